"""The training examples in ``examples/`` run as a user runs them (a subprocess each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def run_example(script: str, args: list[str], timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="envfactory-sb3-") as tmp:
        return _run(script, args, Path(tmp) / "summary.json", timeout)


def _run(script: str, args: list[str], out: Path, timeout: float) -> dict:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        # (SB3's logger makes an SB3-<date> folder in the temp dir: ours, removed with it)
        env={**os.environ, "TMPDIR": str(out.parent)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "env time" in proc.stdout and "learner time" in proc.stdout, proc.stdout
    print(proc.stdout[-600:])
    return json.loads(out.read_text())


@pytest.mark.slow
def test_cleanrl_ppo_learns_cartpole() -> None:
    """The CleanRL-style loop (next_step autoreset) learns: the mean return of the last 20
    episodes passes 150 within 40,960 steps (a random policy gets ~22). Fixed seeds and one
    torch thread make the run reproducible: it stops at the target at step 24,088 (measured;
    ``vectorizer=subproc`` gives the same run, its trajectories being bit-identical), about
    20 s on a quiet 2-core machine, 90 s on a loaded one."""
    summary = run_example(
        "cleanrl_ppo.py",
        ["vectorizer=dummy", "--seed", "1", "--total-steps", "40960", "--target-return", "150"],
        timeout=280,
    )
    assert summary["reached_target_at_step"] is not None, summary
    assert summary["mean_return"] > 150 and summary["window"] == 20


@pytest.mark.slow
def test_sb3_ppo_runs_on_cartpole() -> None:
    """The SB3 script runs end to end through to_sb3 (a few updates, not learning)."""
    summary = run_example(
        "sb3_ppo.py", ["num_envs=4", "--total-steps", "512", "--log-every", "1"], 120
    )
    assert summary["steps"] >= 512 and summary["episodes"] > 0 and summary["policy"] == "MlpPolicy"


@pytest.mark.slow
def test_sb3_ppo_runs_on_atari() -> None:
    """The Atari example runs: SB3's CnnPolicy over env=atari (84x84x4 uint8, hwc; SB3
    transposes it) with subproc-atari workers, and logs."""
    summary = run_example(
        "sb3_ppo.py",
        [
            "env=atari",
            "env.id=ALE/Pong-v5",
            "vectorizer=subproc-atari",
            "num_envs=4",
            "--total-steps",
            "1024",
            "--log-every",
            "1",
        ],
        timeout=280,
    )
    assert summary["steps"] >= 1024 and summary["policy"] == "CnnPolicy"
