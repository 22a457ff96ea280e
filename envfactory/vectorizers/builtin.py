"""The built-in vectorizers, registered through the same hook as third parties."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from ..plugin.spec import hookimpl
from ..plugin.types import VectorizerPlugin
from .base import VecEnvBase, tile_images
from .dummy import DummyConfig, DummyVecEnv, build_dummy

if TYPE_CHECKING:
    from .remote_env import RemoteVecEnv

__all__ = [
    "DummyVecEnv",
    "VecEnvBase",
    "build_auto",
    "build_subproc",
    "build_subproc_atari",
    "envfactory_vectorizers",
    "tile_images",
]


@hookimpl
def envfactory_vectorizers() -> list[VectorizerPlugin]:
    records = [
        VectorizerPlugin("dummy", build_dummy, DummyConfig, summary="all envs in this process"),
    ]
    from .subproc_options import AutoConfig, SubprocAtariConfig, SubprocConfig, prestart

    records += [
        VectorizerPlugin(
            "subproc",
            build_subproc,
            SubprocConfig,
            summary="envs in worker processes",
            prestart=prestart,
        ),
        VectorizerPlugin(
            "subproc-atari",
            build_subproc_atari,
            SubprocAtariConfig,
            summary="worker processes tuned for uint8 image observations",
            prestart=prestart,
        ),
        VectorizerPlugin(
            "auto",
            build_auto,
            AutoConfig,
            summary="subproc trading isolation for speed: envs in this process where that "
            "pays, decided before they are built",
        ),
    ]
    return records


def build_subproc(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> RemoteVecEnv:
    """The ``subproc`` vectorizer's build function: a `SubprocVecEnv`, or
    with ``batch_size`` set the async pool, `SubprocPool`."""
    batch_size = options.pop("batch_size", None)
    if batch_size is not None:
        from .pool import SubprocPool, pool_in_series
        from .subproc_options import check_split

        check_split(len(env_fns), batch_size, options.get("in_parent"), "vectorizer")
        options["in_parent"] = 0
        options["in_series"] = pool_in_series(len(env_fns), batch_size, options.get("in_series"))
        return SubprocPool(env_fns, batch_size, **options)
    from .subproc import SubprocVecEnv

    return SubprocVecEnv(env_fns, **options)


def build_subproc_atari(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> RemoteVecEnv:
    """The ``subproc-atari`` vectorizer's build function (uint8 images, shared memory).

    With ``in_series`` null (and no pool) its split is resolved here,
    `image_split`: the parent steps a worker's share while a core
    is idle, else one worker per core."""
    from .subproc_options import image_split

    options["shared_memory"] = True
    if options.get("in_series") is None and options.get("batch_size") is None:
        options["in_parent"], options["in_series"] = image_split(
            len(env_fns),
            options.get("in_parent"),
            options.get("timeout"),
            bool(options.get("restart", False)),
        )
    return build_subproc(env_fns, uint8_images=True, **options)


def build_auto(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> gym.vector.VectorEnv:
    """The ``auto`` vectorizer's build function (see
    [`AutoConfig`][envfactory.vectorizers.subproc_options.AutoConfig]): every env in this
    process (a [`DummyVecEnv`][envfactory.vectorizers.dummy.DummyVecEnv]) when no core is
    free for a worker now, else ``subproc`` with a parent share (``in_parent`` null). An
    option only a worker process gives (``in_series``, ``timeout``, ``restart``, a pool)
    keeps ``subproc``."""
    from .subproc_options import no_core_for_a_worker

    needs_workers = ("in_series", "timeout", "restart", "batch_size")
    free = options.get("in_parent") is None and not any(map(options.get, needs_workers))
    if free and no_core_for_a_worker():
        return build_dummy(
            env_fns,
            autoreset_mode=options.get("autoreset_mode", "next_step"),
            copy=options.get("copy", True),
            seeding=options.get("seeding", "offset"),
        )
    return build_subproc(env_fns, **options)
