"""What a vectorized env did and why it is built as it is: `RunRecord`, read through
`VecEnvBase.run_record` (the command's summary, ``summary.json``, the sweep table)."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RunRecord", "Split", "WorkerRestarts", "run_record_of"]


@dataclass(frozen=True)
class Split:
    """The plan (`plan_split`): the build starts one worker per `slices` entry and steps the
    last ``in_parent`` envs itself.

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
            most = max(self.workers)
            each = "-".join(map(str, sorted({min(self.workers), most})))
            where = (
                f"{n} worker{'s' if n != 1 else ''} x {each} env{'s' if most != 1 else ''}, "
                f"{self.in_parent} in this process"
            )
        return f"{where}: {self.reason}" if self.reason else where

    def slices(self) -> list[tuple[int, int]]:
        """``[(start, stop), ...]``: each worker's envs (this process's are after the last)."""
        stops = list(itertools.accumulate(self.workers))
        return list(zip([0, *stops], stops))


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
    """What a vectorized env did and how it was built (`VecEnvBase.run_record`).

    Attributes:
        built: the class that was built (``DummyVecEnv``, ``SubprocVecEnv``, ...).
        split: how its envs were placed and why (None: nothing decided at build time).
        restarts: the workers restarted so far, in the order of their first restart.
    """

    built: str
    split: Split | None = None
    restarts: tuple[WorkerRestarts, ...] = ()

    @property
    def restart_count(self) -> int:
        """Restarts of every worker together."""
        return sum(r.count for r in self.restarts)

    def as_dict(self) -> dict[str, Any]:
        """The summary's fields (``summary.json``)."""
        out: dict[str, Any] = {"built": self.built, "restarts": self.restart_count}
        if self.split is not None:
            out["split"] = {**asdict(self.split), "workers": list(self.split.workers)}
        if self.restarts:
            out["restarts_by_worker"] = [asdict(r) for r in self.restarts]
        return out


def run_record_of(env: Any) -> RunRecord:
    """The `RunRecord` of a vectorized env (its vector wrappers looked through)."""
    inner = getattr(env, "unwrapped", env)
    handles = [h for h in getattr(inner, "workers", None) or () if getattr(h, "restarts", None)]
    restarts = (  # (monotonic times: the first restart first)
        WorkerRestarts(int(h.index), len(h.restarts), str(getattr(h, "restart_cause", "")))
        for h in sorted(handles, key=lambda h: h.restarts[0])
    )
    return RunRecord(type(inner).__name__, getattr(inner, "split", None), tuple(restarts))
