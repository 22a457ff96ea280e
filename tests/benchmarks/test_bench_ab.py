"""``benchmarks/ab.py``: old and new trees measured in one run, rows interleaved."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AB = ROOT / "benchmarks" / "ab.py"


@pytest.mark.slow  # a few fresh interpreters, each building a vectorized env
def test_ab_prints_each_trees_rows_against_the_ceiling() -> None:
    args = ["--old", str(ROOT), "--workload", "CartPole", "--num-envs", "4"]
    args += ["--rounds", "1", "--seconds", "0.2"]
    proc = subprocess.run(
        [sys.executable, str(AB), *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| ") and "x |" in ln]
    names = [r.split("|")[1].strip() for r in rows]
    assert names == [
        "ceiling",
        "subproc pool (batch_size=2), old",
        "subproc pool (batch_size=2), new",
        "subproc, old",
        "subproc, new",
        "subproc (in_series=2), old",
        "subproc (in_series=2), new",
    ], proc.stdout
    assert rows[0].endswith("| 1.00x |")
    assert all(float(r.split("|")[2].replace(",", "")) > 0 for r in rows)


def test_ab_refuses_a_folder_that_is_not_a_checkout_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(AB), "--old", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert "is not an envfactory checkout" in last and str(tmp_path) in last
