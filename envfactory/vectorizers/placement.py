"""Where ``subproc``'s envs step, decided while they step: in the worker processes (the
placement the env was built with) or all in the parent, whichever the last measurements
say is cheaper for the caller.

Why at run time: a worker process pays only when a core is free for it. On an idle machine
the workers step their envs beside the parent and cheap envs (CartPole) run 1.1-1.3x a
single process; with a busy core beside them (a learner, another sweep job) every step
waits for a process to be scheduled and the same envs run at 0.3-0.6x a single process.
Which case holds changes while a program runs, and the load average at build time does not
tell (a sweep's other jobs are still importing). So :class:`Placement` times every step
(what ``step_async`` + ``step_wait`` block the caller for), compares the two placements
over short windows, and keeps the cheaper one, trying the other again after a gap that
doubles while the choice holds (up to :data:`MAX_GAP` seconds: a change of load is noticed
within that, at a cost of one short window at most every :data:`MAX_GAP` seconds). It
starts where the build-time probe of the machine points (``parent_first``: a core was busy
when the env was built), and tries the other placement at once.

The envs move between processes with their state (``EnvHost.export``/``adopt``: pickled
with cloudpickle; the worker keeps its copies until the envs come back), so a move changes
no trajectory of envs that pickle faithfully. Only cheap envs move: a state over
:data:`MOVE_LIMIT` bytes a worker (an Atari frame stack, 500 KB) or one that cannot be
pickled ends the moves for that vectorized env, which then keeps its build placement.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .scheduler import HOLD

__all__ = [
    "CLEARLY_WORSE",
    "MAX_GAP",
    "MOVE_LIMIT",
    "RECENT",
    "TRY_SHARE",
    "Placement",
    "held_ctrl_c",
]

#: the most bytes one worker's envs may take to move (8 CartPoles: 23 KB)
MOVE_LIMIT = 256 * 1024
#: the most seconds between two tries of the placement not in use
MAX_GAP = 8.0
#: the most a try of the worse placement may cost, as a share of the gap before the next
#: (a try 3x as slow for 60 ms waits 6 s; one 10% slower, 0.5 s)
TRY_SHARE = 0.02
#: a try whose steps cost this many times the kept placement's (over ``min_steps`` steps)
#: ends at once, without waiting out its window: workers on a busy core cost 2-3x the
#: parent per step here, so a try then costs a few ms instead of 50
CLEARLY_WORSE = 1.5
#: how many recent windows of a placement a try is compared with (their median)
RECENT = 3


@dataclass
class Placement:
    """The run-time choice between the workers (``local`` False) and the parent
    (``local`` True) for ``subproc``'s envs: call :meth:`record` with the seconds each
    step blocked the caller; when :attr:`local` is not where the envs are, move them.

    A window is at least ``window`` seconds of steps and ``min_steps`` steps (a try
    :data:`CLEARLY_WORSE` than the kept placement ends after ``min_steps``); the first
    ``settle`` steps after a move are not counted (a worker falling asleep or waking up).
    A try of the parent keeps it if it is cheaper by ``margin``, a try of the workers if it
    is not dearer by ``margin`` (the workers win near-ties); otherwise the
    gap to the next try doubles (from ``first_gap`` to :data:`MAX_GAP`), or grows to
    what keeps the tries under :data:`TRY_SHARE` of the time when they cost more.

    Why no faster reaction to a change of cost: step costs on a loaded machine swing by
    30-50% from one 50 ms window to the next, and a try costs a window in the (likely)
    worse placement; the doubling gap bounds what tries cost to a few percent.
    """

    window: float = 0.05
    min_steps: int = 16
    settle: int = 4
    margin: float = 0.05
    first_gap: float = 0.5
    clock: Callable[[], float] = time.monotonic
    local: bool = False
    #: the latest cost per step (seconds) of each placement: [workers, parent]
    cost: list[float | None] = field(default_factory=lambda: [None, None])
    #: tries of the placement not in use so far (a diagnostic)
    tries: int = 0
    #: the last :data:`RECENT` window costs of each placement: a try is compared with
    #: their median, so one slow window of the kept placement (the host's hiccup) does
    #: not make a try look cheaper than it is
    recent: list[list[float]] = field(default_factory=lambda: [[], []])
    _trying: bool = False
    _gap: float = 0.0
    _next_try: float = 0.0
    _skip: int = 0
    _sum: float = 0.0
    _count: int = 0
    _try_start: float = 0.0

    def __post_init__(self) -> None:
        self._gap = self.first_gap
        self._skip = self.settle

    def record(self, seconds: float) -> None:
        """Count one step that blocked the caller ``seconds``; at the end of a window,
        decide (:attr:`local` may change)."""
        if self._skip:
            self._skip -= 1
            return
        self._sum += seconds
        self._count += 1
        if self._count < self.min_steps or (
            self._sum < self.window and not (self._trying and self._clearly_worse())
        ):
            return
        per_step = self._sum / self._count
        self._sum, self._count = 0.0, 0
        here = int(self.local)
        self.cost[here] = per_step
        mine = self.recent[here]
        mine.append(per_step)
        del mine[:-RECENT]
        now = self.clock()
        if self._trying:
            self._trying = False
            other = self._kept_cost()
            # the workers win a near-tie (within margin): a try of the parent must be
            # cheaper by margin, a try of the workers only not dearer by it (the workers'
            # first steps after a move are their slowest, and idle they usually pay)
            bound = (1 - self.margin) if self.local else (1 + self.margin)
            if other is not None and not per_step < other * bound:
                self._switch()  # back: the try was not cheaper
                # what the try cost beyond the kept placement, at most TRY_SHARE of the gap
                lost = (now - self._try_start) * (per_step / other - 1)
                self._gap = min(max(self._gap * 2, lost / TRY_SHARE), MAX_GAP)
            else:
                self._gap = self.first_gap
            self._next_try = now + self._gap
        elif now >= self._next_try:  # (at once after the first window)
            self._trying = True
            self._try_start = now
            self.tries += 1
            self._switch()
            self.recent[int(self.local)].clear()  # (its windows of an earlier time)

    def _clearly_worse(self) -> bool:
        """The try so far costs :data:`CLEARLY_WORSE` times the kept placement."""
        kept = self._kept_cost()
        return kept is not None and self._sum > self._count * kept * CLEARLY_WORSE

    def _kept_cost(self) -> float | None:
        """The median of the recent windows of the placement a try is away from (of two,
        the cheaper: a slow window must not make a try win)."""
        windows = sorted(self.recent[1 - int(self.local)])
        return windows[(len(windows) - 1) // 2] if windows else None

    def _switch(self) -> None:
        self.local = not self.local
        self._skip = self.settle
        self._sum, self._count = 0.0, 0


@contextlib.contextmanager
def held_ctrl_c() -> Iterator[None]:
    """Hold a Ctrl-C of the main thread until the block (a move) ends: the scheduler's
    hold (:data:`~.scheduler.HOLD`), installed for the block where no pool has it."""
    used = HOLD.use()
    try:
        with HOLD:
            yield
    finally:
        if used:
            HOLD.unuse()
