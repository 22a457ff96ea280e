"""envfactory_sb3.to_sb3: SB3's VecEnv semantics over envfactory's vectorizers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from envfactory_sb3 import SB3VecEnv, dummy_vec_env, subproc_vec_env, to_sb3
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
)

import envfactory
from envfactory.factory import env_thunks

MODES = ("same_step", "next_step", "disabled")


def _actions(t: int, n: int) -> np.ndarray:
    return np.array([(t * 7 + 3 * i) // 5 % 2 for i in range(n)])


def _rollout(venv, steps: int = 160) -> list:
    venv.seed(3)
    out: list = [venv.reset().tolist()]
    for t in range(steps):
        obs, rew, done, infos = venv.step(_actions(t, venv.num_envs))
        ends = [
            (
                i,
                infos[i]["terminal_observation"].tolist(),
                infos[i]["TimeLimit.truncated"],
                float(infos[i]["episode_stats"]["r"]),
            )
            for i in np.flatnonzero(done)
        ]
        out.append((obs.tolist(), rew.tolist(), done.tolist(), ends))
    venv.close()
    return out


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
@pytest.mark.parametrize("mode", MODES)
def test_every_autoreset_mode_gives_sb3_dummyvecenv_trajectories(vectorizer, mode) -> None:
    """Same env constructors, same seed: SB3's own DummyVecEnv and to_sb3 over envfactory
    (every vectorizer, every autoreset mode) give the same observations, rewards, dones,
    terminal observations and TimeLimit.truncated flags, episode ends included (CartPole
    with a 30-step limit so both terminations and truncations happen)."""
    overrides = ["num_envs=3", "env.max_episode_steps=30"]
    cfg = envfactory.compose([*overrides, f"vectorizer={vectorizer}", f"autoreset_mode={mode}"])
    expected = _rollout(DummyVecEnv(env_thunks(cfg)))
    got = _rollout(to_sb3(envfactory.make_vec(cfg)))
    assert got == expected
    ends = [e for step in expected[1:] for e in step[3]]
    assert {trunc for _, _, trunc, _ in ends} == {True, False}  # both kinds were checked


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_sb3_wrappers_stack_on_it_like_on_sb3s_own() -> None:
    """VecMonitor(VecNormalize(VecFrameStack(.))) over to_sb3(subproc) matches the same stack
    over SB3's DummyVecEnv, step by step, and VecMonitor sees the same episodes."""
    cfg = envfactory.compose(["num_envs=2", "vectorizer=subproc", "autoreset_mode=next_step"])

    def stack(base):
        return VecMonitor(VecNormalize(VecFrameStack(base, n_stack=3), gamma=0.9))

    ours, theirs = stack(to_sb3(envfactory.make_vec(cfg))), stack(DummyVecEnv(env_thunks(cfg)))
    try:
        for v in (ours, theirs):
            v.seed(11)
        np.testing.assert_array_equal(ours.reset(), theirs.reset())
        episodes = [[], []]
        for t in range(120):
            a = _actions(t, 2)
            steps = [v.step(a) for v in (ours, theirs)]
            (o1, r1, d1, i1), (o2, r2, d2, i2) = steps
            assert o1.shape == (2, 12)
            np.testing.assert_allclose(o1, o2, rtol=1e-6)
            np.testing.assert_allclose(r1, r2, rtol=1e-6)
            np.testing.assert_array_equal(d1, d2)
            for k, infos in enumerate((i1, i2)):
                episodes[k] += [info["episode"]["r"] for info in infos if "episode" in info]
        assert episodes[0] == episodes[1] and len(episodes[0]) >= 4
    finally:
        ours.close()
        theirs.close()


def test_episode_statistics_reach_sb3_as_episode() -> None:
    """envfactory's episode_stats become SB3's info["episode"] (what SB3 logs as
    rollout/ep_rew_mean), with the return the rewards add up to; episode_key=None leaves
    the infos alone."""
    venv = to_sb3(envfactory.make_vec(overrides=["num_envs=2"]))
    venv.seed(0)
    venv.reset()
    total = np.zeros(2)
    seen = 0
    for t in range(200):
        _, rew, done, infos = venv.step(_actions(t, 2))
        total += rew
        for i in np.flatnonzero(done):
            ep = infos[i]["episode"]
            assert ep["r"] == total[i] and ep["l"] == int(total[i]) and ep["t"] >= 0
            total[i] = 0
            seen += 1
    assert seen >= 4
    venv.close()
    plain = to_sb3(envfactory.make_vec(overrides=["num_envs=1"]), episode_key=None)
    plain.reset()
    done = [False]
    while not done[0]:
        _, _, done, infos = plain.step(np.array([0]))
    assert "episode" not in infos[0] and "episode_stats" in infos[0]
    plain.close()


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("factory", [dummy_vec_env, subproc_vec_env])
def test_env_is_wrapped_runs_where_the_env_lives(factory) -> None:
    """env_is_wrapped runs SB3's is_wrapped in each env's own process (envfactory's
    ``call(fn)``), with indices; env_method/get_attr/set_attr take SB3's indices."""
    fns = [lambda: gym.make("CartPole-v1"), lambda: Monitor(gym.make("CartPole-v1"))] * 2
    venv = factory(fns)
    try:
        assert isinstance(venv, SB3VecEnv)
        assert venv.env_is_wrapped(Monitor) == [False, True, False, True]
        assert venv.env_is_wrapped(Monitor, indices=[1, 2]) == [True, False]
        venv.set_attr("length", 2.5, indices=[0, -1])
        assert venv.get_attr("length") == [2.5, 0.5, 0.5, 2.5]
        assert venv.env_method("get_wrapper_attr", "length", indices=3) == [2.5]
        assert venv.has_attr("length") and not venv.has_attr("no_such_attribute")
    finally:
        venv.close()


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("vectorizer", ["gymnasium-sync", "gymnasium-async", "gym-sync"])
def test_env_is_wrapped_over_wrapper_vectorizers(vectorizer: str) -> None:
    """The vectorizers that wrap gymnasium's own vector envs (envfactory-gymnasium,
    envfactory-example) answer env_is_wrapped through call(fn), also when their envs are
    in gymnasium's worker processes."""
    venv = to_sb3(envfactory.make_vec(overrides=[f"vectorizer={vectorizer}", "num_envs=3"]))
    try:
        assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True, True]
        assert venv.env_is_wrapped(Monitor, indices=[0, 2]) == [False, False]
    finally:
        venv.close()


def test_render_and_get_images() -> None:
    """render() tiles one rgb_array frame per env (SB3's tile_images); get_images gives
    them one by one."""
    venv = to_sb3(envfactory.make_vec(overrides=["num_envs=3", "env.render_mode=rgb_array"]))
    venv.reset()
    frames = venv.get_images()
    assert len(frames) == 3 and frames[0].shape == (400, 600, 3)
    big = venv.render()
    assert big.shape == (800, 1200, 3) and big[:400, :600].any()
    venv.close()


class SeesOptions(gym.Env):
    """Says in its reset info what ``reset`` got as ``options`` (``'absent'``: no keyword)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, **kwargs):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"options": repr(kwargs.get("options", "absent"))}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= 2, False, {}


class NoOptions(SeesOptions):
    """``reset(seed=None)`` only, as SB3's ``NanAndInfEnv`` (its test_vec_check_nan.py)."""

    def reset(self, seed=None):
        return super().reset(seed=seed)


@pytest.mark.parametrize("factory", [dummy_vec_env, subproc_vec_env])
def test_options_reach_an_env_only_when_the_caller_gave_them_as_sb3(factory) -> None:
    """Issue 38: SB3 passes ``options`` to an env's reset only when ``set_options`` gave it
    non-empty ones (its autoreset passes none); to_sb3 gives each env what SB3's own
    DummyVecEnv gives it, and an env whose reset takes no ``options`` runs (before: every
    reset passed ``options=None``, a TypeError from such an env)."""
    settings = {
        SeesOptions: [None, {}, {"low": 0.1}, [{"low": 0.2}, {}, None]],
        NoOptions: [None, {}, [{}, None, {}]],  # (options given to it are SB3's TypeError too)
    }
    for env_cls, options_list in settings.items():
        theirs, ours = DummyVecEnv([env_cls] * 3), factory([env_cls] * 3)
        for options in options_list:
            for venv in (theirs, ours):
                venv.seed(5)
                venv.set_options(options)
                venv.reset()
            assert ours.reset_infos == theirs.reset_infos, (env_cls.__name__, options)
            if env_cls is NoOptions:
                assert {info["options"] for info in ours.reset_infos} == {"'absent'"}
            for t in range(4):  # autoresets (episodes of 2 steps) pass no options either
                actions = np.zeros(3, np.int64)
                step_ours, step_theirs = ours.step(actions), theirs.step(actions)
                assert step_ours[2].tolist() == step_theirs[2].tolist(), t
                assert ours.reset_infos == theirs.reset_infos, t
        ours.close()
        theirs.close()


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(TypeError, match=r"must be a gymnasium.vector.VectorEnv .* got CartPole"):
        to_sb3(gym.make("CartPole-v1").unwrapped)
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="same object"):
        dummy_vec_env([lambda: env] * 2)
    with pytest.raises(ValueError, match=r"cannot find context for 'fok': start_method must"):
        subproc_vec_env([lambda: gym.make("CartPole-v1")], start_method="fok")
    with pytest.raises(envfactory.ConfigError, match=r"unknown option\(s\) \['in_serie'\]"):
        subproc_vec_env([lambda: gym.make("CartPole-v1")], in_serie=1)
    with pytest.raises(envfactory.ConfigError, match="timeout"):
        subproc_vec_env([lambda: gym.make("CartPole-v1")], timeout=-1)
    venv = dummy_vec_env([lambda: gym.make("CartPole-v1")])
    venv.close()
    venv.close()  # idempotent
    with pytest.raises(envfactory.ClosedError, match=r"reset\(\) on a closed SB3VecEnv"):
        venv.reset()


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_call_runs_a_function_next_to_each_env(vectorizer) -> None:
    """envfactory's call/env_method take a function, run as fn(env, *args, **kwargs) where
    the env lives (what env_is_wrapped needs); get_attr refuses one with one line."""
    import os

    with envfactory.make_vec(overrides=[f"vectorizer={vectorizer}", "num_envs=3"]) as envs:
        pids = envs.call(lambda env, k: (os.getpid(), env.unwrapped.gravity * k), 2)
        assert [g for _, g in pids] == [19.6] * 3
        assert ({p for p, _ in pids} == {os.getpid()}) == (vectorizer == "dummy")
        assert envs.env_method(lambda env: type(env.unwrapped).__name__, indices=[2]) == [
            "CartPoleEnv"
        ]
        with pytest.raises(TypeError, match=r"get_attr\(name\) takes an attribute name"):
            envs.get_attr(len)


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_pickling_is_one_clear_type_error_and_vecnormalize_saves(vectorizer, tmp_path) -> None:
    """Issue 18: ``pickle.dumps(to_sb3(...))`` raised ``Can't pickle local object
    '_checker.<locals>.check_discrete'`` under dummy (an AttributeError) and a
    multiprocessing error under subproc. Now one TypeError that says what to do, while
    what SB3 really saves (VecNormalize's statistics) still saves and loads."""
    import copy
    import pickle

    overrides = [f"vectorizer={vectorizer}", "num_envs=2"]
    venv = to_sb3(envfactory.make_vec(overrides=overrides))
    try:
        for attempt in (pickle.dumps, copy.deepcopy):
            with pytest.raises(TypeError, match=r"cannot pickle an SB3VecEnv: it holds live envs"):
                attempt(venv)
        norm = VecNormalize(venv)
        norm.reset()
        norm.step(np.array([0, 1]))
        with pytest.raises(TypeError, match="cannot pickle an SB3VecEnv"):
            pickle.dumps(VecFrameStack(venv, 2))
        norm.save(tmp_path / "vecnormalize.pkl")
    finally:
        venv.close()
    fresh = to_sb3(envfactory.make_vec(overrides=overrides))
    loaded = VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), fresh)
    assert loaded.obs_rms.count == norm.obs_rms.count
    loaded.close()
