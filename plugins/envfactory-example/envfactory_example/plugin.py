"""The plugin module named by the ``envfactory`` entry point.

It uses only envfactory's public API, as any third-party package would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import envfactory

# -- env family: pendulum ---------------------------------------------------------------


@dataclass
class PendulumConfig:
    """Schema of ``env=pendulum``.

    Attributes:
        family: always ``pendulum``.
        g: gravity (m/s^2).
        max_episode_steps: steps before truncation.
    """

    family: str = "pendulum"
    g: float = 10.0
    max_episode_steps: int = 200

    def __post_init__(self) -> None:
        # envfactory runs this check in the parent whenever a config is composed.
        if not self.g > 0:
            raise envfactory.OptionError("g", self.g, "a gravity > 0")


def make_pendulum(g: float = 10.0, max_episode_steps: int = 200) -> gym.Env:
    return gym.make("Pendulum-v1", g=g, max_episode_steps=max_episode_steps)


# -- wrapper: scale_reward --------------------------------------------------------------


@dataclass
class ScaleRewardConfig:
    """Options of the ``scale_reward`` wrapper.

    Attributes:
        scale: every reward is multiplied by this.
    """

    scale: float = 1.0


def _times(reward: float, scale: float) -> float:
    return reward * scale


def scale_reward(env: gym.Env, scale: float = 1.0) -> gym.Env:
    # functools.partial of a module-level function pickles, unlike a lambda.
    return gym.wrappers.TransformReward(env, functools.partial(_times, scale=scale))


# -- vectorizer: gym-sync ---------------------------------------------------------------


@dataclass
class GymSyncConfig:
    """Schema of ``vectorizer=gym-sync``.

    Attributes:
        name: always ``gym-sync``.
        copy: return a copy of the observation batch.
    """

    name: str = "gym-sync"
    copy: bool = True


class GymSyncVectorEnv(SyncVectorEnv):
    """gymnasium's ``SyncVectorEnv`` plus the context manager envfactory's VecEnvs have."""

    def __enter__(self) -> GymSyncVectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, name: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """gymnasium's ``call(name, ...)``, or, for a function, ``fn(env, *args, **kwargs)``
        on each env (envfactory's VecEnv contract: SB3's ``env_is_wrapped`` uses it)."""
        if callable(name):
            return tuple(name(env, *args, **kwargs) for env in self.envs)
        return super().call(name, *args, **kwargs)


def build_gym_sync(
    env_fns: Sequence[Callable[[], gym.Env]],
    *,
    copy: bool = True,
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
) -> GymSyncVectorEnv:
    # envfactory hands vectorizers gymnasium's AutoresetMode, ready to pass on
    mode = autoreset_mode
    return GymSyncVectorEnv(list(env_fns), copy=copy, autoreset_mode=mode)


# -- hooks -------------------------------------------------------------------------------


@envfactory.hookimpl
def envfactory_env_families() -> list[envfactory.EnvFamilyPlugin]:
    return [
        envfactory.EnvFamilyPlugin(
            "pendulum", make_pendulum, PendulumConfig, summary="Pendulum-v1 with a gravity knob"
        )
    ]


@envfactory.hookimpl
def envfactory_wrappers() -> list[envfactory.WrapperPlugin]:
    return [
        envfactory.WrapperPlugin(
            "scale_reward", scale_reward, ScaleRewardConfig, summary="multiply every reward"
        )
    ]


@envfactory.hookimpl
def envfactory_vectorizers() -> list[envfactory.VectorizerPlugin]:
    return [
        envfactory.VectorizerPlugin(
            "gym-sync", build_gym_sync, GymSyncConfig, summary="gymnasium's SyncVectorEnv"
        )
    ]


@envfactory.hookimpl
def envfactory_config_dirs() -> list[str]:
    return [str(Path(__file__).resolve().parent / "conf")]
