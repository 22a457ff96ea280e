"""envpool's ``envpool.registration``: [`make`][envfactory.envpool.make] and its spellings,
[`make_spec`][envfactory.envpool.make_spec] and [`list_all_envs`][envfactory.envpool.list_all_envs]
(the package's docstring says what maps to what)."""

from __future__ import annotations

import difflib
import functools
import math
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import ConfigError, InvalidSeedError, echo
from ..vectorizers.front.checks import seeds_for
from .pool import DMEnvPool, EnvPool
from .spec import EnvSpec

__all__ = ["list_all_envs", "make", "make_dm", "make_gym", "make_gymnasium", "make_spec"]

# envpool ids whose gymnasium version moved on
_RENAMED = {
    "LunarLander-v2": "LunarLander-v3",
    "LunarLanderContinuous-v2": "LunarLanderContinuous-v3",
    "CarRacing-v2": "CarRacing-v3",
    "BipedalWalkerHardcore-v3": "BipedalWalkerHardcore-v3",
    "Taxi-v3": "Taxi-v4",
}
_COMMON = {
    "num_envs": 1,
    "batch_size": 0,
    "num_threads": 0,
    "max_num_players": 1,
    "thread_affinity_offset": -1,
    "seed": 42,
    "gym_reset_return_info": True,
    "render_mode": None,
    "render_width": None,  # None: the env's own frame size; else frames resized to it
    "render_height": None,
}
RENDER_MODES = (None, "rgb_array", "human")
_RAW_SCREEN = (210, 160)  # the ALE's screen: no resize, so no interpolation to choose
# envpool's Atari defaults (docs/env/atari.rst)
_ATARI = {
    "max_episode_steps": 27000,
    "img_height": 84,
    "img_width": 84,
    "stack_num": 4,
    "gray_scale": True,
    "frame_skip": 4,
    "noop_max": 30,
    "episodic_life": False,
    "zero_discount_on_life_loss": False,
    "reward_clip": False,
    "repeat_action_probability": 0.0,
    "use_inter_area_resize": True,
    "use_fire_reset": True,
    "full_action_space": False,
    "mode": -1,  # -1: the game's default mode / difficulty
    "difficulty": -1,
}


@dataclass(frozen=True)
class _Task:
    """A resolved task: envfactory overrides and envpool's config keys of the task."""

    env_id: str  # the gymnasium / ALE id
    atari: bool
    defaults: dict[str, Any]


@functools.cache
def atari_games() -> dict[str, tuple[str, str]]:
    """envpool's Atari games, ``{"Pong": ("Pong", "pong"), ...}``: envpool's name (its ROM's
    pieces capitalized: ``TicTacToe3d``) to ale-py's name (``TicTacToe3D``) and ROM, for the
    ROMs ale-py ships and registers (it registers no ``Combat``, ``Joust``, ``MazeCraze``,
    ``Warlords``, whose ROMs do not load; envpool refuses them too)."""
    import ale_py

    from ..families.atari import _ale_games

    gym.register_envs(ale_py)
    return {
        "".join(piece.capitalize() for piece in rom.split("_")): (game, rom)
        for game, rom in _ale_games().items()
        if f"ALE/{game}-v5" in gym.registry
    }


def list_all_envs() -> list[str]:
    """envpool-style ids this module resolves: every ``<Game>-v5`` of the games ale-py
    ships and registers, and every gymnasium id."""
    return sorted(f"{game}-v5" for game in atari_games()) + sorted(gym.registry)


def _resolve(task_id: Any) -> _Task:
    if not isinstance(task_id, str) or not task_id:
        raise ConfigError(f"envpool.make: task_id must be a task id string, got {task_id!r}")
    games = {name.lower(): pair for name, pair in atari_games().items()} if "-v5" in task_id else {}
    if task_id.endswith("-v5") and task_id[:-3].lower() in games:  # TicTacToe3d, TicTacToe3D
        game, rom = games[task_id[:-3].lower()]
        return _Task(f"ALE/{game}-v5", True, {**_ATARI, "task": rom})
    env_id = _RENAMED.get(task_id, task_id)
    if env_id in gym.registry:
        spec = gym.spec(env_id)
        defaults = {"max_episode_steps": spec.max_episode_steps}
        return _Task(env_id, False, {**defaults, "reward_threshold": spec.reward_threshold})
    close = difflib.get_close_matches(task_id, list_all_envs(), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ConfigError(
        f"envpool.make: unknown task_id {task_id!r}.{hint} Valid ids: envpool's Atari ids "
        "('Pong-v5', 'Breakout-v5', ...) and gymnasium ids; envfactory.envpool.list_all_envs() "
        "lists them"
    )


def _flag(name: str, value: Any) -> str:
    return f"{name}={str(bool(value)).lower()}"


def _overrides(task: _Task, cfg: dict[str, Any], pool_batch: int, in_series: int | None) -> list:
    n = cfg["num_envs"]
    out = [f"num_envs={n}", "autoreset_mode=next_step", "episode_stats_key=null"]
    out += [f"vectorizer.batch_size={pool_batch}"]
    if in_series is not None:
        out.append(f"vectorizer.in_series={in_series}")
    if cfg["render_mode"] is not None:
        out.append(f"env.render_mode={cfg['render_mode']}")
    if not task.atari:
        steps = cfg["max_episode_steps"]
        out = ["env=gym", f"env.id={task.env_id}", "vectorizer=subproc", *out]
        if steps is not None:
            out.append(f"env.kwargs={{max_episode_steps: {int(steps)}}}")
        return out
    size = (int(cfg["img_height"]), int(cfg["img_width"]))
    if not cfg["use_inter_area_resize"] and size != _RAW_SCREEN:
        raise ConfigError(
            f"envpool.make: use_inter_area_resize=False with img_height, img_width = {size} "
            "is not offered; envfactory resizes Atari frames with cv2.INTER_AREA only (use "
            "use_inter_area_resize=True, or img_height=210, img_width=160: no resize)"
        )
    steps = cfg["max_episode_steps"]
    game = [f"env.{k}={int(cfg[k])}" for k in ("mode", "difficulty") if cfg[k] >= 0]
    return [
        "env=atari",
        f"env.id={task.env_id}",
        "vectorizer=subproc-atari",
        *out,
        "env.layout=chw",
        "env.clip_reward=false",  # clipped here, so that info["reward"] is the raw one
        f"env.obs_type={'grayscale' if cfg['gray_scale'] else 'rgb'}",
        f"env.image_size=[{int(cfg['img_height'])},{int(cfg['img_width'])}]",
        f"env.num_stack={int(cfg['stack_num'])}",
        f"env.frame_skip={int(cfg['frame_skip'])}",
        f"env.noop_max={int(cfg['noop_max'])}",
        _flag("env.episodic_life", cfg["episodic_life"]),
        _flag("env.fire_reset", cfg["use_fire_reset"]),
        _flag("env.full_action_space", cfg["full_action_space"]),
        f"env.repeat_action_probability={float(cfg['repeat_action_probability'])}",
        "env.ram_info=true",  # envpool's info["ram"]
        *game,
        # agent steps only (the automatic FIRE presses are not the agent's), as envpool's;
        # outermost, so a lost life (episodic_life) starts its count again
        f"wrappers=[{{name: time_limit, max_episode_steps: {int(steps)}}}]",
    ]


def _config(task: _Task, kwargs: dict[str, Any]) -> dict[str, Any]:
    valid = {**_COMMON, **task.defaults}
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        hint = difflib.get_close_matches(unknown[0], list(valid), n=1)
        did = f" Did you mean {hint[0]!r}?" if hint else ""
        raise ConfigError(
            f"envpool.make({task.env_id!r}): unknown option {unknown[0]!r}.{did} Valid options: "
            f"{', '.join(sorted(valid))}"
        )
    cfg = {**valid, **kwargs}
    n = cfg["num_envs"]
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ConfigError(f"envpool.make: num_envs must be an int >= 1, got {n!r}")
    batch = cfg["batch_size"] or n
    if isinstance(batch, bool) or not isinstance(batch, int | np.integer) or not 1 <= batch <= n:
        raise ConfigError(
            f"envpool.make: batch_size={cfg['batch_size']!r} must be an int in [1, num_envs={n}] "
            "(or 0 for num_envs: synchronous)"
        )
    if not cfg["gym_reset_return_info"]:
        raise ConfigError(
            "envpool.make: gym_reset_return_info=False is not offered: envpool's gym API "
            "follows gymnasium's reset semantics (reset returns (obs, info)), as envpool 1.2"
        )
    if cfg["render_mode"] not in RENDER_MODES:
        raise ConfigError(
            f"envpool.make: render_mode={echo(cfg['render_mode'])} is not one of None, "
            "'rgb_array', 'human'; e.g. render_mode='rgb_array'"
        )
    if cfg["max_num_players"] != 1:
        raise ConfigError(
            f"envpool.make: max_num_players={cfg['max_num_players']!r}: only single-player "
            "tasks are offered (max_num_players=1)"
        )
    cfg["num_envs"], cfg["batch_size"] = int(n), int(batch)
    for name in set(kwargs) & set(_CHECKS):  # in envpool's names, before envfactory's
        _check_option(task.env_id, name, kwargs[name], valid[name])
    _seed_list(cfg["seed"], cfg["num_envs"])
    cfg["num_threads"] = int(cfg["num_threads"] or cfg["batch_size"])
    return cfg


# what each numeric or boolean option takes: (kind, least value) and envpool's default
_CHECKS: dict[str, tuple[str, int]] = {
    **dict.fromkeys(("stack_num", "frame_skip", "img_height", "img_width"), ("int", 1)),
    **dict.fromkeys(("max_episode_steps", "render_width", "render_height"), ("int", 1)),
    **dict.fromkeys(("noop_max", "num_threads"), ("int", 0)),
    "repeat_action_probability": ("prob", 0),
    **dict.fromkeys(("mode", "difficulty"), ("int", -1)),
    **{k: ("bool", 0) for k, v in {**_COMMON, **_ATARI}.items() if isinstance(v, bool)},
}


def _check_option(env_id: str, name: str, value: Any, default: Any) -> None:
    """A ConfigError naming envpool's option ``name`` (not the envfactory key it maps to)
    for a value of the wrong kind: ``stack_num=0``, ``frame_skip=1.5``, ``reward_clip=1``."""
    kind, least = _CHECKS[name]
    if kind == "bool":
        ok = isinstance(value, bool | np.bool_) or (isinstance(value, int) and value in (0, 1))
        expected = "True or False"
    elif kind == "prob":
        number = isinstance(value, int | float | np.number) and not isinstance(value, bool)
        ok, expected = number and 0.0 <= float(value) <= 1.0, "a number in [0, 1]"
    else:
        integer = isinstance(value, int | np.integer) and not isinstance(value, bool)
        ok, expected = integer and value >= least, f"an int >= {least}"
        ok = ok or (value is None and default is None)  # (max_episode_steps, render_width)
    if not ok:
        raise ConfigError(
            f"envpool.make({env_id!r}): {name}={echo(value)} must be {expected}; e.g. "
            f"{name}={default!r} (envpool's default)"
        )


def _seed_list(seed: Any, n: int) -> list[int]:
    """envpool's ``seed``: an int >= 0 (env ``i`` gets ``seed + i``) or one int >= 0 per
    env; anything else is a ConfigError at [`make`][envfactory.envpool.make], before a worker
    starts."""
    seeds: list[Any] | None = None
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
        seeds = [int(seed) + i for i in range(n)]
    elif isinstance(seed, list | tuple | np.ndarray) and np.ndim(seed) == 1:
        seeds = list(seed)
    try:
        if seeds is None or len(seeds) != n or None in seeds:
            raise InvalidSeedError("")
        seeds_for(seeds, n, "offset")  # (each an int >= 0)
    except InvalidSeedError:
        raise ConfigError(
            f"envpool.make: seed={echo(seed)} must be an int >= 0 (env i gets seed + i) or a "
            f"list of num_envs={n} ints >= 0; e.g. seed=0"
        ) from None
    return [int(s) for s in seeds]


def make(task_id: str, env_type: str, **kwargs: Any) -> EnvPool:
    """envpool's ``make``: a batched env of ``num_envs`` envs of ``task_id``.

    Args:
        task_id: an envpool id (``"Pong-v5"``, ``"CartPole-v1"``, ...).
        env_type: ``"gymnasium"`` or ``"gym"`` (the same since envpool 1.2: gymnasium's
            API); dm_env's ``"dm"`` is not offered. Required, as envpool's.
        **kwargs: envpool's options: ``num_envs``, ``batch_size`` (0 or ``num_envs``:
            synchronous), ``num_threads`` (worker processes), ``seed`` (int: env ``i``
            gets ``seed + i``; or one per env), ``max_episode_steps``, ``render_mode``,
            and the task's (Atari: ``episodic_life``, ``reward_clip``, ``stack_num``,
            ``img_height``, ``mode``, ``difficulty``, ...).

    Raises:
        ConfigError: an unknown task id, ``env_type`` or option, or a bad value.

    Example:
        >>> import envfactory.envpool as envpool
        >>> env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2, seed=0)
        >>> obs, info = env.reset()
        >>> obs.shape, env.action_space.n, info["env_id"].tolist()
        ((2, 4), 2, [0, 1])
        >>> env.close()
    """
    _check_env_type(env_type)
    task = _resolve(task_id)
    cfg = _config(task, kwargs)
    n, batch, threads = cfg["num_envs"], cfg["batch_size"], cfg["num_threads"]
    asynchronous = batch < n
    workers = max(1, min(n, threads if kwargs.get("num_threads") else (os.cpu_count() or 1)))
    # async without num_threads: the pool's own split for this batch_size
    in_series = None if asynchronous and not kwargs.get("num_threads") else math.ceil(n / workers)
    overrides = _overrides(task, cfg, batch if asynchronous else 1, in_series)
    from ..factory import make_vec

    envs = make_vec(overrides=overrides)
    spec = EnvSpec(
        task_id, cfg, envs.single_observation_space, envs.single_action_space, task.atari
    )
    seeds = _seed_list(cfg["seed"], n)
    return EnvPool(task_id, env_type, envs, spec, task.atari, overrides, seeds)


def make_gymnasium(task_id: str, **kwargs: Any) -> EnvPool:
    """``make(task_id, env_type="gymnasium", **kwargs)``."""
    return make(task_id, env_type="gymnasium", **kwargs)


def make_gym(task_id: str, **kwargs: Any) -> EnvPool:
    """``make(task_id, env_type="gym", **kwargs)``: the same as
    [`make_gymnasium`][envfactory.envpool.make_gymnasium] (envpool 1.2: gymnasium's API,
    ``reset`` -> ``(obs, info)``, 5-tuple steps, gymnasium spaces)."""
    return make(task_id, env_type="gym", **kwargs)


def make_dm(task_id: str, **kwargs: Any) -> DMEnvPool:
    """Not offered: raises [`ConfigError`][envfactory.errors.ConfigError] (dm_env's ``TimeStep``
    API)."""
    make(task_id, env_type="dm", **kwargs)  # raises: dm is not an env_type offered
    raise AssertionError("unreachable")


def make_spec(task_id: str, **kwargs: Any) -> EnvSpec:
    """envpool's ``make_spec``: the [`EnvSpec`][envfactory.envpool.EnvSpec] of ``task_id``
    with these options (checked as [`make`][envfactory.envpool.make] checks them), without
    starting a worker: one env is built here to read its spaces, then closed.

    Example:
        >>> import envfactory.envpool as envpool
        >>> spec = envpool.make_spec("CartPole-v1", num_envs=4)
        >>> spec.config.max_episode_steps, spec.config.num_envs, spec.reward_threshold
        (500, 4, 475.0)
    """
    task = _resolve(task_id)
    cfg = _config(task, kwargs)
    from ..factory import make_env

    env = make_env(overrides=_overrides(task, cfg, 1, None))
    try:
        return EnvSpec(task_id, cfg, env.observation_space, env.action_space, task.atari)
    finally:
        env.close()


def _check_env_type(env_type: Any) -> None:
    if env_type not in ("gymnasium", "gym"):
        raise ConfigError(
            f"envpool.make: env_type={env_type!r} is not offered; valid: 'gymnasium' or 'gym' "
            "(the same: gymnasium's API, as envpool 1.2); dm_env's 'dm' is not offered"
        )
