"""Throughput plots: the sweep summary's ``sweep_summary.png`` (a real ``-m`` sweep through
the CLI) and `envfactory.cli.plot.throughput_plot`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from envfactory.cli.plot import PLOT_SIZE, _series, throughput_plot

BIN = Path(sys.executable).parent
# matplotlib's first two default line colours (tab:blue, tab:orange), BGR as OpenCV reads
C0, C1 = (180, 119, 31), (14, 127, 255)


def _pixels_of(img: np.ndarray, bgr: tuple[int, int, int]) -> int:
    return int((np.abs(img.astype(int) - np.array(bgr)).sum(axis=2) < 30).sum())


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_sweep_writes_a_throughput_plot_next_to_its_table(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env.pop("ENVFACTORY_DISABLED_PLUGINS", None)
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [
            str(BIN / "envfactory"),
            "-m",
            "vectorizer=dummy,subproc",
            "num_envs=1,2",
            "run.total_steps=200",
            "run.progress=false",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    assert (sweep / "sweep_summary.md").exists()
    assert "sweep_summary.png" in proc.stdout
    img = cv2.imread(str(sweep / "sweep_summary.png"))
    assert img is not None
    assert img.shape == (PLOT_SIZE[1], PLOT_SIZE[0], 3)
    assert img.std() > 0
    # one line per vectorizer: two line colours, each drawn over many pixels
    assert _pixels_of(img, C0) > 200 and _pixels_of(img, C1) > 200
    assert _pixels_of(img, (40, 39, 214)) == 0  # no third line (tab:red would be C3)


def test_plot_lines_per_vectorizer_and_env_and_failed_rows_skipped(tmp_path: Path) -> None:
    rows = [
        {"env": "CartPole-v1", "vectorizer": "dummy", "num_envs": 4, "steps_per_second": 40.0},
        {"env": "CartPole-v1", "vectorizer": "dummy", "num_envs": 1, "steps_per_second": 10.0},
        {"env": "CartPole-v1", "vectorizer": "dummy", "num_envs": 1, "steps_per_second": 20.0},
        {"env": "ALE/Pong-v5", "vectorizer": "dummy", "num_envs": 1, "steps_per_second": 5.0},
        {"env": "CartPole-v1", "vectorizer": "subproc", "status": "failed", "num_envs": 2},
    ]
    assert _series(rows) == {
        "dummy (ALE/Pong-v5)": [(1, 5.0)],
        "dummy (CartPole-v1)": [(1, 15.0), (4, 40.0)],  # two runs at one point: averaged
    }
    out = throughput_plot(rows, tmp_path / "deep" / "p.png", title="t")
    assert out is not None
    img = cv2.imread(str(out))
    assert img is not None and img.shape == (PLOT_SIZE[1], PLOT_SIZE[0], 3)
    assert throughput_plot(rows[-1:], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_a_sweeps_other_overrides_are_other_lines_and_seeds_are_averaged() -> None:
    """A sweep over ``batch_size`` (or a preset whose vectorizer is still ``subproc``) draws
    one line per value, not their mean at one point; ``num_envs`` and seeds stay averaged."""

    def row(sps: float, *over: str, n: int = 8) -> dict:
        overrides = ["vectorizer=subproc", f"num_envs={n}", *over]
        return {"env": "CartPole-v1", "vectorizer": "subproc", "num_envs": n,
                "steps_per_second": sps, "overrides": overrides}  # fmt: skip

    rows = [
        row(30.0, "vectorizer.batch_size=2", "seed=0"),
        row(34.0, "vectorizer.batch_size=2", "seed=1"),
        row(40.0, "vectorizer.batch_size=4", "seed=0"),
        row(50.0, "vectorizer.batch_size=4", "seed=1"),
        row(60.0, "vectorizer.batch_size=4", "seed=0", n=16),
    ]
    assert _series(rows) == {
        "subproc vectorizer.batch_size=2": [(8, 32.0)],
        "subproc vectorizer.batch_size=4": [(8, 45.0), (16, 60.0)],
    }
    preset = [row(10.0), {**row(20.0), "overrides": ["vectorizer=subproc4", "num_envs=8"]}]
    assert _series(preset) == {"subproc": [(8, 10.0)], "subproc vectorizer=subproc4": [(8, 20.0)]}


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_bench_plot_one_png_per_workload(tmp_path: Path) -> None:
    """``bench.py --plot PATH --plot-from JSON`` (the plot a full run writes, from its JSON)."""
    import json

    results = [
        {"workload": "CartPole", "num_envs": n, "variant": v, "steps_per_s": sps}
        for v, pts in (("dummy", ((1, 50e3), (8, 90e3))), ("subproc", ((1, 15e3), (8, 50e3))))
        for n, sps in pts
    ] + [{"workload": "Pong", "num_envs": 8, "variant": "subproc-atari", "steps_per_s": 2.5e3}]
    src = tmp_path / "bench.json"
    src.write_text(json.dumps({"results": results}))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "bench.py"), "--plot", str(tmp_path / "b.png"),
         "--plot-from", str(src)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cart = cv2.imread(str(tmp_path / "b-CartPole.png"))
    pong = cv2.imread(str(tmp_path / "b-Pong.png"))
    assert cart is not None and pong is not None
    assert cart.shape == pong.shape == (PLOT_SIZE[1], PLOT_SIZE[0], 3)
    assert _pixels_of(cart, C0) > 200 and _pixels_of(cart, C1) > 200  # dummy, subproc
    assert _pixels_of(pong, C1) == 0  # one variant: one colour
    no_plot = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "bench.py"), "--plot-from", str(src)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert no_plot.returncode == 2 and "--plot-from needs --plot PATH" in no_plot.stderr
