"""The board: wake-ups between the parent and its workers through the shared region, not
pipe round trips.

Each worker has a control slot of two cache lines in the shared region (see
`envfactory.vectorizers.transport.shared.layout_for`): the parent writes the first (the
sequence number of the step it asks for, whether it sleeps), the worker the second (the
sequence number of the step it finished, whether a pipe message follows, whether it
sleeps). A step's actions are in the shared region too, so a step costs no pickling and
no system call while both sides are running:

1. the parent writes the actions, then ``cmd = seq``; the worker, spinning on ``cmd``,
   sees it within a microsecond or two;
2. the worker writes observations, rewards and flags, then ``done = seq`` (and
   ``msg = 1`` if a pipe message follows: infos the info columns do not take, pickled
   observations, an error; ``msg = IN_COLUMNS`` if the infos are in the info columns,
   see `infocols`); the parent, spinning on ``done``, sees it.

A side naps through a short wait it expects and spins at its end (`Waiter`); one
that has waited longer than that pays sleeps in ``poll`` on
an eventfd of its own *and* its pipe (so a worker that dies wakes the parent at once, as
with pipes alone): it sets its ``sleeping`` word, issues a full memory barrier and checks
the word it waits on once more; the other side writes its word, issues a barrier, and
writes the eventfd only if the sleeping word is set (Dekker's handshake: one of the two
always sees the other's store). Sleeping waits are also bounded (`SLEEP_SLICE_MS`),
so even a lost wake-up would cost milliseconds, never a hang.

This module is the one waiting policy of the subprocess backend: `Waiter` decides
how long to nap and spin (`Waiter.until`: every wait, the board's, a handle's, the pool's
and a worker's, `WorkerWake` in `worker`), `sleep_until` is the sleeping half of the
handshake (every sleep), `Poller` waits for a pipe by the same policy.

The parent's side of the slots is the group's board (`Board`, one per `SubprocGroup`),
which hands a step to every worker at once (posting to one worker at a time cost the parent
~10 us a worker): `Board.post` writes the actions in one copy, the step numbers in one write
to the ``cmd`` column, one barrier, and the eventfds of sleeping workers only; `Board.wait`
sees them done by one comparison over the ``done`` column, else sleeps in one ``poll`` over
every eventfd and pipe. Anything else (a timeout, a dead worker, a Ctrl-C, a restart) is
left to each worker's own wait (`PipeHandle.recv`, which reads the slot again: the same
answer); the board books each post through the handle's own method (`PipeHandle.booked`).
"""

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

__all__ = [
    "CMD",
    "DONE",
    "MSG",
    "NO_INFOS",
    "PARENT_SLEEPING",
    "SCHEMAS",
    "SLOT_WORDS",
    "WORKER_SLEEPING",
    "Board",
    "Poller",
    "Waiter",
    "drain_eventfd",
    "fence",
    "make_eventfd",
    "signal_eventfd",
    "sleep_until",
]

#: int64 words per worker slot: two 64-byte cache lines, one written by each side
SLOT_WORDS = 16
# written by the parent
CMD, PARENT_SLEEPING = 0, 1
# written by the worker (SCHEMAS: how many info schemas it has sent, see .infocols)
DONE, MSG, WORKER_SLEEPING, SCHEMAS = 8, 9, 10, 11

#: the longest a sleeping side waits before it looks again (a parent-alive watchdog for
#: the worker; a lost wake-up, which the barrier rules out, would cost no more than this)
SLEEP_SLICE_MS = 200

_barrier = threading.Lock()


def fence() -> None:
    """A full memory barrier: taking a lock is an atomic read-modify-write (``lock
    cmpxchg`` on x86, which orders every earlier store before every later load). A
    ``with`` block: a Ctrl-C raised as ``acquire`` returns still releases the lock (it
    was held for good, and every later step hung in its next fence)."""
    with _barrier:
        pass


def make_eventfd() -> int:
    return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)


def signal_eventfd(fd: int) -> None:
    try:
        os.eventfd_write(fd, 1)
    except OSError:  # pragma: no cover - counter full (never: it is drained on each wake)
        pass


def drain_eventfd(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except (BlockingIOError, OSError):
        pass


#: a nap ends this long before the wait is expected to end (a timer wakes a sleeping
#: thread 85-280 us late on the 2-core VM this was tuned on), then the side spins
NAP_MARGIN = 300e-6
#: the longest expected wait that is napped through; a longer one sleeps until woken
#: (its wake-up cost is then small against the wait, and a nap delays noticing a fault)
MAX_NAP = 4e-3
#: how many recent waits predict the next one (the shortest of them is the prediction)
RECENT = 8


class Waiter:
    """How a side waits for the other, learnt from its recent waits.

    Waking a sleeping process costs 25-300 us on a VM (the other side's ``eventfd`` write
    and the scheduler), more than a cheap env step, so the expected wait decides:

    - short (at most ``MAX_NAP``, predicted by the shortest of the last ``RECENT`` waits):
      nap until ``NAP_MARGIN`` before it is expected to end (a plain timed sleep: the
      other side need not wake this one, so that costs it nothing), then spin (a load of
      the shared word and ``sched_yield``, so a runnable process on this core still gets
      it) up to ``max_spin`` past the expected end. A steady step loop thus never pays a
      wake-up, and burns only the margin of a core per wait;
    - longer (a learner's update, a slow env): spin up to ``max_spin`` only while the
      average wait is below it, else sleep at once until the other side wakes this one
      (the caller's flagged sleep).

    A spin that ends without the answer (the other side was not running: an
    oversubscribed machine) makes the next 1, 3, 7, ... 63 waits sleep at once.
    ``max_spin = 0`` never spins nor naps. ``nap=False`` (a pipe: the writer's system
    call wakes a sleeping reader at once anyway, so a nap saves the other side nothing
    and a timer only wakes late): spin up to ``max_spin``, with the same back-off.
    """

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
        """The one wait: ``ready()`` now, or by nap and spin (``spin``, see the class), or
        by ``sleep()`` (`sleep_until`; False: it gave up, and the wait is not recorded)."""
        t0 = time.perf_counter()
        if ready():  # (the common case of a steady loop: no plan, no closure called again)
            got = True
        elif spin and self.skip:  # recent spins were wasted (the other side was not
            self.skip -= 1  # running): sleep at once
            got = ready()
        elif spin:
            nap, spins = self.plan()
            got = False
            if nap > 0:
                left = t0 + nap - time.perf_counter()
                if left > 0:
                    time.sleep(left)
                got = ready()
            if got:  # (caught after the nap)
                self.backoff = 0
            elif spins <= 0:
                got = ready()
            else:
                end = t0 + nap + spins
                while not (got := ready()):
                    if time.perf_counter() > end:
                        # on an oversubscribed machine the answer does not come while we
                        # spin and spinning only delays the side we wait for: sleep at once
                        # for the next 1, 3, 7, ... 63 waits
                        self.backoff = min(2 * self.backoff + 1, 63)
                        self.skip = self.backoff
                        break
                    os.sched_yield()
                else:
                    self.backoff = 0
        else:
            got = False
        if not (got or sleep()):
            return False
        self.record(time.perf_counter() - t0)
        return True


def sleep_until(
    flag: Callable[[int], None],
    ready: Callable[[], bool],
    poll: Any,
    deadline: float | None,
    woke: Callable[[list], bool],
) -> bool:
    """The one sleeping half of every wait (the parent's step and per-worker waits, the
    pool's, a worker's): raise the sleeping flag (``flag(1)``: the other side then writes
    an eventfd), issue a barrier and check ``ready()`` once more; else sleep in ``poll`` for
    at most `SLEEP_SLICE_MS` (the one place a Ctrl-C goes through, `ctrl_c`), lower the
    flag, hand what woke it to ``woke`` (which drains the eventfds; False: stop waiting),
    and check again. True once ready; False past ``deadline`` (``time.monotonic()``; None:
    no limit) or when ``woke`` says so."""
    try:
        while True:
            flag(1)
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
            flag(0)
            if not woke(events):
                return False
            if ready():
                return True
    finally:
        flag(0)


_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


class Poller:
    """Waits for one or more pipes (file descriptors) by the `Waiter` policy
    (without the nap: a pipe's writer wakes a sleeping reader at once): spin while that
    pays, then sleep in ``poll``. A ``select.poll`` registered once costs ~1 us per check
    (``Connection.poll`` builds a selector per call: ~10 us).
    """

    def __init__(self, fds: list[int], spin_seconds: float) -> None:
        self.waiter = Waiter(spin_seconds, nap=False)
        self.fds = list(fds)
        self._poll = select.poll()
        for fd in self.fds:
            self._poll.register(fd, _POLL_IN)

    def register(self, fd: int) -> None:
        self.fds.append(fd)
        self._poll.register(fd, _POLL_IN)

    def unregister(self, fd: int) -> None:
        self.fds.remove(fd)
        self._poll.unregister(fd)

    def ready(self, timeout_ms: int = 0) -> list[tuple[int, int]]:
        """The ``(fd, events)`` ready now (or within ``timeout_ms``; -1: no limit)."""
        return self._poll.poll(timeout_ms)

    def wait(self, timeout: float | None, spin: bool = True) -> list[tuple[int, int]]:
        """The ``(fd, events)`` ready within ``timeout`` seconds (None: no limit; []
        when it passed): at once if one is; else spin by the policy (``spin``), then
        sleep. A wait that got something is recorded (`waits_below`)."""
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

    def waits_below(self, seconds: float) -> bool:
        """Whether its waits (those that had to wait; a moving average) are shorter than
        ``seconds`` (spinning through such a wait costs less than a wake-up)."""
        return self.waiter.avg < seconds


def control_view(buf: Any, offset: int, workers: int) -> np.ndarray:
    """The control slots: an int64 array of shape ``(workers, SLOT_WORDS)``."""
    return np.ndarray((workers, SLOT_WORDS), np.int64, buffer=buf, offset=offset)


#: a step's answer with no infos and the observations in shared memory (a StepResult)
NO_INFOS: Any = ([], None)


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
        self.sleeping = self.control[:, WORKER_SLEEPING]
        self.actions = actions[: self.stop] if isinstance(actions, np.ndarray) else None
        self.seqs: list[int] = [0] * n  # the step each worker was asked for
        self.posted = False  # a step was posted and not yet waited for here
        self.waiter = Waiter(max((w.spin_us for w in self.workers), default=0) * 1e-6)
        self._poll: Any = None
        self._pipes: dict[int, int] = {}  # pipe -> worker (the rest are eventfds)

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
        buf[:] = actions if len(actions) == self.stop else actions[: self.stop]
        self.seqs = seqs
        self.cmd[:] = seqs  # the post itself: one store
        for w, seq in zip(workers, seqs):  # (`recv` reads each answer from the slot again)
            w.sent = w.seq = seq
            w.via_slot = True
        self.posted = True
        with _barrier:  # (`fence`, inline: the step's hot path) the step numbers are
            pass  # visible before the sleeping words are read
        for w, sleeping in zip(workers, self.sleeping.tolist()):
            if sleeping:
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
        if done.tolist() == seqs:  # (a list compare: cheaper than numpy's for a few workers)
            self.waiter.record(0.0)
        else:

            def ready() -> bool:
                return done.tolist() == seqs

            if not self.waiter.until(ready, lambda: self._sleep(ready, deadline)):
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
                answers.append((ColumnRows(w.columns, w.schema, w.start, w.stop - w.start), None))
        return answers

    def _sleep(self, ready: Any, deadline: float | None) -> bool:
        """Sleep until ``ready()`` (True), or False: past ``deadline``, or a pipe woke
        it. `sleep_until`, for every worker at once."""
        if self._poll is None:
            poll, self._pipes = select.poll(), {w.fileno(): k for k, w in enumerate(self.workers)}
            for w in self.workers:
                poll.register(w.done, select.POLLIN)
                poll.register(w.fileno(), _POLL_IN)
            self._poll = poll
        control, quiet, poll = self.control, [], self._poll

        def flag(value: int) -> None:
            control[:, PARENT_SLEEPING] = value

        def woke(events: list) -> bool:
            for fd, _ in events:
                k = self._pipes.get(fd)
                if k is None:  # an eventfd
                    drain_eventfd(fd)
                    continue
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
