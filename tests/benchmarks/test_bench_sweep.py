"""``benchmarks/bench.py --sweep``: four joblib jobs step CartPole at once, under each
vectorizer, and the table and issue 19's target row are printed with ratios from the run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow  # four jobs build and step vec envs twice: ~20 s
def test_sweep_prints_totals_and_the_target(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--sweep", "--rounds", "1", "--seconds", "0.5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    rows = dict(re.findall(r"^\| (dummy|subproc|auto) \| ([\d,]+) \|", proc.stdout, re.M))
    assert set(rows) == {"dummy", "subproc", "auto"}
    assert all(int(v.replace(",", "")) > 0 for v in rows.values())
    assert re.search(
        r"^\| parallel sweep, 4 jobs x CartPole 8: subproc / dummy \(issue 19\) >= 0\.9x "
        r"\| \d+\.\d\dx \| (yes|NO) \|$",
        proc.stdout,
        re.M,
    ), proc.stdout
    assert re.search(
        r"^\| parallel sweep, 4 jobs x CartPole 8: auto \(recommended for speed\) / dummy "
        r"\(issue 26\) >= 0\.9x \| \d+\.\d\dx \| (yes|NO) \|$",
        proc.stdout,
        re.M,
    ), proc.stdout
