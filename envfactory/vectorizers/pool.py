"""The async env pool: ``subproc`` / ``subproc-atari`` with ``batch_size`` set.

envpool's spelling, so a loop written for envpool runs unchanged:

    envs.async_reset(seed=0)                 # every env starts resetting
    while True:
        obs, rew, term, trunc, info = envs.recv()       # the next batch_size ready envs
        envs.send(policy(obs), info["env_id"])          # they step while you learn

How it relates to gymnasium: `SubprocPool` *is* a ``gymnasium.vector.VectorEnv``
(the front, ``RemoteVecEnv``, over a `SubprocGroup`, as ``SubprocVecEnv`` is):
``reset()``, ``step(actions)`` (``env_ids=None``) and the async halves step every env
together, synchronously, exactly as ``batch_size=null`` does, whenever no env is in
flight; gymnasium's vector wrappers see a ``num_envs`` batch there. ``async_reset`` /
``send`` / ``recv`` / ``step(actions, env_ids)`` are the pool calls; their batches have
``batch_size`` rows, and ``infos["env_id"]`` says which envs.

The structure: the pool is a scheduler over a worker group's readiness, by composition.
`PoolScheduler` (``envs.pool``) owns every piece of async state and talks to the workers only
through the handles' public API and the small `PoolBackend` interface, which `RemoteSite`
implements over any group's messages and failure policy and `_PipeSite` completes with the
pipes' readiness and the shared-memory rows; the synchronous ``reset``/``step`` are the
front's own, unchanged (one front, one pending call, closed flag and set of episode flags).
What is shared between the modes is
only what belongs to the envs: the workers, their rows, the episode-ended flags and the
broken state. The switch between the modes is explicit: the synchronous calls raise
``AlreadyPendingError`` unless the scheduler is drained, and ``async_reset`` (drained
too) starts from a clean scheduler.

Each env is stepped by the same per-env runner as every other vectorizer, in the order of
its own sends, so its trajectory equals ``dummy``'s for the same actions and seeds whatever
order the envs come back in (every autoreset mode). A worker steps only the envs it was
sent (one message per worker and ``send``); the batch unit is the env, not the worker:
results of a worker beyond what ``recv`` needs wait, ready, for the next ``recv``, so every
``1 <= batch_size <= num_envs`` is reachable with any ``in_series`` (throughput is best when
``batch_size`` is a multiple of the envs per worker). ``recv(env_ids=ids)`` returns exactly
the envs ``ids`` (a step of a subset, whatever ``batch_size``). Faults raise the
synchronous mode's errors; with ``restart=true`` a rebuilt worker's envs report their
episode truncated (``infos["restarted"]``): those in flight or waiting in ``recv``'s queue
at once, the others at their next ``send``. Ctrl-C during ``recv`` leaves the pool usable
(see `scheduler`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array

from ..errors import ConfigError
from .handle import WorkerHandle
from .pipe import PipeHandle
from .pool_env import PoolVecEnv, take_rows
from .protocol import Cmd
from .remote_env import pop_faults
from .runner import InfoCalls
from .scheduler import RemoteSite
from .subproc import SubprocGroup
from .subproc_options import check_split, default_in_series
from .wakeup import Poller

__all__ = ["SPIN_WAIT", "PoolVecEnv", "SubprocPool", "pool_in_series", "take_rows"]

#: the pool's parent spins through its waits for a worker while they average no longer
#: than this, even while every core is busy: waking a sleeping process costs 25-300 us on
#: a VM, so the wait for a cheap env's step is cheaper spun through
SPIN_WAIT = 150e-6


def pool_in_series(num_envs: int, batch_size: Any, in_series: int | None) -> int | None:
    """``in_series`` of a pool when the config leaves it null: one worker per core, as
    ``subproc-atari`` (the parent mostly waits; a learner shares its core), but no worker
    with more envs than ``batch_size``, so a worker's answer fits one ``recv`` and at
    least ``num_envs / batch_size`` workers take turns (16 CartPoles, ``batch_size=8``: 2
    workers of 8; 8 Pongs, ``batch_size=4`` on 2 cores: 2 workers of 4)."""
    if in_series is not None or isinstance(batch_size, bool) or not isinstance(batch_size, int):
        return in_series
    return max(1, min(default_in_series(num_envs, leave_parent_a_core=False), batch_size))


class SubprocPool(PoolVecEnv):
    """An async pool of ``num_envs`` envs in worker processes (``vectorizer.batch_size``):
    `PoolVecEnv` over a `SubprocGroup` (every env in a worker) whose readiness is its
    pipes' and whose rows are in shared memory (`_PipeSite`)."""

    group: SubprocGroup

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], batch_size: int, **options: Any
    ) -> None:
        if batch_size is None:
            raise ConfigError(
                "SubprocPool needs a batch_size (an integer in [1, num_envs]); for a "
                "synchronous VecEnv use SubprocVecEnv (vectorizer.batch_size=null)"
            )
        check_split(len(env_fns), batch_size, options.get("in_parent"), "vectorizer")
        autoreset_mode = options.pop("autoreset_mode", "next_step")
        faults = pop_faults(options)
        group = SubprocGroup(env_fns, handoff=False, **options)
        super().__init__(group, batch_size, _PipeSite, autoreset_mode, **faults)


class _PipeSite(RemoteSite):
    """The scheduler's view of a `SubprocPool` (see `PoolBackend`):
    a message's ticket is its pipe sequence number; a worker has an answer when its pipe
    is readable (one `Poller` over the pipes of the workers that owe
    answers); an answer's rows are the shared-memory rows, or its pickled observations
    kept per env."""

    def __init__(self, group: SubprocGroup) -> None:
        super().__init__(group)
        self.subproc = group
        self._by_fd: dict[int, WorkerHandle] = {}
        self._poller = Poller([], group.spin_us * 1e-6)
        self._cpus = os.cpu_count() or 1

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        self.group.send(cmd, [handle], lambda _: data)
        return _pipe(handle).seq

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        _pipe(handle).seq = ticket  # (a later post moved it on; a worker answers in order)
        return self.group.wait(handle, deadline, call, budget)

    def watch(self, handle: WorkerHandle) -> None:
        fd = _pipe(handle).fileno()
        self._by_fd[fd] = handle
        self._poller.register(fd)

    def unwatch(self, handle: WorkerHandle) -> None:
        for fd, other in list(self._by_fd.items()):
            if other is handle:
                del self._by_fd[fd]
                self._poller.unregister(fd)

    def ready(self, timeout: float | None) -> list[WorkerHandle]:
        poller, by_fd = self._poller, self._by_fd
        events = poller.ready(0) if timeout == 0 else poller.wait(timeout, self._spins())
        return [by_fd[fd] for fd, _ in events]

    def _spins(self) -> bool:
        """Whether this process spins while it waits for a worker: only while a core is
        left to it (fewer workers in flight than cores), or while its recent waits were
        shorter than a wake-up costs (`SPIN_WAIT`, on average). While every core
        steps a worker's envs, a spin only takes CPU time from them (the pipe's writer
        wakes this process anyway)."""
        return len(self._by_fd) < self._cpus or self._poller.waits_below(SPIN_WAIT)

    def keep(self, handle: WorkerHandle, envs: list[int], answer: Any) -> InfoCalls:
        calls, obs = answer  # a StepResult: observations pickled unless in shared memory
        if obs is not None:
            per_env, start = self.subproc._env_obs, handle.start
            for i in envs:
                per_env[i] = obs[i - start]
        return calls

    def rows(self, ids: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        group = self.subproc
        b = group._buffers
        assert b is not None
        if group._shm_obs:
            obs = take_rows(b.obs, ids)
        else:
            out = create_empty_array(group.env.single_observation_space, n=len(ids))
            obs = group.batch_obs([group._env_obs[i] for i in ids], out)
        return obs, b.rewards[ids], b.terminations[ids], b.truncations[ids]


def _pipe(handle: WorkerHandle) -> PipeHandle:
    assert isinstance(handle, PipeHandle)
    return handle
