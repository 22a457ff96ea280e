"""envpool's Python interface over envfactory's async pool: swap one import line.

Code written for [envpool](https://github.com/sail-sg/envpool) runs with
``import envfactory.envpool as envpool`` in place of ``import envpool``:

    import envfactory.envpool as envpool
    env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=8, batch_size=4, seed=0)
    env.async_reset()
    while True:
        obs, rew, term, trunc, info = env.recv()          # the next 4 ready envs
        env.send(policy(obs), info["env_id"])

What is envpool's, and kept: per-env ``action_space`` / ``observation_space``; ``len(env)``,
``env.is_async``, ``env.config`` (``num_envs``, ``batch_size``, ``seed``, ... and the task's
keys); ``reset(env_id=None)``, ``step(action, env_id=None)`` (also in synchronous mode, for
a subset of envs), ``async_reset()``, ``send(action, env_id=None)`` (also envpool's dict
form ``{"action": ..., "env_id": ...}``), ``recv()``; float32 rewards; infos ``env_id``,
``players`` (``{"env_id": ...}``) and ``elapsed_step``, and for Atari ``lives``,
``reward`` (before clipping) and ``terminated`` (the real game over); the seed given to
``make`` (default 42; env ``i`` gets ``seed + i``); envpool's auto-reset (the step after
the end of an episode resets the env and ignores its action: gymnasium's ``next_step``).

Task ids: envpool's Atari ids (``Pong-v5``, ``Breakout-v5``, any ``<Game>-v5`` of a ROM
ale-py ships) build envfactory's ``atari`` family with envpool's defaults (no episodic
life, no reward clipping, fire reset, 84x84 grayscale, CHW, stack 4, frame skip 4, noop max
30, ``repeat_action_probability=0``, 27000 steps), and envpool's option names
(``episodic_life``, ``reward_clip``, ``stack_num``, ``img_height``, ...). Any other id is a
gymnasium id (``CartPole-v1``, ``Pendulum-v1``, ...; envpool's ``LunarLander-v2`` /
``CarRacing-v2`` / ``BipedalWalker-v3`` / ``LunarLanderContinuous-v2`` map to gymnasium's
current versions) built by the ``gym`` family, with ``max_episode_steps``.

``env_type``: ``"gymnasium"`` gives gymnasium's API (``reset`` -> ``(obs, info)``, 5-tuple
steps). ``"gym"`` gives the API of the installed ``gym``, as envpool does: with gym >= 0.26,
gymnasium's; with an older gym (CleanRL's envpool scripts pin 0.23), or none, the classic
API (``reset`` -> ``obs``, ``step`` -> ``(obs, rew, done, info)`` with
``info["TimeLimit.truncated"]``); spaces are ``gym.spaces`` when gym is installed.
``"dm"`` (dm_env's ``TimeStep``) is not offered.

How it maps onto the pool: ``batch_size < num_envs`` (async) is envfactory's pool with that
``batch_size`` (``subproc`` / ``subproc-atari`` with ``vectorizer.batch_size``), so ``recv``
returns the first ``batch_size`` envs ready. Synchronous mode builds the pool with
``batch_size=1``: a step of every env is the pool's synchronous ``step`` (one round trip per
worker), and a step of a subset is ``send`` then ``recv(env_ids=...)`` of exactly those
envs, in the order of ``env_id``. ``num_threads`` sets the number of worker processes.
"""

from __future__ import annotations

import difflib
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from .errors import ClosedError, ConfigError, InvalidSeedError, NoPendingCallError, echo
from .vectorizers.checks import check_env_ids, check_seeds
from .vectorizers.pool import take_rows

__all__ = ["EnvPool", "list_all_envs", "make", "make_dm", "make_gym", "make_gymnasium"]

# envpool ids whose gymnasium version moved on
_RENAMED = {
    "LunarLander-v2": "LunarLander-v3",
    "LunarLanderContinuous-v2": "LunarLanderContinuous-v3",
    "CarRacing-v2": "CarRacing-v3",
    "BipedalWalkerHardcore-v3": "BipedalWalkerHardcore-v3",
}
_COMMON = {
    "num_envs": 1,
    "batch_size": 0,
    "num_threads": 0,
    "max_num_players": 1,
    "thread_affinity_offset": -1,
    "seed": 42,
    "gym_reset_return_info": False,
}
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
}


@dataclass(frozen=True)
class _Task:
    """A resolved task: envfactory overrides and envpool's config keys of the task."""

    env_id: str  # the gymnasium / ALE id
    atari: bool
    defaults: dict[str, Any]


def list_all_envs() -> list[str]:
    """envpool-style ids this module resolves: every ``<Game>-v5`` of the ROMs ale-py
    ships, and every gymnasium id."""
    from .families.atari import _ale_games

    return sorted(f"{game}-v5" for game in _ale_games()) + sorted(gym.registry)


def _resolve(task_id: Any) -> _Task:
    from .families.atari import ale_game

    if not isinstance(task_id, str) or not task_id:
        raise ConfigError(f"envpool.make: task_id must be a task id string, got {task_id!r}")
    if task_id.endswith("-v5") and "/" not in task_id and ale_game(f"ALE/{task_id}"):
        game = ale_game(f"ALE/{task_id}")
        return _Task(f"ALE/{task_id}", True, {**_ATARI, "task": game})
    env_id = _RENAMED.get(task_id, task_id)
    if env_id in gym.registry:
        steps = gym.spec(env_id).max_episode_steps
        return _Task(env_id, False, {"max_episode_steps": steps})
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
    if not task.atari:
        steps = cfg["max_episode_steps"]
        out = ["env=gym", f"env.id={task.env_id}", "vectorizer=subproc", *out]
        if steps is not None:
            out.append(f"env.kwargs={{max_episode_steps: {int(steps)}}}")
        return out
    if not cfg["use_inter_area_resize"]:
        raise ConfigError(
            "envpool.make: use_inter_area_resize=False is not offered; envfactory resizes "
            "Atari frames with cv2.INTER_AREA only (use_inter_area_resize=True)"
        )
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
        f"env.max_episode_steps={int(cfg['max_episode_steps'])}",
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
    "max_episode_steps": ("int", 1),
    **dict.fromkeys(("noop_max", "num_threads"), ("int", 0)),
    "repeat_action_probability": ("prob", 0),
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
        ok = ok or (name == "max_episode_steps" and value is None)
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
        check_seeds(seeds)
    except InvalidSeedError:
        raise ConfigError(
            f"envpool.make: seed={echo(seed)} must be an int >= 0 (env i gets seed + i) or a "
            f"list of num_envs={n} ints >= 0; e.g. seed=0"
        ) from None
    return [int(s) for s in seeds]


def make(task_id: str, env_type: str = "gymnasium", **kwargs: Any) -> EnvPool:
    """envpool's ``make``: a batched env of ``num_envs`` envs of ``task_id``.

    Args:
        task_id: an envpool id (``"Pong-v5"``, ``"CartPole-v1"``, ...).
        env_type: ``"gymnasium"`` or ``"gym"`` (see the module docstring).
        **kwargs: envpool's options: ``num_envs``, ``batch_size`` (0 or ``num_envs``:
            synchronous), ``num_threads`` (worker processes), ``seed`` (int: env ``i``
            gets ``seed + i``; or one per env), ``max_episode_steps``, and the task's
            (Atari: ``episodic_life``, ``reward_clip``, ``stack_num``, ``img_height``, ...).

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
    api = _api(env_type)
    task = _resolve(task_id)
    cfg = _config(task, kwargs)
    n, batch, threads = cfg["num_envs"], cfg["batch_size"], cfg["num_threads"]
    asynchronous = batch < n
    workers = max(1, min(n, threads if kwargs.get("num_threads") else (os.cpu_count() or 1)))
    # async without num_threads: the pool's own split for this batch_size
    in_series = None if asynchronous and not kwargs.get("num_threads") else math.ceil(n / workers)
    overrides = _overrides(task, cfg, batch if asynchronous else 1, in_series)
    from .factory import make_vec

    envs = make_vec(overrides=overrides)
    return EnvPool(task_id, env_type, envs, cfg, api, task.atari, overrides)


def make_gymnasium(task_id: str, **kwargs: Any) -> EnvPool:
    """``make(task_id, env_type="gymnasium", **kwargs)``."""
    return make(task_id, env_type="gymnasium", **kwargs)


def make_gym(task_id: str, **kwargs: Any) -> EnvPool:
    """``make(task_id, env_type="gym", **kwargs)``."""
    return make(task_id, env_type="gym", **kwargs)


def make_dm(task_id: str, **kwargs: Any) -> EnvPool:
    """Not offered: raises [`ConfigError`][envfactory.errors.ConfigError] (dm_env's ``TimeStep``
    API)."""
    return make(task_id, env_type="dm", **kwargs)


@dataclass(frozen=True)
class _Api:
    classic: bool  # reset -> obs; step -> (obs, rew, done, info)
    gym_spaces: Any  # gym.spaces module, or None for gymnasium's


def _api(env_type: Any) -> _Api:
    if env_type == "gymnasium":
        return _Api(False, None)
    if env_type == "gym":
        try:
            import gym as old_gym  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            return _Api(True, None)
        major_minor = tuple(int(p) for p in old_gym.__version__.split(".")[:2])
        return _Api(major_minor < (0, 26), old_gym.spaces)
    raise ConfigError(
        f"envpool.make: env_type={env_type!r} is not offered; valid: 'gymnasium' (gymnasium's "
        "API) or 'gym' (the installed gym's API, classic without gym); dm_env's 'dm' is not "
        "offered"
    )


def _gym_space(space: gym.Space, spaces: Any) -> Any:
    """The ``gym.spaces`` twin of a gymnasium space (``env_type="gym"`` with gym
    installed, so ``isinstance(env.action_space, gym.spaces.Discrete)`` holds)."""
    if spaces is None:
        return space
    s = gym.spaces
    if isinstance(space, s.Discrete):
        return spaces.Discrete(int(space.n))
    if isinstance(space, s.Box):
        return spaces.Box(space.low, space.high, space.shape, space.dtype)
    if isinstance(space, s.MultiDiscrete):
        return spaces.MultiDiscrete(space.nvec)
    if isinstance(space, s.MultiBinary):
        return spaces.MultiBinary(space.n)
    if isinstance(space, s.Dict):
        return spaces.Dict({k: _gym_space(v, spaces) for k, v in space.spaces.items()})
    if isinstance(space, s.Tuple):
        return spaces.Tuple([_gym_space(v, spaces) for v in space.spaces])
    raise ConfigError(f"envpool: env_type='gym' cannot express {space!r} as a gym space")


class EnvPool:
    """envpool's batched env over an envfactory pool (made by [`make`][envfactory.envpool.make]).

    ``env.envs`` is the envfactory ``VectorEnv`` underneath (``env.overrides`` the config
    that built it).
    """

    def __init__(
        self,
        task_id: str,
        env_type: str,
        envs: Any,
        config: dict[str, Any],
        api: _Api,
        atari: bool,
        overrides: list[str],
    ) -> None:
        self.envs, self.overrides = envs, overrides
        self._task_id, self._env_type, self._config, self._api = task_id, env_type, config, api
        self._atari = atari
        self.observation_space = _gym_space(envs.single_observation_space, api.gym_spaces)
        self.action_space = _gym_space(envs.single_action_space, api.gym_spaces)
        n = config["num_envs"]
        self._all = np.arange(n, dtype=np.int32)
        self._elapsed = np.zeros(n, dtype=np.int32)
        self._done = np.zeros(n, dtype=np.bool_)  # the last result ended an episode
        self._life_lost = np.zeros(n, dtype=np.bool_)  # ... by a lost life (episodic_life)
        self._resetting = np.zeros(n, dtype=np.bool_)  # a reset is in flight
        self._seeded = np.zeros(n, dtype=np.bool_)
        self._seed_list = _seed_list(config["seed"], n)
        self._closed = False
        self._flight: list[int] = []  # synchronous mode: envs sent, in send order

    # -- envpool's attributes ---------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        """envpool's config dict: ``num_envs``, ``batch_size``, ``seed``, ... and the task's."""
        return dict(self._config)

    @property
    def is_async(self) -> bool:
        """``batch_size < num_envs``: ``recv`` returns the first ``batch_size`` ready envs."""
        return bool(self._config["batch_size"] < self._config["num_envs"])

    @property
    def all_env_ids(self) -> np.ndarray:
        """``np.arange(num_envs)`` as int32."""
        return self._all

    def __len__(self) -> int:
        return int(self._config["num_envs"])

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self._config.items())
        return f"EnvPool({self._task_id!r}, env_type={self._env_type!r}, {items})"

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def seed(self, seed: Any = None) -> None:
        """Abandoned, as in envpool: pass ``seed`` to [`make`][envfactory.envpool.make]."""
        warnings.warn(
            "The `seed` function in envpool is abandoned. You can set seed by "
            "envpool.make(..., seed=seed) instead.",
            stacklevel=2,
        )

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        self._closed = True
        self.envs.close()

    # -- envpool's calls --------------------------------------------------------------
    def reset(self, env_id: Any = None) -> Any:
        """Reset the envs ``env_id`` (default all); return their observations
        (``(obs, info)`` unless the classic gym API)."""
        self._check_open("reset")
        ids = self._ids(env_id, "reset(env_id")
        mask = np.zeros(len(self), dtype=np.bool_)
        mask[ids] = True
        options = None if mask.all() else {"reset_mask": mask}
        obs, infos = self.envs.reset(seed=self._seeds(mask), options=options)
        self._done[ids] = self._life_lost[ids] = self._resetting[ids] = False
        self._elapsed[ids] = 0
        rows = np.asarray(ids, dtype=np.intp)
        zeros, ones = np.zeros(len(ids), dtype=np.bool_), np.ones(len(ids), dtype=np.bool_)
        info = self._info(rows, infos, np.zeros(len(ids), np.float32), zeros, ones, rows)
        obs = take_rows(obs, rows)
        if self._api.classic and not self._config["gym_reset_return_info"]:
            return obs
        return obs, info

    def async_reset(self) -> None:
        """Start resetting every env; [`recv`][envfactory.envpool.EnvPool.recv] returns them."""
        self._check_open("async_reset")
        self.envs.async_reset(seed=self._seeds(np.ones(len(self), dtype=np.bool_)))
        self._resetting[:] = True
        if not self.is_async:
            self._flight = list(range(len(self)))

    def send(self, action: Any, env_id: Any = None) -> None:
        """Step the envs ``env_id`` (default all) with ``action`` (one row each, or
        envpool's dict ``{"action": ..., "env_id": ...}``) and return at once."""
        self._check_open("send")
        action, ids = self._split(action, env_id, "send(action, env_id")
        self.envs.send(action, ids)
        if not self.is_async:
            self._flight += ids

    def recv(self) -> tuple:
        """The next ``batch_size`` envs done (synchronous mode: every env sent)."""
        self._check_open("recv")
        if self.is_async:
            return self._result(*self.envs.recv())
        if not self._flight:
            raise NoPendingCallError(
                "recv() with no env in flight: call send(action, env_id) or async_reset() first",
                "",
            )
        result = self.envs.recv(env_ids=self._flight)  # exactly those envs, in send order
        self._flight = []
        return self._result(*result)

    def step(self, action: Any, env_id: Any = None) -> tuple:
        """``send(action, env_id)`` then ``recv()``; every env at once (no ``env_id``, none
        in flight, synchronous mode) is one synchronous step of the pool."""
        self._check_open("step")
        whole = env_id is None and not isinstance(action, Mapping)
        if whole and not self.is_async and not self._flight:
            obs, rew, term, trunc, infos = self.envs.step(self._actions(action, len(self)))
            return self._result(obs, rew, term, trunc, infos, all_=True)
        action, ids = self._split(action, env_id, "step(action, env_id")
        self.send(action, ids)
        return self.recv()

    def xla(self) -> Any:
        """envpool's XLA interface is not offered."""
        raise NotImplementedError("envfactory.envpool offers no XLA interface (envpool's xla())")

    # -- helpers ----------------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ClosedError(
                f"envpool: {what}() on a closed EnvPool; make a new one with envpool.make(...)"
            )

    def _seeds(self, mask: np.ndarray) -> list[int | None]:
        base = self._seed_list
        out = [base[i] if mask[i] and not self._seeded[i] else None for i in range(len(self))]
        self._seeded |= mask
        return out

    def _ids(self, env_id: Any, head: str) -> list[int]:
        """``env_id`` (default all) checked as the pool checks its ``env_ids``: ints in
        ``[0, num_envs)``, each at most once (a ValueError naming the call and ids)."""
        if env_id is None:
            return list(range(len(self)))
        return check_env_ids(env_id, len(self), f"envpool: {head}")

    def _actions(self, action: Any, n: int) -> np.ndarray:
        space = self.envs.single_action_space
        arr = np.asarray(action)
        if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
            arr = arr.astype(np.int64, copy=False)
        elif isinstance(space, gym.spaces.Box):
            arr = arr.astype(space.dtype, copy=False)
        if arr.ndim == 0 or arr.shape[0] != n:
            raise ValueError(
                f"envpool: the action batch has shape {arr.shape}, expected {n} rows (one per "
                "env_id); pass one action per env in env_id"
            )
        return arr

    def _split(self, action: Any, env_id: Any, head: str) -> tuple[np.ndarray, list[int]]:
        if isinstance(action, Mapping):
            env_id = action.get("env_id", env_id)
            action = action["action"]
        if env_id is None:
            n = np.asarray(action).shape[0] if np.ndim(action) else 0
            if self.is_async and n != len(self):
                raise ValueError(
                    f"envpool: send(action) of {n} rows without env_id in async mode: pass "
                    "env_id=info['env_id'] of the last recv()"
                )
            env_id = self._all
        ids = self._ids(env_id, head)
        return self._actions(action, len(ids)), ids

    def _result(self, obs: Any, rew: Any, term: Any, trunc: Any, infos: dict, all_=False) -> tuple:
        ids = self._all.astype(np.intp) if all_ else np.asarray(infos["env_id"], dtype=np.intp)
        rows = np.arange(len(ids))
        reset_rows = self._done[ids] | self._resetting[ids]
        rew = np.asarray(rew, dtype=np.float32)
        term, trunc = np.asarray(term, dtype=np.bool_), np.asarray(trunc, dtype=np.bool_)
        info = self._info(ids, infos, rew, term, reset_rows, rows)
        if self._atari and self._config["reward_clip"]:
            rew = np.sign(rew).astype(np.float32)
        done = term | trunc
        self._done[ids] = done
        self._resetting[ids] = False
        if self._atari:
            self._life_lost[ids] = term & (info["lives"] > 0)
        if self._api.classic:
            info["TimeLimit.truncated"] = trunc
            return obs, rew, done, info
        return obs, rew, term, trunc, info

    def _info(
        self,
        ids: np.ndarray,
        infos: dict,
        rew: np.ndarray,
        term: np.ndarray,
        reset_rows: np.ndarray,
        rows: Any,
    ) -> dict[str, Any]:
        # elapsed steps: 0 after a reset, but a life continued (episodic_life) keeps counting
        keep = reset_rows & self._life_lost[ids]
        self._elapsed[ids] = np.where(reset_rows & ~keep, 0, self._elapsed[ids] + ~reset_rows)
        env_id = ids.astype(np.int32)
        info: dict[str, Any] = {
            "env_id": env_id,
            "players": {"env_id": env_id.copy()},
            "elapsed_step": self._elapsed[ids].copy(),
        }
        if self._atari:
            lives = np.asarray(infos.get("lives", np.zeros(len(self))), dtype=np.int32)[rows]
            info["lives"] = np.where(infos.get("_lives", np.ones(len(lives), bool))[rows], lives, 0)
            info["reward"] = np.where(reset_rows, 0.0, rew).astype(np.float32)
            # the real game over: a lost life (episodic_life) ends an episode with lives > 0
            info["terminated"] = (term & (info["lives"] == 0)).astype(np.int32)
        return info
