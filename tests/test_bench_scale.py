"""``benchmarks/bench.py --scale``: the many-core table (issue 19.6) runs on any machine,
prints every row it measured with ratios from the run, and writes its samples (after
every round, so a run cut short keeps them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_scale_prints_rows_and_ratios_and_writes_samples(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--scale", "--workloads", "CartPole",
         "--sizes", "2", "--rounds", "1", "--seconds", "0.2", "--out", str(out)],
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
