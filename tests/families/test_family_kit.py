"""The family conformance kit (envfactory.testing) on the built-in families, and on
deliberately defective envs, to show each check can fail."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envfactory
from envfactory.testing import (
    FamilyConformance,
    check_env_episode_stats,
    check_env_seeding,
    check_env_spaces,
    episode_stats_key_of,
)


def _factory(*overrides: str):
    cfg = envfactory.compose(list(overrides))
    return lambda: envfactory.make_env(cfg)


class TestGymFamily(FamilyConformance):
    @pytest.fixture(params=["CartPole-v1", "Pendulum-v1"])
    def make_env(self, request: pytest.FixtureRequest):
        return _factory("env=gym", f"env.id={request.param}")

    stats_max_steps = 400


class TestMountainCarFamily(FamilyConformance):
    @pytest.fixture
    def make_env(self):
        return _factory(
            "env=mountaincar",
            "env.num_stack=3",
            "wrappers=[{name: time_limit, max_episode_steps: 40}]",
        )

    stats_max_steps = 100


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
class TestAtariFamily(FamilyConformance):
    """Pong (every end is a game over) and Breakout (lost lives end the learner's episode
    without statistics; the truncation at max_episode_steps is a real end). FIRE steps
    taken inside reset count in ``l``; ``r`` is the raw score under clipped rewards."""

    steps = 30
    stats_max_steps = 120
    strict_episode_stats = False
    exact_episode_lengths = False
    returns_are_reward_sums = False

    @pytest.fixture(params=["ALE/Pong-v5", "ALE/Breakout-v5"])
    def make_env(self, request: pytest.FixtureRequest):
        return _factory("env=atari", f"env.id={request.param}", "env.max_episode_steps=50")


def test_stats_key_is_read_from_the_env() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"), stats_key="my_stats")
    assert episode_stats_key_of(env) == "my_stats"
    assert episode_stats_key_of(gym.make("CartPole-v1")) == "episode"
    assert check_env_episode_stats(lambda: env, max_steps=300, min_episodes=2) >= 2
    assert episode_stats_key_of(envfactory.make_env(overrides=["env=gym"])) == "episode_stats"
    make = _factory(
        "env=mountaincar",
        "episode_stats_key=my_key",
        "wrappers=[{name: time_limit, max_episode_steps: 9}]",
    )
    assert episode_stats_key_of(make()) == "my_key"
    assert check_env_episode_stats(make, max_steps=30, min_episodes=3) == 3


@pytest.mark.parametrize(
    "overrides",
    [
        ("env=atari", "env.max_episode_steps=20"),
        ("env=mountaincar", "wrappers=[{name: time_limit, max_episode_steps: 5}]"),
    ],
    ids=["atari", "user-wrapper"],
)
def test_env_spec_recreates_the_env(overrides: tuple[str, ...]) -> None:
    """``env.spec`` (which gymnasium's check_env and RecordVideo read) works and remakes an
    env with the same spaces; it raised ValueError for the atari family and for any env
    with a user wrapper."""
    env = envfactory.make_env(overrides=list(overrides))
    again = env.spec.make()
    try:
        assert again.observation_space == env.observation_space
        assert again.action_space == env.action_space
    finally:
        env.close()
        again.close()


# -- the kit catches broken families -----------------------------------------------------


class WrongDtype(gym.ObservationWrapper):
    """Declares float32 but returns float64."""

    def observation(self, observation: Any) -> Any:
        return np.asarray(observation, dtype=np.float64)


class IgnoresSeed(gym.Wrapper):
    """Resets with a fresh random seed whatever seed it is given."""

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return self.env.reset(seed=int(np.random.default_rng().integers(1 << 30)), options=options)


class StatsMidEpisode(gym.Wrapper):
    """Reports episode statistics on every 5th step."""

    t = 0

    def step(self, action: Any) -> Any:
        obs, r, term, trunc, info = self.env.step(action)
        self.t += 1
        if self.t % 5 == 0:
            info = {**info, "episode": {"r": 0.0, "l": 5, "t": 0.0}}
        return obs, r, term, trunc, info


def test_kit_catches_a_wrong_dtype() -> None:
    with pytest.raises(
        AssertionError, match="observation dtype float64 != observation_space dtype float32"
    ):
        check_env_spaces(lambda: WrongDtype(gym.make("CartPole-v1")))


def test_kit_catches_an_env_that_ignores_its_seed() -> None:
    with pytest.raises(AssertionError, match="same seed, fresh envs"):
        check_env_seeding(lambda: IgnoresSeed(gym.make("CartPole-v1")))


def test_kit_catches_an_env_whose_seed_changes_nothing() -> None:
    with pytest.raises(AssertionError, match="the env ignores its seed"):
        check_env_seeding(lambda: gym.make("MountainCarContinuous-v0").unwrapped and _Constant())


def test_kit_catches_statistics_outside_episode_ends() -> None:
    with pytest.raises(AssertionError, match=r"on a step that ended no episode"):
        check_env_episode_stats(lambda: StatsMidEpisode(gym.make("CartPole-v1")))


def test_kit_catches_missing_statistics() -> None:
    with pytest.raises(AssertionError, match=r"the episode ended without info\['episode'\]"):
        check_env_episode_stats(lambda: gym.make("CartPole-v1"))


class _Constant(gym.Env):
    """The same start state and dynamics whatever the seed."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(1, np.float32), 0.0, False, False, {}
