"""The Ray actor that hosts a slice of envs.

One actor holds ``in_series`` envs and answers one method call per vectorized call (one
``step`` for all its envs, not one per env). Its observations leave as one batch per
actor (numpy arrays, which Ray's serializer puts in the object store out of band and the
caller reads without unpickling them per env). The per-env step/reset/autoreset logic is
envfactory's own runner, the one ``dummy`` and ``subproc`` use, so the trajectories are
the same by construction.

Every method answers ``(OK, payload)`` or ``(ERROR, failure)``: an env's exception is
caught here and travels with its type name, the exception (when it pickles) and its
traceback, so the caller raises the same ``RemoteEnvError`` as ``subproc``.
"""

from __future__ import annotations

import os
import pickle
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array

from envfactory import ObservationError
from envfactory.vectorizers.runner import EnvRunner
from envfactory.vectorizers.shared import check_observation

__all__ = ["ERROR", "OK", "EnvActor", "array_batched"]

OK, ERROR = "ok", "error"

#: ``(exc_type "module.qualname", the exception or None if it does not pickle, traceback)``
Failure = tuple[str, Any, str]


def array_batched(space: gym.Space) -> bool:
    """True when a batch of ``space`` is numpy arrays only (Box, Discrete, MultiDiscrete,
    MultiBinary, and Dict/Tuple of those): such a batch crosses as arrays and is copied
    into the caller's batch slice by slice. Other spaces (Text, Graph, Sequence, OneOf)
    cross as one list per actor."""
    if isinstance(space, gym.spaces.Dict):
        return all(array_batched(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return all(array_batched(s) for s in space.spaces)
    return isinstance(
        space,
        (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary),
    )


def _failure(exc: BaseException) -> Failure:
    tb = traceback.format_exc()
    try:
        import ray.cloudpickle as cp

        pickle.loads(cp.dumps(exc))  # some pickle but cannot be rebuilt (__init__ args)
        picklable: BaseException | None = exc
    except Exception:
        picklable = None
    return (f"{type(exc).__module__}.{type(exc).__qualname__}", picklable, tb)


class _LostEnv:
    """Stands in for an env of a rebuilt actor for one step: the caller's episode was lost
    with the old actor, so that step reports it truncated at the last observation the
    caller saw (reward 0), as ``subproc``'s rebuilt workers do."""

    def __init__(self, env: Any, obs: Any) -> None:
        self.env, self.obs = env, obs

    def step(self, action: Any) -> tuple:
        return self.obs, 0.0, False, True, {"restarted": True}

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)


class EnvActor:
    """Hosts envs ``start .. start + len(env_fns)`` of a vectorized env (made a Ray actor
    with ``ray.remote(EnvActor)`` by :class:`envfactory_ray.RayVecEnv`)."""

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], start: int, mode: AutoresetMode
    ) -> None:
        self.start, self.mode = start, mode
        self.envs: list[gym.Env] = []
        self.lost: dict[int, Any] = {}  # envs whose lost episode is yet to end (restart)
        self.init_failure: Failure | None = None
        try:
            self.envs = [fn() for fn in env_fns]
        except Exception as exc:  # reported by describe(): the caller raises it
            self.init_failure = _failure(exc)
            return
        self.runner = EnvRunner(self.envs, mode)
        self.space = self.envs[0].observation_space
        self.arrays = array_batched(self.space)
        self._buf: Any = create_empty_array(self.space, n=len(self.envs)) if self.arrays else None

    # -- helpers ----------------------------------------------------------------------
    def _batch(self) -> Any:
        """This actor's observations: one batch of arrays, or a list (other spaces)."""
        obs = self.runner.obs
        if not self.arrays:
            return list(obs)
        try:
            return concatenate(self.space, obs, self._buf)
        except Exception as exc:
            for i, value in enumerate(obs):
                check_observation(self.space, self.start + i, value)
            raise ObservationError(
                f"the envs' observations cannot be batched for observation space "
                f"{self.space}: {type(exc).__name__}: {exc}"
            ) from exc

    def _result(self, calls: list) -> tuple:
        r = self.runner
        return self._batch(), r.rewards, r.terminations, r.truncations, calls

    def _step_lost(self, actions: Any) -> list:
        r, real, lost = self.runner, self.runner.envs, self.lost
        r.envs = [_LostEnv(e, lost[i]) if i in lost else e for i, e in enumerate(real)]  # type: ignore[misc]
        try:
            calls = r.step(actions)
        finally:
            r.envs = real
        calls += [(i, {"restarted": True}) for i in sorted(lost)]
        lost.clear()
        return calls

    # -- methods ----------------------------------------------------------------------
    def describe(self) -> tuple[str, Any]:
        """Where the actor runs and what its envs are: ``{"pid", "node_id", "node_ip",
        "envs": [(observation_space, action_space, metadata, render_mode, spec id)]}``."""
        if self.init_failure is not None:
            return ERROR, self.init_failure
        import ray

        ctx = ray.get_runtime_context()
        info = {
            "pid": os.getpid(),
            "node_id": ctx.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "actor_id": ctx.get_actor_id(),
            "envs": [
                (
                    e.observation_space,
                    e.action_space,
                    dict(e.metadata),
                    e.render_mode,
                    getattr(e.spec, "id", None),
                )
                for e in self.envs
            ],
        }
        return OK, info

    def step(self, actions: Any) -> tuple[str, Any]:
        try:
            r = self.runner
            return OK, self._result(r.step(actions) if not self.lost else self._step_lost(actions))
        except Exception as exc:
            return ERROR, _failure(exc)

    def reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> tuple[str, Any]:
        try:
            if mask is None:
                self.lost.clear()
            else:
                for j in np.flatnonzero(mask).tolist():
                    self.lost.pop(j, None)
            return OK, self._result(self.runner.reset(seeds, options, mask))
        except Exception as exc:
            return ERROR, _failure(exc)

    def restarted(self, last_obs: list, done: list[bool]) -> tuple[str, Any]:
        """This actor replaces one that failed during a step: each env ends its lost
        episode now (truncated, at the last observation the caller saw), or, if that step
        was its ``next_step`` autoreset, is reset."""
        try:
            n, r = len(self.envs), self.runner
            due = [i for i in range(n) if done[i] and self.mode is AutoresetMode.NEXT_STEP]
            for i in range(n):
                if i in due:
                    r.autoreset[i] = True
                else:
                    self.lost[i] = last_obs[i]
            calls = self._step_lost([None] * n)
            calls += [(i, {"restarted": True}) for i in due]
            return OK, self._result(calls)
        except Exception as exc:
            return ERROR, _failure(exc)

    def restart_reset(self, reset: tuple, last_obs: list, done: list[bool]) -> tuple[str, Any]:
        """This actor replaces one that failed during a reset: the reset is redone (same
        seeds and options); with a ``reset_mask``, the unmasked envs keep the observation
        the caller saw and end their lost episode (truncated) at their next step."""
        try:
            seeds, options, mask = reset
            r = self.runner
            calls = r.reset(seeds, options, mask)
            self.lost.clear()
            for i in range(len(self.envs)):
                if mask is not None and not mask[i]:
                    r.obs[i] = last_obs[i]
                    if done[i] and self.mode is AutoresetMode.NEXT_STEP:
                        r.autoreset[i] = True  # its next step is the autoreset
                    elif not (done[i] and self.mode is AutoresetMode.DISABLED):  # (awaits a reset)
                        self.lost[i] = last_obs[i]
                else:
                    calls.append((i, {"restarted": True}))
            return OK, self._result(calls)
        except Exception as exc:
            return ERROR, _failure(exc)

    def call(self, name: Any, args: Any, kwargs: Any, local: list[int]) -> tuple[str, Any]:
        """``get_wrapper_attr(name)`` of the envs ``local``, called with ``args``/``kwargs``
        if it is callable and ``args`` is not None (``get_attr`` passes None); a function
        ``name`` runs as ``name(env, *args, **kwargs)`` here, next to the env."""
        try:
            import ray.cloudpickle as cp

            out = []
            for i in local:
                if callable(name):  # call(fn): fn(env, *args, **kwargs) in this actor
                    out.append(name(self.envs[i], *args, **kwargs))
                    continue
                attr = self.envs[i].get_wrapper_attr(name)
                out.append(attr(*args, **kwargs) if args is not None and callable(attr) else attr)
            cp.dumps(out)  # an unpicklable result is the env's error, not a dead actor
            return OK, out
        except Exception as exc:
            return ERROR, _failure(exc)

    def set_attr(self, name: str, values: list, local: list[int]) -> tuple[str, Any]:
        try:
            for i, v in zip(local, values):
                self.envs[i].set_wrapper_attr(name, v)
            return OK, None
        except Exception as exc:
            return ERROR, _failure(exc)

    def close(self) -> tuple[str, Any]:
        for e in self.envs:
            try:
                e.close()
            except Exception:
                pass
        self.envs = []
        return OK, None

    def pid(self) -> int:
        return os.getpid()
