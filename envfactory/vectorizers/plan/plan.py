"""The plan: how the envs are split over workers and this process, decided once (`plan_split`)."""

from __future__ import annotations

import glob
import math
import os
import time
from collections.abc import Callable

from ... import _compat
from ..record import Split
from ..transport.handle import split_envs
from .options import check_split

__all__ = ["CHEAP_STEP_SECONDS", "others_running", "plan_split"]

#: on 8 or more cpus, an env whose step takes less than this goes two or more to a worker
CHEAP_STEP_SECONDS = 50e-6


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
    the last envs this process steps, and why. The options as configured (``timeout`` ``inf``
    is None); ``images``: ``subproc-atari``; ``fallback``: ``auto``; ``load``: other programs'
    running threads (None: sampled if needed); ``probe``: one env step's seconds; ``cpus``:
    the workers' cores (None: this machine's). Raises ``OptionError``/``ConfigError``.

    Example:
        >>> plan_split(5, in_series=2).workers
        (2, 2, 1)
        >>> plan_split(4, in_series=2, in_parent=1).slices()
        [(0, 2), (2, 3)]
    """
    check_split(num_envs, batch_size, in_parent, "vectorizer")
    cpus = cpus or os.cpu_count() or 1
    if batch_size is not None:  # one worker per core, none with more envs than a batch
        reason = f"the async pool (batch_size={batch_size}), every env in a worker"
        if in_series is None:
            in_series = min(math.ceil(num_envs / cpus), batch_size)
        else:
            reason += f"; in_series={in_series} as configured"
        return Split(tuple(b - a for a, b in split_envs(num_envs, in_series)), 0, reason)
    if load is None and (in_series is None or in_parent is None):
        load = others_running()
    seen = f"load {load or 0.0:.1f} running threads of other programs on {cpus} cpu"
    seen += "s" if cpus != 1 else ""
    asked = {"in_series": in_series, "timeout": timeout is not None, "restart": restart}
    needs = [k for k, v in asked.items() if v]
    share = 0 if in_parent is None else int(in_parent)
    if in_parent is None and not needs and cpus - (load or 0.0) < 1.5 and fallback:
        return Split(
            (),
            num_envs,
            "auto fell back to every env in this process: no core free for a worker at build "
            f"time ({seen}; a worker needs two free cores, one for it and one for this process)",
        )
    if in_parent is None and not needs and cpus >= 2:  # a worker's share while a core is idle
        share = num_envs // cpus  # as many as each of the cpus - 1 workers
        if (load or 0.0) > cpus - 1 - min(cpus - 1, num_envs - share) + 0.5:
            share = 0  # no core left for this process
    if in_series is not None:
        parts = [f"in_series={in_series} as configured"]
    else:  # one worker per core free (a core left to this process's share)
        free = cpus - round(load or 0.0)
        if share:
            workers, why = max(1, cpus - 1), "one worker per core but the one left to this process"
        elif images:
            workers, why = cpus, "one worker per cpu (subproc-atari: image envs, whatever the load)"
        elif 0 < free < cpus:
            workers, why = free, "one worker per core free at build time"
        else:
            idle = "no core" if free <= 0 else "every core"
            workers, why = cpus, f"one worker per cpu ({idle} free at build time)"
        in_series = math.ceil((num_envs - share) / workers)
        fewer = math.ceil(num_envs / max(1, cpus // 2))  # one worker per two cpus
        if probe is not None and not share and not images and cpus >= 8 and fewer > in_series:
            seconds = probe()  # (on 8+ cpus, for a step under `CHEAP_STEP_SECONDS`)
            if seconds is not None and seconds < CHEAP_STEP_SECONDS:
                in_series = fewer
                why = (
                    f"one worker per two cpus (a cheap env: a step of {seconds * 1e6:.0f} us, "
                    f"under {CHEAP_STEP_SECONDS * 1e6:.0f} us, on 8+ cpus)"
                )
        parts = [f"in_series null: {why}"]
    counts = tuple(b - a for a, b in split_envs(num_envs - share, in_series))
    if in_parent is not None:
        why = "every env isolated in a worker" if in_parent == 0 else "as configured"
        parts.append(f"in_parent={in_parent} ({why})")
    elif share:
        parts.append(f"in_parent null: this process steps {share} (a core was idle)")
    else:
        if needs:
            why = f"{', '.join(needs)} set (an env in this process can be neither timed out "
            why += "nor restarted)" if set(needs) - {"in_series"} else "nor split by in_series)"
        elif cpus < 2 or sum(counts) < cpus:
            why = "fewer envs than cpus"
        else:
            why = "no core idle for this process"
        parts.append(f"in_parent null: none in this process: {why}")
    if load is not None:
        parts.append(seen)
    return Split(counts, share, "; ".join(parts))


def others_running(samples: int = 8, gap: float = 0.001) -> float:
    """Other programs' running threads now (``/proc/loadavg``, this program's helpers left out)."""
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
    for path in (p for pid in pids for p in glob.glob(f"/proc/{pid}/task/*/stat")):
        try:
            with open(path, "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited
        n += stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"R"
    return n
