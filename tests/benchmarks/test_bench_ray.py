"""``benchmarks/bench.py --ray``: the Ray vectorizer against ``subproc`` in one run, on one
local Ray or (``--ray-nodes N``) a local cluster of N nodes, as issue 27's many-core target
is measured (2 nodes of 8 cpus on 16 cores)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("envfactory_ray")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow  # a local Ray cluster of two nodes starts (~10 s)
def test_ray_nodes_measures_on_a_local_cluster(tmp_path: Path) -> None:
    before = _raylets()
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--ray", "--ray-nodes", "2", "--workloads",
         "CartPole", "--sizes", "2", "--rounds", "1", "--seconds", "0.2"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 local nodes" in proc.stdout, proc.stdout
    row = re.search(r"^\| CartPole \| 2 \| (.*) \|$", proc.stdout, re.M)
    assert row, proc.stdout
    cells = row.group(1).split(" | ")
    sub, _, plain, local, graph = (c.replace(",", "") for c in cells[:5])
    assert int(sub) > 0 and int(plain) > 0 and int(local) > 0
    assert int(graph) > 0  # the node-local mode over a compiled graph
    assert all(re.fullmatch(r"[+-][\d,]+", c) for c in cells[8:10]), cells  # +us per step
    said = r"^Ray's own floor here: 2 do-nothing actors .* ([\d,]+) us a step as one task each, "
    floor = re.search(said + r"([\d,]+) us through one compiled graph", proc.stdout, re.M)
    assert floor and all(int(us.replace(",", "")) > 0 for us in floor.groups()), proc.stdout
    assert _raylets() <= before  # nothing of the cluster is left running


def _raylets() -> set[str]:
    """The pids of the raylets (one per Ray node) running now."""
    got = subprocess.run(["pgrep", "-x", "raylet"], capture_output=True, text=True)
    return set(got.stdout.split())
