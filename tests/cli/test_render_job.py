"""The render job (``envfactory job=render``): a real CLI subprocess writes a tiled PNG and an
MP4 into its Hydra run dir; the test opens both with OpenCV."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

BIN = Path(sys.executable).parent


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HYDRA_FULL_ERROR",)}
    env.pop("ENVFACTORY_DISABLED_PLUGINS", None)
    return subprocess.run(
        [str(BIN / "envfactory"), *args, "run.progress=false"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize(
    ("overrides", "num_envs", "frame_hw", "grid"),
    [
        (["env=gym", "vectorizer=dummy"], 4, (400, 600), (2, 2)),
        (["env=pong", "vectorizer=subproc-atari"], 2, (210, 160), (1, 2)),
    ],
    ids=["cartpole-4", "pong-subproc-atari-2"],
)
def test_render_job_writes_tiled_png_and_mp4(
    tmp_path: Path,
    overrides: list[str],
    num_envs: int,
    frame_hw: tuple[int, int],
    grid: tuple[int, int],
) -> None:
    steps = 12
    out = tmp_path / "run"
    proc = _cli(
        [
            "job=render",
            *overrides,
            f"num_envs={num_envs}",
            f"run.render_steps={steps}",
            "seed=3",
            f"hydra.run.dir={out}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "render.png" in proc.stdout
    (fh, fw), (rows, cols) = frame_hw, grid
    img = cv2.imread(str(out / "render.png"))
    assert img is not None and img.shape == (rows * fh, cols * fw, 3)
    assert img.std() > 0
    panels = [
        img[r * fh : (r + 1) * fh, c * fw : (c + 1) * fw] for r in range(rows) for c in range(cols)
    ]
    assert len(panels) == num_envs  # one panel per env, no padding panel in these grids
    for p in panels:  # every env drew something: no constant panel
        assert p.std() > 0
    # different seeds per env: the envs' frames are not all the same picture
    assert any(not np.array_equal(panels[0], p) for p in panels[1:])
    cap = cv2.VideoCapture(str(out / "render.mp4"))
    try:
        assert cap.isOpened()
        assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == steps
        assert int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)) == cols * fw
        assert int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)) == rows * fh
        frames = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            assert frame.shape == (rows * fh, cols * fw, 3)
            frames += 1
        assert frames == steps
    finally:
        cap.release()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["job"] == "render" and summary["status"] == "ok"
    assert summary["image_size"] == [cols * fw, rows * fh]


def test_render_job_bad_option_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _cli(["job=render", "run.render_steps=0", f"hydra.run.dir={tmp_path / 'r'}"], tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "envfactory: error: run.render_steps=0: expected an integer >= 1 (the render job's "
        "vector steps); set run.render_steps=30, say"
    ]
    assert not (tmp_path / "r" / "render.png").exists()


def test_render_job_of_an_env_without_rgb_array_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An env whose render modes lack rgb_array was refused with the gym family's "valid
    choices: human, or null": null, which the render job cannot use."""
    (tmp_path / "human_only.py").write_text(
        "import gymnasium as gym\n"
        "from gymnasium.envs.classic_control import CartPoleEnv\n"
        "class HumanOnly(CartPoleEnv):\n"
        "    metadata = {'render_modes': ['human'], 'render_fps': 50}\n"
        "gym.register('HumanOnly-v0', entry_point=HumanOnly)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    proc = _cli(["job=render", "env.id=human_only:HumanOnly-v0", "hydra.run.dir=r"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "envfactory: error: run.job=render: human_only:HumanOnly-v0 cannot render rgb_array "
        "frames (its render modes: human); render an env that can, or use run.job=rollout"
    ]


def test_unknown_job_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _cli(["run.job=paint", f"hydra.run.dir={tmp_path / 'r'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and "run.job" in lines[0] and "paint" in lines[0], lines
    assert "render" in lines[0]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_render_job_resets_finished_envs_under_disabled_autoreset(tmp_path: Path) -> None:
    # CartPole's random episodes last about 20 steps: 60 steps finish several of them
    out = tmp_path / "run"
    proc = _cli(
        ["job=render", "autoreset_mode=disabled", "num_envs=2", "seed=0", f"hydra.run.dir={out}"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    cap = cv2.VideoCapture(str(out / "render.mp4"))
    try:
        assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 60
    finally:
        cap.release()


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_render_job_prints_no_sdl_warning(tmp_path: Path) -> None:
    """Issue 18: a successful render printed SDL's ``error: XDG_RUNTIME_DIR is invalid or not
    set in the environment.`` on a machine with no display session (no XDG_RUNTIME_DIR, no
    DISPLAY): the render job runs SDL headless, in the CLI and in its workers."""
    base = {k: v for k, v in os.environ.items() if k not in ("HYDRA_FULL_ERROR",)}
    base.pop("ENVFACTORY_DISABLED_PLUGINS", None)
    for key in (
        "XDG_RUNTIME_DIR",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "SDL_VIDEODRIVER",
        "SDL_AUDIODRIVER",
    ):
        base.pop(key, None)
    cases = ["dummy", "subproc"]
    procs = [
        subprocess.Popen(
            [
                str(BIN / "envfactory"),
                "job=render",
                f"vectorizer={v}",
                "num_envs=2",
                "run.render_steps=2",
                "run.progress=false",
                f"hydra.run.dir={tmp_path / v}",
            ],
            cwd=tmp_path,
            env=base,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for v in cases
    ]
    for v, proc in zip(cases, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert err == "", (v, err)
        assert out.startswith("envfactory render: CartPole-v1 x2: ")
        assert (tmp_path / v / "render.png").is_file()


def test_headless_sdl_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """SDL's drivers are set only while the render job runs, and never over the user's."""
    from envfactory.cli.render import headless_sdl

    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    monkeypatch.setenv("SDL_AUDIODRIVER", "pulse")
    with headless_sdl():
        assert os.environ["SDL_VIDEODRIVER"] == "dummy"
        assert os.environ["SDL_AUDIODRIVER"] == "pulse"  # the user's choice stays
    assert "SDL_VIDEODRIVER" not in os.environ and os.environ["SDL_AUDIODRIVER"] == "pulse"
