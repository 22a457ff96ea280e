"""The built-in vectorizers, registered through the same hook as third parties."""

from __future__ import annotations

import logging
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
    "log_split",
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
    with ``batch_size`` set the async pool, `SubprocPool`. Its
    [`split`][envfactory.vectorizers.record.Split] says how the envs were placed and why
    (with the load sampled once for the whole default split)."""
    from .record import explain_split
    from .subproc_options import others_running

    requested = {k: options.get(k) for k in ("in_series", "timeout", "restart", "batch_size")}
    requested["in_parent"] = options.get("in_parent", 0)
    requested.update(options.pop("requested", {}))  # (subproc-atari: what was configured)
    load = options.pop("load", None)
    level = options.pop("log_level", logging.DEBUG)
    default = options.get("in_series") is None or options.get("in_parent", 0) is None
    if load is None and default and options.get("batch_size") is None:
        load = others_running()
    envs = _build_subproc(env_fns, load, **options)
    sizes = [h.stop - h.start for h in envs.workers]
    envs.split = explain_split(requested, sizes, int(getattr(envs, "in_parent", 0)), load)
    log_split(envs, level)
    return envs


def _build_subproc(
    env_fns: Sequence[Callable[[], gym.Env]], load: float | None, **options: Any
) -> RemoteVecEnv:
    batch_size = options.pop("batch_size", None)
    if batch_size is not None:
        from .pool import SubprocPool, pool_in_series
        from .subproc_options import check_split

        check_split(len(env_fns), batch_size, options.get("in_parent"), "vectorizer")
        options["in_parent"] = 0
        options["in_series"] = pool_in_series(len(env_fns), batch_size, options.get("in_series"))
        return SubprocPool(env_fns, batch_size, **options)
    from .subproc import SubprocVecEnv

    return SubprocVecEnv(env_fns, load=load, **options)


def build_subproc_atari(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> RemoteVecEnv:
    """The ``subproc-atari`` vectorizer's build function (uint8 images, shared memory).

    With ``in_series`` null (and no pool) its split is resolved here,
    `image_split`: the parent steps a worker's share while a core
    is idle, else one worker per core."""
    from .subproc_options import image_split, others_running

    options["shared_memory"] = True
    if options.get("in_series") is None and options.get("batch_size") is None:
        options["requested"] = {k: options.get(k) for k in ("in_series", "in_parent")}
        options["load"] = others_running()
        options["in_parent"], options["in_series"] = image_split(
            len(env_fns),
            options.get("in_parent"),
            options.get("timeout"),
            bool(options.get("restart", False)),
            options["load"],
        )
    return build_subproc(env_fns, uint8_images=True, **options)


def build_auto(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> gym.vector.VectorEnv:
    """The ``auto`` vectorizer's build function (see
    [`AutoConfig`][envfactory.vectorizers.subproc_options.AutoConfig]): every env in this
    process (a [`DummyVecEnv`][envfactory.vectorizers.dummy.DummyVecEnv]) when no core is
    free for a worker now, else ``subproc`` with a parent share (``in_parent`` null). An
    option only a worker process gives (``in_series``, ``timeout``, ``restart``, a pool)
    keeps ``subproc``. What it chose and why (the load it saw) is the env's
    [`split`][envfactory.vectorizers.record.Split], also logged on one INFO line of the
    ``envfactory`` logger."""
    from .record import fallback_split
    from .subproc_options import no_core_for_a_worker, others_running

    needs_workers = ("in_series", "timeout", "restart", "batch_size")
    free = options.get("in_parent") is None and not any(map(options.get, needs_workers))
    load = others_running() if free else None
    if free and no_core_for_a_worker(load):
        envs = build_dummy(
            env_fns,
            autoreset_mode=options.get("autoreset_mode", "next_step"),
            copy=options.get("copy", True),
            seeding=options.get("seeding", "offset"),
        )
        envs.split = fallback_split(len(env_fns), load)
        log_split(envs, logging.INFO)
        return envs
    return build_subproc(env_fns, load=load, log_level=logging.INFO, **options)


def log_split(envs: Any, level: int) -> None:
    """The one line of the ``envfactory`` logger saying how a build placed the envs and why
    (its [`split`][envfactory.vectorizers.record.Split]): INFO for ``auto``, which decides
    from the load at build time (on the ``envfactory`` command it is in the console and the
    job's log file), DEBUG for ``subproc``'s split (its summary says it; a line on every
    run's console would be noise, as in ``job=render``'s one-line output)."""
    split = envs.split
    logging.getLogger("envfactory").log(
        level, "built %s: %s", type(envs).__name__, split.describe()
    )
