"""``RemoteVecEnv``: the one front of every worker backend over a `WorkerGroup`, and the
checks of what a group starts and answers (`check_started`, `check_batch`)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import ConfigError, too_many_open_files
from ..transport.ctrl_c import HOLD, CallGuard, PendingCall
from ..transport.handle import CLOSE_TIMEOUT, WorkerHandle
from ..worker.protocol import Call, Cmd, Reset, SetAttr
from .base import VecEnvBase
from .checks import per_env_answer
from .env_calls import EnvCall
from .group import Batch, WorkerGroup
from .supervisor import Outcome, Supervisor

__all__ = ["FAULT_KEYS", "CallGuard", "RemoteVecEnv", "check_batch", "check_started", "pop_faults"]

#: the options of the front (the rest of a vectorizer's options are its group's)
FAULT_KEYS = ("seeding", "timeout", "restart", "max_restarts", "restart_window", "copy")


def pop_faults(options: dict[str, Any]) -> dict[str, Any]:
    """The front's options (`FAULT_KEYS`) taken out of ``options``."""
    return {k: options.pop(k) for k in FAULT_KEYS if k in options}


_FLAGS = (
    ("rewards", "biuf", "number"),
    ("terminations", "b", "bool"),
    ("truncations", "b", "bool"),
)


def check_batch(batch: Any, num_envs: int, obs_space: gym.Space, backend: Any, call: str) -> None:
    """A backend's first batch of a step or reset: five, one reward and bool flag per env, infos
    a dict, a Box observation of ``num_envs`` rows; else a RuntimeError naming the bug."""
    what = ""
    if not isinstance(batch, tuple) or len(batch) != 5:
        tup = isinstance(batch, tuple)
        what = f"a tuple of {len(batch)}" if tup else f"a {type(batch).__name__} (not a tuple of 5)"
    else:
        obs, *flags, infos = batch
        for (name, kinds, kind), a in zip(_FLAGS, flags):
            if not isinstance(a, np.ndarray) or a.shape != (num_envs,) or a.dtype.kind not in kinds:
                got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                what = f"{name} {got} (expected a {kind} numpy array of shape ({num_envs},))"
                break
        else:
            shape = (num_envs, *(obs_space.shape or ()))
            if not isinstance(infos, dict):
                what = f"infos of type {type(infos).__name__} (expected a dict)"
            elif isinstance(obs_space, gym.spaces.Box) and (
                not isinstance(obs, np.ndarray) or obs.shape != shape
            ):
                got = obs.shape if isinstance(obs, np.ndarray) else type(obs).__name__
                what = (
                    f"observations {got} (expected shape {shape}: "
                    f"{num_envs} rows of the observation space {obs_space})"
                )
    if what:
        raise RuntimeError(
            f"{type(backend).__name__}: its {call} batch has {what}; a backend's collect must "
            f"return (obs, rewards, terminations, truncations, infos) for every env (a bug in "
            f"the backend {type(backend).__module__})"
        )


def check_started(group: Any) -> None:
    """After a group's ``start``: its handles' slices cover the envs ``0..num_envs`` one after
    another and the spaces are set, else a RuntimeError naming what it missed."""
    handles, name, at = group.handles, type(group).__name__, 0
    for h in handles:  # (-1 from the first slice out of place on)
        at = h.stop if h.start == at and h.stop > h.start else -1
    if handles and at != group.num_envs:
        slices = ", ".join(f"{h.label} {h.start}:{h.stop}" for h in handles)
        raise RuntimeError(
            f"{name}.start(): the workers' env slices ({slices}) must cover envs "
            f"0:{group.num_envs} one after another, in env order (see split_envs; a bug in "
            "the backend)"
        )
    if handles and hasattr(group.env, "single_observation_space"):
        return
    missed = "wait_started" if handles else "set_handles"
    raise RuntimeError(
        f"{name}.start() returned without {missed}: a group's start hands its workers to "
        "set_handles, then waits for them with wait_started (which sets the spaces)"
    )


class RemoteVecEnv(VecEnvBase):
    """A vectorized env whose envs live in the workers of a
    [`WorkerGroup`][envfactory.vectorizers.remote.WorkerGroup], not started yet (started here;
    closed if that fails): ``RemoteVecEnv(MyGroup(env_fns, ...), autoreset_mode, seeding)``;
    the keyword-only rest are [`FaultOptions`][envfactory.vectorizers.remote.FaultOptions]'
    (``restart`` needs a group with ``respawn`` and ``last_obs``). It owns the call state, its
    `CallGuard` and its `Supervisor`, whose outcomes it applies to its own state (`apply`)."""

    _resumes = True  # (a call is cut only in its wait, which it repeats: `CallState`)
    _posted_at = 0.0  # when the call in progress was posted (its waits' one deadline)

    def __init__(
        self, group: WorkerGroup, autoreset_mode: Any = "next_step", seeding: str = "offset", *,
        timeout: float | None = None, restart: bool = False, max_restarts: int = 5,
        restart_window: float = 60.0, copy: bool = True,
    ) -> None:  # fmt: skip
        self.group = group
        group.env = weakref.proxy(self)
        super().__init__(group.num_envs, autoreset_mode, seeding)
        self.supervisor = sup = Supervisor(timeout, restart, max_restarts, restart_window)
        rebuilds = type(group).respawn is not WorkerGroup.respawn and hasattr(group, "last_obs")
        if restart and not rebuilds:
            raise ConfigError(
                f"vectorizer.restart=true: {type(group).__name__} cannot rebuild a worker (it "
                "implements no respawn/last_obs); set vectorizer.restart=false"
            )
        self.timeout, self.restart, self.copy = sup.timeout, restart, copy
        self._guard = CallGuard(type(self).__name__)
        self._holds = HOLD.use()  # a Ctrl-C lands only in a call's wait (see ctrl_c)
        self._closed_by: str | None = None
        self._unchecked = {"step", "reset"}  # calls whose batch is checked once (check_batch)
        self.env_id = group.env_id
        try:
            group.start()
            check_started(group)
            #: the workers' handles (not this process's envs), in env order
            self.workers: list[WorkerHandle] = [h for h in group.handles if not h.in_process]
        except BaseException as exc:
            self.close(terminate=True)
            fds = too_many_open_files(exc, len(group.handles))  # "ulimit -n" on line one
            if fds is not None and fds is not exc:
                raise fds from exc
            raise

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return [h.pid for h in self.workers if h.pid is not None]

    def apply(self, outcome: Outcome) -> BaseException | None:
        """Apply the `Supervisor`'s ``outcome`` (the one place the broken state is set, first
        reason kept); returns the error to raise."""
        if outcome.broken is not None and self._broken is None:
            self._broken = outcome.broken
        return outcome.error

    @property
    def restarts(self) -> list[int]:
        """How many times each worker was restarted (``vectorizer.restart=true``)."""
        return [len(h.restarts) for h in self.workers]

    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self._guard.enter("reset_async")
        try:
            self._check_ready("reset_async", "reset")  # again, now under the call guard
            group = self.group
            for h in group.handles:  # (kept to redo the reset in a rebuilt worker)
                part = None if mask is None else mask[h.start : h.stop]
                h.last_reset = Reset(seeds[h.start : h.stop], options, part)
            group.send(Cmd.RESET, group.handles, lambda h: h.last_reset)
            self._pending, self._posted_at = PendingCall.RESET, time.monotonic()
        finally:
            self._guard.leave()

    def _start_step(self, actions: Any) -> None:
        self._guard.enter("step_async")
        try:
            if self._pending is not PendingCall.NONE or self._broken is not None:
                self._check_ready("step_async", "step")  # again, now under the call guard
            self.group.post_step(actions)
            self._pending, self._posted_at = PendingCall.STEP, time.monotonic()
        finally:
            self._guard.leave()

    def _finish_step(self, timeout: float | None) -> Batch:
        call, mask = "step", None
        if self._pending is PendingCall.RESET:
            call, mask = "reset", self._pending_mask
        self._guard.enter(f"{call}_wait")
        group = self.group
        try:
            own = self.timeout  # (a wait cut by Ctrl-C: the same deadline, from the post)
            deadline = None if timeout is not None or own is None else self._posted_at + own
            answers = group.gather(call, None, own if timeout is None else timeout, deadline)
            batch = group.collect(group.handles, answers, mask)
            if self._unchecked:  # the first batch of a step and of a reset, until one passes
                check_batch(batch, self.num_envs, self.single_observation_space, group, call)
                self._unchecked.discard(call)
        finally:
            self._guard.leave()
        return batch

    def _start_call(self, r: EnvCall) -> None:
        self._guard.enter(r.what)
        try:
            self._check_ready(r.what, r.what)  # again, now under the call guard
            group = self.group
            asked = [
                (h, [i - h.start for i in r.indices if h.start <= i < h.stop]) for h in group.order
            ]
            asked = [(h, loc) for h, loc in asked if loc]
            local_of = {id(h): loc for h, loc in asked}
            handles = [h for h, _ in asked]
            if group.before_calls is not None:
                group.before_calls(handles)
            if r.values is None:
                cmd = Cmd.CALL
                group.send(cmd, handles, lambda h: Call(r.name, r.args, r.kwargs, local_of[id(h)]))
            else:
                cmd, value_of = Cmd.SET_ATTR, dict(zip(r.indices, r.values))
                group.send(cmd, handles, lambda h: SetAttr(
                    r.name, [value_of[h.start + i] for i in local_of[id(h)]], local_of[id(h)]
                ))  # fmt: skip
            self._calls, self._posted_at = (cmd, asked, r.indices), time.monotonic()
        finally:
            self._guard.leave()

    def _finish_call(self, timeout: float | None) -> list[Any]:
        self._guard.enter("call_wait")
        try:
            cmd, asked, indices = self._calls
            own = self.timeout  # (as `_finish_step`'s)
            deadline = None if timeout is not None or own is None else self._posted_at + own
            wait = own if timeout is None else timeout
            results = self.group.gather(cmd, [h for h, _ in asked], wait, deadline)
            by_index: dict[int, Any] = {}
            for (h, loc), answer in zip(asked, results):
                answer = per_env_answer(answer, len(loc), self.group, h.label, cmd)
                by_index.update((h.start + i, r) for i, r in zip(loc, answer))
            return [by_index[i] for i in indices]
        finally:
            self._guard.leave()

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        group = self.group
        group.env = weakref.proxy(self)  # (again: the garbage collector clears them before __del__)
        guard = self._guard
        if os.getpid() != guard.owner_pid:
            if hasattr(group, "forget"):  # a forked child's copy: the workers are the parent's
                group.forget()
            return
        active = guard.active
        if active is not None:  # a call in progress (another thread's, or this one's under a
            # signal handler): end the workers so that it ends with ClosedError; another
            # thread's leaves before the shared memory goes
            self._closed_by, terminate = threading.current_thread().name, True
            for h in group.handles:
                with contextlib.suppress(Exception):  # (close kills it again, and says)
                    h.kill()
            mine = active[1] is threading.current_thread()
            deadline = time.monotonic() + CLOSE_TIMEOUT
            while not mine and guard.active is not None and time.monotonic() < deadline:
                time.sleep(0.001)
        group.close(timeout, terminate, guard.active is None)  # (locked: no call reads them)
