"""The board (a step handed to the workers through their control slots) and the one waiting
policy (`Waiter`, `sleep_until`). A worker's slot is two cache lines: the parent writes
``CMD`` (the step asked) and ``PARENT_SLEEPING``, the worker ``DONE`` (the step finished),
``MSG`` (1: a pipe message follows; `IN_COLUMNS`: infos in the columns), ``WORKER_SLEEPING``
and ``SCHEMAS``. A sleeper raises its word, a barrier, checks again; the other side writes,
a barrier, and signals the eventfd only if the word is set (Dekker's handshake)."""

from __future__ import annotations

import math
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .ctrl_c import HOLD
from .infocols import ColumnRows

if TYPE_CHECKING:
    from .pipe import PipeHandle

__all__ = [  # (the slot words, the board, the waiting policy, the eventfds)
    "CMD", "DONE", "MSG", "NO_INFOS", "PARENT_SLEEPING", "SCHEMAS", "SLOT_WORDS",
    "WORKER_SLEEPING", "Board", "Poller", "Waiter", "drain_eventfd", "fence", "make_eventfd",
    "signal_eventfd", "sleep_until",
]  # fmt: skip

#: int64 words per worker slot: two 64-byte cache lines, one written by each side
SLOT_WORDS = 16
# written by the parent
CMD, PARENT_SLEEPING = 0, 1
# written by the worker (SCHEMAS: how many info schemas it has sent, see .infocols)
DONE, MSG, WORKER_SLEEPING, SCHEMAS = 8, 9, 10, 11

#: the longest a sleeping side waits before it looks again (the worker's parent watchdog)
SLEEP_SLICE_MS = 200

_barrier = threading.Lock()


def fence() -> None:
    """A full memory barrier (taking a lock is a ``lock cmpxchg`` on x86); a ``with``
    block, so that a Ctrl-C raised as ``acquire`` returns still releases the lock."""
    with _barrier:
        pass


def make_eventfd() -> int:
    return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)


def signal_eventfd(fd: int) -> None:  # (never full: the sleeper drains it on each wake)
    os.eventfd_write(fd, 1)


def drain_eventfd(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except OSError:  # (nothing to read: EAGAIN)
        pass


#: a nap ends this long before the wait's expected end (a timer wakes 85-280 us late)
NAP_MARGIN = 300e-6
#: the longest expected wait that is napped through; a longer one sleeps until woken
MAX_NAP = 4e-3
#: how many recent waits predict the next one (the shortest of them)
RECENT = 8
#: the pool's wait looks at every worker's pipe at least this often (a dead worker's hang-up
#: shows there, while its slot says nothing and the other workers keep the wait from sleeping)
PIPE_LOOK = 0.01


class Waiter:
    """How a side waits for the other, learnt from its recent waits (docs/concepts/
    vectorizers.md): a short one (the shortest of the last ``RECENT``, up to ``MAX_NAP``) is
    napped through to ``NAP_MARGIN`` before its end, then spun up to ``max_spin`` past it; a
    longer one spins ``max_spin`` only while the average wait is below it, else sleeps. A spin
    that misses makes the next 1, 3, 7, ... 63 waits sleep at once. ``max_spin = 0``: never
    spin nor nap; ``nap=False`` (a pipe): spin only."""

    __slots__ = ("avg", "backoff", "k", "max_spin", "nap", "recent", "skip")

    def __init__(self, max_spin: float, nap: bool = True) -> None:
        self.max_spin = max_spin
        self.nap = nap
        self.avg = 0.0
        self.recent = [0.0] * RECENT
        self.k = 0
        self.skip = self.backoff = 0  # waits left to sleep at once; the next such run

    def record(self, seconds: float) -> None:
        """A wait took ``seconds``."""
        self.avg += 0.2 * (seconds - self.avg)
        self.recent[self.k] = seconds
        self.k = (self.k + 1) % RECENT

    def plan(self) -> tuple[float, float]:
        """``(nap, spin)`` seconds for the next wait (made only when a wait must wait)."""
        if self.max_spin <= 0:
            return 0.0, 0.0
        if not self.nap:
            return 0.0, self.max_spin
        low = min(self.recent)
        if low <= MAX_NAP:
            nap = low - NAP_MARGIN if low > NAP_MARGIN else 0.0
            return nap, low - nap + self.max_spin
        return 0.0, (self.max_spin if self.avg < self.max_spin else 0.0)

    def until(
        self, ready: Callable[[], bool], sleep: Callable[[], bool], spin: bool = True
    ) -> bool:
        """The one wait: ``ready()`` now, by nap and spin (``spin``), or by ``sleep()``
        (False: it gave up, and the wait is not recorded)."""
        t0 = time.perf_counter()
        got = ready()  # (the common case of a steady loop: no plan, no closure called again)
        if not got and spin and self.skip:  # recent spins were wasted (the other side was not
            self.skip -= 1  # running): sleep at once
            got = ready()
        elif not got and spin:
            nap, spins = self.plan()
            if nap > 0 and (left := t0 + nap - time.perf_counter()) > 0:
                time.sleep(left)
            end, now = t0 + nap + spins, time.perf_counter()
            while not (got := ready()) and now <= end:
                os.sched_yield()
                now = time.perf_counter()
            if got:  # (caught after the nap or spinning)
                self.backoff = 0
            elif spins > 0:  # a wasted spin: the next waits sleep at once
                self.backoff = min(2 * self.backoff + 1, 63)
                self.skip = self.backoff
        if not (got or sleep()):
            return False
        self.record(time.perf_counter() - t0)
        return True


def sleep_until(
    flag: tuple[np.ndarray, Any], ready: Callable[[], bool], poll: Any, deadline: float | None,
    woke: Callable[[list], bool],
) -> bool:  # fmt: skip
    """The sleeping half of every wait: raise ``words[key]`` (``flag``), check ``ready()``
    again, else sleep in ``poll`` (a Ctrl-C goes through) up to `SLEEP_SLICE_MS`; ``woke``
    drains the eventfds. True once ready; False past ``deadline`` or if ``woke`` says."""
    words, key = flag
    try:
        while True:
            words[key] = 1
            fence()  # the flag is visible before the words are read again
            if ready():
                return True
            ms = SLEEP_SLICE_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ms = min(ms, math.ceil(left * 1000))
            events = HOLD.waiting(poll.poll, ms)
            words[key] = 0
            if not woke(events):
                return False
            if ready():
                return True
    finally:
        words[key] = 0


_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_PARENTS = (slice(None), PARENT_SLEEPING)  # (every worker's PARENT_SLEEPING word)


class Poller:
    """Waits for one or more pipes by the `Waiter` policy without the nap (a ``select.poll``
    registered once: ~1 us a check, where ``Connection.poll`` builds a selector: ~10 us)."""

    def __init__(self, fds: list[int], spin_seconds: float) -> None:
        self.waiter = Waiter(spin_seconds, nap=False)
        self.fds = list(fds)
        self._poll = select.poll()
        for fd in self.fds:
            self._poll.register(fd, _POLL_IN)

    def ready(self, timeout_ms: int = 0) -> list[tuple[int, int]]:
        return self._poll.poll(timeout_ms)

    def wait(self, timeout: float | None, spin: bool = True) -> list[tuple[int, int]]:
        """The ``(fd, events)`` ready within ``timeout`` seconds (None: no limit; []: none)."""
        poll, t0 = self._poll.poll, time.perf_counter()
        got = poll(0)
        if got:
            return got

        def check() -> bool:
            got[:] = poll(0)
            return bool(got)

        def sleep() -> bool:
            left = None if timeout is None else timeout - (time.perf_counter() - t0)
            got[:] = poll(-1 if left is None else max(0, math.ceil(left * 1000)))
            return bool(got)

        self.waiter.until(check, sleep, spin)
        return got


#: a step's answer with no infos and the observations in shared memory (a StepResult)
NO_INFOS: Any = ([], None)


class Board:
    """The board of ``workers`` (attached, in env order, worker ``k`` at slot ``k``), whose
    envs are the first ``stop`` of the action buffer ``actions``."""

    def __init__(self, workers: Sequence[PipeHandle], control: np.ndarray, actions: Any) -> None:
        self.workers = list(workers)
        n = len(self.workers)
        self.stop = self.workers[-1].stop
        self.control = c = control[:n]
        self.cmd, self.done, self.msg = c[:, CMD], c[:, DONE], c[:, MSG]
        self.sleeping = c[:, WORKER_SLEEPING]
        self.actions = actions[: self.stop] if isinstance(actions, np.ndarray) else None
        self.seqs: list[int] = [0] * n  # the step each worker was asked for
        for w in self.workers:  # (a handle waits for a step of its own here: `PipeHandle.recv`)
            w.board = self
        self.posted = False  # a step was posted and not yet waited for here
        self.waiter = Waiter(max((w.spin_us for w in self.workers), default=0) * 1e-6)
        self.waiter_ready = Waiter(self.waiter.max_spin, nap=False)  # (the pool's: no nap)
        self._poll: Any = None
        self._pipes: dict[int, int] = {}  # pipe -> worker (the rest are eventfds)
        self._look_at = 0.0  # when `ready` looks at every pipe next (`PIPE_LOOK`)

    def post(self, actions: Any, some: Sequence[PipeHandle] | None = None) -> bool:
        """Ask every worker (or the consecutive workers ``some``, whose rows ``actions`` are:
        the pool's) for a step: one copy, one write, one barrier, the sleepers' eventfds.
        False (nothing done): by pipe, or a worker has a cut message to finish."""
        buf = self.actions
        if buf is None or type(actions) is not np.ndarray or actions.dtype != buf.dtype:
            return False
        workers, seqs = self.workers if some is None else some, []
        for w in workers:
            if w.unsent:  # (the rest of a message a Ctrl-C cut: it goes first, by pipe)
                return False
            seqs.append(w.sent + 1)
        if some is None:
            buf[:] = actions if len(actions) == self.stop else actions[: self.stop]
            self.seqs, self.posted = seqs, True
            self.cmd[:] = seqs  # the post itself: one store
        else:
            buf[some[0].start : some[-1].stop] = actions
            self.cmd[some[0].index : some[-1].index + 1] = seqs
        for w, seq in zip(workers, seqs):  # (`recv` reads each answer from the slot again)
            w.sent = w.seq = seq
            w.via_slot, w.answer = True, None
        with _barrier:  # (`fence`, inline: the step's hot path) the step numbers are
            pass  # visible before the sleeping words are read
        sleeping = self.sleeping.tolist()
        for w in workers:
            if sleeping[w.index]:
                signal_eventfd(w.go)
        return True

    def wait(self, deadline: float | None) -> list[Any] | None:
        """Each worker's StepResult (None: by pipe) once all are done; or None: the
        per-worker path takes over (past the deadline, or a pipe woke the wait)."""
        self.posted = False
        done, seqs = self.done, self.seqs
        if done.tolist() == seqs:  # (a list compare: cheaper than numpy's for a few workers)
            self.waiter.record(0.0)
        else:

            def ready() -> bool:
                return done.tolist() == seqs

            def wake(k: int) -> bool:  # a pipe first: that worker's own wait reads it
                return bool(self.done[k] == self.seqs[k])  # (its infos, once all are done)

            if not self.waiter.until(ready, lambda: self._sleep(ready, deadline, wake)):
                return None
        with _barrier:  # (`fence`) their results were written before ``done``
            pass
        answers: list[Any] = []  # (a handle asked again reads its slot: the same answer)
        for w, msg in zip(self.workers, self.msg.tolist()):
            if msg == 0:  # no infos
                answers.append(NO_INFOS)
            elif msg == 1:  # by pipe: read by the caller (`PipeHandle.recv`), once all are done
                answers.append(None)
            else:  # infos in the info columns
                if w.slot[SCHEMAS] != w.schemas:  # (an invariant) the per-worker path
                    return None  # raises it, with the failure policy
                assert w.columns is not None and w.schema is not None
                answers.append((ColumnRows((w.columns, w.schema, w.start, w.stop - w.start)), None))
        return answers

    def _fds(self) -> Any:
        """One ``select.poll`` over every worker's eventfd and pipe (see `forget_fds`)."""
        if self._poll is None:
            poll, self._pipes = select.poll(), {w.fileno(): k for k, w in enumerate(self.workers)}
            for w in self.workers:
                poll.register(w.done, select.POLLIN)
                poll.register(w.fileno(), _POLL_IN)
            self._poll = poll
        return self._poll

    def _sleep(self, ready: Any, deadline: float | None, wake: Callable[[int], bool]) -> bool:
        """`sleep_until` for every worker at once (False: past ``deadline``, or ``wake(k)``
        ended the wait on worker ``k``'s pipe; a pipe it lets be leaves the poll until the
        wait ends: no busy loop on a hang-up)."""
        quiet, poll = [], self._fds()

        def woke(events: list) -> bool:
            for fd, _ in events:
                k = self._pipes.get(fd)
                if k is None:  # an eventfd
                    drain_eventfd(fd)
                    continue
                if not wake(k):
                    return False
                quiet.append(fd)
                poll.unregister(fd)
            return True

        try:
            return sleep_until((self.control, _PARENTS), ready, poll, deadline, woke)
        finally:
            for fd in quiet:
                poll.register(fd, _POLL_IN)

    def ready(self, owing: Sequence[PipeHandle], timeout: float | None, spin: bool) -> list:
        """The pool's wait ("the first ready"; a handle's own wait for its step too): the
        workers of ``owing`` whose answer (or end) is there, waiting up to ``timeout`` seconds
        (0: look only; None: no limit) for the first. Pipes are polled when a step went by
        pipe, and by the sleep. The rest of a message a Ctrl-C cut is written first (its
        worker answers nothing before it has it all)."""
        for w in owing:
            if w.unsent:
                w.flush()
        piped = [w for w in owing if not w.via_slot]
        now = time.monotonic()
        if now >= self._look_at:  # every pipe now and then: a hang-up goes by no slot
            piped, self._look_at = list(owing), now + PIPE_LOOK
        poll, pipes, workers = self._fds() if piped else None, self._pipes, self.workers
        woken: list = []  # workers whose pipe woke the sleep
        got: list = []

        def check() -> bool:
            got[:] = [w for w in owing if w.via_slot and w.slot[DONE] == w.seq]
            if woken:
                got.extend(w for w in woken if w not in got)
            if poll is not None:
                for fd, _ in poll.poll(0):
                    k = pipes.get(fd)
                    if k is not None and workers[k] in piped and workers[k] not in got:
                        got.append(workers[k])
            return bool(got)

        if check() or timeout == 0:
            return got
        deadline = None if timeout is None else now + timeout

        def wake(k: int) -> bool:
            if workers[k] in owing and workers[k] not in woken:
                woken.append(workers[k])
            return True

        sleep = lambda: self._sleep(check, deadline, wake)  # noqa: E731
        return got if self.waiter_ready.until(check, sleep, spin) else []

    def forget_fds(self) -> None:
        """A worker was rebuilt (a new pipe): register the fds afresh."""
        self._poll = None
