"""Atari wrappers that gymnasium lacks: episodic life, fire on reset, RAM skipping, layout.

Nothing here imports ``ale_py`` or ``cv2``: the ALE interface is reached through
``env.unwrapped.ale`` of an already built environment.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box

__all__ = [
    "EpisodicLife",
    "FireReset",
    "RamInfo",
    "RamPreprocessing",
    "RawNoopReset",
    "StackLayout",
    "sign_reward",
]


def sign_reward(reward: SupportsFloat) -> float:
    """Return the sign of ``reward`` (-1.0, 0.0 or 1.0) as a Python float.

    A module-level function (not a lambda) so that wrapped envs stay picklable.
    """
    return float(np.sign(float(reward)))


class EpisodicLife(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Ends the learner's episode on every lost life; resets the game only on game over.

    When ``ale.lives()`` decreases and lives remain, ``step`` returns ``terminated=True``.
    Only the ``reset()`` right after such a step continues the game: it takes one no-op
    step (action 0) and returns that observation. Every other reset resets the game: after
    a real game over or truncation, after a step that ended the episode for any other
    reason (a ``time_limit`` in ``wrappers`` above this one), a second reset in a row, and
    any reset given a ``seed`` or ``options`` (so seeded resets are reproducible).

    If the game ends during the continuation no-op (a ``max_episode_steps`` truncation,
    say), the game is reset and the info of that last step (its episode statistics
    included) is kept in the returned reset info, under the reset's own entries.
    """

    def __init__(self, env: gym.Env) -> None:
        """Wrap ``env``, an ALE environment (possibly wrapped).

        Args:
            env: the environment; ``env.unwrapped.ale`` must exist.
        """
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self)
        self.lives = 0
        self.life_lost = False  # the last step ended the learner's episode on a lost life

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the game; report a lost life (with lives left) as ``terminated``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self._ale_lives()
        self.life_lost = 0 < lives < self.lives and not (terminated or truncated)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Continue the game with a no-op right after a lost life; otherwise reset it."""
        if self.life_lost and seed is None and not options:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the game ended during the no-op
                obs, reset_info = self.env.reset()
                info = {**info, **reset_info}
        else:
            obs, info = self.env.reset(seed=seed, options=options)
        self.life_lost = False
        self.lives = self._ale_lives()
        return obs, info


class FireReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Presses FIRE (action 1) then action 2 after every reset, for games that need it.

    Applies only if the action meanings have ``"FIRE"`` at index 1 and at least 3 actions;
    otherwise it is a pass-through. If either step ends the episode, the env is reset
    again, and the info of the step that ended it (episode statistics included) is kept
    in the returned info under the new reset's entries.
    Placed outside `EpisodicLife`, FIRE is pressed again after each lost life.
    """

    def __init__(self, env: gym.Env) -> None:
        """Wrap ``env``, an ALE environment (possibly wrapped).

        Args:
            env: the environment; ``env.unwrapped.get_action_meanings()`` must exist.
        """
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self)
        meanings = list(env.unwrapped.get_action_meanings())  # type: ignore[attr-defined]
        self.active = len(meanings) >= 3 and meanings[1] == "FIRE"

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset, then step actions 1 and 2 (re-resetting if either ends the episode)."""
        obs, info = self.env.reset(seed=seed, options=options)
        if not self.active:
            return obs, info
        for action in (1, 2):
            obs, _, terminated, truncated, step_info = self.env.step(action)
            if terminated or truncated:
                obs, reset_info = self.env.reset(seed=seed, options=options)
                info = {**info, **step_info, **reset_info}
            else:
                info = {**info, **step_info}
        return obs, info


class RamPreprocessing(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """No-op reset and frame skipping for ``obs_type="ram"`` (no image processing).

    On reset, takes ``1..noop_max`` no-ops drawn from ``env.unwrapped.np_random`` (as
    `gymnasium.wrappers.AtariPreprocessing` does). Each step repeats the action
    ``frame_skip`` times, sums the rewards and stops early when the episode ends; the
    observation is the RAM after the last frame.
    """

    def __init__(self, env: gym.Env, noop_max: int = 30, frame_skip: int = 4) -> None:
        """Wrap ``env``, an ALE env made with ``frameskip=1`` and ``obs_type="ram"``.

        Args:
            env: the environment.
            noop_max: maximum number of no-ops on reset; 0 disables them.
            frame_skip: frames per agent step (>= 1).
        """
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self, noop_max=noop_max, frame_skip=frame_skip)
        if frame_skip < 1 or noop_max < 0:
            raise ValueError(f"need frame_skip >= 1 and noop_max >= 0: {frame_skip}, {noop_max}")
        self.noop_max = noop_max
        self.frame_skip = frame_skip

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Repeat ``action`` up to ``frame_skip`` times, summing the rewards."""
        total = 0.0
        info: dict[str, Any] = {}
        obs: Any = None
        terminated = truncated = False
        for _ in range(self.frame_skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset, then take a seeded random number of no-ops."""
        obs, info = self.env.reset(seed=seed, options=options)
        rng = self.env.unwrapped.np_random
        noops = int(rng.integers(1, self.noop_max + 1)) if self.noop_max > 0 else 0
        for _ in range(noops):
            obs, _, terminated, truncated, step_info = self.env.step(0)
            info.update(step_info)
            if terminated or truncated:
                obs, info = self.env.reset(seed=seed, options=options)
        return obs, info


class StackLayout(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Arranges (stacked) uint8 frames into the final layout in one copy.

    Input (after `gymnasium.wrappers.FrameStackObservation`, or a single frame when
    ``stacked=False``) and output, with ``N`` frames, oldest first:

    ============  ============  ===================  ==================
    obs_type      input         ``hwc``              ``chw``
    ============  ============  ===================  ==================
    grayscale     (N, H, W)     (H, W, N)            (N, H, W)
    rgb           (N, H, W, 3)  (H, W, 3N)           (3N, H, W)
    ram           (N, 128)      (128N,)              (128N,)
    ============  ============  ===================  ==================

    RGB channels are ``[frame0 R, G, B, frame1 R, G, B, ...]``.
    """

    def __init__(self, env: gym.Env, obs_type: str, layout: str, stacked: bool = True) -> None:
        """Wrap ``env``.

        Args:
            env: env with a uint8 Box observation space shaped as in the table above.
            obs_type: ``grayscale``, ``rgb`` or ``ram``.
            layout: ``hwc`` or ``chw`` (ignored for ``ram``).
            stacked: whether the input has a leading stack axis.
        """
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(
            self, obs_type=obs_type, layout=layout, stacked=stacked
        )
        if obs_type not in ("grayscale", "rgb", "ram") or layout not in ("hwc", "chw"):
            raise ValueError(f"bad obs_type/layout: {obs_type!r}, {layout!r}")
        self.obs_type, self.layout, self.stacked = obs_type, layout, stacked
        space = env.observation_space
        assert isinstance(space, Box), space
        dummy = np.zeros(space.shape if stacked else (1, *space.shape), dtype=np.uint8)
        shape = self._arrange(dummy).shape
        self.observation_space = Box(0, 255, shape, np.uint8)

    def _arrange(self, stack: np.ndarray) -> np.ndarray:
        if self.obs_type == "ram":
            return stack.reshape(-1)
        if self.obs_type == "grayscale":
            if self.layout == "chw":
                return stack
            return np.ascontiguousarray(np.moveaxis(stack, 0, -1))
        n, h, w, c = stack.shape
        if self.layout == "chw":
            return stack.transpose(0, 3, 1, 2).reshape(n * c, h, w)
        return stack.transpose(1, 2, 0, 3).reshape(h, w, n * c)

    def observation(self, observation: Any) -> np.ndarray:
        """Return ``observation`` in the configured layout (uint8, C-contiguous)."""
        stack = np.asarray(observation, dtype=np.uint8)
        if not self.stacked:
            stack = stack[None]
        return np.ascontiguousarray(self._arrange(stack))


class RawNoopReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """No-op reset through the console's own NOOP, for games whose minimal action set has
    no NOOP at index 0 (Backgammon), where `gymnasium.wrappers.AtariPreprocessing` refuses
    ``noop_max > 0``.

    On reset, presses ALE's NOOP ``1..noop_max`` times (drawn from
    ``env.unwrapped.np_random``, as AtariPreprocessing draws its count), resetting the game
    again if it ends; the preprocessing above reads the screen from the ALE afterwards.
    """

    def __init__(self, env: gym.Env, noop_max: int) -> None:
        """Wrap ``env``, an ALE env made with ``frameskip=1``; ``noop_max >= 1``."""
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self, noop_max=noop_max)
        self.noop_max = noop_max

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset, then press the console's NOOP a seeded random number of times."""
        import ale_py

        obs, info = self.env.reset(seed=seed, options=options)
        unwrapped: Any = self.env.unwrapped
        ale = unwrapped.ale
        for _ in range(int(unwrapped.np_random.integers(1, self.noop_max + 1))):
            ale.act(ale_py.Action.NOOP)
            if ale.game_over():
                obs, info = self.env.reset(seed=seed, options=options)
        return obs, info


class RamInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds the console's 128-byte RAM (uint8) to every info as ``info["ram"]``."""

    def __init__(self, env: gym.Env) -> None:
        """Wrap ``env``, an ALE env (possibly wrapped)."""
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self)

    def _ram(self) -> np.ndarray:
        return np.asarray(self.env.unwrapped.ale.getRAM(), dtype=np.uint8)  # type: ignore[attr-defined]

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; ``info["ram"]`` is the RAM after the step."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "ram": self._ram()}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; ``info["ram"]`` is the RAM after the reset."""
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "ram": self._ram()}
