"""Episode statistics: envfactory's own (``infos["episode_stats"]``, the config's
``episode_stats_key``) reach the infos however an episode ends, and gymnasium's own
``RecordEpisodeStatistics`` (``infos["episode"]``) works unchanged next to them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.vector import RecordEpisodeStatistics

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
                assert infos["_episode_stats"].all()
                assert (infos["episode_stats"]["l"] == 25).all()
                assert (infos["episode_stats"]["r"] == -25.0).all()
                seen += 1
            else:
                assert "episode_stats" not in infos
            assert "episode" not in infos  # gymnasium's key is left to gymnasium
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
        assert infos["episode_stats"]["r"][0] == -10.0
        assert infos["episode_stats"]["l"][0] == 10


def _stats_trace(envs: gym.vector.VectorEnv, steps: int, key: str = "episode") -> list[Any]:
    """Per step: which envs reported ``infos[key]`` and their (r, l)."""
    envs.reset(seed=0)
    space = gym.spaces.MultiDiscrete([2] * envs.num_envs, seed=0)
    trace: list[Any] = []
    for _ in range(steps):
        infos = envs.step(space.sample())[4]
        if key in infos:
            mask = infos[f"_{key}"]
            trace.append((mask.tolist(), infos[key]["r"][mask].tolist(),
                          infos[key]["l"][mask].tolist()))  # fmt: skip
        else:
            trace.append(None)
    return trace


def _sync_cartpole(n: int, per_env: bool = False) -> gym.vector.VectorEnv:
    def make() -> gym.Env:
        env = gym.make("CartPole-v1")
        return gym.wrappers.RecordEpisodeStatistics(env) if per_env else env

    return gym.vector.SyncVectorEnv([make] * n)


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_gymnasium_vector_record_episode_statistics_works_unchanged(vectorizer: str) -> None:
    """CleanRL's loop: gymnasium's vector RecordEpisodeStatistics around make_vec gives the
    same statistics as around gymnasium's own SyncVectorEnv (it used to raise "key
    'episode' already exists" at the first episode end)."""
    over = [f"vectorizer={vectorizer}", "num_envs=3"]
    with envfactory.make_vec(overrides=over) as envs:
        ours = _stats_trace(RecordEpisodeStatistics(envs), 150)
    ref = RecordEpisodeStatistics(_sync_cartpole(3))
    theirs = _stats_trace(ref, 150)
    ref.close()
    assert ours == theirs
    assert sum(t is not None for t in theirs) >= 3  # episodes did end


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_record_episode_statistics_in_wrappers_works(vectorizer: str) -> None:
    """gymnasium's per-env RecordEpisodeStatistics in ``wrappers`` (it used to fail with a
    bare AssertionError at the first episode end); envfactory's own key still reports."""
    over = [
        f"vectorizer={vectorizer}",
        "num_envs=3",
        "wrappers=[{name: record_episode_statistics}]",
    ]
    with envfactory.make_vec(overrides=over) as envs:
        ours = _stats_trace(envs, 150)
        builtin = _stats_trace(envs, 150, key="episode_stats")
    ref = _sync_cartpole(3, per_env=True)
    theirs = _stats_trace(ref, 150)
    ref.close()
    assert ours == theirs == builtin
    assert sum(t is not None for t in theirs) >= 3


def test_episode_stats_key_renames_or_turns_off_the_builtin_statistics() -> None:
    with envfactory.make_vec(overrides=["num_envs=2", "episode_stats_key=stats"]) as envs:
        renamed = _stats_trace(envs, 100, key="stats")
    with envfactory.make_vec(overrides=["num_envs=2", "episode_stats_key=null"]) as envs:
        off = _stats_trace(envs, 100, key="episode_stats")
    assert any(t is not None for t in renamed)
    assert all(t is None for t in off)
    env = envfactory.make_env(overrides=["episode_stats_key=null"])
    assert "EpisodeStatistics" not in str(env)
    env.close()
    with pytest.raises(envfactory.ConfigError, match="episode_stats_key"):
        envfactory.make_vec(overrides=["episode_stats_key=_x"])


def _breakout(overrides: list[str]) -> list[str]:
    return ["env=breakout", "num_envs=1", *overrides]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_atari_with_a_user_wrapper_reports_real_games_not_lives() -> None:
    over = _breakout(["wrappers=[{name: time_limit, max_episode_steps: 100000}]"])
    with envfactory.make_vec(overrides=over) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        life_ends, games = 0, 0
        for _ in range(1500):
            _, _, term, _, infos = envs.step(envs.action_space.sample())
            life_ends += int(term[0])
            games += int(infos.get("_episode_stats", [False])[0])
        assert games >= 1
        assert life_ends >= 4 * games  # Breakout has 5 lives per game


def _first_game(extra: list[str]) -> dict[str, Any]:
    """Play SpaceInvaders (3 lives, 5 to 30 points a kill) until the first real game over,
    with gymnasium's vector RecordEpisodeStatistics outside."""
    over = ["env=atari", "env.id=ALE/SpaceInvaders-v5", "num_envs=1", "env.fire_reset=false"]
    with envfactory.make_vec(overrides=over + extra) as vec:
        envs = RecordEpisodeStatistics(vec)
        envs.reset(seed=3)
        space = gym.spaces.MultiDiscrete([envs.single_action_space.n], seed=3)
        rewards, lives = [], []
        for _ in range(5000):
            _, rew, _, _, infos = envs.step(space.sample())
            rewards.append(float(rew[0]))
            if infos.get("_episode", [False])[0]:
                lives.append(float(infos["episode"]["r"][0]))
            if infos.get("_episode_stats", [False])[0]:
                game = float(infos["episode_stats"]["r"][0])
                return {"game": game, "lives": lives, "rewards": rewards}
    raise AssertionError("no game over in 5000 steps")


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_builtin_statistics_give_the_real_atari_score() -> None:
    """With DeepMind's defaults (clipped rewards, one episode per life), envfactory's key
    reports the real game score at the real game over; gymnasium's wrapper outside the
    family reports what the learner sees (clipped, per life)."""
    clipped = _first_game([])
    raw = _first_game(["env.clip_reward=false"])
    assert len(clipped["lives"]) == 3  # gymnasium's: one episode per life
    assert clipped["game"] == raw["game"] == sum(raw["rewards"])  # the real score
    assert sum(clipped["lives"]) == sum(clipped["rewards"]) < clipped["game"]
    assert set(clipped["rewards"]) <= {0.0, 1.0}  # what the learner sees is clipped


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


def test_the_users_wrappers_are_applied_with_episode_stats_off() -> None:
    """A new user's trial (issue 28's re-trial): ``episode_stats_key=null`` dropped every
    wrapper of ``wrappers`` without a word (TimeLimit, ClipReward, even the
    ``record_episode_statistics`` the docs tell you to add then)."""
    import gymnasium as gym

    import envfactory

    env = envfactory.make_env(
        envfactory.compose(
            [
                "episode_stats_key=null",
                "wrappers=[{name: time_limit, max_episode_steps: 5}, record_episode_statistics]",
            ]
        )
    )
    names = []
    e: gym.Env = env
    while isinstance(e, gym.Wrapper):
        names.append(type(e).__name__)
        e = e.env
    assert "TimeLimit" in names and "RecordEpisodeStatistics" in names
    env.reset(seed=0)
    for t in range(5):
        *_, trunc, info = env.step(0 if t % 2 else 1)
    assert trunc and "episode" in info
