"""The ``mountaincar`` family: MountainCar with the last ``num_stack`` observations
stacked into one flat float32 vector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import gymnasium as gym
import numpy as np

from ..config.checks import check_choice, check_int

__all__ = ["MountainCarConfig", "make_mountaincar"]


@dataclass
class MountainCarConfig:
    """Schema of ``env=mountaincar``.

    Attributes:
        family: always ``mountaincar``.
        id: ``MountainCar-v0`` (discrete) or ``MountainCarContinuous-v0``.
        num_stack: observations stacked, oldest first; shape ``(2 * num_stack,)``.
        max_episode_steps: overrides the id's time limit (200 / 999); null keeps it.
        render_mode: null, ``rgb_array`` (``render()`` frames, 400x600x3; needs
            ``pip install envfactory[render]``, i.e. pygame) or ``human``.
    """

    family: str = "mountaincar"
    id: str = "MountainCar-v0"
    num_stack: int = 4
    max_episode_steps: Optional[int] = None  # noqa: UP045
    render_mode: Optional[str] = None  # noqa: UP045

    def __post_init__(self) -> None:
        """The checks envfactory runs at compose time (see `envfactory.config.checks`)."""
        check_choice(self, "id", _IDS)
        check_int(self, "num_stack", 1)
        check_int(self, "max_episode_steps", 1, optional=True)
        if self.render_mode is not None:
            check_choice(self, "render_mode", _RENDER_MODES)


_IDS = ("MountainCar-v0", "MountainCarContinuous-v0")


_RENDER_MODES = ("rgb_array", "human")


def make_mountaincar(
    id: str = "MountainCar-v0",
    num_stack: int = 4,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
) -> gym.Env:
    """MountainCar whose observation is the last ``num_stack`` observations, oldest first,
    flattened to float32; right after reset every slot holds the reset observation."""
    MountainCarConfig(  # the schema's checks
        id=id, num_stack=num_stack, max_episode_steps=max_episode_steps, render_mode=render_mode
    )
    kwargs: dict[str, Any] = {"render_mode": render_mode}
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    env = gym.make(id, **kwargs)
    env = gym.wrappers.FrameStackObservation(env, num_stack, padding_type="reset")
    env = gym.wrappers.FlattenObservation(env)
    assert isinstance(env.observation_space, gym.spaces.Box)
    assert env.observation_space.dtype == np.float32
    return env
