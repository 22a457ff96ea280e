"""The Ray-launcher sweep of docs/guides/sweeps-and-ray.md, run as written (issue 27): the
block installs hydra-ray-launcher (``--no-deps``), starts a Ray cluster on this machine
(``ray start --head``), sweeps two jobs through it as Ray tasks and stops it. Each line runs
as a reader would run it (``bash -c``, this interpreter's ``bin/`` first on ``PATH``), in a
Ray temp dir of its own; whatever the block installed is uninstalled afterwards, and the
cluster is stopped even if a line fails."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "sweeps-and-ray.md"


def _block() -> list[str]:
    """The lines of the page's bash block that sweeps through the Ray launcher."""
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)
    block = next(b for b in blocks if "hydra/launcher=ray" in b and "ray start" in b)
    return [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _installed() -> set[str]:
    return {d.metadata["Name"] for d in importlib.metadata.distributions()}


@pytest.mark.slow  # pip installs the launcher and starts a Ray cluster (about 30 s)
def test_the_guides_ray_launcher_sweep_runs_as_written(tmp_path: Path) -> None:
    lines = _block()
    assert lines[0].startswith("pip install") and lines[-1] == "ray stop", lines
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # (short: Ray puts sockets there)
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_TMPDIR": ray_tmp,
        "RAY_ADDRESS": "",
    }
    before = _installed()
    out = ""
    try:
        for line in lines:
            proc = subprocess.run(
                ["bash", "-c", line],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, (line, proc.stdout[-3000:], proc.stderr[-3000:])
            assert "Traceback" not in proc.stderr, (line, proc.stderr[-3000:])
            if line.startswith("envfactory"):
                out = proc.stdout
    finally:
        subprocess.run(["ray", "stop", "--force"], env=env, capture_output=True, check=False)
        extra = sorted(_installed() - before)
        if extra:
            subprocess.run(
                [sys.executable, "-m", "pip", "uninstall", "-y", "-q", *extra],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert "envfactory sweep: 2 job(s)" in out, out[-3000:]
    summaries = [json.loads(p.read_text()) for p in tmp_path.rglob("summary.json")]
    assert sorted(s["num_envs"] for s in summaries) == [2, 4], summaries
    assert all(s["steps"] > 0 for s in summaries), summaries
