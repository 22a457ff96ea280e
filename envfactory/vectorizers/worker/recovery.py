"""The recovery rule: what each env of a rebuilt worker does with the episode its predecessor
lost (see docs/concepts/faults.md), applied by `EnvHost` in a worker and by `Recoverable` through a
vectorized env's public calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from ..front.checks import autoreset_mode
from ..transport.handle import env_label

__all__ = ["Recover", "Recoverable", "RecoverableFn", "after_reset", "after_step", "recovered_step"]


class Recover(str, Enum):
    """What one env of a rebuilt worker does: ``LOST`` ends its lost episode (truncated at the
    last observation seen, reward 0, ``restarted``); ``RESET``/``RESET_FLAGGED`` is its
    ``next_step`` autoreset (flagged ``restarted``); ``REDONE`` redoes the lost reset; ``NONE``
    awaits the caller's reset."""

    LOST = "lost"
    RESET = "reset"
    RESET_FLAGGED = "reset-flagged"
    REDONE = "redone"
    NONE = "none"


LOST, RESET, RESET_FLAGGED, REDONE, NONE = Recover  # (in their order above)


def after_step(done: Sequence[bool], mode: AutoresetMode | str) -> list[Recover]:
    """The rule after a lost step: per env, ``RESET_FLAGGED`` (``done``, next_step) or ``LOST``."""
    next_step = autoreset_mode(mode) is AutoresetMode.NEXT_STEP
    return [RESET_FLAGGED if d and next_step else LOST for d in done]


def after_reset(mask: Any, done: Sequence[bool], mode: AutoresetMode | str) -> list[Recover]:
    """The rule after a lost reset (``mask``: its ``reset_mask``): per env ``REDONE``, or outside
    the mask ``RESET``, ``NONE`` or ``LOST``.

    Example:
        >>> [r.value for r in after_reset([1, 0, 0], [0, 1, 0], "next_step")]
        ['redone', 'reset', 'lost']
    """
    ended = {AutoresetMode.NEXT_STEP: RESET, AutoresetMode.DISABLED: NONE}
    then = ended.get(autoreset_mode(mode), LOST)  # an env outside the mask whose episode ended
    return [REDONE if mask is None or mask[i] else then if d else LOST for i, d in enumerate(done)]


def recovered_step(env: Any, armed: Any) -> tuple:
    """The step that stands for the lost one: ``armed`` ``RESET``/``RESET_FLAGGED`` resets
    ``env``, ``(LOST, obs)`` ends its episode truncated at ``obs`` (reward 0 both)."""
    if armed in (RESET, RESET_FLAGGED):
        obs, info = env.reset()
        if armed == RESET_FLAGGED:
            info = {**info, "restarted": True}
        return obs, 0.0, False, False, info
    return armed[1], 0.0, False, True, {"restarted": True}


class Recoverable(gym.Wrapper):
    """An env ``set_attr('envfactory_recover', what)`` arms: its next step stands for the lost
    one."""

    #: the attribute ``set_attr`` arms
    ATTR = "envfactory_recover"

    def __init__(self, env: gym.Env, mode: AutoresetMode) -> None:
        super().__init__(env)
        self.same_step = autoreset_mode(mode) is AutoresetMode.SAME_STEP
        self.envfactory_recover: Any = None
        self._flag_reset = False

    def step(self, action: Any) -> Any:
        armed, self.envfactory_recover = self.envfactory_recover, None
        if armed is None or (isinstance(armed, str) and armed in (REDONE, NONE)):
            return self.env.step(action)
        if armed not in (RESET, RESET_FLAGGED):
            self._flag_reset = self.same_step
        return recovered_step(self.env, armed)

    def reset(self, **kwargs: Any) -> Any:
        self.envfactory_recover = None
        obs, info = self.env.reset(**kwargs)
        if self._flag_reset:
            self._flag_reset = False
            info = {**info, "restarted": True}
        return obs, info


class RecoverableFn:
    """An env constructor whose env comes wrapped in `Recoverable` (picklable)."""

    def __init__(self, fn: Callable[[], gym.Env], mode: AutoresetMode) -> None:
        self.fn, self.mode = fn, mode
        self.label = env_label(fn)

    def __call__(self) -> gym.Env:
        return Recoverable(self.fn(), self.mode)
