"""The async env pool: ``subproc``/``subproc-atari`` with ``batch_size`` set (envpool's
``async_reset``/``send``/``recv``; see docs/concepts/async-pool.md): `SubprocPool`, `PoolVecEnv`
over a `SubprocGroup`, and `_PipeSite`, its readiness and rows."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array

from ...errors import ConfigError
from ..front.remote_env import pop_faults
from ..record import Split
from ..subproc import SubprocGroup, plan_for
from ..transport.board import DONE, PARENT_SLEEPING, Poller, drain_eventfd, sleep_until
from ..transport.handle import WorkerHandle
from ..transport.pipe import PipeHandle
from ..worker.protocol import Cmd
from ..worker.runner import InfoCalls
from .pool_env import PoolVecEnv, take_rows
from .scheduler import RemoteSite

_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR

__all__ = ["SPIN_WAIT", "PoolVecEnv", "SubprocPool", "take_rows"]

#: the parent spins through waits that average under this, even with every core busy (a
#: wake-up costs 25-300 us on a VM)
SPIN_WAIT = 150e-6


class SubprocPool(PoolVecEnv):
    """An async pool of envs in worker processes: `PoolVecEnv` over a `SubprocGroup`."""

    group: SubprocGroup

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        batch_size: int,
        split: Split | None = None,
        **options: Any,
    ) -> None:
        if batch_size is None:
            raise ConfigError(
                "SubprocPool needs a batch_size (an integer in [1, num_envs]); for a "
                "synchronous VecEnv use SubprocVecEnv (vectorizer.batch_size=null)"
            )
        if split is None:
            split = plan_for(env_fns, {**options, "batch_size": batch_size})
        self.split = split
        autoreset_mode = options.pop("autoreset_mode", "next_step")
        faults = pop_faults(options)
        group = SubprocGroup(env_fns, handoff=False, split=split, **options)
        super().__init__(group, batch_size, _PipeSite, autoreset_mode, **faults)


class _PipeSite(RemoteSite):
    """The scheduler's view of a `SubprocPool` (a `PoolBackend`): a ticket is its handle's seq;
    a step of all of a worker's envs goes through its control slot, anything else by pipe; one
    check covers both, and one ``poll`` over the pipes and eventfds sleeps."""

    def __init__(self, group: SubprocGroup) -> None:
        super().__init__(group)
        self.subproc = group
        self._by_fd: dict[int, PipeHandle] = {}  # the pipes of the workers that owe
        self._fd_of: dict[int, int] = {}  # id(handle) -> its pipe while it owes
        # a worker's pipe and eventfd stay registered from its first message on: index ->
        # fds, and the worker that holds each registered pipe number (numbers are reused)
        self._registered: dict[int, tuple[int, int]] = {}
        self._owner: dict[int, int] = {}
        self._eventfds: set[int] = set()
        self._poller = Poller([], group.spin_us * 1e-6)
        self._sleep = select.poll()  # the pipes and their eventfds
        self._cpus = os.cpu_count() or 1

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        h: PipeHandle = handle  # type: ignore[assignment]  # (the group's: no check per call)
        if cmd == Cmd.STEP_ENVS and len(data[0]) == h.stop - h.start:
            # every env of the worker: its slot (when the actions fit the shared buffer)
            cmd, data = Cmd.STEP, data[1]
        h.send(cmd, data)  # (a Ctrl-C goes through while it waits for a busy worker)
        return h.seq

    resumes_reads = True  # (PipeHandle keeps what a read took, and its answer, by seq)

    def answered(self, handle: WorkerHandle, ticket: int) -> bool:
        h: PipeHandle = handle  # type: ignore[assignment]
        return h.has_answer(ticket)

    def taken(self, handle: WorkerHandle) -> int | None:
        h: PipeHandle = handle  # type: ignore[assignment]
        return h.seq if h.unsent else None  # (a message it holds to write first)

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        handle.seq = ticket  # type: ignore[attr-defined]  # (a later post moved it on)
        return self.group.wait(handle, deadline, call, budget)

    def watch(self, handle: WorkerHandle) -> None:
        h: PipeHandle = handle  # type: ignore[assignment]
        fd = h._fd
        self._by_fd[fd], self._fd_of[id(h)] = h, fd
        if self._registered.get(h.index) != (fd, h.done):  # first, or a rebuilt worker
            self._unregister(h.index)
            stale = self._owner.get(fd)  # a closed pipe of another worker had this number
            if stale is not None:
                self._registered.pop(stale, None)  # (the number is this worker's now)
            else:
                self._poller.register(fd)
                self._sleep.register(fd, _POLL_IN)
            self._sleep.register(h.done, select.POLLIN)
            self._owner[fd] = h.index
            self._registered[h.index] = (fd, h.done)
            self._eventfds.add(h.done)

    def unwatch(self, handle: WorkerHandle) -> None:
        fd = self._fd_of.pop(id(handle), None)
        if fd is not None:
            del self._by_fd[fd]

    def _unregister(self, index: int) -> None:
        """Stop polling worker ``index``'s pipe and eventfd."""
        fds = self._registered.pop(index, None)
        if fds is not None:
            fd, done = fds
            if self._owner.get(fd) == index:  # (else another worker's pipe has the number)
                del self._owner[fd]
                self._poller.unregister(fd)
                self._sleep.unregister(fd)
            self._sleep.unregister(done)
            self._eventfds.discard(done)

    def ready(self, timeout: float | None) -> list[WorkerHandle]:
        got = self._ready_now()
        if got or timeout == 0:
            return got
        box: list[WorkerHandle] = []

        def check() -> bool:
            box[:] = self._ready_now()
            return bool(box)

        sleep = lambda: self._sleep_until(check, timeout)  # noqa: E731
        return box if self._poller.waiter.until(check, sleep, self._spins()) else []

    def _ready_now(self) -> list[WorkerHandle]:
        """The workers whose answer (or end) is there: a slot step done or a readable pipe."""
        by_fd = self._by_fd
        out: list[WorkerHandle] = [
            h for h in by_fd.values() if h.via_slot and h.slot[DONE] == h.seq
        ]
        for fd, _ in self._poller.ready(0):
            h = by_fd.get(fd)  # (None: a worker that owes nothing, see _unregister)
            if h is not None and h not in out:
                out.append(h)
        return out

    def _sleep_until(self, check: Callable[[], bool], timeout: float | None) -> bool:
        """Sleep until ``check()`` or ``timeout`` (False), flagged in the slots in flight."""
        slots = [h.slot for h in self._by_fd.values() if h.via_slot]
        deadline = None if timeout is None else time.monotonic() + timeout

        def flag(value: int) -> None:
            for slot in slots:
                slot[PARENT_SLEEPING] = value

        def woke(events: list) -> bool:
            for fd, _ in events:
                if fd in self._eventfds:
                    drain_eventfd(fd)
                elif fd not in self._by_fd:  # it owes nothing: no busy loop on it
                    self._unregister(self._owner[fd])
            return True

        return sleep_until(flag, check, self._sleep, deadline, woke)

    def _spins(self) -> bool:
        """Whether to spin: a core is left to this process, or waits are short (`SPIN_WAIT`)."""
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
