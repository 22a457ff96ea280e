"""ALE envs that load their ROM once, at the first reset, not also when built.

ale_py's ``AtariEnv`` loads the ROM when it is built (~65 ms, most of an Atari env's
construction) and again at every seeded reset, which re-seeds the emulator: a vectorized env
pays both for every env before its first batch (issue 28, start-up: 8 Pongs spent 0.5 s of
CPU in ROM loads before the first reset). `RomAtOnceAtariEnv` is ``AtariEnv`` whose
constructor skips the load when an env of the same game and action set was built in this
process before (the first one loads, and its action set and screen size serve the others);
the ROM is then loaded at the first ``reset`` (a seeded reset loads it anyway, an unseeded one
loads it as the constructor would have: seeded at random), or at the first use of the ALE that
needs a game (a step, the screen, the lives, a saved state: ``env.unwrapped.ale`` is a stand-in
until then, which loads the ROM before it passes such a call on). What a seeded reset returns,
and everything after it, is what ``AtariEnv`` gives: the load re-initialises the emulator.

The ``atari`` family builds its envs from this class; a render mode of ``human`` or
``sound_obs`` keep ale_py's own behaviour (the ROM is loaded when built).
"""

from __future__ import annotations

from typing import Any

from ale_py.env import AtariEnv

__all__ = ["RomAtOnceAtariEnv"]

#: what a loaded ALE answered for a game, by constructor key (per process)
_KNOWN: dict[tuple[Any, ...], dict[str, Any]] = {}
_ASKED = ("getMinimalActionSet", "getLegalActionSet", "getScreenDims", "getRAMSize")
#: the ALE's calls that set up a load (ale_py's seed_game and load_game make them)
_SETUP = frozenset(
    {"setInt", "setFloat", "setBool", "setString", "setLoggerMode", "loadROM", "setMode",
     "setDifficulty", "getInt", "getFloat", "getBool", "getString"}
)  # fmt: skip


class _PendingALE:
    """The ALE of an env whose ROM is not loaded yet. The answers known from an env of the
    same game built before are given as they are, the settings reach the real ALE, and
    anything else (a step, the screen, the lives, a state) loads the ROM first, as the
    constructor would have (seeded at random): nothing reaches an ALE without a game."""

    def __init__(self, env: RomAtOnceAtariEnv, ale: Any, known: dict[str, Any]) -> None:
        self.env, self.real, self.known = env, ale, known

    def __getattr__(self, name: str) -> Any:
        if name in self.known:
            value = self.known[name]
            return lambda: value
        if name not in _SETUP:
            self.env.load_now()
        return getattr(self.real, name)


class RomAtOnceAtariEnv(AtariEnv):
    """``ale_py.env.AtariEnv`` that loads its ROM at the first reset (see the module)."""

    def __init__(self, game: str, **kwargs: Any) -> None:
        key = (game, kwargs.get("mode"), kwargs.get("difficulty"),
               bool(kwargs.get("full_action_space")), bool(kwargs.get("continuous")))  # fmt: skip
        plain = kwargs.get("render_mode") == "human" or kwargs.get("sound_obs")
        self._skip: dict[str, Any] | None = None if plain else _KNOWN.get(key)
        super().__init__(game, **kwargs)
        self._skip = None
        if not plain and key not in _KNOWN:  # loaded: its answers serve the next ones
            _KNOWN[key] = {name: getattr(self.ale, name)() for name in _ASKED}
        #: ``(height, width)`` of the screen, known before the ROM is loaded
        self.screen_dims = tuple(self.ale.getScreenDims())

    @property
    def rom_pending(self) -> bool:
        """Whether the ROM is still to be loaded (at the first reset or use)."""
        return isinstance(self.ale, _PendingALE)

    def load_game(self) -> None:
        if self._skip is not None:  # in __init__, a game known here: load at first use
            self.ale = _PendingALE(self, self.ale, self._skip)  # type: ignore[assignment]
            return
        if isinstance(self.ale, _PendingALE):
            self.ale = self.ale.real
        super().load_game()

    def load_now(self) -> None:
        """The load the constructor skipped, as it would have done it (the emulator seeded
        at random); nothing if the ROM is loaded. A seeded reset loads it by itself."""
        if isinstance(self.ale, _PendingALE):
            self.seed_game()
            self.load_game()
