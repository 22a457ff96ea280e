"""The ``atari`` environment family: ALE games with DeepMind-style preprocessing.

``ale_py`` and ``cv2`` are imported only inside `make_atari`, so importing this module
is cheap. Wrapper order (outermost last):

    ALE (frameskip=1) -> AtariPreprocessing | RamPreprocessing -> TimeLimit (optional)
    -> EpisodeStatistics -> EpisodicLife -> FireReset -> sign reward clip
    -> FrameStackObservation -> StackLayout

envfactory's [`EpisodeStatistics`][envfactory.EpisodeStatistics] sits inside the
life-loss and reward-clip wrappers, so ``info["episode_stats"]`` (the config's
``episode_stats_key``) holds the real, unclipped game score and the length in agent steps,
and appears only at a real game over or truncation. gymnasium's ``RecordEpisodeStatistics``
added by the user (``info["episode"]``) sees what the learner sees: one episode per life,
clipped rewards.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import multiprocessing as mp
import re
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import numpy as np

from envfactory.config.checks import check_bool, check_choice, check_int, check_number
from envfactory.episode_stats import EpisodeStatistics
from envfactory.errors import ConfigError, OptionError, UnknownKeyError, did_you_mean
from envfactory.families.atari_wrappers import (
    EpisodicLife,
    FireReset,
    RamInfo,
    RamPreprocessing,
    RawNoopReset,
    StackLayout,
    sign_reward,
)

__all__ = [
    "LAYOUTS",
    "OBS_TYPES",
    "RENDER_MODES",
    "AtariConfig",
    "ale_game",
    "check_ale_id",
    "make_atari",
]

OBS_TYPES = ("grayscale", "rgb", "ram")
LAYOUTS = ("hwc", "chw")
RENDER_MODES = ("rgb_array", "human")


@dataclass
class AtariConfig:
    """Schema of the Hydra env node for ``env=atari``; the defaults are DeepMind's.

    Attributes:
        family: always ``"atari"``.
        id: a gymnasium ALE id, e.g. ``"ALE/Pong-v5"``.
        noop_max: random no-ops (``1..noop_max``) on reset; 0 disables.
        frame_skip: repeat each action this many frames, max-pooling the last two
            (images only).
        episodic_life: a lost life ends the learner's episode, and only the reset right
            after it continues the game; every other reset starts a new game.
        fire_reset: press FIRE then action 2 after reset, for games whose action 1 is FIRE.
        obs_type: ``grayscale``, ``rgb`` or ``ram``.
        image_size: an int (square) or ``[height, width]``; ignored for ``ram``.
        num_stack: frames stacked, oldest first; 1 disables stacking.
        clip_reward: replace each reward by its sign.
        layout: ``hwc`` or ``chw`` (ignored for ``ram``).
        repeat_action_probability: sticky actions; 0.0 is DeepMind's setting.
        full_action_space: use all 18 actions instead of the game's minimal set.
        max_episode_steps: cap in env steps after frame skip (the automatic FIRE and
            life-continuation steps count too); None keeps ALE's own cap
            (108,000 frames).
        render_mode: null (no rendering), ``rgb_array`` (``render()`` returns the ALE's
            full RGB screen, 210x160x3 for most games, whatever ``obs_type``) or ``human``
            (ALE's own window).
        mode: the game mode (ALE's ``setMode``; one of the game's available modes);
            null keeps the game's default.
        difficulty: the game difficulty (ALE's ``setDifficulty``); null keeps the default.
        ram_info: add the console's 128-byte RAM (uint8) to every step's and reset's info
            as ``info["ram"]`` (envpool's Atari info).
    """

    family: str = "atari"
    id: str = "ALE/Pong-v5"
    noop_max: int = 30
    frame_skip: int = 4
    episodic_life: bool = True
    fire_reset: bool = True
    obs_type: str = "grayscale"
    image_size: Any = 84
    num_stack: int = 4
    clip_reward: bool = True
    layout: str = "hwc"
    repeat_action_probability: float = 0.0
    full_action_space: bool = False
    max_episode_steps: int | None = None
    render_mode: Optional[str] = None  # noqa: UP045
    mode: Optional[int] = None  # noqa: UP045
    difficulty: Optional[int] = None  # noqa: UP045
    ram_info: bool = False

    def __post_init__(self) -> None:
        """The checks envfactory runs at compose time (see `envfactory.config.checks`);
        the id is checked without importing ale_py (`check_ale_id`)."""
        if self.family != "atari":
            raise OptionError("family", self.family, "'atari'")
        for key, minimum in (("noop_max", 0), ("frame_skip", 1), ("num_stack", 1)):
            check_int(self, key, minimum)
        check_int(self, "max_episode_steps", 1, optional=True)
        check_int(self, "mode", 0, optional=True)
        check_int(self, "difficulty", 0, optional=True)
        bools = ("episodic_life", "fire_reset", "clip_reward", "full_action_space", "ram_info")
        for key in bools:
            check_bool(self, key)
        check_choice(self, "obs_type", OBS_TYPES)
        check_choice(self, "layout", LAYOUTS)
        _image_hw(self.image_size)
        check_number(self, "repeat_action_probability", 0.0, 1.0)
        if self.render_mode is not None:
            check_choice(self, "render_mode", RENDER_MODES)
        check_ale_id(self.id)


_FIELDS = [f.name for f in dataclasses.fields(AtariConfig) if f.name != "family"]


def _image_hw(value: Any) -> tuple[int, int]:
    """Return ``(height, width)`` from an int or a ``[height, width]`` sequence."""

    def positive(v: Any) -> bool:
        return isinstance(v, Integral) and not isinstance(v, bool) and int(v) > 0

    if positive(value):
        return int(value), int(value)
    if not isinstance(value, (str, bytes, Integral)):
        try:
            items = list(value)  # also accepts OmegaConf ListConfig
        except TypeError:
            items = []
        if len(items) == 2 and all(positive(v) for v in items):
            return int(items[0]), int(items[1])
    raise OptionError("image_size", value, "a positive int or [height, width] of positive ints")


def _rom_name(rom: str) -> str:
    return rom.title().replace("_", "")  # ale_py.registration.rom_id_to_name


@functools.lru_cache(maxsize=1)
def _ale_games() -> dict[str, str]:
    """``{"SpaceInvaders": "space_invaders", ...}`` from the ROM files ale_py ships, found
    without importing ale_py (importing it loads the emulator)."""
    spec = importlib.util.find_spec("ale_py")
    if spec is None or not spec.submodule_search_locations:
        return {}
    roms = Path(next(iter(spec.submodule_search_locations))) / "roms"
    return {_rom_name(p.stem): p.stem for p in sorted(roms.glob("*.bin"))}


_ALE_ID = re.compile(r"^(?:ALE/(?P<v5>\w+)-v5|(?P<old>\w+?)(?:NoFrameskip|Deterministic)?-v[04])$")


def ale_game(env_id: str) -> str | None:
    """The ROM name of an ALE id (``ALE/Pong-v5`` -> ``pong``; ``PongNoFrameskip-v4`` too),
    or None if ``env_id`` does not name a game ale_py ships."""
    m = _ALE_ID.match(env_id)
    if not m:
        return None
    return _ale_games().get(m.group("v5") or m.group("old") or "")


def check_ale_id(env_id: Any) -> None:
    """Raise [`OptionError`][envfactory.OptionError] unless ``env_id`` is an ALE id.

    Decision: ale_py registers its ids with gymnasium only when imported, and importing it
    loads the emulator, so the check does not import it. An id is valid when gymnasium
    already knows it with an ale_py entry point, or when it has the form of ale_py's ids
    (``ALE/<Game>-v5``, ``<Game>[NoFrameskip]-v0|v4``) and ``<Game>`` is one of the ROMs
    in ale_py's package folder.
    """
    if not isinstance(env_id, str) or not env_id:
        raise OptionError("id", env_id, "an ALE id such as 'ALE/Pong-v5'")
    if ale_game(env_id) is not None:
        return
    spec = gym.registry.get(env_id)
    if spec is not None:
        entry = spec.entry_point
        entry_name = entry if isinstance(entry, str) else getattr(entry, "__module__", "")
        if str(entry_name).startswith("ale_py"):
            return
        raise OptionError(
            "id",
            env_id,
            "an ALE (Atari) id such as 'ALE/Pong-v5'",
            hint=f"{env_id!r} is not an Atari game: use env=gym env.id={env_id}.",
        )
    games = _ale_games()
    if not games:
        raise OptionError(
            "id", env_id, "an ALE id", hint="ale-py is not installed: pip install ale-py."
        )
    ids = [f"ALE/{g}-v5" for g in games]
    guess = env_id.removeprefix("ALE/").split("-")[0].removesuffix("NoFrameskip")
    close = difflib.get_close_matches(guess, list(games), n=1, cutoff=0.5)
    hint = did_you_mean(env_id, ids) or (f" Did you mean 'ALE/{close[0]}-v5'?" if close else "")
    raise OptionError(
        "id",
        env_id,
        "an ALE id of the form ALE/<Game>-v5",
        hint=f"{hint} Games: {', '.join(list(games)[:6])}, ... ({len(games)} in all).",
    )


def _validate(options: dict[str, Any]) -> dict[str, Any]:
    """Merge ``options`` over the defaults and check every value with
    `AtariConfig.__post_init__`.

    Raises:
        ConfigError: on an invalid value; `UnknownKeyError` (also a ``TypeError``, as a
            function's unknown keyword) on an unknown key.
    """
    options = dict(options)
    unknown = sorted(set(options) - set(_FIELDS) - {"family"})
    if unknown:
        key = unknown[0]
        raise UnknownKeyError(
            f"atari: unknown option {key!r}.{did_you_mean(key, _FIELDS)} "
            f"Valid options: {', '.join(_FIELDS)}"
        )
    cfg = AtariConfig(**options)
    opts = {name: getattr(cfg, name) for name in _FIELDS}
    opts["image_size"] = _image_hw(opts["image_size"])
    opts["repeat_action_probability"] = float(opts["repeat_action_probability"])
    return opts


_ROM_AT_ONCE = "envfactory.families.ale_rom"


def _ale_env_class() -> Any:
    from ale_py.env import AtariEnv

    return AtariEnv


def _make_base(
    env_id: str,
    obs_type: str,
    rap: float,
    full_action_space: bool,
    render_mode: str | None = None,
    game: dict[str, Any] | None = None,
) -> gym.Env:
    """``gym.make`` an ALE env with ``frameskip=1``, turning a bad id into a ConfigError."""
    try:
        spec = gym.spec(env_id)
    except gym.error.Error as e:  # NameNotFound, VersionNotFound, NamespaceNotFound, ...
        ale_ids = [k for k in gym.registry if k.startswith("ALE/")]
        raise ConfigError(
            f"atari: invalid id={env_id!r} ({str(e).rstrip('.')}).{did_you_mean(env_id, ale_ids)}"
            " Expected an ALE id such as 'ALE/Pong-v5'."
        ) from e
    entry = spec.entry_point
    entry_name = entry if isinstance(entry, str) else getattr(entry, "__module__", "")
    if not entry_name.startswith("ale_py"):
        raise OptionError("id", env_id, "an ALE (Atari) environment id such as 'ALE/Pong-v5'")
    if entry in ("ale_py.env:AtariEnv", _ale_env_class()):  # its ROM loaded once (ale_rom)
        spec = dataclasses.replace(spec, entry_point=f"{_ROM_AT_ONCE}:RomAtOnceAtariEnv")
    return gym.make(
        spec,
        frameskip=1,
        repeat_action_probability=rap,
        full_action_space=full_action_space,
        # AtariPreprocessing reads the screen from the ALE itself and ignores the base env's
        # observation, which ALE would otherwise render as RGB on every skipped frame
        # (~30 us each, ~18% of a Pong step): ask for the 128-byte RAM instead. render()
        # still returns the real RGB screen (ALE's getScreenRGB), and only when called.
        obs_type="ram",
        render_mode=render_mode,
        **(game or {}),  # mode / difficulty, when set
    )


class _ScreenSpace(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Declares the screen's space over a RAM-observation ALE env, for AtariPreprocessing
    (which sizes its buffers from it and reads the screen straight from the ALE)."""

    def __init__(self, env: gym.Env, rgb: bool) -> None:
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self, rgb=rgb)
        unwrapped: Any = env.unwrapped  # (its ROM may load at the first reset: ale_rom)
        height, width = getattr(unwrapped, "screen_dims", None) or unwrapped.ale.getScreenDims()
        shape = (height, width, 3) if rgb else (height, width)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)

    def observation(self, observation: Any) -> Any:
        return observation  # never used by AtariPreprocessing


def make_atari(**options: Any) -> gym.Env:
    """Build a preprocessed ALE environment.

    Args:
        **options: the fields of `AtariConfig` except ``family`` (a ``family`` of
            ``"atari"`` is tolerated); missing fields take the defaults.

    Returns:
        The wrapped env. Observations are uint8 and match ``observation_space`` exactly:
        grayscale ``(H, W, N)`` / ``(N, H, W)``, rgb ``(H, W, 3N)`` / ``(3N, H, W)``,
        ram ``(128 * N,)``, with ``N = num_stack`` frames oldest first.

    Raises:
        ConfigError: for an unknown option or an invalid value (the message names the key,
            the value and the valid choices).
    """
    opts = _validate(options)
    import ale_py  # deferred: heavy, and only needed when an Atari env is built

    gym.register_envs(ale_py)
    if mp.current_process().name.startswith("envfactory-worker-"):
        # no banner per worker; a process of the user's keeps its ALE logger as set there
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    obs_type: str = opts["obs_type"]
    env = _make_base(
        opts["id"],
        obs_type,
        opts["repeat_action_probability"],
        opts["full_action_space"],
        opts["render_mode"],
        {k: opts[k] for k in ("mode", "difficulty") if opts[k] is not None},
    )
    try:
        noop_max = opts["noop_max"]
        meanings = list(env.unwrapped.get_action_meanings())  # type: ignore[attr-defined]
        if noop_max and meanings[:1] != ["NOOP"]:
            # a game whose minimal action set has no NOOP (Backgammon): its no-ops are
            # the console's own NOOP, as envpool's (the learner's action 0 is not one)
            env, noop_max = RawNoopReset(env, noop_max), 0
        if obs_type == "ram":
            env = RamPreprocessing(env, noop_max=noop_max, frame_skip=opts["frame_skip"])
        else:
            import cv2  # noqa: F401  # deferred; AtariPreprocessing resizes with cv2.INTER_AREA

            height, width = opts["image_size"]
            env = gym.wrappers.AtariPreprocessing(
                _ScreenSpace(env, rgb=obs_type == "rgb"),
                noop_max=noop_max,
                frame_skip=opts["frame_skip"],
                screen_size=(width, height),  # cv2 order: (width, height)
                terminal_on_life_loss=False,
                grayscale_obs=obs_type == "grayscale",
                grayscale_newaxis=False,
                scale_obs=False,
            )
        if opts["max_episode_steps"] is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=opts["max_episode_steps"])
        env = EpisodeStatistics(env)
        if opts["episodic_life"]:
            env = EpisodicLife(env)
        if opts["fire_reset"]:
            env = FireReset(env)
        if opts["clip_reward"]:
            env = gym.wrappers.TransformReward(env, sign_reward)
        if opts["ram_info"]:
            env = RamInfo(env)
        stacked = opts["num_stack"] > 1
        if stacked:
            env = gym.wrappers.FrameStackObservation(env, opts["num_stack"], padding_type="reset")
        return StackLayout(env, obs_type, opts["layout"], stacked=stacked)
    except ValueError as e:  # e.g. AtariPreprocessing: noop_max > 0 but action 0 is not NOOP
        env.close()
        raise ConfigError(f"atari: cannot build {opts['id']!r}: {e}") from e
