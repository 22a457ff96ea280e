"""``benchmarks/bench.py``'s targets table and memory line when a number could not be measured
(psutil, from the ``[bench]`` extra, missing): "not measured" with the install line, never a
NaN ratio marked as a missed target."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench


def test_a_memory_target_without_psutil_is_not_measured_not_missed() -> None:
    nan = float("nan")
    startup = {
        "envfactory": {"seconds": 1.0, "pss_mb": nan},
        "gym-async/forkserver": {"seconds": 2.0, "pss_mb": nan},
    }
    table = bench.render_targets([], [], startup)
    start, pss = [line for line in table.splitlines() if "(forkserver)" in line]
    assert start.endswith("| 0.50x | yes |")  # (measured: a ratio and its verdict)
    assert "not measured (psutil is missing: pip install -e '.[bench]')" in pss
    assert "NO" not in pss and "nan" not in pss


def test_peak_memory_without_psutil_is_not_measured() -> None:
    names = ("raw limit", "dummy", "gym-sync", "gym-async", "subproc")
    rows = [{"workload": "CartPole", "num_envs": 1, "variant": v, "steps_per_s": 1.0,
             "peak_rss_mb": 0.0 if v == "dummy" else float("nan")} for v in names]  # fmt: skip
    text = bench.render(rows, {"CartPole": {"dummy": 0.1}})
    assert "Peak RSS of parent + workers during CartPole runs: not measured (psutil" in text
