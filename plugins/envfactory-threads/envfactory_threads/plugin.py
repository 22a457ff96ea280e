"""Vectorizer ``threads``: envs stepped by threads of this process, a backend on envfactory's
vectorizer-author API ([`envfactory.vectorizers.remote`][envfactory.vectorizers.remote]).

Each group of ``in_series`` envs lives in one thread (a
[`ThreadHandle`][envfactory_threads.plugin.ThreadHandle]) that builds, steps and closes them: an env
is only ever touched by its own thread (some simulators and renderers require that). The thread
answers with envfactory's ``EnvHost``; the group of threads is a ``WorkerGroup`` and envfactory's
front, ``RemoteVecEnv``, does the rest. The threads are daemons: one
that hung past ``timeout`` cannot be stopped and must not keep the interpreter from exiting (a
``ThreadPoolExecutor``'s thread would).
"""

from __future__ import annotations

import copy
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

import envfactory
from envfactory import OptionError
from envfactory.vectorizers import remote
from envfactory.vectorizers.remote import EnvHost, EnvInfo, WorkerHandle

__all__ = [
    "ThreadGroup",
    "ThreadHandle",
    "ThreadVecEnv",
    "ThreadsConfig",
    "envfactory_vectorizers",
]


@dataclass
class ThreadsConfig(remote.FaultOptions):
    """Schema of ``vectorizer=threads``.

    Attributes:
        name: always ``threads``.
        in_series: envs per thread (any split of num_envs, as even as possible); null =
            one thread per core (ceil(num_envs / cpu count) envs each).
        timeout: seconds a thread may take for one call (> 0); null or ``inf`` waits
            forever. A thread that timed out cannot be stopped: it is left to finish.
        restart: rebuild in a new thread the envs of a thread that raised or hung during
            ``step``/``reset``; their episodes end truncated (``infos["restarted"]``).

    The other fault options are [`FaultOptions`][envfactory.vectorizers.remote.FaultOptions]'.
    """

    name: str = "threads"
    in_series: Optional[int] = None  # noqa: UP045 (OmegaConf needs Optional on Python 3.10)

    def __post_init__(self) -> None:
        n = self.in_series
        if n is not None and (isinstance(n, bool) or not isinstance(n, Integral) or n < 1):
            raise OptionError("in_series", n, "an integer >= 1 or null")
        super().__post_init__()


def _serve(jobs: queue.SimpleQueue) -> None:
    """A thread's loop: run each ``(future, fn, args)`` until ``None``."""
    while (job := jobs.get()) is not None:
        future, fn, args = job
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # raised by the parent's recv
            future.set_exception(exc)


class ThreadHandle(WorkerHandle):
    """A thread hosting envs ``start:stop``: ``send`` queues a command, ``recv`` waits for its
    future, ``kill`` lets the thread go (it exits after its current command).

    Resumable, as ``subproc``'s workers: a Ctrl-C (which only the main thread gets) never
    reaches the thread, and a call holds it but in ``recv`` (the wait), which keeps the
    future, so asked again after a Ctrl-C it gives the same answer and ``step_wait()``
    finishes the step."""

    resumable = True

    def __init__(self, index: int, start: int, stop: int, env_id: str, fns: list) -> None:
        super().__init__(index, start, stop, env_id)
        self.fns = fns
        self.jobs: queue.SimpleQueue | None = None
        self.future: Future | None = None
        self.host: Any = None  # its EnvHost, made in the thread

    def spawn(self, mode: Any) -> None:
        self.jobs, name = queue.SimpleQueue(), f"envfactory-threads-{self.index}"
        threading.Thread(target=_serve, args=(self.jobs,), name=name, daemon=True).start()
        self.future = self._submit(self._build, mode)

    def _build(self, mode: Any) -> list[EnvInfo]:
        self.host = host = EnvHost([fn() for fn in self.fns], mode, lambda calls, _: calls)
        return [EnvInfo.of(e) for e in host.envs]

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        self.jobs.put((future := Future(), fn, args))  # type: ignore[union-attr]
        return future

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
        close = cmd == remote.Cmd.CLOSE
        run = self.host.close if close else self.host.handle
        self.future = self._submit(run, *(() if close else (cmd, data)))

    def recv(self, deadline: float | None, call: str) -> Any:
        future = self.future  # kept: after a Ctrl-C, asked again, the same answer
        if future is None:
            return None
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            return future.result(remaining)
        except FutureTimeout:  # (TimeoutError itself from Python 3.11)
            raise TimeoutError from None
        except Exception as exc:  # an env's: raised below, the original as its __cause__
            err = self.remote_error(call, remote.failure_of(exc))
        raise err

    def kill(self) -> None:
        if self.jobs is not None:
            self.jobs.put(None)  # the thread exits once its current command returns
            self.jobs = None


class ThreadGroup(remote.WorkerGroup):
    """The threads (``in_series`` envs each; null: one per core), as envfactory's
    [`WorkerGroup`][envfactory.vectorizers.remote.WorkerGroup]: start, collect the batch from
    each thread's runner, rebuild a thread."""

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], in_series: int | None = None
    ) -> None:
        super().__init__()
        self.num_envs, self.env_id = len(env_fns), remote.env_label(env_fns[0])
        # (the core's plan: null is one thread per core; threads share this process's
        # cores, so other programs' load is not weighed: load=0)
        split = enumerate(remote.plan_split(self.num_envs, in_series=in_series, load=0.0).slices())
        self.threads = [ThreadHandle(k, a, b, self.env_id, env_fns[a:b]) for k, (a, b) in split]

    def start(self) -> None:
        self.set_handles(self.threads)
        for h in self.threads:
            h.spawn(self.env.autoreset_mode)
        self.wait_started(self.threads)
        self._obs = create_empty_array(self.env.single_observation_space, n=self.num_envs)

    def collect(self, handles: Sequence[WorkerHandle], results: list, mask: Any) -> tuple:
        runners = [h.host.runner for h in self.threads]
        per_env = [o for r in runners for o in r.obs]
        self._obs = self.batch_obs(per_env, self._obs)
        rewards, terms, truncs = (
            np.concatenate([getattr(r, k) for r in runners])
            for k in ("rewards", "terminations", "truncations")
        )
        return self.out(self._obs), rewards, terms, truncs, self.merge_answers(handles, results)

    def last_obs(self, handle: WorkerHandle) -> list[Any]:
        per_env = list(iterate(self.env.observation_space, self._obs))
        return [copy.deepcopy(per_env[i]) for i in range(handle.start, handle.stop)]

    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        assert isinstance(handle, ThreadHandle)
        handle.spawn(self.env.autoreset_mode)
        return list(self.wait(handle, time.monotonic() + budget, "restart", budget))


class ThreadVecEnv(remote.RemoteVecEnv):
    """Envs stepped by threads of this process (``in_series`` per thread), with ``dummy``'s
    trajectories: envfactory's front over a [`ThreadGroup`][envfactory_threads.plugin.ThreadGroup]
    (the fault options are the front's, see
    [`ThreadsConfig`][envfactory_threads.plugin.ThreadsConfig])."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: Any = "next_step",
        in_series: int | None = None,
        **faults: Any,
    ) -> None:
        super().__init__(ThreadGroup(env_fns, in_series), autoreset_mode, **faults)


@envfactory.hookimpl
def envfactory_vectorizers() -> list[envfactory.VectorizerPlugin]:
    return [
        envfactory.VectorizerPlugin(
            "threads",
            ThreadVecEnv,
            ThreadsConfig,
            summary="envs stepped by threads of this process (envs that release the GIL)",
        )
    ]
