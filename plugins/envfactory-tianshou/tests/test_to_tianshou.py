"""``to_tianshou``: Tianshou's own ``Collector`` over envfactory envs.

The reference is Tianshou's ``DummyVectorEnv`` over the same gymnasium envs with the same
seeds (Tianshou's PyPI sdist ships no tests, so its classes are the reference): the
replay buffers the two collectors fill must be equal, for ``n_step`` and for
``n_episode`` (where Tianshou steps only the unfinished envs).
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from envfactory_tianshou import TianshouVectorEnv, to_tianshou
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import BaseVectorEnv, DummyVectorEnv
from tianshou.utils.net.common import Net

import envfactory
from envfactory.errors import AlreadyPendingError, ClosedError, NoPendingCallError
from envfactory.vectorizers.asyncpool.pool import SubprocPool
from envfactory.vectorizers.subproc import SubprocVecEnv

N = 3
VECTORIZERS = {
    "dummy": ["vectorizer=dummy"],
    "subproc": ["vectorizer=subproc"],
    "pool": ["vectorizer=subproc", "vectorizer.batch_size=1"],
    "pool3": ["vectorizer=subproc", f"vectorizer.batch_size={N}"],
}


def _policy() -> DiscreteQLearningPolicy:
    torch.manual_seed(0)
    net = Net(state_shape=4, action_shape=2, hidden_sizes=[16])
    return DiscreteQLearningPolicy(model=net, action_space=gym.spaces.Discrete(2), eps_training=0.3)


def _envfactory(name: str) -> TianshouVectorEnv:
    overrides = [f"num_envs={N}", "episode_stats_key=null", *VECTORIZERS[name]]
    return to_tianshou(envfactory.make_vec(overrides=overrides))


def _collect(venv: BaseVectorEnv, **how: int) -> tuple[VectorReplayBuffer, object]:
    venv.seed(11)
    buffer = VectorReplayBuffer(2000, len(venv))
    collector = Collector(_policy(), venv, buffer)
    collector.reset()
    stats = collector.collect(random=True, **how)
    return buffer, stats


@pytest.mark.parametrize("vectorizer", list(VECTORIZERS))
@pytest.mark.parametrize("how", [{"n_step": 90}, {"n_episode": 7}], ids=["n_step", "n_episode"])
def test_same_seeds_collect_the_same_episodes_as_dummy_vector_env(
    vectorizer: str, how: dict[str, int]
) -> None:
    ref = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(N)])
    ref_buffer, ref_stats = _collect(ref, **how)
    venv = _envfactory(vectorizer)
    buffer, stats = _collect(venv, **how)
    venv.close()
    ref.close()
    assert len(buffer) == len(ref_buffer) > 0
    for key in ("obs", "act", "rew", "terminated", "truncated", "obs_next"):
        np.testing.assert_array_equal(getattr(buffer, key), getattr(ref_buffer, key), key)
    assert stats.n_collected_episodes == ref_stats.n_collected_episodes  # type: ignore[attr-defined]
    if "n_episode" in how:
        assert stats.n_collected_episodes == how["n_episode"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("vectorizer", ["dummy", "pool", "pool3"])
def test_a_subset_step_moves_only_those_envs(vectorizer: str) -> None:
    venv = _envfactory(vectorizer)
    assert isinstance(venv, BaseVectorEnv) and len(venv) == N and not venv.is_async
    venv.seed(0)
    obs, infos = venv.reset()
    assert [info["env_id"] for info in infos] == [0, 1, 2]
    _obs2, rew, _term, _trunc, infos = venv.step(np.array([1, 0]), id=[2, 0])
    assert [info["env_id"] for info in infos] == [2, 0] and rew.tolist() == [1.0, 1.0]
    # env 1 did not move: a full step from here equals a fresh copy's first step
    full, *_ = venv.step(np.array([0, 0, 0]))
    ref = gym.make("CartPole-v1")
    ref.reset(seed=1)  # seed(0), then the reset above (no seed: the generator goes on)
    ref.reset()
    np.testing.assert_array_equal(full[1], ref.step(0)[0])
    obs, infos = venv.reset(env_id=[1])
    assert obs.shape == (1, 4) and infos[0]["env_id"] == 1
    venv.close()


class _Clock(gym.Env):
    """Each step takes 0.4 s and says when it started and ended (``t0``, ``t1``)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple:
        t0 = time.monotonic()
        time.sleep(0.4)
        return np.zeros(1, np.float32), 1.0, False, False, {"t0": t0, "t1": time.monotonic()}


def test_a_pool_of_any_batch_size_steps_a_subset_in_parallel() -> None:
    """``batch_size`` larger than the subset (3 envs, a step of 2): the two envs step at
    the same time (the pool's send then recv(env_ids=...)), not one after the other."""
    pool = SubprocPool([_Clock] * N, N, in_series=1, context="fork")
    venv = to_tianshou(pool)
    venv.reset()
    _obs, rew, _term, _trunc, infos = venv.step(np.array([1, 0]), id=[2, 0])
    venv.close()
    assert [info["env_id"] for info in infos] == [2, 0] and rew.tolist() == [1.0, 1.0]
    starts, ends = [info["t0"] for info in infos], [info["t1"] for info in infos]
    assert max(starts) < min(ends), (starts, ends)  # the two steps overlap in time


def test_env_attrs_and_spaces_per_env() -> None:
    venv = _envfactory("dummy")
    assert venv.action_space == [gym.spaces.Discrete(2)] * N
    assert venv.get_env_attr("gravity", id=1) == [9.8]
    venv.set_env_attr("gravity", 3.0, id=[0, 2])
    assert venv.get_env_attr("gravity") == [3.0, 9.8, 3.0]
    venv.close()
    with pytest.raises(AssertionError, match="cannot be called after close"):
        venv.reset()


def test_bad_venvs_are_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"takes a gymnasium\.vector\.VectorEnv"):
        to_tianshou(gym.make("CartPole-v1"))  # type: ignore[arg-type]
    envs = envfactory.make_vec(overrides=["num_envs=2", "autoreset_mode=same_step"])
    with pytest.raises(ValueError, match="autoreset_mode=next_step"):
        to_tianshou(envs)
    envs.close()


def test_a_closed_venv_is_refused_as_to_sb3_refuses_it() -> None:
    envs = envfactory.make_vec(overrides=["num_envs=2"])
    envs.close()
    with pytest.raises(ClosedError, match=r"to_tianshou\(venv\): the venv is closed"):
        to_tianshou(envs)


class _FailsOnce(gym.Env):
    """Steps of reward 1 in episodes of 4; its ``at``-th step raises, once per test (the
    flag file), as a simulator fault."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, flag: str, at: int) -> None:
        self.flag, self.at, self.steps, self.t = flag, at, 0, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple:
        self.steps += 1
        if self.steps == self.at and not os.path.exists(self.flag):
            Path(self.flag).touch()
            raise RuntimeError("the simulator failed on purpose")
        self.t += 1
        return np.full(1, self.t / 10, np.float32), 1.0, self.t >= 4, False, {}


def test_restart_covers_a_subset_step_of_collect_n_episode(tmp_path: Path) -> None:
    """With ``restart=true`` an env fault in a step of a subset (``collect(n_episode=...)``
    steps only the unfinished envs) ends that env's episode truncated, with
    ``restarted``, as a full step does; before, it crashed the Collector."""
    fns = [functools.partial(_FailsOnce, str(tmp_path / "flag"), 6 + i) for i in range(N)]
    venv = to_tianshou(SubprocVecEnv(fns, restart=True, in_series=1, context="fork"))
    assert not isinstance(venv.venv, SubprocPool)
    venv.reset()
    venv.step(np.zeros(N, dtype=int))  # one full step: the faulty env is at its step 6 later
    with pytest.warns(RuntimeWarning, match=r"(?s)restarting after: .*simulator failed on purpose"):
        last = None
        for _ in range(5):
            obs, rew, _term, trunc, infos = venv.step(np.array([0, 0]), id=[2, 0])
            if trunc.any():
                break
            last = obs[1]
    assert trunc.tolist() == [False, True] and rew.tolist() == [1.0, 0.0], (trunc, rew)
    assert infos[1]["restarted"] and infos[1]["env_id"] == 0
    np.testing.assert_array_equal(obs[1], last)  # the last observation it returned
    obs, _ = venv.reset(env_id=[0])
    _, rew, _, trunc, _ = venv.step(np.array([0]), id=[0])  # it steps on
    assert rew.tolist() == [1.0] and not trunc.any()
    venv.close()

    flag = tmp_path / "flag2"
    fns = [functools.partial(_FailsOnce, str(flag), 9) for _ in range(N)]
    venv = to_tianshou(SubprocVecEnv(fns, restart=True, in_series=1, context="fork"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _buffer, stats = _collect(venv, n_episode=7)
    venv.close()
    assert flag.exists() and stats.n_collected_episodes == 7  # type: ignore[attr-defined]


class _EndsAtStep2(_Clock):
    """A `_Clock` whose episode ends (terminated) at its second step."""

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple:
        self.t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple:
        self.t += 1
        obs, rew, _, trunc, info = super().step(action)
        return obs + self.t, rew, self.t == 2, trunc, info


def _ctrl_c_in(call: Any) -> None:
    timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        call()
    timer.join()


def test_ctrl_c_in_a_subset_step_over_a_pool_is_finished_by_step_none() -> None:
    """A Ctrl-C while a step of a subset waits leaves it pending, as envfactory's own step:
    every other call refuses at once with AlreadyPendingError naming ``step(None, id)``,
    which returns the step whole (an episode that ended in it is seen), and the pool goes
    on. Before, the next call finished it and dropped it with a RuntimeWarning (and earlier
    still, every later call failed)."""
    pool = SubprocPool([_EndsAtStep2] * N, N, in_series=1, context="fork")
    venv = to_tianshou(pool)
    venv.reset()
    venv.step(np.array([1, 1, 1]))  # every env at t=1
    _ctrl_c_in(lambda: venv.step(np.array([1, 0]), id=[2, 0]))
    says = r"step\(action, id=\[2, 0\]\) interrupted by Ctrl-C is pending; call step\(None, "
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is dropped with a warning
        for call in (
            lambda: venv.step(np.array([1, 1, 1])),
            lambda: venv.step(np.array([1]), id=[1]),
            venv.reset,
            lambda: venv.get_env_attr("t"),
            lambda: venv.seed(0),
        ):
            with pytest.raises(AlreadyPendingError, match=says):
                call()
        with pytest.raises(ValueError, match=r"the step pending is the one of envs \[2, 0\]"):
            venv.step(None, id=[0])
        obs, rew, term, _trunc, infos = venv.step(None, id=[2, 0])
    assert [info["env_id"] for info in infos] == [2, 0] and rew.tolist() == [1.0, 1.0]
    assert term.tolist() == [True, True] and obs[:, 0].tolist() == [2.0, 2.0]  # seen
    assert venv.get_env_attr("t") == [2, 1, 2]  # env 1 did not move; 0 and 2 once
    # a Ctrl-C in step(None, id) itself: still pending, finished by the next one
    venv.reset(env_id=[0, 2])
    _ctrl_c_in(lambda: venv.step(np.array([1]), id=[1]))
    _ctrl_c_in(lambda: venv.step(None))
    _obs, rew, term, _trunc, infos = venv.step(None)
    assert infos[0]["env_id"] == 1 and term.tolist() == [True]
    _obs, rew, *_ = venv.step(np.array([1, 1]), id=[0, 2])  # usable
    assert rew.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="action must be not-None"):
        venv.step(None)  # nothing pending
    venv.close()


def test_ctrl_c_before_a_subset_step_is_sent_leaves_nothing_pending() -> None:
    """A Ctrl-C that lands before the pool's send went out: nothing is pending, so the
    next call just runs (a poll tells), and ``step(None)`` says so."""
    pool = SubprocPool([_Clock] * N, N, in_series=1, context="fork")
    venv = to_tianshou(pool)
    venv.reset()

    def send_interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    pool.send = send_interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        venv.step(np.array([1]), id=[1])
    del pool.send
    with pytest.raises(NoPendingCallError, match=r"never reached the envs .* step\(action, id"):
        venv.step(None)
    out = venv.step(np.array([1, 1, 1]))  # runs
    assert out[1].tolist() == [1.0] * N
    pool.send = send_interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        venv.step(np.array([1]), id=[1])
    del pool.send
    obs, _ = venv.reset()  # nothing to finish: it runs
    assert obs.shape == (N, 1)
    venv.close()


@pytest.mark.slow
def test_dqn_through_tianshou_learns_cartpole() -> None:
    """Tianshou's own DQN and trainer, its training and test collectors over envfactory's
    subproc pool: the greedy policy's test return climbs well above a random policy's
    (~22 on CartPole)."""
    from tianshou.algorithm.modelfree.dqn import DQN
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.trainer import OffPolicyTrainerParams

    torch.manual_seed(0)
    train = to_tianshou(
        envfactory.make_vec(
            overrides=["num_envs=4", "episode_stats_key=null", *VECTORIZERS["pool"]]
        )
    )
    test = to_tianshou(envfactory.make_vec(overrides=["num_envs=4", "episode_stats_key=null"]))
    train.seed(0)
    test.seed(100)
    net = Net(state_shape=4, action_shape=2, hidden_sizes=[64, 64])
    policy = DiscreteQLearningPolicy(
        model=net, action_space=gym.spaces.Discrete(2), eps_training=0.1, eps_inference=0.0
    )
    algorithm = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=1e-3),
        gamma=0.9,
        n_step_return_horizon=3,
        target_update_freq=320,
    )
    train_collector = Collector(
        algorithm, train, VectorReplayBuffer(20_000, 4), exploration_noise=True
    )
    test_collector = Collector(algorithm, test, exploration_noise=True)
    train_collector.reset()
    train_collector.collect(n_step=256, random=True)
    result = algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=train_collector,
            test_collector=test_collector,
            max_epochs=10,
            epoch_num_steps=2_000,
            collection_step_num_env_steps=8,
            test_step_num_episodes=8,
            batch_size=64,
            update_step_num_gradient_steps_per_sample=0.125,
            stop_fn=lambda mean_rewards: mean_rewards >= 150,
            show_progress=False,
            verbose=False,
        )
    )
    final = test_collector.collect(n_episode=8, reset_before_collect=True)
    train.close()
    test.close()
    assert result.best_reward >= 100, result.best_reward
    assert final.returns.mean() >= 60, final.returns


def test_ctrl_c_in_a_step_of_every_env_is_finished_by_step_none() -> None:
    """A Ctrl-C in a step of every env (a Collector's usual step) leaves envfactory's step
    pending: the adapter's calls say to call ``step(None)``, which returns it whole, and the
    env goes on (before, every later step and reset failed naming ``step_wait()``, which a
    Tianshou vector env does not have)."""
    pool = SubprocPool([_EndsAtStep2] * N, N, in_series=1, context="fork")
    venv = to_tianshou(pool)
    venv.reset()
    venv.step(np.array([1, 1, 1]))  # every env at t=1
    _ctrl_c_in(lambda: venv.step(np.array([1, 1, 1])))
    says = r"a step of every env interrupted by Ctrl-C is pending; call step\(None\)"
    for call in (lambda: venv.step(np.array([1, 1, 1])), venv.reset):
        with pytest.raises(AlreadyPendingError, match=says):
            call()
    obs, rew, term, _trunc, infos = venv.step(None)
    assert obs[:, 0].tolist() == [2.0] * N  # (the second step of each env)
    assert rew.tolist() == [1.0] * N and term.tolist() == [True] * N  # the episode end seen
    assert [info["env_id"] for info in infos] == [0, 1, 2]
    venv.reset()
    _obs, rew, *_ = venv.step(np.array([1, 1, 1]))  # usable
    assert rew.tolist() == [1.0] * N
    with pytest.raises(ValueError, match="action must be not-None"):
        venv.step(None)  # nothing pending
    venv.close()
