"""envpool's batched env (``GymnasiumEnvPool``) over an envfactory pool, made by
[`make`][envfactory.envpool.make]."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from ..errors import AlreadyPendingError, ClosedError, NoPendingCallError
from ..vectorizers.asyncpool.pool import take_rows
from ..vectorizers.front.checks import check_env_ids
from .spec import EnvSpec

__all__ = ["DMEnvPool", "EnvPool", "GymnasiumEnvPool"]


class EnvPool(gym.vector.VectorEnv, gym.Env):  # type: ignore[misc]
    """envpool's batched env over an envfactory pool (made by [`make`][envfactory.envpool.make]).

    A ``gymnasium.Env`` (so ``gymnasium.Wrapper(env)`` takes it) and a
    ``gymnasium.vector.VectorEnv`` (so gymnasium's vector wrappers, ``NormalizeObservation``
    ..., take it), as envpool's: ``num_envs``, ``single_observation_space`` /
    ``single_action_space`` (the same objects as envpool's per-env ``observation_space`` /
    ``action_space``), ``is_vector_env``. ``env.envs`` is the envfactory ``VectorEnv``
    underneath (``env.overrides`` the config that built it), ``env.spec`` envpool's
    [`EnvSpec`][envfactory.envpool.EnvSpec].

    The pool starts done, as envpool's: a step before any reset is the reset of the envs
    stepped (their actions ignored; rewards 0, no flags), in synchronous mode. The pool
    underneath resets a subset only once every env was reset, so the first reset of a
    subset (``reset(env_id=...)``, or a step of some envs before any reset) resets every
    env, each with its seed; the others then step on from that reset (envpool would reset
    them at their first step). In async mode, ``async_reset()`` comes first.
    """

    metadata = {"render_modes": ["rgb_array", "human"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        task_id: str,
        env_type: str,
        envs: Any,
        spec: EnvSpec,
        atari: bool,
        overrides: list[str],
        seeds: list[int],
    ) -> None:
        self.envs, self.overrides = envs, overrides
        self._task_id, self._env_type, self._spec = task_id, env_type, spec
        self._config = spec._config
        self._atari = atari
        n = self._config["num_envs"]
        self.num_envs = n
        self.observation_space = self.single_observation_space = envs.single_observation_space
        self.action_space = self.single_action_space = envs.single_action_space
        self.render_mode = self._config["render_mode"]
        self.closed = False
        self._all = np.arange(n, dtype=np.int32)
        self._elapsed = np.zeros(n, dtype=np.int32)
        self._done = np.zeros(n, dtype=np.bool_)  # the last result ended an episode
        self._life_lost = np.zeros(n, dtype=np.bool_)  # ... by a lost life (episodic_life)
        self._resetting = np.zeros(n, dtype=np.bool_)  # a reset is in flight
        self._started = np.zeros(n, dtype=np.bool_)  # reset at least once (all, or none)
        self._seeded = np.zeros(n, dtype=np.bool_)
        self._seed_list = seeds  # env i's first reset (make's seed, checked there)
        self._flight: list[int] = []  # synchronous mode: envs sent, in send order
        self._fresh: tuple | None = None  # synchronous mode: the first reset, done by send

    # -- envpool's attributes ---------------------------------------------------------
    @property
    def spec(self) -> EnvSpec:  # type: ignore[override]
        """envpool's [`EnvSpec`][envfactory.envpool.EnvSpec] of this pool's task and options."""
        return self._spec

    @property
    def config(self) -> dict[str, Any]:
        """envpool's config dict: ``num_envs``, ``batch_size``, ``seed``, ... and the task's."""
        return dict(self._config)

    @property
    def is_async(self) -> bool:
        """``batch_size < num_envs``: ``recv`` returns the first ``batch_size`` ready envs."""
        return bool(self._config["batch_size"] < self._config["num_envs"])

    @property
    def is_vector_env(self) -> bool:
        """True: a batch of envs (gymnasium's older vector-aware wrappers read it)."""
        return True

    @property
    def all_env_ids(self) -> np.ndarray:
        """``np.arange(num_envs)`` as int32."""
        return self._all

    def __len__(self) -> int:
        return int(self._config["num_envs"])

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self._config.items())
        return f"EnvPool({self._task_id!r}, env_type={self._env_type!r}, {items})"

    __str__ = __repr__

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self.close()
        return False

    def seed(self, seed: Any = None) -> None:
        """Abandoned, as in envpool: pass ``seed`` to [`make`][envfactory.envpool.make]."""
        warnings.warn(
            "The `seed` function in envpool is abandoned. You can set seed by "
            "envpool.make(..., seed=seed) instead.",
            stacklevel=2,
        )

    def close(self, **kwargs: Any) -> None:
        """Stop the worker processes (idempotent; gymnasium's ``close`` keywords are
        accepted and ignored)."""
        self.closed = True
        self.envs.close()

    def render(self, env_ids: Any = None) -> np.ndarray | None:  # type: ignore[override]
        """Frames of the envs ``env_ids`` (an int or ids; default env 0), stacked:
        ``(len(env_ids), H, W, 3)`` uint8 with ``render_mode="rgb_array"`` (the env's own
        size, or ``render_height`` x ``render_width`` given to ``make``: resized with
        cv2.INTER_AREA); None with ``"human"`` (one env's window). Rendering changes no env's
        state.

        Raises:
            RuntimeError: the pool was made without ``render_mode``.
            ValueError: a bad env id, or several with ``"human"``.
        """
        self._check_open("render")
        if self.render_mode not in ("rgb_array", "human"):
            raise RuntimeError(
                "envpool: render() needs render_mode='rgb_array' or 'human' when creating the "
                "env: envpool.make(..., render_mode='rgb_array')"
            )
        ids = self._ids([0] if env_ids is None else np.atleast_1d(env_ids), "render(env_ids")
        if self.render_mode == "human" and len(ids) != 1:
            raise ValueError(f"envpool: render_mode='human' shows one env, got env_ids={ids}")
        frames = self.envs.env_method("render", indices=ids)
        if self.render_mode == "human":
            return None
        size = (self._config["render_width"], self._config["render_height"])
        if size != (None, None):
            import cv2  # deferred, as every cv2 use

            frames = [self._resized(cv2, np.asarray(f), size) for f in frames]
        return np.stack([np.asarray(f, dtype=np.uint8) for f in frames])

    @staticmethod
    def _resized(cv2: Any, frame: np.ndarray, size: tuple[Any, Any]) -> np.ndarray:
        """``frame`` at ``render_width`` x ``render_height`` (either None: the frame's own)."""
        width, height = size[0] or frame.shape[1], size[1] or frame.shape[0]
        if (height, width) == frame.shape[:2]:
            return frame
        return cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)

    # -- envpool's calls --------------------------------------------------------------
    def reset(
        self, env_id: Any = None, *, seed: Any = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the envs ``env_id`` (default all; or gymnasium's
        ``options={"reset_mask": mask}``); return ``(obs, info)`` of those envs. ``seed``
        is ignored with a warning, as envpool's: seeds are fixed by ``make``."""
        self._check_open("reset")
        if seed is not None:
            warnings.warn(
                "envpool: seeds are fixed when the env is made; reset(seed=...) is ignored: "
                "pass seed to envpool.make instead",
                stacklevel=2,
            )
        if options:
            unknown = sorted(set(options) - {"reset_mask"})
            if unknown or env_id is not None:
                raise ValueError(
                    f"envpool: reset(options={options!r}): the only option is 'reset_mask', "
                    "and not with env_id; pass either env_id or options={'reset_mask': mask}"
                )
            env_id = np.flatnonzero(np.asarray(options["reset_mask"], dtype=np.bool_))
        ids = self._ids(env_id, "reset(env_id")
        obs, _, _, _, info = self._reset_rows(ids)
        return obs, info

    def async_reset(self) -> None:
        """Start resetting every env; [`recv`][envfactory.envpool.EnvPool.recv] returns them."""
        self._check_open("async_reset")
        self.envs.async_reset(seed=self._seeds(np.ones(len(self), dtype=np.bool_)))
        self._resetting[:] = self._started[:] = True
        if not self.is_async:
            self._flight = list(range(len(self)))

    def send(self, action: Any, env_id: Any = None) -> None:
        """Step the envs ``env_id`` (default all) with ``action`` (one row each, or
        envpool's dict ``{"action": ..., "env_id": ...}``) and return at once. In
        synchronous mode, before any reset, the envs are reset instead (envpool's pool
        starts done; see the class docstring)."""
        self._check_open("send")
        action, ids = self._split(action, env_id, "send(action, env_id")
        if self._fresh is not None:
            raise AlreadyPendingError(
                f"envpool: send(env_id={ids}) before recv() of the first reset; call recv() first",
                "send",
            )
        if not self.is_async and not self._started.any():
            self._fresh = self._reset_rows(ids)  # their first step is their reset
            return
        self.envs.send(action, ids)
        if not self.is_async:
            self._flight += ids

    def recv(self) -> tuple:
        """The next ``batch_size`` envs done (synchronous mode: every env sent)."""
        self._check_open("recv")
        if self.is_async:
            return self._result(*self.envs.recv())
        if self._fresh is not None:
            fresh, self._fresh = self._fresh, None
            return fresh
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
        in flight, synchronous mode, every env reset before) is one synchronous step of
        the pool."""
        self._check_open("step")
        whole = env_id is None and not isinstance(action, Mapping)
        if whole and not self.is_async and not self._flight and self._started.all():
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
        if self.closed:
            raise ClosedError(
                f"envpool: {what}() on a closed EnvPool; make a new one with envpool.make(...)"
            )

    def _reset_rows(self, ids: list[int]) -> tuple:
        """Reset the envs ``ids`` now (every env, before any reset): their rows as a result
        (rewards 0, no flags)."""
        mask = np.zeros(len(self), dtype=np.bool_)
        mask[ids] = True
        if not self._started.any():
            # the pool underneath resets a subset only after a reset of all: reset all
            # (each with its seed); the others step on from there, never shown
            mask[:] = True
        options = None if mask.all() else {"reset_mask": mask}
        obs, infos = self.envs.reset(seed=self._seeds(mask), options=options)
        self._done[mask] = self._life_lost[mask] = self._resetting[mask] = False
        self._started[mask] = True
        self._elapsed[mask] = 0
        rows = np.asarray(ids, dtype=np.intp)
        zeros, ones = np.zeros(len(ids), dtype=np.bool_), np.ones(len(ids), dtype=np.bool_)
        rew = np.zeros(len(ids), np.float32)
        info = self._info(rows, infos, rew, zeros, ones, rows)
        return take_rows(obs, rows), rew, zeros, zeros.copy(), info

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
        self._done[ids] = term | trunc
        self._resetting[ids] = False
        if self._atari:
            self._life_lost[ids] = term & (info["lives"] > 0)
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
            passed = ("ram",)  # not ALE's frame counters: envpool's Atari infos
        else:
            passed = tuple(k for k in infos if not k.startswith("_") and k not in info)
        for key in passed:  # the env's own infos (CliffWalking's "prob", ...)
            if key in infos:
                info[key] = take_rows(infos[key], np.asarray(rows, dtype=np.intp))
        return info


#: envpool's name of its gymnasium-API pool class (``make_gym`` and ``make_gymnasium``
#: both return it since envpool 1.2)
GymnasiumEnvPool = EnvPool


class DMEnvPool:
    """envpool's dm_env pool: not offered ([`make_dm`][envfactory.envpool.make_dm] raises
    ``ConfigError``); the name exists so that code importing it for type hints loads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "envfactory.envpool offers no dm_env pool (envpool's make_dm); use make_gymnasium"
        )
