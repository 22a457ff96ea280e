"""One hand-off per step for all of ``subproc``'s workers (issue 26).

Each worker has a control slot in the shared region (see `wakeup`). Posting a step
to the workers one at a time (`send`) and waiting for them one
at a time costs the parent ~10 us a worker; this module does it for the group:

1. `StepHandoff.post` writes every worker's actions with one copy into the shared
   action buffer, every worker's step number with one write into the slots' ``cmd``
   column, issues one barrier, and writes the eventfd only of the workers that sleep
   (none while they spin: no system call at all);
2. `StepHandoff.wait` sees completion by one comparison over the ``done`` column
   (spinning by the `Waiter` policy while that pays, else sleeping in one
   ``poll`` over every worker's eventfd and pipe), and returns the workers whose answer
   follows by pipe (non-empty infos, pickled observations, an error).

Anything else (a timeout, a dead worker, a Ctrl-C, a restart) is left to the per-worker
path, which finds the handles exactly as their own `send` would
have left them: the hand-off keeps each handle's bookkeeping (``sent``, ``seq``,
``via_slot``) as it posts.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .pipe import PipeHandle
from .wakeup import (
    CMD,
    DONE,
    MSG,
    PARENT_SLEEPING,
    SLEEP_SLICE_MS,
    WORKER_SLEEPING,
    Waiter,
    drain_eventfd,
    fence,
    signal_eventfd,
)

__all__ = ["NO_INFOS", "StepHandoff"]

#: a step's answer with no infos and the observations in shared memory (a StepResult)
NO_INFOS: Any = ([], None)

_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


class StepHandoff:
    """The step hand-off of ``workers`` (every one attached to the shared region, in env
    order, worker ``k`` at control slot ``k``), whose envs are the first ``stop`` of the
    action buffer ``actions``."""

    def __init__(self, workers: Sequence[PipeHandle], control: np.ndarray, actions: Any) -> None:
        self.workers = list(workers)
        n = len(self.workers)
        self.stop = self.workers[-1].stop
        self.control = control[:n]
        self.cmd = self.control[:, CMD]
        self.done = self.control[:, DONE]
        self.msg = self.control[:, MSG]
        self.actions = actions[: self.stop] if isinstance(actions, np.ndarray) else None
        self.seqs: list[int] = [0] * n  # the step each worker was asked for
        self.posted = False  # a step was posted and not yet waited for here
        self.waiter = Waiter(max((w.spin_us for w in self.workers), default=0) * 1e-6)
        self._poll: Any = None
        self._fds: dict[int, int] = {}  # eventfd -> worker
        self._pipes: dict[int, int] = {}  # pipe -> worker

    def fits(self, actions: Any) -> bool:
        """Whether this step can be handed off here: its actions fit the shared buffer
        (the same dtype: else the envs get the caller's dtype by pipe), and no worker has
        the rest of a message an interrupt cut still to write."""
        buf = self.actions
        if buf is None or type(actions) is not np.ndarray or actions.dtype != buf.dtype:
            return False
        return all(not w._unsent for w in self.workers)

    def post(self, actions: np.ndarray, marks: list[int]) -> None:
        """Ask every worker for a step: one copy, one write, one barrier, and the
        eventfds of the sleeping workers only. ``marks`` gets each worker's count of
        sends before this one, before the worker is touched (what ``*_wait()`` needs to
        finish a post that a Ctrl-C cut: a worker without a mark was not asked)."""
        self.actions[:] = actions[: self.stop]  # type: ignore[index]  # (fits(): an array)
        seqs = self.seqs = []
        for w in self.workers:  # each handle as its own send leaves it
            s = w.sent
            marks.append(s)
            s += 1
            w.sent = w.seq = s
            w.via_slot, w._answer = True, None
            seqs.append(s)
        self.cmd[:] = seqs
        self.posted = True
        fence()  # the step numbers are visible before the sleeping words are read
        for w in self.workers:
            if w.slot[WORKER_SLEEPING]:
                signal_eventfd(w.go)

    def wait(self, deadline: float | None) -> list[int] | None:
        """Wait until every worker answered the posted step: the indices of the workers
        whose answer follows by pipe (empty: none; the others' answers, no infos, are
        kept in their handles), or None if the per-worker path must take over (the
        deadline passed, or a pipe woke the wait: a worker died or sent something
        else)."""
        self.posted = False
        done, seqs = self.done, self.seqs

        def ready() -> bool:  # (a list compare: cheaper than numpy's for a few workers)
            return done.tolist() == seqs

        t0 = time.perf_counter()
        if not (ready() or self.waiter.wait(ready, t0) or self._sleep(ready, deadline)):
            return None
        self.waiter.record(time.perf_counter() - t0)
        fence()  # their results were written before ``done``
        piped: list[int] = []
        for k, (w, flagged) in enumerate(zip(self.workers, self.msg.tolist())):
            w.via_slot = False  # answered: a retry after a Ctrl-C reads no slot
            if flagged:
                piped.append(k)
            else:
                w._answer = (w.seq, NO_INFOS)
        return piped

    def _sleep(self, ready: Any, deadline: float | None) -> bool:
        """Sleep until ``ready()`` (True), or False: past ``deadline``, or a pipe woke
        it. The flagged sleep of `wakeup`, for every worker at once."""
        if self._poll is None:
            self._poll = select.poll()
            self._fds.clear()
            self._pipes.clear()
            for k, w in enumerate(self.workers):
                self._poll.register(w.done, select.POLLIN)
                self._poll.register(w.fileno(), _POLL_IN)
                self._fds[w.done] = k
                self._pipes[w.fileno()] = k
        control, quiet = self.control, []
        try:
            while True:
                control[:, PARENT_SLEEPING] = 1
                fence()
                if ready():
                    return True
                ms = SLEEP_SLICE_MS
                if deadline is not None:
                    ms = min(ms, math.ceil(max(0.0, deadline - time.monotonic()) * 1000))
                events = self._poll.poll(ms)
                control[:, PARENT_SLEEPING] = 0
                for fd, _ in events:
                    if fd in self._fds:
                        drain_eventfd(fd)
                        continue
                    k = self._pipes[fd]
                    if self.done[k] != self.seqs[k]:  # (not done yet)
                        return False  # a pipe first: let that worker's own wait read it
                    self._poll.unregister(fd)  # its infos, read once every worker is done
                    quiet.append(fd)
                if ready():
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        finally:
            control[:, PARENT_SLEEPING] = 0
            for fd in quiet:
                self._poll.register(fd, _POLL_IN)

    def forget_fds(self) -> None:
        """A worker was rebuilt (a new pipe): register the file descriptors afresh."""
        self._poll = None
