"""``benchmarks/bench.py --train``: the training-loop section (CleanRL-style PPO over every
vectorizer and the peers) runs and prints its table and targets, skips with one line when
torch is missing, and its advantage estimates are GAE's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_gae_matches_the_recursion() -> None:
    """gamma 0.99, lambda 0.95; a done at step t cuts the bootstrap from t + 1."""
    sys.path.insert(0, str(BENCH))
    try:
        from train import gae
    finally:
        sys.path.remove(str(BENCH))
    rew = np.array([[1.0], [0.0], [2.0]], dtype=np.float32)
    val = np.array([[0.5], [0.2], [0.1]], dtype=np.float32)
    done = np.array([[0.0], [1.0], [0.0]], dtype=np.float32)
    last = np.array([0.3], dtype=np.float32)
    d2 = 2.0 + 0.99 * 0.3 - 0.1
    a2 = d2
    a1 = 0.0 - 0.2  # done: no bootstrap, no carry
    a0 = (1.0 + 0.99 * 0.2 - 0.5) + 0.99 * 0.95 * a1
    np.testing.assert_allclose(gae(rew, val, done, last)[:, 0], [a0, a1, a2], rtol=1e-6)


def test_train_skips_without_torch() -> None:
    code = (
        "import runpy, sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        f"sys.argv = ['bench.py', '--train']\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        f"runpy.run_path({str(BENCH / 'bench.py')!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "--train: torch is not installed (pip install torch==2.13.0): no training-loop rows"
    )


@pytest.mark.slow
def test_train_section_runs() -> None:
    pytest.importorskip("torch")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--train", "--workloads", "CartPole",
         "--sizes", "2", "--rounds", "1", "--seconds", "0.1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "**Training loop** (CleanRL-style PPO" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| CartPole (mlp) |")]
    names = [r.split(" | ")[1] for r in rows]
    expected = ["dummy", "subproc", "subproc pool (batch 1, async loop)", "gym-sync", "gym-async"]
    assert names[:5] == expected
    for r in rows:
        cells = r.strip("| ").split(" | ")
        assert float(cells[2].replace(",", "")) > 0
        assert 0 < int(cells[3].rstrip("%")) <= 100
    assert " | 1.00x | " in rows[0]
    assert "| training loop, CartPole: subproc / dummy >= 0.95x |" in out
    assert "| training loop, CartPole: subproc / gym-async >= 2x |" in out
