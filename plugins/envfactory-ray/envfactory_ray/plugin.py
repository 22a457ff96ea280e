"""The plugin module named by the ``envfactory`` entry point: vectorizer ``ray``.

``import envfactory_ray.plugin`` does not import Ray: Ray is imported when a ``ray``
vectorized env is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

import envfactory

from .config import RayConfig

__all__ = ["RayConfig", "build_ray", "envfactory_vectorizers"]


def build_ray(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> Any:
    """The ``ray`` vectorizer's build function: a
    [`envfactory_ray.vecenv.RayVecEnv`][envfactory_ray.vecenv.RayVecEnv], or with ``batch_size``
    the async pool, [`envfactory_ray.pool.RayPool`][envfactory_ray.pool.RayPool]."""
    options.pop("name", None)
    batch_size = options.pop("batch_size", None)
    if batch_size is not None:
        from .pool import RayPool

        return RayPool(env_fns, batch_size, **options)
    from .vecenv import RayVecEnv

    return RayVecEnv(env_fns, **options)


@envfactory.hookimpl
def envfactory_vectorizers() -> list[envfactory.VectorizerPlugin]:
    return [
        envfactory.VectorizerPlugin(
            "ray",
            build_ray,
            RayConfig,
            summary="envs in Ray actors, on this machine or a Ray cluster",
        )
    ]
