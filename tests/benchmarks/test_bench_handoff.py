"""``benchmarks/handoff.py``: the parent's CPU per step on a do-nothing env against
``dummy`` with issue 26's bound, the functions one step enters, and (``--workload``) the
parent's CPU per batch of a real workload."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "handoff.py"), *args],
        capture_output=True, text=True, timeout=300, cwd=BENCH,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_handoff_prints_the_parent_cpu_and_the_step_shape() -> None:
    out = _run("--workers", "1", "--steps", "300", "--rounds", "1", "--no-pool")
    line = re.search(
        r"^1 workers: subproc +([\d.]+) +dummy +([\d.]+) +target <= +17 \((met|not met)\); "
        r"one step enters (\d+) envfactory functions in (\d+) modules "
        r"\((\d+) in (\d+) at an episode end\)$",
        out,
        re.M,
    )
    assert line, out
    assert float(line[1]) > 0 and float(line[2]) > 0 and int(line[4]) > 5, out
    assert int(line[6]) >= int(line[4]), out  # (an episode end enters at least as many)
    assert re.search(r"^one worker: subproc - dummy = -?[\d.]+ us \(target <= 5\)$", out, re.M)


def test_handoff_measures_a_real_workload() -> None:
    out = _run("--workload", "CartPole", "--num-envs", "4", "--rounds", "1",
               "vectorizer.in_series=2")  # fmt: skip
    assert re.search(
        r"^# this checkout: CartPole x4 subproc vectorizer\.in_series=2: parent CPU [\d.]+ us "
        r"per batch$",
        out,
        re.M,
    ), out
