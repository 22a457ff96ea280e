"""``benchmarks/cycle.py``: the anatomy of a synchronous ``subproc`` step is causal (no
worker starts a step before the parent posted it, none ends it before it started, the
parent's wait ends after the last worker's step: the stamps of one cycle are aligned)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_cycle_anatomy_is_causal() -> None:
    code = (
        "import json, cycle; "
        "print(json.dumps(cycle.anatomy('CartPole', 4, ['vectorizer.in_series=2'], 0.3)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=BENCH
    )  # (a fresh process: the workers import ``cycle`` from the benchmarks folder)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.splitlines()[-1])
    parts = {k: np.array(v) for k, v in res.items()}
    assert len(parts["cycle"]) > 100 and set(parts) == {
        "start 0", "work 0", "start 1", "work 1", "notice", "turnaround", "cycle",
    }  # fmt: skip
    for k in ("start 0", "start 1", "work 0", "work 1", "notice", "turnaround"):
        assert (parts[k] > 0).all(), k  # (misaligned stamps: a step "before" its post)


def test_the_cycle_command_prints_the_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "cycle.py"), "--num-envs", "2", "--seconds", "0.2"],
        capture_output=True, text=True, timeout=120, cwd=BENCH,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "cycles" in proc.stdout and "turnaround" in proc.stdout, proc.stdout
