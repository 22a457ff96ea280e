"""The plan: how a vectorizer's envs are split over its workers and this process, decided once
by [`plan_split`][envfactory.vectorizers.remote.plan_split] before any env is built, into one
[`Split`][envfactory.vectorizers.record.Split] with its one-line reason (what the run summary
prints). Nothing downstream re-derives it: a backend starts one worker per
[`Split.slices`][envfactory.vectorizers.record.Split.slices] entry and steps the last
``in_parent`` envs itself.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ... import _compat
from ..record import Split
from ..transport.handle import split_envs
from .options import check_split

__all__ = [
    "CHEAP_STEP_SECONDS",
    "default_in_series",
    "image_split",
    "no_core_for_a_worker",
    "others_running",
    "parent_share",
    "plan_split",
]


def plan_split(
    num_envs: int,
    *,
    in_series: int | None = None,
    in_parent: int | None = 0,
    batch_size: int | None = None,
    timeout: float | None = None,
    restart: bool = False,
    images: bool = False,
    fallback: bool = False,
    load: float | None = None,
    probe: Callable[[], float | None] | None = None,
    cpus: int | None = None,
) -> Split:
    """The split of ``num_envs`` envs, decided once before any is built: envs per worker,
    the envs this process steps itself (the last ones), and the one-line reason.

    Args:
        num_envs: how many envs.
        in_series: envs per worker as configured (None: one worker per core free now; see
            `default_in_series`, `cheap_in_series`).
        in_parent: envs this process steps itself as configured (None: a worker's share
            while a core is idle for it, `parent_share`; 0: every env in a worker).
        batch_size: the async pool's batch (None: a synchronous step): every env in a
            worker, none with more envs than a batch (`pool_in_series`).
        timeout: the configured ``timeout`` (``inf`` is None, as the options checked it):
            an env in this process cannot be timed out, so a null ``in_parent`` gives 0.
        restart: the configured ``restart``: as ``timeout``.
        images: uint8 image observations (``subproc-atari``): never probed; a null
            ``in_series`` is `image_split`'s.
        fallback: ``auto``: every env in this process when no core is free for a worker
            (`no_core_for_a_worker`) and nothing asks for a worker process.
        load: other programs' running threads as the caller sampled them
            (`others_running`; None: sampled here, once, if the plan depends on it).
        probe: the seconds of one env's step, timed in a throwaway process (called only
            on 8 or more cpus where it could change the split).
        cpus: the cores the workers share (None: this machine's, ``os.cpu_count()``; a
            backend on other machines passes theirs, and a ``load`` it measured there or
            0.0).

    Returns:
        The plan, a [`Split`][envfactory.vectorizers.record.Split].

    Raises:
        OptionError: ``batch_size`` or ``in_parent`` out of range (`check_split`).
        ConfigError: ``in_series`` not an integer >= 1 or null.

    Example:
        >>> plan_split(5, in_series=2).workers
        (2, 2, 1)
        >>> plan_split(4, in_series=2, in_parent=1).slices()
        [(0, 2), (2, 3)]
    """
    check_split(num_envs, batch_size, in_parent, "vectorizer")
    cpus = _cpus(cpus)
    asked = {
        "in_series": in_series,
        "in_parent": in_parent,
        "timeout": timeout,
        "restart": restart,
        "batch_size": batch_size,
    }
    if batch_size is not None:
        series = pool_in_series(num_envs, batch_size, in_series, cpus)
        return _planned(asked, split_envs(num_envs, series), 0, None, cpus)
    if load is None and (in_series is None or in_parent is None):
        load = others_running()
    needs_worker = in_series or timeout is not None or restart
    if fallback and in_parent is None and not needs_worker and no_core_for_a_worker(load, cpus):
        return fallback_split(num_envs, load, cpus)
    if images and in_series is None:
        share, in_series = image_split(num_envs, in_parent, timeout, restart, load, cpus)
    else:
        share = parent_share(num_envs, in_parent, in_series, timeout, restart, images, load, cpus)
    if in_series is None:  # one worker per core free, a core left to this process's share
        in_series = default_in_series(num_envs - share, share > 0, None if share else load, cpus)
        if probe is not None and not share and not images:
            in_series = cheap_in_series(num_envs, in_series, probe, cpus)
    return _planned(asked, split_envs(num_envs - share, in_series), share, load, cpus)


def _planned(
    asked: dict[str, Any], slices: list, in_parent: int, load: float | None, cpus: int
) -> Split:
    sizes = [b - a for a, b in slices]
    return explain_split(asked, sizes, int(in_parent), load, cpus)


def _cpus(cpus: int | None) -> int:
    return cpus or os.cpu_count() or 1


def pool_in_series(
    num_envs: int, batch_size: int, in_series: int | None, cpus: int | None = None
) -> int:
    """``in_series`` of a pool when the config leaves it null: one worker per core, as
    ``subproc-atari`` (the parent mostly waits; a learner shares its core), but no worker
    with more envs than ``batch_size``, so a worker's answer fits one ``recv`` and at
    least ``num_envs / batch_size`` workers take turns (16 CartPoles, ``batch_size=8``: 2
    workers of 8; 8 Pongs, ``batch_size=4`` on 2 cores: 2 workers of 4)."""
    if in_series is not None:
        return in_series
    return max(1, min(default_in_series(num_envs, False, None, cpus), batch_size))


def no_core_for_a_worker(load: float | None = None, cpus: int | None = None) -> bool:
    """Whether a worker process would wait for a core at every step: fewer than two cores
    are free (``load``: other programs' runnable threads now, `others_running`), one
    for the parent and one for a worker."""
    return _cpus(cpus) - (others_running() if load is None else load) < 1.5


def default_in_series(
    num_envs: int, leave_parent_a_core: bool, load: float | None = None, cpus: int | None = None
) -> int:
    """Envs per worker: one worker per core, or (``leave_parent_a_core``: the parent steps a
    share of the envs itself) one worker per core but one. With ``load`` (other programs'
    running threads, `others_running`): one worker per core they leave free, when they
    leave some but not all (a synchronous step waits for its slowest worker, and a worker
    sharing a core with a busy program is slow: CartPole 8 envs with one busy core on 2 cores
    made 0.62x ``dummy`` in one worker, 0.54x in two); on an oversubscribed machine still
    one per core (a program's share of the CPUs grows with its process count there: 0.39x
    in two workers, 0.29x in one)."""
    cpus = _cpus(cpus)
    workers = max(1, cpus - 1) if leave_parent_a_core else cpus
    if load is not None and not leave_parent_a_core:
        free = cpus - round(load)
        if 0 < free < cpus:
            workers = free
    return math.ceil(num_envs / workers)


def others_running(samples: int = 8, gap: float = 0.001) -> float:
    """How many threads of other programs are running or runnable now: the mean of
    ``/proc/loadavg``'s running count over ``samples`` reads ``gap`` seconds apart (about
    10 ms), less this reader and multiprocessing's helper processes of this program (the
    fork server and the resource tracker: a fork server still booting, numpy's threads
    included, is no load a worker will meet, and counting it put 8 Pongs in one worker
    instead of two: 0.55 s for the first reset against 0.28 s). Unlike the 1-minute load
    average it does not remember processes that have just exited (a previous vec env's
    workers, a benchmark's last variant). Falls back to the 1-minute load average where
    there is no /proc."""
    counts = []
    helpers = _compat.helper_pids()
    try:
        for k in range(samples):
            if k:
                time.sleep(gap)
            with open("/proc/loadavg", encoding="ascii") as f:
                running = int(f.read().split()[3].split("/")[0]) - 1
            counts.append(max(0, running - _running(helpers)))
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except OSError:  # pragma: no cover - no load average on this platform
            return 0.0
    return sum(counts) / len(counts)


def _running(pids: list[int]) -> int:
    """How many threads of ``pids`` are running or runnable (R)."""
    n = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # exited
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            n += stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"R"
    return n


def parent_share(
    num_envs: int,
    in_parent: int | None,
    in_series: int | None,
    timeout: float | None,
    restart: bool,
    images: bool,
    load: float | None = None,
    cpus: int | None = None,
) -> int:
    """How many envs (the last ones) the parent steps itself: ``in_parent``, or (null) as
    many as one worker gets, when nothing asks for what only a worker process gives
    (``timeout``, ``restart``, a fixed ``in_series`` split), ``images`` is False (a
    ``SubprocVecEnv`` built directly for uint8 images keeps every env in a worker;
    ``subproc-atari``'s build function decides its split itself, with this function),
    and a core is idle for the parent to step them on beside its workers (``load``: other
    programs' runnable threads now, `others_running`). On 2 idle cores a parent share
    made CartPole at 16 envs 1.34x dummy against 0.62x without; with a busy core it made
    steps slower, because the parent and the worker must then both get a core at once."""
    if in_parent is not None:
        return int(in_parent)
    if in_series is not None or timeout is not None or restart or images:
        return 0
    cpus = _cpus(cpus)
    if cpus < 2:
        return 0
    if load is None:
        load = others_running()
    share = num_envs // cpus  # as many as each of the cpus - 1 workers
    workers = min(cpus - 1, num_envs - share)
    if share == 0 or load > cpus - 1 - workers + 0.5:  # no core left for the parent
        return 0
    return share


def image_split(
    num_envs: int,
    in_parent: int | None,
    timeout: float | None,
    restart: bool,
    load: float | None = None,
    cpus: int | None = None,
) -> tuple[int, int]:
    """``subproc-atari``'s default split, ``(in_parent, in_series)``: the parent steps a
    worker's share when `parent_share` gives one (a core idle; ``load`` as there)
    and one worker steps the rest, as ``subproc``; otherwise every env is in a worker, one
    worker per core (a synchronous step leaves the parent nothing to do while it waits,
    so it only pays to keep the parent out when it has no core of its own)."""
    share = parent_share(num_envs, in_parent, None, timeout, restart, False, load, cpus)
    return share, default_in_series(num_envs - share, share > 0, None, cpus)


#: on 8 or more cpus, an env whose step takes less than this goes two or more to a worker
CHEAP_STEP_SECONDS = 50e-6


def cheap_in_series(
    num_envs: int, in_series: int, probe: Callable[[], float | None], cpus: int | None = None
) -> int:
    """Envs per worker for ``subproc``'s default on 8 or more cpus: enough for one worker
    per two cpus when ``probe()`` (an env step's seconds, `probe.step_seconds`) is under
    `CHEAP_STEP_SECONDS`, else ``in_series``. The probe runs only where it could change
    the split. Measured on 16 vCPUs (2026-11-27, docs/benchmarks.md): 16 CartPoles (a step
    of ~10 us) made 165k steps/s in 8 workers against 122k in 16, and 32 made 211k in 8
    against 185k in 16; 16 Pongs (~600 us) made 0.77x in 8 workers, so they keep one each."""
    cpus = _cpus(cpus)
    fewer = math.ceil(num_envs / max(1, cpus // 2))
    if cpus < 8 or fewer <= in_series:
        return in_series
    seconds = probe()
    return fewer if seconds is not None and seconds < CHEAP_STEP_SECONDS else in_series


def _load_words(load: float | None, cpus: int | None = None) -> str:
    cpus = _cpus(cpus)
    seen = "not sampled" if load is None else f"{load:.1f} running threads of other programs"
    return f"load {seen} on {cpus} cpu{'s' if cpus != 1 else ''}"


def explain_split(
    requested: Mapping[str, Any],
    workers: list[int],
    in_parent: int,
    load: float | None,
    cpus: int | None = None,
) -> Split:
    """The [`Split`][envfactory.vectorizers.record.Split] a ``subproc``-family build
    decided: ``requested`` are the vectorizer's options as configured (``in_series``,
    ``in_parent``, ``timeout``, ``restart``, ``batch_size``), ``workers`` and ``in_parent``
    what was built, ``load`` what the build sampled (`others_running`; None: not sampled,
    because nothing was left to the cores free)."""
    parts: list[str] = []
    cpus = _cpus(cpus)
    batch = requested.get("batch_size")
    series = requested.get("in_series")
    if batch is not None:
        parts.append(f"the async pool (batch_size={batch}), every env in a worker")
    if series is not None:
        parts.append(f"in_series={series} as configured")
    elif batch is None:
        share = " but the one left to this process" if in_parent else ""
        if not in_parent and cpus >= 8:
            share = " (on 8+ cpus a cheap env's step, under 50 us, puts two or more per worker)"
        parts.append(f"in_series null: one worker per core free at build time{share}")
    asked = requested.get("in_parent", 0)
    if batch is not None:
        pass
    elif asked is not None:
        why = "every env isolated in a worker" if asked == 0 else "as configured"
        parts.append(f"in_parent={asked} ({why})")
    elif in_parent:
        parts.append(f"in_parent null: this process steps {in_parent} (a core was idle)")
    else:
        needs = [k for k in ("in_series", "timeout", "restart") if requested.get(k)]
        if needs:
            why = f"{', '.join(needs)} set (an env in this process can be neither timed out "
            why += "nor restarted)" if set(needs) - {"in_series"} else "nor split by in_series)"
        elif cpus < 2 or sum(workers) < cpus:
            why = "fewer envs than cpus"
        else:
            why = "no core idle for this process"
        parts.append(f"in_parent null: none in this process: {why}")
    if load is not None or (series is None and batch is None):
        parts.append(_load_words(load, cpus))
    return Split(tuple(workers), in_parent, "; ".join(parts))


def fallback_split(num_envs: int, load: float | None, cpus: int | None = None) -> Split:
    """``auto``'s fallback: every env in this process, because no core was free for a worker
    when it was built (``load``: other programs' running threads it saw)."""
    return Split(
        (),
        num_envs,
        f"auto fell back to every env in this process: no core free for a worker at build "
        f"time ({_load_words(load, cpus)}; a worker needs two free cores, one for it and one for "
        "this process)",
    )
