"""What a vectorized env did and why it is built as it is: the typed record read through
[`VecEnvBase.run_record`][envfactory.VecEnvBase.run_record], which the
``envfactory`` command prints in its summary, saves in ``summary.json`` and shows in the
sweep table.

Two facts, each kept where it is decided:

* **the split** ([`Split`][envfactory.vectorizers.record.Split]): how many envs each worker
  got, how many this process steps itself, and why (``auto``'s fallback to every env in this
  process, ``subproc``'s default split from the cores free at build time). A build function
  that decides it sets ``envs.split`` once, before returning the env (`explain_split`);
  an env built directly has none.
* **the restarts** ([`WorkerRestarts`][envfactory.vectorizers.record.WorkerRestarts]): per
  worker rebuilt with ``vectorizer.restart=true``, how many times and the first cause, read
  from the worker handles (``WorkerHandle.restarts``, ``WorkerHandle.restart_cause``).

Example:
    >>> import envfactory
    >>> with envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"]) as envs:
    ...     record = envs.run_record
    >>> record.built, record.restart_count, record.split
    ('DummyVecEnv', 0, None)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RunRecord",
    "Split",
    "WorkerRestarts",
    "explain_split",
    "fallback_split",
    "run_record_of",
]


@dataclass(frozen=True)
class Split:
    """How a vectorizer placed its envs, decided once before any env was built.

    Attributes:
        workers: envs per worker process, in worker order (empty: every env in this process).
        in_parent: envs this process steps itself (the last ones).
        reason: why, in words (the options that decided it, the load seen at build time).
    """

    workers: tuple[int, ...]
    in_parent: int
    reason: str

    def describe(self) -> str:
        """``2 workers x 8 envs, 0 in this process: <reason>``."""
        n = len(self.workers)
        if not n:
            where = f"every env ({self.in_parent}) in this process"
        else:
            sizes = sorted(set(self.workers))
            each = str(sizes[0]) if len(sizes) == 1 else "-".join(map(str, (sizes[0], sizes[-1])))
            where = (
                f"{n} worker{'s' if n != 1 else ''} x {each} env{'s' if sizes[-1] != 1 else ''}, "
                f"{self.in_parent} in this process"
            )
        return f"{where}: {self.reason}" if self.reason else where


@dataclass(frozen=True)
class WorkerRestarts:
    """One worker's restarts (``vectorizer.restart=true``).

    Attributes:
        worker: the worker's index (``worker 1`` in messages).
        count: how many times it was rebuilt.
        first_cause: the first failure that rebuilt it, on one line.
    """

    worker: int
    count: int
    first_cause: str


@dataclass(frozen=True)
class RunRecord:
    """What a vectorized env did and how it was built: what
    [`VecEnvBase.run_record`][envfactory.VecEnvBase.run_record] returns.

    Attributes:
        built: the class that was built (``DummyVecEnv``, ``SubprocVecEnv``, ...).
        split: how its envs were placed and why (None: nothing was decided at build time,
            as ``dummy``'s).
        restarts: the workers restarted so far, in the order of their first restart (the
            first one's ``first_cause`` is the run's first; empty: none).
    """

    built: str
    split: Split | None = None
    restarts: tuple[WorkerRestarts, ...] = ()

    @property
    def restart_count(self) -> int:
        """Restarts of every worker together."""
        return sum(r.count for r in self.restarts)

    def as_dict(self) -> dict[str, Any]:
        """The summary's fields (``summary.json``): ``built``, ``split`` (workers, in_parent,
        reason) and ``restarts`` (the total) with ``restarts_by_worker``."""
        out: dict[str, Any] = {"built": self.built, "restarts": self.restart_count}
        if self.split is not None:
            out["split"] = {
                "workers": list(self.split.workers),
                "in_parent": self.split.in_parent,
                "reason": self.split.reason,
            }
        if self.restarts:
            out["restarts_by_worker"] = [
                {"worker": r.worker, "count": r.count, "first_cause": r.first_cause}
                for r in self.restarts
            ]
        return out


def run_record_of(env: Any) -> RunRecord:
    """The [`RunRecord`][envfactory.vectorizers.record.RunRecord] of a vectorized env (its
    vector wrappers looked through): its ``split`` and its workers' restarts (a worker's
    ``restarts`` are its restart times, ``restart_cause`` the first one's cause)."""
    inner = getattr(env, "unwrapped", env)
    handles = [h for h in getattr(inner, "workers", None) or () if getattr(h, "restarts", None)]
    handles.sort(key=lambda h: h.restarts[0])  # (monotonic times: the first restart first)
    restarts = tuple(
        WorkerRestarts(int(h.index), len(h.restarts), str(getattr(h, "restart_cause", "")))
        for h in handles
    )
    return RunRecord(type(inner).__name__, getattr(inner, "split", None), restarts)


def _load_words(load: float | None) -> str:
    cpus = os.cpu_count() or 1
    seen = "not sampled" if load is None else f"{load:.1f} running threads of other programs"
    return f"load {seen} on {cpus} cpu{'s' if cpus != 1 else ''}"


def explain_split(
    requested: Mapping[str, Any], workers: list[int], in_parent: int, load: float | None
) -> Split:
    """The [`Split`][envfactory.vectorizers.record.Split] a ``subproc``-family build
    decided: ``requested`` are the vectorizer's options as configured (``in_series``,
    ``in_parent``, ``timeout``, ``restart``, ``batch_size``), ``workers`` and ``in_parent``
    what was built, ``load`` what the build sampled (`others_running`; None: not sampled,
    because nothing was left to the cores free)."""
    parts: list[str] = []
    batch = requested.get("batch_size")
    series = requested.get("in_series")
    if batch is not None:
        parts.append(f"the async pool (batch_size={batch}), every env in a worker")
    if series is not None:
        parts.append(f"in_series={series} as configured")
    elif batch is None:
        share = " but the one left to this process" if in_parent else ""
        if not in_parent and (os.cpu_count() or 1) >= 8:
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
        cpus = os.cpu_count() or 1
        if needs:
            why = f"{', '.join(needs)} set (an env in this process can be neither timed out "
            why += "nor restarted)" if set(needs) - {"in_series"} else "nor split by in_series)"
        elif cpus < 2 or sum(workers) < cpus:
            why = "fewer envs than cpus"
        else:
            why = "no core idle for this process"
        parts.append(f"in_parent null: none in this process: {why}")
    if load is not None or (series is None and batch is None):
        parts.append(_load_words(load))
    return Split(tuple(workers), in_parent, "; ".join(parts))


def fallback_split(num_envs: int, load: float | None) -> Split:
    """``auto``'s fallback: every env in this process, because no core was free for a worker
    when it was built (``load``: other programs' running threads it saw)."""
    return Split(
        (),
        num_envs,
        f"auto fell back to every env in this process: no core free for a worker at build "
        f"time ({_load_words(load)}; a worker needs two free cores, one for it and one for "
        "this process)",
    )
