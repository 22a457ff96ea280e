"""The group's board: the parent's side of every worker's control slot (see `wakeup`).

One board per `SubprocGroup` hands a step to every worker at once (issue 26): posting and
waiting one worker at a time costs the parent ~10 us a worker, so it

1. `Board.post`: writes every worker's actions with one copy into the shared action
   buffer, every worker's step number with one write into the slots' ``cmd`` column,
   issues one barrier, and writes the eventfd only of the workers that sleep (none while
   they spin: no system call at all);
2. `Board.wait`: sees completion by one comparison over the ``done`` column (by the
   `Waiter` policy, `Waiter.until`, else sleeping in one ``poll`` over every worker's
   eventfd and pipe), and returns every worker's answer but those that follow by pipe
   (infos the info columns do not take, pickled observations, an error).

Anything else (a timeout, a dead worker, a Ctrl-C, a restart) is left to each worker's own
wait (`PipeHandle.recv`), which finds the handles exactly as their own ``send`` would have
left them: the board books each post and answer through the handle's own methods
(`PipeHandle.booked`, ``answered``, ``answer_follows``), so the handle stays the only
writer of its state.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .infocols import ColumnRows
from .wakeup import (
    CMD,
    DONE,
    MSG,
    NO_INFOS,
    PARENT_SLEEPING,
    SCHEMAS,
    WORKER_SLEEPING,
    Waiter,
    drain_eventfd,
    fence,
    signal_eventfd,
    sleep_until,
)

if TYPE_CHECKING:
    from .pipe import PipeHandle

__all__ = ["Board"]

_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


class Board:
    """The board of ``workers`` (every one attached to the shared region, in env
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

    def post(self, actions: Any) -> bool:
        """Ask every worker for a step: one copy, one write, one barrier, and the
        eventfds of the sleeping workers only. False (nothing done) if the step cannot
        be handed off here: its actions do not fit the shared buffer (another dtype: the
        envs get the caller's dtype by pipe), or a worker has the rest of a message a
        Ctrl-C cut to write first."""
        buf = self.actions
        if buf is None or type(actions) is not np.ndarray or actions.dtype != buf.dtype:
            return False
        workers, seqs = self.workers, []
        for w in workers:
            if w.unsent:  # (the rest of a message a Ctrl-C cut: it goes first, by pipe)
                return False
            seqs.append(w.sent + 1)
        buf[:] = actions[: self.stop]
        self.seqs = seqs
        self.cmd[:] = seqs  # the post itself: one store
        for w, seq in zip(workers, seqs):  # each handle books its own state
            w.booked(seq)
        self.posted = True
        fence()  # the step numbers are visible before the sleeping words are read
        for w in workers:
            if w.slot[WORKER_SLEEPING]:
                signal_eventfd(w.go)
        return True

    def wait(self, deadline: float | None) -> list[Any] | None:
        """Wait until every worker answered the posted step: each worker's answer (a
        StepResult), None for those whose answer follows by pipe (non-empty infos the
        info columns do not take, pickled observations, an error: the caller reads
        them); or None if the per-worker path must take over (the deadline passed, or
        a pipe woke the wait: a worker died or sent something else)."""
        self.posted = False
        done, seqs = self.done, self.seqs

        def ready() -> bool:  # (a list compare: cheaper than numpy's for a few workers)
            return done.tolist() == seqs

        if not self.waiter.until(ready, lambda: self._sleep(ready, deadline)):
            return None
        fence()  # their results were written before ``done``
        answers: list[Any] = []
        for w, msg in zip(self.workers, self.msg.tolist()):
            if msg == 0:  # no infos
                w.answered(NO_INFOS)
                answers.append(NO_INFOS)
            elif msg == 1:  # by pipe: read by the caller, once every worker is done
                w.answer_follows()
                answers.append(None)
            else:  # infos in the info columns
                if w.slot[SCHEMAS] != w.schemas:  # (an invariant) the per-worker path
                    return None  # raises it, with the failure policy
                assert w.columns is not None and w.schema is not None
                answer = (ColumnRows(w.columns, w.schema, w.start, w.stop - w.start), None)
                w.answered(answer)
                answers.append(answer)
        return answers

    def _sleep(self, ready: Any, deadline: float | None) -> bool:
        """Sleep until ``ready()`` (True), or False: past ``deadline``, or a pipe woke
        it. `sleep_until`, for every worker at once."""
        if self._poll is None:
            poll, fds, pipes = select.poll(), {}, {}
            for k, w in enumerate(self.workers):
                poll.register(w.done, select.POLLIN)
                poll.register(w.fileno(), _POLL_IN)
                fds[w.done] = k
                pipes[w.fileno()] = k
            self._fds, self._pipes, self._poll = fds, pipes, poll
        control, quiet, poll = self.control, [], self._poll

        def flag(value: int) -> None:
            control[:, PARENT_SLEEPING] = value

        def woke(events: list) -> bool:
            for fd, _ in events:
                if fd in self._fds:
                    drain_eventfd(fd)
                    continue
                k = self._pipes[fd]
                if self.done[k] != self.seqs[k]:  # (not done yet)
                    return False  # a pipe first: let that worker's own wait read it
                quiet.append(fd)
                poll.unregister(fd)  # its infos, read once every worker is done
            return True

        try:
            return sleep_until(flag, ready, poll, deadline, woke)
        finally:
            for fd in quiet:
                poll.register(fd, _POLL_IN)

    def forget_fds(self) -> None:
        """A worker was rebuilt (a new pipe): register the file descriptors afresh."""
        self._poll = None
