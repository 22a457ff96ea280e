"""The built-in vectorizers, registered through the same hook as third parties."""

from __future__ import annotations

from ..plugin.spec import hookimpl
from ..plugin.types import VectorizerPlugin
from .base import VecEnvBase, tile_images
from .dummy import DummyConfig, DummyVecEnv, build_dummy

__all__ = ["DummyVecEnv", "VecEnvBase", "envfactory_vectorizers", "tile_images"]


@hookimpl
def envfactory_vectorizers() -> list[VectorizerPlugin]:
    records = [
        VectorizerPlugin("dummy", build_dummy, DummyConfig, summary="all envs in this process"),
    ]
    from .subproc import SubprocAtariConfig, SubprocConfig, build_subproc, build_subproc_atari

    records += [
        VectorizerPlugin(
            "subproc", build_subproc, SubprocConfig, summary="envs in worker processes"
        ),
        VectorizerPlugin(
            "subproc-atari",
            build_subproc_atari,
            SubprocAtariConfig,
            summary="worker processes tuned for uint8 image observations",
        ),
    ]
    return records
