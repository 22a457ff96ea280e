"""envfactory's built-in episode statistics.

Every env that [`envfactory.make_vec`][envfactory.make_vec] /
[`envfactory.make_env`][envfactory.make_env] builds reports, in the info of the step that ends an
episode, ``info[key] = {"r": return, "l": length, "t": seconds}`` (gymnasium's
``RecordEpisodeStatistics`` layout; vectorized, the arrays come with the ``_<key>`` mask). ``key``
is the top-level config option ``episode_stats_key`` (default ``"episode_stats"``; null turns the
statistics off).

The key is not gymnasium's ``"episode"`` on purpose: that one is left to gymnasium's own
``RecordEpisodeStatistics`` (per env in ``wrappers``, or
``gymnasium.wrappers.vector.RecordEpisodeStatistics`` around the VectorEnv), so code
written for gymnasium runs unchanged. The two may differ on purpose: a family may place
[`EpisodeStatistics`][envfactory.EpisodeStatistics] deep in its own wrapper chain (``atari`` puts it
below the life-loss and reward-clip wrappers, so it reports the real game score at the real game
over), while gymnasium's wrapper outside the family sees what the learner sees.
"""

from __future__ import annotations

import time
from typing import Any, SupportsFloat

import gymnasium as gym

__all__ = ["DEFAULT_KEY", "EpisodeStatistics"]

DEFAULT_KEY = "episode_stats"


class EpisodeStatistics(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Records each episode's return, length and wall time under ``info[key]``.

    A family that wants its statistics recorded at a particular depth of its wrapper chain
    wraps that depth in this class itself; the factory then sets
    [`key`][envfactory.EpisodeStatistics.key] from the config instead of adding another one on top.

    Attributes:
        key: the info key, or None to record nothing.
        episode_return: the return so far of the current episode.
        episode_length: steps so far in the current episode.
        episode_count: episodes reported since construction.

    Example:
        >>> import gymnasium as gym
        >>> env = EpisodeStatistics(gym.make("CartPole-v1"))
        >>> _ = env.reset(seed=0)
        >>> while "episode_stats" not in (info := env.step(0)[4]):
        ...     pass
        >>> sorted(info["episode_stats"])
        ['l', 'r', 't']
    """

    def __init__(self, env: gym.Env, key: str | None = DEFAULT_KEY) -> None:
        super().__init__(env)
        gym.utils.RecordConstructorArgs.__init__(self, key=key)  # env.spec can remake it
        self.key = key
        self.episode_return = 0.0
        self.episode_length = 0
        self.episode_count = 0
        self.episode_start_time = time.perf_counter()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and start a new episode's counts."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._restart()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at an episode end, add ``info[key]``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += float(reward)
        self.episode_length += 1
        if terminated or truncated:
            self.end_episode(info)
        return obs, reward, terminated, truncated, info

    def end_episode(self, info: dict[str, Any]) -> None:
        """Report the current episode in ``info`` (unless it is empty or the key is None)
        and start counting a new one. Wrappers above this one call it when they end the
        episode themselves (a ``time_limit`` in ``wrappers``)."""
        if self.key is not None and self.episode_length > 0:
            elapsed = round(time.perf_counter() - self.episode_start_time, 6)
            info[self.key] = {"r": self.episode_return, "l": self.episode_length, "t": elapsed}
            self.episode_count += 1
        self._restart()

    def _restart(self) -> None:
        self.episode_return, self.episode_length = 0.0, 0
        self.episode_start_time = time.perf_counter()
