"""The parallel-sweep section of the benchmark (``bench.py --sweep``).

A Hydra sweep with the joblib launcher runs several jobs at once on one machine; with more
jobs than cores, every job's vec env shares the cores with the others (issue 19's "never
lose to one process"). Here ``jobs`` jobs (joblib's loky processes, as Hydra's joblib
launcher uses) each build CartPole with ``num_envs`` envs under one vectorizer and step it
with random actions; all of them count their steps over the same wall-clock window (they
start stepping together and warm up until it opens), and the row is the sum: total steps/s
of the sweep. Rounds are interleaved and every cell is a median, as in the rest of
bench.py; the ratio to ``dummy`` is from the same run.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

VECTORIZERS = ("dummy", "subproc", "auto")
#: the last run's medians: vectorizer -> total steps/s
MEDIANS: dict[str, float] = {}


def job(vectorizer: str, num_envs: int, opens: float, seconds: float, seed: int) -> int:
    """One sweep job: build, reset, step until the window ``[opens, opens + seconds)``
    (wall clock, ``time.time``) closes; the steps taken inside it, summed over envs."""
    import numpy as np

    import envfactory

    envs = envfactory.make_vec(
        overrides=[
            "env=gym", "env.id=CartPole-v1", f"num_envs={num_envs}", f"vectorizer={vectorizer}",
        ]
    )  # fmt: skip
    try:
        envs.reset(seed=seed)
        rng = np.random.default_rng(seed)
        bank = [rng.integers(0, 2, num_envs) for _ in range(64)]
        steps, k = 0, 0
        closes = opens + seconds
        while True:
            now = time.time()
            if now >= closes:
                break
            envs.step(bank[k % 64])
            k += 1
            if now >= opens:
                steps += num_envs
        return steps
    finally:
        envs.close()


def sweep_rate(vectorizer: str, jobs: int, num_envs: int, seconds: float, pool: Any) -> float:
    """Total steps/s of ``jobs`` jobs run at once (their window opens 3 s from now, time
    for each to build its vec env)."""
    from joblib import delayed

    opens = time.time() + 3.0
    counts = pool(delayed(job)(vectorizer, num_envs, opens, seconds, s) for s in range(jobs))
    return sum(counts) / seconds


def main(rounds: int = 3, seconds: float = 3.0, jobs: int = 4, num_envs: int = 8) -> str:
    """The table: total steps/s of the sweep under each vectorizer, and subproc / dummy."""
    from joblib import Parallel

    rates: dict[str, list[float]] = {v: [] for v in VECTORIZERS}
    with Parallel(n_jobs=jobs, backend="loky") as pool:
        sweep_rate("dummy", jobs, num_envs, 0.5, pool)  # start the loky workers
        for r in range(rounds):
            for v in VECTORIZERS if r % 2 == 0 else VECTORIZERS[::-1]:
                rates[v].append(sweep_rate(v, jobs, num_envs, seconds, pool))
                print(f"round {r + 1}/{rounds} sweep {jobs} jobs x CartPole {num_envs}  {v:8s}"
                      f" {rates[v][-1]:9.0f} steps/s", flush=True)  # fmt: skip
    med = {v: statistics.median(x) for v, x in rates.items()}
    MEDIANS.update(med)
    lines = [
        f"## A parallel sweep: {jobs} joblib jobs x CartPole {num_envs} envs at once",
        "",
        "| vectorizer | total steps/s | / dummy |",
        "|---|---|---|",
    ]
    for v in VECTORIZERS:
        lines.append(f"| {v} | {med[v]:,.0f} | {med[v] / med['dummy']:.2f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(main())
