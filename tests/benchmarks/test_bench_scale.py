"""``benchmarks/bench.py --scale``: the many-core table (issue 19.6) runs on any machine,
prints every row it measured with ratios from the run, and writes its samples (after
every round, so a run cut short keeps them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_scale_prints_rows_and_ratios_and_writes_samples(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--scale", "--workloads", "CartPole",
         "--sizes", "2", "--rounds", "1", "--seconds", "0.2", "--out", str(out),
         "--plot", str(tmp_path / "scale.png")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    head = re.search(r"^\| envs \| (.*) \|$", proc.stdout, re.M)
    assert head, proc.stdout
    names = head.group(1).split(" | ")
    assert names[:5] == ["raw limit", "dummy", "subproc", "subproc pool (batch n/2)", "gym-async"]
    assert "subproc / dummy" in names and "subproc / gym-async" in names
    row = re.search(r"^\| 2 \| (.*) \|$", proc.stdout, re.M)
    assert row, proc.stdout
    cells = row.group(1).split(" | ")
    assert len(cells) == len(names)
    measured = [int(c.replace(",", "")) for c in cells[:5]]
    assert all(v > 0 for v in measured)
    ratio = float(cells[names.index("subproc / dummy")].rstrip("x"))
    assert abs(ratio - measured[2] / measured[1]) < 0.01  # the ratio is of this run's cells
    data = json.loads(out.read_text())
    assert data["rounds_done"] == 1 and data["machine"]["cpus"] >= 1
    got = {(s["workload"], s["num_envs"], s["variant"]) for s in data["samples"]}
    assert ("CartPole", 2, "subproc") in got and ("CartPole", 2, "gym-async") in got
    assert (tmp_path / "scale.png").stat().st_size > 10_000  # --plot: the medians drawn
    again = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--plot", str(tmp_path / "again.png"),
         "--plot-from", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("n", "batch", "cpus", "workers"),
    [
        (8, 8, 2, 1),  # a core left for PufferLib's busy-waiting main process
        (8, 4, 2, 2),  # a batch of n/2 must be whole workers: two, even on 2 cores
        (16, 16, 16, 8),  # at most 15, and a count that divides 16
        (64, 32, 16, 8),
        (1, 1, 16, 1),
        (6, 3, 16, 6),
    ],
)
def test_puffer_gets_a_core_less_than_the_machine(
    n: int, batch: int, cpus: int, workers: int
) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench
    finally:
        sys.path.remove(str(BENCH))
    assert bench.puffer_workers(n, batch, cpus) == workers


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--scale", "--workloads", "Foo"],
            "invalid choice: 'Foo' (choose from 'CartPole', 'Pong')",
        ),
        (["--scale", "--sizes", "0"], "argument --sizes: must be above 0 (and finite), got 0"),
        (["--load", "--seconds", "-1"], "argument --seconds: must be above 0 (and finite), got -1"),
        (["--load", "--seconds", "inf"], "must be above 0 (and finite), got inf"),
        (["--scale", "--sizes"], "argument --sizes: expected at least one argument"),
        (["--scale", "--startup"], "argument --startup: not allowed with argument --scale"),
        (
            ["--scale", "--quick"],
            "--quick shortens the full run only; leave it out with a section flag",
        ),
        (
            ["--load", "--plot", "x.png"],
            "--plot draws the full run's or --scale's table; leave it out with this section",
        ),
        (["--pool", "--old", "."], "--old and --cases go with --scale"),
        (
            ["--scale", "--cases", "envpol sync"],
            "invalid choice: 'envpol sync' (choose from 'raw limit', 'dummy', 'subproc', "
            "'subproc-atari', 'subproc pool', 'subproc-atari pool', 'gym-async', "
            "'pufferlib-mp', 'envpool sync', 'envpool async', 'AtariVectorEnv')",
        ),
        (["--scale", "--old", "/nope"], "'/nope' is not an envfactory checkout (no envfactory/)"),
        (["--scale", "--ray-nodes", "2"], "--ray-nodes goes with --ray"),
        (["--ray", "--ray-nodes", "0"], "--ray-nodes: must be above 0 (and finite), got 0"),
    ],
)
def test_bad_arguments_are_one_line_before_anything_runs(args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(says), proc.stderr
    assert "Traceback" not in proc.stderr


def _table(stdout: str) -> tuple[list[str], list[str]]:
    """The first table's column names and its first row's cells."""
    head = re.search(r"^\| envs \| (.*) \|$", stdout, re.M)
    row = re.search(r"^\| \d+ \| (.*) \|$", stdout, re.M)
    assert head and row, stdout
    return head.group(1).split(" | "), row.group(1).split(" | ")


@pytest.mark.slow  # two fresh interpreters build a subproc each
def test_old_measures_our_row_from_the_other_checkout_and_cases_picks_rows(
    tmp_path: Path,
) -> None:
    """``--old`` adds our row measured from another checkout (each tree in a fresh
    interpreter) with the ratio new / old; ``--cases`` measures only the rows named. A
    checkout whose envfactory cannot be imported proves which tree the row used: its
    failure is named and the other rows are still printed."""
    root = BENCH.parent
    args = [sys.executable, str(BENCH / "bench.py"), "--scale", "--workloads", "CartPole",
            "--sizes", "2", "--rounds", "1", "--seconds", "0.2", "--cases", "raw limit",
            "subproc"]  # fmt: skip
    proc = subprocess.run(
        [*args, "--old", str(root), "--out", str(tmp_path / "a.json")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    names, cells = _table(proc.stdout)
    assert names == ["raw limit", "subproc", "subproc (old)", "subproc / raw limit",
                     "subproc / subproc (old)"]  # fmt: skip
    new, old = (int(c.replace(",", "")) for c in cells[1:3])
    assert new > 0 and old > 0
    assert abs(float(cells[4].rstrip("x")) - new / old) < 0.01

    broken = tmp_path / "broken"
    shutil.copytree(root / "envfactory", broken / "envfactory")
    (broken / "envfactory" / "__init__.py").write_text("raise ImportError('the old tree')\n")
    proc = subprocess.run(
        [*args, "--old", str(broken), "--out", str(tmp_path / "b.json")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"subproc (old): RuntimeError('the sync row failed in {broken}" in proc.stderr
    assert "ImportError: the old tree" in proc.stderr
    names, _ = _table(proc.stdout)
    assert names == ["raw limit", "subproc", "subproc / raw limit"]


def test_raw_limit_says_when_a_process_dies_instead_of_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import peers
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(peers, "_raw_worker", lambda *a: os._exit(3))  # (forked: inherited)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="ended with exit code 3"):
        peers.raw_limit("CartPole", 2, 0.1)
    assert time.monotonic() - t0 < 30
