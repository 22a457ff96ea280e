"""The built-in environment families, registered through the same hook as third parties."""

from __future__ import annotations

from ..plugin.spec import hookimpl
from ..plugin.types import EnvFamilyPlugin
from .atari import AtariConfig, make_atari
from .gym import GymConfig, make_gym
from .mountaincar import MountainCarConfig, make_mountaincar

__all__ = ["envfactory_env_families"]


@hookimpl
def envfactory_env_families() -> list[EnvFamilyPlugin]:
    return [
        EnvFamilyPlugin("gym", make_gym, GymConfig, summary="any registered gymnasium id"),
        EnvFamilyPlugin(
            "mountaincar",
            make_mountaincar,
            MountainCarConfig,
            summary="MountainCar with stacked flat float32 observations",
        ),
        EnvFamilyPlugin(
            "atari",
            make_atari,
            AtariConfig,
            summary="ALE games with DeepMind preprocessing",
            preload=("ale_py", "cv2"),
        ),
    ]
