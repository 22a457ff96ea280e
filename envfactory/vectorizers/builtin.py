"""The built-in vectorizers, registered through the same hook as third parties."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from ..plugin.spec import hookimpl
from ..plugin.types import VectorizerPlugin
from .dummy import DummyConfig, build_dummy

__all__ = ["build_auto", "build_subproc", "build_subproc_atari", "envfactory_vectorizers"]


@hookimpl
def envfactory_vectorizers() -> list[VectorizerPlugin]:
    from .plan.launch import prestart
    from .plan.options import AutoConfig, SubprocAtariConfig, SubprocConfig

    auto = "subproc trading isolation for speed: envs in this process where that pays, decided "
    return [
        VectorizerPlugin("dummy", build_dummy, DummyConfig, summary="all envs in this process"),
        VectorizerPlugin("subproc", build_subproc, SubprocConfig,
                         summary="envs in worker processes", prestart=prestart),
        VectorizerPlugin("subproc-atari", build_subproc_atari, SubprocAtariConfig,
                         summary="worker processes tuned for uint8 image observations",
                         prestart=prestart),
        VectorizerPlugin("auto", build_auto, AutoConfig, summary=auto + "before they are built"),
    ]  # fmt: skip


def build_subproc(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> gym.vector.VectorEnv:
    """``subproc``: a `SubprocVecEnv`, or with ``batch_size`` the pool, to the plan."""
    return _build(env_fns, logging.DEBUG, False, options)


def build_subproc_atari(
    env_fns: Sequence[Callable[[], gym.Env]], **options: Any
) -> gym.vector.VectorEnv:
    """``subproc-atari``: ``subproc`` for uint8 images in shared memory."""
    options["shared_memory"] = True
    return _build(env_fns, logging.DEBUG, False, {**options, "uint8_images": True})


def build_auto(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> gym.vector.VectorEnv:
    """``auto`` (see `AutoConfig`); its split is logged on one INFO line."""
    return _build(env_fns, logging.INFO, True, options)


def _build(
    env_fns: Sequence[Callable[[], gym.Env]], level: int, fallback: bool, options: dict
) -> gym.vector.VectorEnv:
    """The plan, then the vec env it says, its split logged at ``level`` (INFO for ``auto``)."""
    from .asyncpool.pool import SubprocPool
    from .subproc import SubprocVecEnv, plan_for

    split = plan_for(env_fns, options, fallback)
    envs: gym.vector.VectorEnv
    if not split.workers:
        kept = ("autoreset_mode", "copy", "seeding")  # (the options dummy takes)
        envs = build_dummy(env_fns, **{k: options[k] for k in kept if k in options})
        envs.split = split
    elif options.get("batch_size") is not None:
        envs = SubprocPool(env_fns, options.pop("batch_size"), split, **options)
    else:
        options.pop("batch_size", None)
        envs = SubprocVecEnv(env_fns, split=split, **options)
    logging.getLogger("envfactory").log(
        level, "built %s: %s", type(envs).__name__, split.describe()
    )
    return envs
