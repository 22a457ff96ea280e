"""Wake-ups between the parent and a worker through the shared region, not pipe round trips.

Each worker has a control slot of two cache lines in the shared region (see
:func:`envfactory.vectorizers.shared.layout_for`): the parent writes the first (the
sequence number of the step it asks for, whether it sleeps), the worker the second (the
sequence number of the step it finished, whether a pipe message follows, whether it
sleeps). A step's actions are in the shared region too, so a step costs no pickling and
no system call while both sides are running:

1. the parent writes the actions, then ``cmd = seq``; the worker, spinning on ``cmd``,
   sees it within a microsecond or two;
2. the worker writes observations, rewards and flags, then ``done = seq`` (and
   ``msg = 1`` if a pipe message follows: non-empty infos, pickled observations, an
   error); the parent, spinning on ``done``, sees it.

A side that has waited longer than spinning pays (:class:`Waiter`) sleeps in ``poll`` on
an eventfd of its own *and* its pipe (so a worker that dies wakes the parent at once, as
with pipes alone): it sets its ``sleeping`` word, issues a full memory barrier and checks
the word it waits on once more; the other side writes its word, issues a barrier, and
writes the eventfd only if the sleeping word is set (Dekker's handshake: one of the two
always sees the other's store). Sleeping waits are also bounded (:data:`SLEEP_SLICE_MS`),
so even a lost wake-up would cost milliseconds, never a hang.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

__all__ = [
    "CMD",
    "DONE",
    "MSG",
    "PARENT_SLEEPING",
    "SLOT_WORDS",
    "WORKER_SLEEPING",
    "Waiter",
    "drain_eventfd",
    "fence",
    "make_eventfd",
    "signal_eventfd",
]

#: int64 words per worker slot: two 64-byte cache lines, one written by each side
SLOT_WORDS = 16
# written by the parent
CMD, PARENT_SLEEPING = 0, 1
# written by the worker
DONE, MSG, WORKER_SLEEPING = 8, 9, 10

#: the longest a sleeping side waits before it looks again (a parent-alive watchdog for
#: the worker; a lost wake-up, which the barrier rules out, would cost no more than this)
SLEEP_SLICE_MS = 200

_barrier = threading.Lock()


def fence() -> None:
    """A full memory barrier: taking a lock is an atomic read-modify-write (``lock
    cmpxchg`` on x86, which orders every earlier store before every later load)."""
    _barrier.acquire()
    _barrier.release()


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


class Waiter:
    """How long to spin before sleeping, learnt from the waits so far.

    Spinning (a load of a shared word, then ``sched_yield`` so a runnable process on this
    core still gets it) pays when the other side answers within about a sleep/wake-up's
    cost (25-300 us on a VM); for a longer wait it burns a core for nothing. So the
    budget follows a moving average of recent wait times: while waits are shorter than
    ``max_spin`` this side spins up to ``max_spin``, else it only checks once and sleeps.
    A sleep's wake-up cost is part of the measured wait, so spinning comes back only when
    waits really get short. ``max_spin = 0`` never spins.
    """

    __slots__ = ("avg", "max_spin")

    def __init__(self, max_spin: float) -> None:
        self.max_spin = max_spin
        self.avg = 0.0

    def budget(self) -> float:
        return self.max_spin if self.avg < self.max_spin else 0.0

    def record(self, seconds: float) -> None:
        self.avg += 0.2 * (seconds - self.avg)

    def spin(self, word: Any, index: int, value: int) -> bool:
        """Spin while ``word[index] != value``, for at most the budget; True if it got it."""
        budget = self.budget()
        if budget <= 0:
            return bool(word[index] == value)
        end = time.perf_counter() + budget
        while word[index] != value:
            if time.perf_counter() > end:
                return False
            os.sched_yield()
        return True


def control_view(buf: Any, offset: int, workers: int) -> np.ndarray:
    """The control slots: an int64 array of shape ``(workers, SLOT_WORDS)``."""
    return np.ndarray((workers, SLOT_WORDS), np.int64, buffer=buf, offset=offset)
