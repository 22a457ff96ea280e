"""``ThreadVecEnv``: envs stepped by threads of this process, on envfactory's
vectorizer-author API.

Each group of ``in_series`` envs lives in one thread (a :class:`ThreadHandle`, the
:class:`~envfactory.vectorizers.remote.WorkerHandle`): it builds them, and steps, resets and
closes them, so an env is only ever touched by its own thread (some simulators and
renderers require that). The thread answers each command with envfactory's
:class:`~envfactory.vectorizers.remote.EnvHost` (the autoreset of ``dummy``, the recovery
of lost episodes); :class:`~envfactory.vectorizers.remote.RemoteVecEnv` does the rest.
"""

from __future__ import annotations

import copy as _copy
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from envfactory.vectorizers.remote import (
    Cmd,
    EnvHost,
    EnvInfo,
    RemoteVecEnv,
    WorkerHandle,
    env_label,
    failure_of,
    split_envs,
)

__all__ = ["ThreadHandle", "ThreadVecEnv"]


def _serve(jobs: queue.SimpleQueue) -> None:
    """A thread's loop: run each ``(future, fn, args)`` until ``None``."""
    while (job := jobs.get()) is not None:
        future, fn, args = job
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # raised by the parent's recv
                future.set_exception(exc)


class ThreadHandle(WorkerHandle):
    """One thread of this process hosting envs ``start:stop``: ``send`` queues the
    command, ``recv`` waits for its future, ``kill`` lets go of the thread (a daemon that
    exits after its current command: a thread cannot be stopped from outside)."""

    def __init__(self, index: int, start: int, stop: int, env_id: str, fns: list) -> None:
        super().__init__(index, start, stop, env_id)
        self.fns = fns
        self.jobs: queue.SimpleQueue | None = None
        self.future: Future | None = None
        self.host: EnvHost | None = None

    def spawn(self, mode: Any) -> None:
        """A new thread; its first answer is its envs' EnvInfos."""
        self.jobs = queue.SimpleQueue()
        name = f"envfactory-threads-{self.index}"
        threading.Thread(target=_serve, args=(self.jobs,), name=name, daemon=True).start()
        self.future = self._submit(self._build, mode)

    def _build(self, mode: Any) -> list[EnvInfo]:
        self.host = host = EnvHost([fn() for fn in self.fns], mode, _answer)
        return [EnvInfo.of(e) for e in host.envs]

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        assert self.jobs is not None
        self.jobs.put((future, fn, args))
        return future

    @property
    def label(self) -> str:
        return f"thread {self.index}"

    @property
    def where(self) -> str:
        return f"thread envfactory-threads-{self.index}"

    @property
    def pid(self) -> int:
        return os.getpid()

    @property
    def alive(self) -> bool:
        return self.jobs is not None

    def send(self, cmd: str, data: Any) -> None:
        assert self.host is not None
        run = self.host.close if cmd == Cmd.CLOSE else self.host.handle
        self.future = self._submit(run, *(() if cmd == Cmd.CLOSE else (cmd, data)))

    def recv(self, deadline: float | None, call: str) -> Any:
        future, self.future = self.future, None
        if future is None:
            return None
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            return future.result(remaining)
        except FutureTimeout:  # (TimeoutError itself from Python 3.11)
            raise TimeoutError from None
        except Exception as exc:  # an env's: raised below, the original as its __cause__
            err = self.remote_error(call, failure_of(exc))
        raise err

    def kill(self) -> None:
        if self.jobs is not None:
            self.jobs.put(None)  # the thread exits once its current command returns
            self.jobs = None


def _answer(calls: list, mask: Any) -> tuple:
    return calls


class ThreadVecEnv(RemoteVecEnv):
    """Envs stepped by threads of this process (``in_series`` per thread); the same
    trajectories as ``dummy``. The fault options (``timeout``, ``restart``,
    ``max_restarts``, ``restart_window``, ``copy``) are
    :class:`~envfactory.vectorizers.remote.RemoteVecEnv`'s."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: Any = "next_step",
        in_series: int | None = None,
        seeding: str = "offset",
        **faults: Any,
    ) -> None:
        super().__init__(len(env_fns), autoreset_mode, seeding, **faults)
        self.env_id = env_label(env_fns[0])
        if in_series is None:
            in_series = math.ceil(self.num_envs / (os.cpu_count() or 1))
        split = split_envs(self.num_envs, in_series)
        self.threads = [
            ThreadHandle(k, a, b, self.env_id, list(env_fns[a:b])) for k, (a, b) in enumerate(split)
        ]
        self._set_handles(self.threads)
        try:
            for h in self.threads:
                h.spawn(self.autoreset_mode)
            self._start(self.threads)
        except BaseException:
            self.close(terminate=True)
            raise
        self._obs = create_empty_array(self.single_observation_space, n=self.num_envs)

    def _collect(self, handles: Sequence[WorkerHandle], results: list, mask: Any) -> tuple:
        runners = [h.host.runner for h in self.threads if h.host is not None]
        per_env = [o for r in runners for o in r.obs]
        self._obs = self._batch_obs(per_env, self._obs)
        rewards, terms, truncs = (
            np.concatenate([getattr(r, k) for r in runners])
            for k in ("rewards", "terminations", "truncations")
        )
        return self._out(self._obs), rewards, terms, truncs, self._merge_answers(handles, results)

    def _last_obs(self, handle: WorkerHandle) -> list[Any]:
        per_env = list(iterate(self.observation_space, self._obs))
        return [_copy.deepcopy(per_env[i]) for i in range(handle.start, handle.stop)]

    def _respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        assert isinstance(handle, ThreadHandle)
        handle.spawn(self.autoreset_mode)
        return list(self._wait(handle, time.monotonic() + budget, "restart", budget))
