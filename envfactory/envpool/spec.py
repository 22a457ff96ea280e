"""envpool's ``EnvSpec``: what a task is, without building the pool
([`make_spec`][envfactory.envpool.make_spec], and ``env.spec`` of a pool).

It holds envpool's config (``spec.config.max_episode_steps``, ``spec.config.mode``, ...
as a namedtuple, every option [`make`][envfactory.envpool.make] takes, with the value it
takes), ``reward_threshold``, the gymnasium spaces of one env, and envpool's array specs
of the state (``"obs"``, ``"info:env_id"``, ``"info:ram"``, ...) and of the action
(``"env_id"``, ``"players.env_id"``, ``"action"``). dm_env's ``observation_spec()`` /
``action_spec()`` are not offered (no ``make_dm``).
"""

from __future__ import annotations

import pprint
from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["ArraySpec", "EnvSpec"]


@dataclass(frozen=True)
class ArraySpec:
    """envpool's spec of one array of the state or the action (one env's row)."""

    dtype: Any
    shape: list[int]
    minimum: Any = None
    maximum: Any = None
    is_discrete: bool = False


def _scalar(dtype: Any, low: Any = None, high: Any = None) -> ArraySpec:
    return ArraySpec(np.dtype(dtype).type, [], low, high)


def _space_spec(space: gym.Space) -> ArraySpec:
    if isinstance(space, gym.spaces.Discrete):
        first = int(space.start)
        return ArraySpec(np.int32, [], first, first + int(space.n) - 1, is_discrete=True)
    if isinstance(space, gym.spaces.Box):
        low: Any = space.low
        high: Any = space.high
        if np.all(low == low.flat[0]) and np.all(high == high.flat[0]):
            low, high = low.flat[0], high.flat[0]  # one bound for all, as envpool's
        return ArraySpec(space.dtype.type, list(space.shape), low, high)
    dtype = getattr(space, "dtype", None)
    return ArraySpec(dtype.type if dtype is not None else object, list(space.shape or ()))


class EnvSpec:
    """envpool's ``EnvSpec`` of a task (see the module docstring)."""

    def __init__(
        self,
        task_id: str,
        config: dict[str, Any],
        observation_space: gym.Space,
        action_space: gym.Space,
        atari: bool,
    ) -> None:
        self.task_id = task_id
        self._config = dict(config)
        self._atari = atari
        self._observation_space = observation_space
        self._action_space = action_space

    @property
    def config(self) -> Any:
        """The task's config, a namedtuple: ``spec.config.max_episode_steps``, ..."""
        keys = sorted(self._config)
        return namedtuple("Config", keys)(*(self._config[k] for k in keys))

    @property
    def reward_threshold(self) -> float | None:
        """The task's reward threshold (gymnasium's registry), None for none (Atari)."""
        value = self._config.get("reward_threshold")
        return None if value is None else float(value)

    @property
    def observation_space(self) -> gym.Space:
        """One env's observation space (gymnasium's)."""
        return self._observation_space

    @property
    def action_space(self) -> gym.Space:
        """One env's action space (gymnasium's)."""
        return self._action_space

    gymnasium_observation_space = observation_space
    gymnasium_action_space = action_space

    @property
    def state_array_spec(self) -> dict[str, ArraySpec]:
        """envpool's state keys: the observation, rewards and flags, and the infos."""
        out = {
            "obs": _space_spec(self._observation_space),
            "info:env_id": _scalar(np.int32, 0, self._config["num_envs"] - 1),
            "info:players.env_id": ArraySpec(np.int32, [-1]),
            "elapsed_step": _scalar(np.int32),
            "reward": _scalar(np.float32),
            "trunc": _scalar(np.bool_),
        }
        if self._atari:
            out["info:lives"] = _scalar(np.int32)
            out["info:reward"] = _scalar(np.float32)
            out["info:terminated"] = _scalar(np.int32, 0, 1)
            out["info:ram"] = ArraySpec(np.uint8, [128], 0, 255)
        return out

    @property
    def action_array_spec(self) -> dict[str, ArraySpec]:
        """envpool's action keys: ``env_id``, ``players.env_id`` and ``action``."""
        return {
            "env_id": _scalar(np.int32, 0, self._config["num_envs"] - 1),
            "players.env_id": ArraySpec(np.int32, [-1]),
            "action": _space_spec(self._action_space),
        }

    def __repr__(self) -> str:
        return f"EnvSpec({self.task_id!r}, {pprint.pformat(self._config)})"
