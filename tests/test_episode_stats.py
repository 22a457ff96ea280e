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
