"""Episode statistics reach the infos however an episode ends."""

from __future__ import annotations

import numpy as np
import pytest

import envfactory


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_a_time_limit_in_wrappers_still_reports_the_episode(vectorizer: str) -> None:
    overrides = [
        "env=mountaincar",
        "num_envs=2",
        f"vectorizer={vectorizer}",
        "wrappers=[{name: time_limit, max_episode_steps: 25}]",
    ]
    with envfactory.make_vec(overrides=overrides) as envs:
        envs.reset(seed=0)
        seen = 0
        for step in range(1, 80):
            _, _, _, trunc, infos = envs.step(np.zeros(2, dtype=np.int64))
            if step % 26 == 25:  # next_step autoreset: every 26th step is a reset step
                assert trunc.all()
                assert infos["_episode"].all()
                assert (infos["episode"]["l"] == 25).all()
                assert (infos["episode"]["r"] == -25.0).all()
                seen += 1
            else:
                assert "episode" not in infos
        assert seen == 3


def test_stats_are_recorded_below_reward_wrappers() -> None:
    """A reward-changing wrapper does not change the recorded return."""
    overrides = [
        "env=mountaincar",
        "num_envs=1",
        "wrappers=[{name: time_limit, max_episode_steps: 10}, "
        "{name: clip_reward, min_reward: -0.5, max_reward: 0.5}]",
    ]
    with envfactory.make_vec(overrides=overrides) as envs:
        envs.reset(seed=0)
        for _ in range(10):
            _, reward, _, _, infos = envs.step(np.zeros(1, dtype=np.int64))
            assert reward[0] == -0.5
        assert infos["episode"]["r"][0] == -10.0
        assert infos["episode"]["l"][0] == 10


def _breakout(overrides: list[str]) -> list[str]:
    return ["env=breakout", "num_envs=1", *overrides]


def test_atari_with_a_user_wrapper_reports_real_games_not_lives() -> None:
    over = _breakout(["wrappers=[{name: time_limit, max_episode_steps: 100000}]"])
    with envfactory.make_vec(overrides=over) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        life_ends, games = 0, 0
        for _ in range(1500):
            _, _, term, _, infos = envs.step(envs.action_space.sample())
            life_ends += int(term[0])
            games += int(infos.get("_episode", [False])[0])
        assert games >= 1
        assert life_ends >= 4 * games  # Breakout has 5 lives per game


def test_masked_reset_after_a_lost_life_continues_the_game() -> None:
    with envfactory.make_vec(overrides=_breakout(["autoreset_mode=disabled"])) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        lives = []
        while len(lives) < 3:
            _, _, term, trunc, _ = envs.step(envs.action_space.sample())
            if term[0] or trunc[0]:
                envs.reset(options={"reset_mask": np.array([True])})
                lives.append(envs.call("get_wrapper_attr", "ale")[0].lives())
        assert lives == [4, 3, 2]
