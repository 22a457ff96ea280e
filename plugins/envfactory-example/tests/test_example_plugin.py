"""envfactory-example, pip-installed and found through its entry point, checked with
envfactory's own kits: the family kit on ``pendulum`` (and its preset), the vectorizer
conformance suite on ``gym-sync``."""

from __future__ import annotations

import numpy as np
import pytest

import envfactory
from envfactory.testing import FamilyConformance, VecEnvConformance, check_entry_point


def test_found_through_the_entry_point() -> None:
    check_entry_point(
        "envfactory-example",
        entry_point="envfactory_example",
        families=["pendulum"],
        wrappers=["scale_reward"],
        vectorizers=["gym-sync"],
    )


class TestPendulumFamily(FamilyConformance):
    stats_max_steps = 200

    @pytest.fixture(params=["env=pendulum", "env=pendulum_moon"])
    def make_env(self, request: pytest.FixtureRequest):
        cfg = envfactory.compose([request.param, "env.max_episode_steps=60"])
        return lambda: envfactory.make_env(cfg)


class TestGymSyncVectorizer(VecEnvConformance):
    steps = 100
    error_classes = False  # gymnasium's SyncVectorEnv: no parent-side checks, usable after close

    @pytest.fixture(params=["next_step", "same_step", "disabled"])
    def make_vecenv(self, request: pytest.FixtureRequest):
        cfg = envfactory.compose(
            ["vectorizer=gym-sync", "num_envs=3", f"autoreset_mode={request.param}"]
        )
        return lambda: envfactory.make_vec(cfg)


def test_scale_reward_scales() -> None:
    def rewards(scale: float) -> np.ndarray:
        wrappers = f"wrappers=[{{name: scale_reward, scale: {scale}}}]"
        with envfactory.make_vec(overrides=["env=pendulum", "num_envs=2", wrappers]) as envs:
            envs.reset(seed=3)
            return np.array([envs.step(np.zeros((2, 1), np.float32))[1] for _ in range(5)])

    np.testing.assert_allclose(rewards(0.1), 0.1 * rewards(1.0))
