"""ALE envs that load their ROM once, at the first reset, not also when built.

ale_py's ``AtariEnv`` loads the ROM when it is built (~65 ms, most of an Atari env's
construction) and again at every seeded reset, which re-seeds the emulator: a vectorized env
pays both for every env before its first batch (issue 28, start-up: 8 Pongs spent 0.5 s of
CPU in ROM loads before the first reset). `RomAtOnceAtariEnv` is ``AtariEnv`` whose
constructor skips the load when an env of the same game and action set was built in this
process before (the first one loads, and its action set and screen size serve the others);
the ROM is then loaded at the first ``reset`` (a seeded reset loads it anyway, an unseeded one
loads it as the constructor would have: seeded at random), or at a first ``step``,
``render``, ``clone_state`` or ``restore_state``. What a seeded reset returns, and everything
after it, is what ``AtariEnv`` gives: the load re-initialises the emulator.

Until then ``env.unwrapped.ale`` has no game loaded: read it after ``reset`` (gymnasium's
contract: reset before use). The ``atari`` family builds its envs from this class; a render
mode of ``human`` or ``sound_obs`` keep ale_py's own behaviour (the ROM is loaded when built).
"""

from __future__ import annotations

from typing import Any

import ale_py
from ale_py.env import AtariEnv

__all__ = ["RomAtOnceAtariEnv"]

#: what a loaded ALE answered for a game, by constructor key (per process)
_KNOWN: dict[tuple[Any, ...], dict[str, Any]] = {}
_ASKED = ("getMinimalActionSet", "getLegalActionSet", "getScreenDims", "getRAMSize")


class _Answers:
    """The ALE during ``AtariEnv.__init__`` when the load is skipped: the calls that need a
    loaded game answer from `_KNOWN`, the others (settings) reach the real ALE."""

    def __init__(self, ale: Any, known: dict[str, Any]) -> None:
        self.real, self.known = ale, known

    def __getattr__(self, name: str) -> Any:
        if name in self.known:
            value = self.known[name]
            return lambda: value
        return getattr(self.real, name)


class RomAtOnceAtariEnv(AtariEnv):
    """``ale_py.env.AtariEnv`` that loads its ROM at the first reset (see the module)."""

    def __init__(self, game: str, **kwargs: Any) -> None:
        key = (game, kwargs.get("mode"), kwargs.get("difficulty"),
               bool(kwargs.get("full_action_space")), bool(kwargs.get("continuous")))  # fmt: skip
        plain = kwargs.get("render_mode") == "human" or kwargs.get("sound_obs")
        self._skip: dict[str, Any] | None = None if plain else _KNOWN.get(key)
        self._rom_pending = False
        super().__init__(game, **kwargs)
        if isinstance(self.ale, _Answers):
            self.ale = self.ale.real
        elif not plain and key not in _KNOWN:  # loaded: its answers serve the next ones
            _KNOWN[key] = {name: getattr(self.ale, name)() for name in _ASKED}
        self._skip = None
        #: ``(height, width)`` of the screen, known before the ROM is loaded
        self.screen_dims = tuple(
            self.ale.getScreenDims() if plain else _KNOWN[key]["getScreenDims"]
        )

    def load_game(self) -> None:
        if self._skip is not None:  # in __init__, a game known here: load at first use
            self._rom_pending = True
            self.ale = _Answers(self.ale, self._skip)  # type: ignore[assignment]
            return
        self._rom_pending = False
        super().load_game()

    def _load_now(self) -> None:
        """The load the constructor skipped, as it would have done it (the emulator seeded
        at random)."""
        if self._rom_pending:
            self.seed_game()
            self.load_game()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is None:
            self._load_now()
        return super().reset(seed=seed, options=options)  # (a seed loads the ROM)

    def step(self, action: Any) -> Any:
        self._load_now()
        return super().step(action)

    def render(self) -> Any:
        self._load_now()
        return super().render()

    def clone_state(self, include_rng: bool = False) -> ale_py.ALEState:
        self._load_now()
        return super().clone_state(include_rng=include_rng)

    def restore_state(self, state: ale_py.ALEState) -> None:
        self._load_now()
        super().restore_state(state)
