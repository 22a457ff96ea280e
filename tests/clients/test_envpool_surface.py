"""envpool 1.2's surface as envpool's own test files use it (classic_control, toy_text, box2d,
atari, make_test, api_test; issue 38), written here: one test per behaviour those files
check, on the env families envfactory claims. Each failed before issue 38 (the old module
had no ``make_spec`` / ``env.spec``, gave the classic gym API from ``make_gym`` without
gym, refused ``step`` before ``reset``, ``render_mode``, ``mode`` / ``difficulty``, dropped
the env's infos, counted the FIRE presses in the time limit and could not build
Backgammon)."""

from __future__ import annotations

from pathlib import Path
from typing import get_type_hints

import gymnasium as gym
import numpy as np
import pytest

import envfactory.envpool as envpool
from envfactory.errors import AlreadyPendingError, ConfigError

ATARI_SMALL = {"num_envs": 1, "seed": 0}


def test_version_typing_names_and_required_env_type() -> None:
    """make_test: ``__version__``, ``py.typed``, the public names, and ``make`` without
    ``env_type`` is a TypeError (envpool's signature)."""
    assert envpool.__version__ == "1.2.4"
    assert Path(envpool.__file__).with_name("py.typed").is_file()
    for name in ("EnvSpec", "EnvPool", "DMEnvPool", "GymnasiumEnvPool", "make_spec"):
        assert name in envpool.__all__
    assert get_type_hints(envpool.make_spec)["return"] is envpool.EnvSpec
    assert get_type_hints(envpool.make_gym)["return"] is envpool.GymnasiumEnvPool
    assert get_type_hints(envpool.make_dm)["return"] is envpool.DMEnvPool
    with pytest.raises(TypeError):
        envpool.make("CartPole-v1")  # type: ignore[call-arg]
    assert "pong" in envpool.atari_game_list
    # envpool's id of a game is its ROM's pieces capitalized (ale-py's: TicTacToe3D)
    assert "TicTacToe3d-v5" in envpool.list_all_envs()
    assert envpool.make_spec("TicTacToe3d-v5").config.task == "tic_tac_toe_3d"


def test_make_spec_and_env_spec_give_envpools_config() -> None:
    """make_test / api_test / box2d_deterministic_test: ``make_spec`` without a pool, and
    ``env.spec`` of one: ``config`` (a namedtuple), ``reward_threshold``, spaces, array
    specs."""
    spec = envpool.make_spec("CartPole-v1", num_envs=3)
    assert spec.config.max_episode_steps == 500 and spec.config.num_envs == 3
    assert spec.reward_threshold == 475.0
    assert spec.action_space == gym.spaces.Discrete(2)
    assert spec.observation_space.shape == (4,)
    assert envpool.make_spec("Pendulum-v1", max_episode_steps=3).config.max_episode_steps == 3
    for task, n in (("Pong-v5", 6), ("Breakout-v5", 4)):
        spec = envpool.make_spec(task)
        assert spec.action_array_spec["action"].maximum + 1 == n
        assert len(spec.action_array_spec) == 3 and spec.action_space.n == n
        obs = spec.observation_space
        assert (
            isinstance(obs, gym.spaces.Box) and obs.dtype == np.uint8 and obs.shape == (4, 84, 84)
        )
        assert spec.state_array_spec["info:ram"].dtype == np.uint8
        assert spec.state_array_spec["info:ram"].shape == [128]
        assert spec.reward_threshold is None
    with envpool.make_gymnasium("Pendulum-v1", num_envs=2) as env:
        assert env.spec.config.max_episode_steps == 200 and env.spec.config.num_envs == 2
        assert env.spec.observation_space == env.observation_space
    with pytest.raises(ConfigError, match=r"unknown option 'stack_nm'.*Did you mean 'stack_num'"):
        envpool.make_spec("Pong-v5", stack_nm=4)


def test_box2d_ids_old_and_new() -> None:
    """box2d_deterministic_test: envpool's Box2D ids, old (``-v2``) and new, with their
    limits. Box2D is gymnasium's optional ``box2d`` extra."""
    pytest.importorskip("Box2D")
    limits = {"CarRacing-v2": 1000, "LunarLander-v2": 1000, "BipedalWalkerHardcore-v3": 2000}
    for task, steps in limits.items():
        assert envpool.make_spec(task).config.max_episode_steps == steps
    with envpool.make_gym("LunarLander-v2", num_envs=2, seed=0) as env:
        obs, _, _, _, _ = env.step(np.zeros(2, dtype=int))
        np.testing.assert_array_equal(obs[1], gym.make("LunarLander-v3").reset(seed=1)[0])


def test_toy_text_ids_envpool_lists() -> None:
    """toy_text_test: envpool's ``Taxi-v3`` is gymnasium's ``Taxi-v4`` (gymnasium 1.4 has no
    v3), FrozenLake and CliffWalking as gymnasium's."""
    with envpool.make_gymnasium("Taxi-v3", num_envs=2, seed=0) as env:
        assert env.observation_space == gym.spaces.Discrete(500) and env.action_space.n == 6
        obs, _ = env.reset()
        assert obs[1] == gym.make("Taxi-v4").reset(seed=1)[0]
    assert envpool.make_spec("FrozenLake8x8-v1").observation_space.n == 64


def test_make_gym_is_make_gymnasium() -> None:
    """envpool 1.2: ``make_gym`` is gymnasium's API whether or not ``gym`` is installed
    (before: the classic 4-tuple API without gym); ``gym_reset_return_info=False`` is
    refused, as envpool 1.2 refuses it."""
    with envpool.make_gym("CartPole-v1", num_envs=2, seed=0) as env:
        assert isinstance(env.action_space, gym.spaces.Discrete)
        obs, info = env.reset()
        assert obs.shape == (2, 4) and info["env_id"].tolist() == [0, 1]
        out = env.step(np.zeros(2, dtype=int))
        assert len(out) == 5 and out[2].dtype == np.bool_ and out[3].dtype == np.bool_
    with pytest.raises(ConfigError, match="gym_reset_return_info=False is not offered"):
        envpool.make_gym("CartPole-v1", gym_reset_return_info=False)


def test_the_pool_starts_done_so_a_first_step_resets() -> None:
    """classic_control_test steps without ``reset``: the first step of an env is its reset
    (the action ignored, reward 0, no flags, elapsed 0), seeded ``seed + i``; a subset too."""
    with envpool.make_gym("CartPole-v1", num_envs=3, seed=7) as env:
        obs, rew, term, trunc, info = env.step(np.ones(3, dtype=int))
        for i in range(3):
            ref, _ = gym.make("CartPole-v1").reset(seed=7 + i)
            np.testing.assert_array_equal(obs[i], ref)
        assert not rew.any() and not term.any() and not trunc.any()
        assert info["elapsed_step"].tolist() == [0, 0, 0]
        _, rew, _, _, info = env.step(np.ones(3, dtype=int))
        assert rew.tolist() == [1, 1, 1] and info["elapsed_step"].tolist() == [1, 1, 1]
    with envpool.make_gym("CartPole-v1", num_envs=3, seed=7) as env:
        obs, _ = env.reset(env_id=np.array([1]))  # resets every env underneath
        np.testing.assert_array_equal(obs[0], gym.make("CartPole-v1").reset(seed=8)[0])
        _, rew, _, _, info = env.step(np.zeros(3, dtype=int))
        assert info["env_id"].tolist() == [0, 1, 2] and rew.tolist() == [1, 1, 1]

    with envpool.make_gym("CartPole-v1", num_envs=3, seed=7) as env:
        obs, rew, _, _, info = env.step(np.zeros(2, dtype=int), env_id=np.array([2, 0]))
        assert info["env_id"].tolist() == [2, 0] and rew.tolist() == [0, 0]
        np.testing.assert_array_equal(obs[0], gym.make("CartPole-v1").reset(seed=9)[0])
        _, rew, _, _, info = env.step(np.zeros(3, dtype=int))
        assert rew.tolist() == [1, 1, 1] and info["elapsed_step"].tolist() == [1, 1, 1]

    with envpool.make_gym("CartPole-v1", num_envs=2, seed=7) as env:
        env.send(np.zeros(2, dtype=int))  # the reset, done here
        with pytest.raises(AlreadyPendingError, match=r"before recv\(\) of the first reset"):
            env.send(np.zeros(2, dtype=int))
        _, rew, _, _, info = env.recv()
        assert rew.tolist() == [0, 0] and info["env_id"].tolist() == [0, 1]


def test_same_seed_same_steps_other_seed_other_steps() -> None:
    """classic_control_test's deterministic check, from the first step."""
    envs = [envpool.make_gym("Acrobot-v1", num_envs=2, seed=s) for s in (0, 0, 1)]
    try:
        rng = np.random.default_rng(0)
        for _ in range(30):
            action = rng.integers(0, 3, size=2)
            a, b, c = (e.step(action)[0] for e in envs)
            np.testing.assert_array_equal(a, b)
            assert not np.allclose(a, c)
    finally:
        for e in envs:
            e.close()


def test_render_mode_and_render_env_ids() -> None:
    """classic_control_render_test / box2d_render_test: ``render()`` is env 0's frame,
    ``render(env_ids=...)`` those envs', stacked; rendering changes nothing; frames are
    gymnasium's own, or resized to ``render_width`` x ``render_height``."""
    with envpool.make_gymnasium("CartPole-v1", num_envs=2, seed=0, render_mode="rgb_array") as env:
        obs, _ = env.reset()
        frame0, frame1, both = env.render(), env.render(env_ids=1), env.render(env_ids=[0, 1])
        assert frame0.shape == frame1.shape == (1, 400, 600, 3) and both.shape == (2, 400, 600, 3)
        assert frame0.dtype == np.uint8
        np.testing.assert_array_equal(frame0[0], both[0])
        np.testing.assert_array_equal(frame1[0], both[1])
        np.testing.assert_array_equal(frame0, env.render())
        oracle = gym.make("CartPole-v1", render_mode="rgb_array")
        oracle.reset(seed=0)
        oracle.unwrapped.state = np.asarray(obs[0], dtype=np.float64)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(frame0[0], oracle.render())
    with envpool.make_gymnasium(
        "Pendulum-v1", num_envs=2, render_mode="rgb_array", render_width=64, render_height=48
    ) as env:
        env.reset()
        assert env.render(env_ids=[0, 1]).shape == (2, 48, 64, 3)
    with envpool.make_gymnasium("CartPole-v1", num_envs=1) as env:
        env.reset()
        with pytest.raises(RuntimeError, match=r"render_mode='rgb_array'"):
            env.render()
    with pytest.raises(ConfigError, match=r"render_mode='rgb' is not one of"):
        envpool.make_gymnasium("CartPole-v1", render_mode="rgb")
    with pytest.raises(ConfigError, match=r"render_width=0 must be an int >= 1"):
        envpool.make_gymnasium("CartPole-v1", render_mode="rgb_array", render_width=0)


def test_the_envs_own_infos_reach_the_caller() -> None:
    """toy_text_test: CliffWalking's ``info["prob"]`` at reset and step (as plain
    ``make_vec`` gives it)."""
    with envpool.make_gymnasium("CliffWalking-v1") as env:
        _, info = env.reset()
        np.testing.assert_allclose(info["prob"], 1.0)
        _, _, _, _, info = env.step(np.array([0]))
        np.testing.assert_allclose(info["prob"], 1.0)
        assert info["prob"].shape == (1,)


def test_atari_infos_are_envpools_seven_with_ram() -> None:
    """api_test / atari_envpool_test: ``info["ram"]`` (uint8, 128 bytes a row, changing as
    the game runs) among envpool's seven Atari info keys."""
    with envpool.make_gym("Pong-v5", num_envs=2, seed=0) as env:
        _, info = env.reset()
        assert set(info) == {
            "env_id",
            "players",
            "elapsed_step",
            "lives",
            "reward",
            "terminated",
            "ram",
        }
        assert info["ram"].dtype == np.uint8 and info["ram"].shape == (2, 128)
        before = info["ram"].copy()
        changed = False
        for _ in range(16):
            _, _, _, _, info = env.step(np.ones(2, dtype=np.int32))
            changed = changed or not np.array_equal(info["ram"], before)
        assert changed and len(info) == 7


def test_atari_time_limit_counts_agent_steps_only() -> None:
    """atari_envpool_test's partial step: ``max_episode_steps=10`` truncates at the agent's
    10th step with ``elapsed_step`` 10 (before: at step 8, the two FIRE presses counted)."""
    with envpool.make_gym("Pong-v5", num_envs=3, max_episode_steps=10, seed=0) as env:
        env.reset()
        env.step(np.zeros(1, dtype=int), env_id=np.array([1]))  # env 1 one step ahead
        for step in range(1, 10):
            _, _, _, trunc, info = env.step(np.zeros(3, dtype=int))
            assert trunc.tolist() == [False, step == 9, False], step
        assert info["elapsed_step"].tolist() == [9, 10, 9]
        _, _, _, trunc, info = env.step(np.zeros(2, dtype=int), env_id=np.array([0, 2]))
        assert trunc.all() and info["elapsed_step"].tolist() == [10, 10]


def test_a_gymnasium_env_and_a_vector_env_for_gymnasiums_wrappers() -> None:
    """make_test / classic_control_test: ``gymnasium.Env`` (``gymnasium.Wrapper`` takes it)
    and a ``VectorEnv`` with ``num_envs``, ``single_*_space`` (envpool's per-env spaces),
    ``is_vector_env``, so ``NormalizeObservation`` wraps it."""
    with envpool.make_gym("CartPole-v1", num_envs=4) as env:
        assert isinstance(env, gym.Env) and isinstance(env, gym.vector.VectorEnv)
        assert gym.Wrapper(env).unwrapped is env
        assert env.num_envs == 4 and env.is_vector_env
        assert env.single_observation_space is env.observation_space
        assert env.single_action_space is env.action_space
        wrapped = gym.wrappers.vector.NormalizeObservation(env)
        obs, _ = wrapped.reset()
        assert obs.shape == (4, 4)
        obs, rew, term, trunc, _ = wrapped.step(np.zeros(4, dtype=np.int32))
        assert obs.shape == (4, 4) and rew.shape == term.shape == trunc.shape == (4,)


def test_reset_takes_gymnasiums_keywords() -> None:
    """A vector wrapper calls ``reset(seed=..., options=...)``: the seed is envpool's (fixed
    at make, a warning), ``reset_mask`` picks envs."""
    with envpool.make_gym("CartPole-v1", num_envs=3, seed=0) as env:
        with pytest.warns(UserWarning, match="reset\\(seed=...\\) is ignored"):
            env.reset(seed=5)
        obs, info = env.reset(options={"reset_mask": np.array([False, True, True])})
        assert obs.shape == (2, 4) and info["env_id"].tolist() == [1, 2]


def test_atari_mode_and_difficulty() -> None:
    """api_test / atari_envpool_test: ``mode`` / ``difficulty`` (-1: the game's default)
    change the game."""
    assert envpool.make_spec("Breakout-v5").config.difficulty == -1
    spec = envpool.make_spec("Breakout-v5", mode=4, difficulty=1)
    assert (spec.config.mode, spec.config.difficulty) == (4, 1)
    raw = dict(ATARI_SMALL, stack_num=1, frame_skip=1, noop_max=1, use_fire_reset=False)
    raw.update(gray_scale=False, img_height=210, img_width=160, use_inter_area_resize=False)
    for task, option in (("Breakout-v5", {"difficulty": 1}), ("Freeway-v5", {"mode": 1})):
        with envpool.make_gym(task, **raw) as a, envpool.make_gym(task, **raw, **option) as b:
            assert b.spec.config[0] is not None
            assert not np.array_equal(a.reset()[0], b.reset()[0]), task
    with pytest.raises(ConfigError, match=r"mode=1\.5 must be an int >= -1"):
        envpool.make_gym("Breakout-v5", mode=1.5)


def test_backgammon_builds_and_steps() -> None:
    """``Backgammon-v5`` (in ``list_all_envs()``) has no NOOP in its action set: its
    random no-ops are the console's NOOP (before: the build failed); games that cannot
    build are not listed (before: ``Combat-v5`` was, and failed to build)."""
    assert "Backgammon-v5" in envpool.list_all_envs()
    # ale-py ships these ROMs but registers no env for them (they do not load): not listed
    for broken in ("Combat", "Joust", "MazeCraze", "Warlords"):
        assert f"{broken}-v5" not in envpool.list_all_envs()
        with pytest.raises(ConfigError, match=f"unknown task_id '{broken}-v5'"):
            envpool.make_gym(f"{broken}-v5")
    with envpool.make_gym("Backgammon-v5", **ATARI_SMALL) as env:
        obs, _ = env.reset()
        assert obs.shape == (1, 4, 84, 84)
        env.step(np.zeros(1, dtype=int))
