"""The render job (``envfactory job=render``, i.e. ``run.job=render``): pictures of the
configured envs.

It forces ``env.render_mode=rgb_array``, resets with ``seed``, takes ``run.render_steps``
vector steps with ``run.policy`` and writes, in the Hydra run dir:

* ``render.png``: every env's frame after the last step, tiled row-major in a
  ``ceil(sqrt(num_envs))``-column grid ([`envfactory.tile_images`][envfactory.tile_images]; one
  panel per env, black padding);
* ``render.mp4``: the tiled frames, one per step (``run.render_steps`` frames at
  ``run.fps``), written with OpenCV's ``VideoWriter`` (``mp4v``); an odd width or height
  is padded by one black pixel (MPEG-4 needs even sizes).

Any family whose ``render()`` returns ``rgb_array`` frames works, Atari included (ALE's
full 210x160 RGB screen, whatever ``obs_type``). CartPole and MountainCar frames need
pygame (``pip install 'envfactory[render]'``); without it the job says so in one line
(`pygame_missing`). SDL, under pygame, is told to use no display and no audio device
while the job runs (`headless_sdl`), so it prints no warning about either.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

__all__ = [
    "MP4_FILE",
    "PNG_FILE",
    "force_rgb_array",
    "headless_sdl",
    "pygame_missing",
    "render_job",
    "tiled_frame",
]

PNG_FILE = "render.png"
MP4_FILE = "render.mp4"


def force_rgb_array(cfg: DictConfig) -> None:
    """Set ``env.render_mode=rgb_array``; a family without ``render_mode`` is a config error."""
    from envfactory.errors import ConfigError

    env = cfg.get("env")
    family = OmegaConf.select(cfg, "env.family", default=None)
    if not isinstance(env, DictConfig) or "render_mode" not in env:
        raise ConfigError(
            f"run.job=render: env family {family!r} has no render_mode option, so it cannot "
            "render rgb_array frames; use a family that has one (gym, atari) or run.job=rollout"
        )
    env_id = env.get("id") if family == "gym" else None
    if isinstance(env_id, str):  # (the gym family's own check would offer null)
        from envfactory.families.gym import render_modes

        modes = render_modes(env_id)
        if modes is not None and "rgb_array" not in modes:
            raise ConfigError(
                f"run.job=render: {env_id} cannot render rgb_array frames (its render "
                f"modes: {', '.join(modes) or 'none'}); render an env that can, or use "
                "run.job=rollout"
            )
    with open_dict(cfg):
        cfg.env.render_mode = "rgb_array"


#: SDL's drivers for pictures drawn off-screen (``rgb_array``): no display, no sound card
_SDL_HEADLESS = {"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"}


@contextmanager
def headless_sdl() -> Iterator[None]:
    """While the render job runs (its worker processes start inside): SDL's dummy video and
    audio drivers, unless the user set them. pygame draws ``rgb_array`` frames off-screen;
    without this SDL probes for a display and prints ``XDG_RUNTIME_DIR is invalid or not
    set`` on a machine without one. ``os.environ`` is restored afterwards, so nothing else
    (a later job of a sweep, the user's shell) sees the change."""
    added = [k for k in _SDL_HEADLESS if k not in os.environ]
    os.environ.update({k: _SDL_HEADLESS[k] for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def pygame_missing(exc: BaseException, env: str) -> Exception | None:
    """The one-line config error for a render that failed because pygame is not installed
    (gymnasium's ``DependencyNotInstalled`` or the ``ImportError``, in this process or in a
    worker's traceback), or None for any other failure."""
    from envfactory.errors import ConfigError, WorkerError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ImportError) and seen.name == "pygame":
            break
        text = seen.remote_traceback if isinstance(seen, WorkerError) else str(seen)
        if "pygame" in text and ("not installed" in text or "No module named" in text):
            break
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return None
    return ConfigError(
        f"run.job=render: {env} draws its frames with pygame, which is not installed; "
        "install it with pip install 'envfactory[render]' (Atari envs, env=pong, render "
        "without it)"
    )


def tiled_frame(envs: Any) -> np.ndarray:
    """Every env's current ``render()`` frame tiled into one HxWx3 uint8 image."""
    from envfactory import tile_images
    from envfactory.errors import EnvfactoryError

    frames = list(envs.render())
    for i, f in enumerate(frames):
        shape = getattr(f, "shape", None)
        if shape is None or len(shape) != 3 or shape[2] != 3:
            raise EnvfactoryError(
                f"run.job=render: env {i}'s render() returned "
                f"{type(f).__name__} {shape if shape is not None else ''}, not an HxWx3 "
                "rgb_array frame; this family does not render rgb_array"
            )
    return np.ascontiguousarray(tile_images(frames), dtype=np.uint8)


def render_job(cfg: DictConfig, envs: Any, out_dir: Path) -> dict[str, Any]:
    """Reset, step ``run.render_steps`` times, write ``render.png`` and ``render.mp4`` into
    ``out_dir``; returns what it wrote (paths, frame count, sizes)."""
    import cv2

    from envfactory.cli.rollout import is_disabled_autoreset, noop_action
    from envfactory.errors import EnvfactoryError

    steps, fps = int(cfg.run.render_steps), int(cfg.run.fps)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, mp4 = out_dir / PNG_FILE, out_dir / MP4_FILE
    envs.reset(seed=cfg.seed)
    envs.action_space.seed(cfg.seed)
    policy = str(getattr(cfg.run.policy, "value", cfg.run.policy))
    noop = noop_action(envs.action_space) if policy == "noop" else None
    disabled = is_disabled_autoreset(envs)
    frame = tiled_frame(envs)
    h, w = frame.shape[:2]
    vh, vw = h + h % 2, w + w % 2  # MPEG-4 wants even sizes
    fourcc = cv2.VideoWriter_fourcc(*"mp4v")  # type: ignore[attr-defined]
    writer = cv2.VideoWriter(str(mp4), fourcc, fps, (vw, vh))
    if not writer.isOpened():
        raise EnvfactoryError(f"run.job=render: OpenCV cannot write {mp4} (mp4v codec)")
    try:
        for _ in range(steps):
            _, _, term, trunc, _ = envs.step(envs.action_space.sample() if noop is None else noop)
            done = np.logical_or(term, trunc)
            if disabled and done.any():  # as the rollout: reset the finished envs
                envs.reset(options={"reset_mask": done})
            frame = tiled_frame(envs)
            padded = np.zeros((vh, vw, 3), np.uint8)
            padded[:h, :w] = frame
            writer.write(cv2.cvtColor(padded, cv2.COLOR_RGB2BGR))
    finally:
        writer.release()
    if not cv2.imwrite(str(png), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)):
        raise EnvfactoryError(f"run.job=render: OpenCV cannot write {png}")
    return {
        "png": str(png),
        "mp4": str(mp4),
        "frames": steps,
        "fps": fps,
        "image_size": [int(w), int(h)],
        "video_size": [int(vw), int(vh)],
    }
