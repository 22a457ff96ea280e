"""``ALEVectorEnv``: ale_py's ``AtariVectorEnv`` speaking envfactory's VecEnv contract.

What it adds on top of ``AtariVectorEnv`` (cheap numpy on the batch, no per-env Python):
float64 rewards and sign clipping done here (so the statistics keep the raw score),
gymnasium's info layout (``_key`` masks; ``final_obs`` / ``final_info`` in ``same_step``),
episode statistics at the real game over, the ``hwc`` layout, seeds and ``reset_mask`` with
gymnasium's meaning, and envpool's pool spelling when ``batch_size < num_envs``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import envfactory

from .names import ALTERNATIVE, NAME

__all__ = ["ALEVectorEnv"]


class ALEVectorEnv(VectorEnv):
    """The ``atari`` family on ``ale_py.vector_env.AtariVectorEnv`` (see the package README
    for where observations differ from the Python family)."""

    def __init__(
        self,
        ale_kwargs: dict[str, Any],
        *,
        layout: str,
        grayscale: bool,
        clip_reward: bool,
        episodic_life: bool,
        stats_key: str | None,
        autoreset_mode: AutoresetMode,
    ) -> None:
        from ale_py.vector_env import AtariVectorEnv

        self.ale = AtariVectorEnv(**ale_kwargs, autoreset_mode=autoreset_mode)
        self.num_envs = n = int(ale_kwargs["num_envs"])
        self.batch_size = self.ale.batch_size
        self.layout, self.grayscale = layout, grayscale
        self.clip_reward, self.episodic_life = clip_reward, episodic_life
        self.stats_key = stats_key
        self.autoreset_mode = autoreset_mode
        self.metadata = {"autoreset_mode": autoreset_mode}
        self.render_mode = None
        self.spec = None
        self.closed = False

        native = self.ale.single_observation_space.shape  # (stack, H, W[, 3])
        shape = self._arrange(np.zeros((1, *native), np.uint8)).shape[1:]
        self.single_observation_space = Box(0, 255, shape, np.uint8)
        self.single_action_space = self.ale.single_action_space
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self.pool = self.batch_size < n

        self._returns = np.zeros(n, np.float64)
        self._lengths = np.zeros(n, np.int64)
        self._starts = np.full(n, time.perf_counter())
        self._autoreset = np.zeros(n, np.bool_)
        self._pending: Any = None  # the first batch of an async_reset
        self._last_ids: np.ndarray | None = None

    # -- layout and infos --------------------------------------------------------------
    def _arrange(self, obs: np.ndarray) -> np.ndarray:
        """ALE's (B, stack, H, W[, 3]) into the family's layout (table in StackLayout)."""
        if self.grayscale:
            if self.layout == "chw":
                return obs
            return np.ascontiguousarray(np.moveaxis(obs, 1, -1))
        b, s, h, w, c = obs.shape
        if self.layout == "chw":
            return obs.transpose(0, 1, 4, 2, 3).reshape(b, s * c, h, w)
        return obs.transpose(0, 2, 3, 1, 4).reshape(b, h, w, s * c)

    @staticmethod
    def _masked(info: dict[str, Any], size: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in info.items():
            if key == "final_obs":
                continue
            out[key] = value
            out[f"_{key}"] = np.ones(size, np.bool_)
        return out

    def _stats(self, ids: np.ndarray, ended: np.ndarray) -> dict[str, Any]:
        now = time.perf_counter()
        idx = ids[ended]
        size = len(ids)
        r = np.zeros(size, np.float64)
        n = np.zeros(size, np.int64)
        t = np.zeros(size, np.float64)
        r[ended] = self._returns[idx]
        n[ended] = self._lengths[idx]
        t[ended] = np.round(now - self._starts[idx], 6)
        self._returns[idx] = 0.0
        self._lengths[idx] = 0
        self._starts[idx] = now
        mask = ended.copy()
        return {"r": r, "l": n, "t": t, "_r": mask, "_l": mask, "_t": mask}

    # -- the VectorEnv API -------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all envs, or the ``options["reset_mask"]`` ones. An int seed gives env *i*
        the seed ``seed + i`` (also under a mask); a list gives one seed per env."""
        self._check_open("reset")
        n = self.num_envs
        mask = None if options is None else options.get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (n,):
                raise ValueError(
                    f"reset_mask must be a bool array of shape ({n},); got {mask.dtype} "
                    f"{mask.shape}"
                )
        ids = np.arange(n) if mask is None else np.flatnonzero(mask)
        seeds: np.ndarray | None = None
        if seed is not None:
            if isinstance(seed, (int, np.integer)):
                full = np.arange(int(seed), int(seed) + n)
            else:
                full = np.asarray(list(seed), dtype=np.int64)
                if full.shape != (n,):
                    raise ValueError(
                        f"reset(seed=<list of {len(full)}>) needs one seed per env (num_envs={n})"
                    )
            seeds = full[ids]
        kwargs: dict[str, Any] = {"seed": seeds}
        if mask is not None:
            kwargs["options"] = {"reset_mask": mask}
        obs, info = self.ale.reset(**kwargs)
        now = time.perf_counter()
        self._returns[ids], self._lengths[ids], self._starts[ids] = 0.0, 0, now
        self._autoreset[ids] = False
        if self.pool:
            self._last_ids = np.asarray(info["env_id"])
        infos = self._masked(info, len(obs))
        if mask is not None:
            for key in [k for k in infos if k.startswith("_")]:
                infos[key] = mask.copy()
        return self._arrange(obs), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every env (with ``batch_size < num_envs`` use ``send`` / ``recv``)."""
        self._check_open("step")
        if self.pool:
            raise envfactory.ConfigError(
                f"vectorizer=ale-vector with batch_size={self.batch_size} < "
                f"num_envs={self.num_envs} is an async pool: use async_reset(), recv() and "
                "send(actions, env_ids), or set vectorizer.batch_size=null"
            )
        self.ale.send(np.asarray(actions))
        return self._convert(self.ale.recv())

    def _convert(self, result: tuple) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, raw, term, trunc, info = result
        ids = np.asarray(info["env_id"])
        raw = np.asarray(raw, np.float64)
        counted = ~self._autoreset[ids]
        if self.autoreset_mode is not AutoresetMode.NEXT_STEP:
            counted[:] = True
        self._returns[ids] += np.where(counted, raw, 0.0)
        self._lengths[ids] += counted
        done = term | trunc
        ended = done & (trunc | (np.asarray(info["lives"]) == 0)) if self.episodic_life else done
        rewards = np.sign(raw) if self.clip_reward else raw
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self._autoreset[ids] = done
        final_obs = info.get("final_obs")
        infos = self._masked(info, len(ids))
        key = self.stats_key
        stats = self._stats(ids, ended) if key is not None and ended.any() else None
        if self.autoreset_mode is AutoresetMode.SAME_STEP and done.any():
            final_info = {k: v for k, v in infos.items()}
            for k in list(final_info):
                if k.startswith("_"):
                    final_info[k] = done.copy()
            if stats is not None:
                final_info[key], final_info[f"_{key}"] = stats, ended.copy()
            arranged = self._arrange(np.asarray(final_obs))
            objs = np.empty(len(ids), dtype=object)
            for i in np.flatnonzero(done):
                objs[i] = arranged[i]
            infos["final_obs"], infos["_final_obs"] = objs, done.copy()
            infos["final_info"], infos["_final_info"] = final_info, done.copy()
        elif stats is not None:
            infos[key], infos[f"_{key}"] = stats, ended.copy()
        return self._arrange(obs), rewards, term, trunc, infos

    # -- envpool's pool spelling (batch_size < num_envs) --------------------------------
    def async_reset(self, seed: int | list[int] | None = None) -> None:
        """Reset every env; ``recv()`` then returns the first ``batch_size`` ready envs."""
        self._pending = self.reset(seed=seed)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """The next ``batch_size`` ready envs; ``infos["env_id"]`` says which."""
        self._check_open("recv")
        if self._pending is not None:
            obs, infos = self._pending
            self._pending = None
            size = len(obs)
            zeros = np.zeros(size, np.bool_)
            return obs, np.zeros(size), zeros, zeros.copy(), infos
        result = self._convert(self.ale.recv())
        self._last_ids = np.asarray(result[4]["env_id"])
        return result

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Actions for the envs of the last ``recv()`` (``env_ids`` in any order)."""
        self._check_open("send")
        actions = np.asarray(actions)
        if env_ids is not None and self._last_ids is not None:
            env_ids = np.asarray(env_ids)
            if sorted(env_ids.tolist()) != sorted(self._last_ids.tolist()):
                raise ValueError(
                    f"send(env_ids={env_ids.tolist()}): ale-vector takes actions for the envs "
                    f"of the last recv() ({self._last_ids.tolist()})"
                )
            order = {int(e): k for k, e in enumerate(env_ids)}
            actions = actions[[order[int(e)] for e in self._last_ids]]
        self.ale.send(actions)

    def call(self, name: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Refused (one line): ale_py's ``AtariVectorEnv`` steps its games in C++, so there
        is no Python env per index for ``call(name)`` or ``call(fn)`` to reach.

        Raises:
            NotImplementedError: always, naming the vectorizer to use instead.
        """
        what = repr(name) if isinstance(name, str) else getattr(name, "__name__", repr(name))
        raise NotImplementedError(
            f"vectorizer={NAME} cannot run call({what}): ale_py's AtariVectorEnv steps its "
            f"games in C++, with no Python env per index; for per-env calls (call(fn), "
            f"call(name)) use {ALTERNATIVE} (or dummy) with the same env=atari config"
        )

    def _check_open(self, call: str) -> None:
        if self.closed:
            from gymnasium.error import ClosedEnvironmentError

            raise ClosedEnvironmentError(f"ale-vector: {call}() called after close()")

    def close_extras(self, **kwargs: Any) -> None:
        self.ale.close()
        del self.ale

    def close(self, **kwargs: Any) -> None:
        if not self.closed:
            self.close_extras(**kwargs)
            self.closed = True

    def __enter__(self) -> ALEVectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
