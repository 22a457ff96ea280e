"""Tianshou's asynchronous collection through ``to_tianshou(pool, wait_num=..., timeout=...)``
(issue 38): what Tianshou's own venv tests check of ``wait_num`` / ``timeout``
(``test/base/test_env.py``: ``test_async_check_id``, ``test_async_env``; its sdist ships no
tests, so they are restated here for one observation space), and its ``AsyncCollector`` over
the pool. A reset of a finished env is the pool's autoreset: no ``options``, as Tianshou's."""

from __future__ import annotations

import functools
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from envfactory_tianshou import to_tianshou
from tianshou.algorithm.algorithm_base import Policy
from tianshou.data import AsyncCollector, Batch, VectorReplayBuffer

import envfactory
from envfactory.vectorizers.asyncpool.pool import SubprocPool

DELAYS = (0.05, 0.1, 0.6, 1.0)  # seconds one step of env i takes


class _Sleeper(gym.Env):
    """Episodes of 3 steps, each ``delay`` seconds; its reset takes no ``options`` (as
    Tianshou's test envs' ``reset`` reads ``options["state"]`` when given any)."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, delay: float) -> None:
        self.delay, self.t = delay, 0

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[override]
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"reset": True}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(self.delay)
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 3, False, {}


def _pool(**how: Any) -> Any:
    fns = [functools.partial(_Sleeper, d) for d in DELAYS]
    return to_tianshou(SubprocPool(fns, 1, in_series=1, context="fork"), **how)


def _ids(infos: np.ndarray) -> set[int]:
    return {int(info["env_id"]) for info in infos}


def test_wait_num_returns_the_envs_done_as_they_finish() -> None:
    """Tianshou's test_async_check_id: a step returns once ``wait_num`` of the envs stepping
    are done, the others keep stepping; ``step(None)`` waits so for those."""
    venv = _pool(wait_num=2)
    try:
        assert venv.is_async and venv.wait_num == 2 and venv.timeout is None
        venv.reset()
        _, _, _, _, infos = venv.step(np.ones(4, np.int64), [0, 1, 2, 3])
        assert _ids(infos) == {0, 1} and sorted(venv.waiting_id) == [2, 3]
        with pytest.raises(ValueError, match=r"envs \[2\], which are stepping now"):
            venv.step(np.ones(1, np.int64), [2])
        with pytest.raises(ValueError, match="only envs whose episode just ended"):
            venv.reset([0])  # (mid-episode, while 2 and 3 step)
        obs, _, _, _, infos = venv.step(None)
        assert _ids(infos) == {2, 3} and obs.tolist() == [[1.0], [1.0]]
        assert venv.waiting_id == [] and sorted(venv.ready_id) == [0, 1, 2, 3]
    finally:
        venv.close()


def test_timeout_returns_what_is_done_by_then() -> None:
    """``timeout``: after that many seconds a step returns the envs done (at least one),
    though fewer than ``wait_num`` are."""
    venv = _pool(timeout=0.35)
    try:
        assert venv.is_async and venv.wait_num == 4
        venv.reset()
        t0 = time.monotonic()
        _, _, _, _, infos = venv.step(np.ones(4, np.int64))
        took = time.monotonic() - t0
        assert _ids(infos) == {0, 1} and took >= 0.35, took
        _, _, _, _, infos = venv.step(None)  # the timeout holds for step(None) too
        assert _ids(infos) == {2}
        _, _, _, _, infos = venv.step(None)
        assert _ids(infos) == {3} and venv.waiting_id == []
    finally:
        venv.close()


def test_a_finished_env_is_reset_while_others_step_with_no_options() -> None:
    """Tianshou's AsyncCollector resets the envs that finished while the others step: the
    pool's autoreset, which passes no ``options`` (this env's reset takes none; a masked
    reset would pass ``{}``, as gymnasium's vector envs do)."""
    venv = _pool(wait_num=1)
    try:
        venv.reset()
        ready, done_seen = [0, 1, 2, 3], 0
        for _ in range(40):
            _, _, term, _, infos = venv.step(np.ones(len(ready), np.int64), ready)
            ready = [int(info["env_id"]) for info in infos]
            ended = [i for i, t in zip(ready, term) if t]
            if ended:
                robs, rinfos = venv.reset(ended)
                assert robs.tolist() == [[0.0]] * len(ended)
                assert all(info["reset"] for info in rinfos)
                done_seen += len(ended)
            if done_seen >= 4:
                break
        assert done_seen >= 4
    finally:
        venv.close()


class _RandomPolicy(Policy):
    """Random actions with a hidden state, as Tianshou's ``MaxActionPolicy`` of its
    test_collector.py (Tianshou 2.0.1's AsyncCollector indexes the policy's entries, which a
    policy that returns only actions leaves empty, whatever the venv)."""

    def __init__(self) -> None:
        super().__init__(action_space=gym.spaces.Discrete(2))
        self.rng = np.random.default_rng(0)

    def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Batch:
        state = np.zeros((len(batch.obs), 2)) if state is None else state + 1
        return Batch(act=self.rng.integers(0, 2, len(batch.obs)), state=state)


def test_async_collector_over_the_pool_keeps_each_envs_trajectory() -> None:
    """Tianshou's AsyncCollector over ``to_tianshou(pool, wait_num=2, timeout=...)``: each
    env's transitions in the buffer chain (an observation is the previous next observation
    until the episode ends) and every terminated episode ends outside CartPole's bounds."""
    envs = envfactory.make_vec(
        overrides=["num_envs=4", "vectorizer=subproc", "vectorizer.batch_size=1"]
    )
    venv = to_tianshou(envs, wait_num=2, timeout=0.01)
    buffer = VectorReplayBuffer(4000, 4)
    venv.seed(3)
    with pytest.warns(UserWarning, match="async setting may collect extra transitions"):
        collector = AsyncCollector(_RandomPolicy(), venv, buffer)
    collector.reset()
    stats = collector.collect(n_step=400)
    stats_episodes = collector.collect(n_episode=6, reset_before_collect=False)
    venv.close()
    assert stats.n_collected_steps >= 400 and stats_episodes.n_collected_episodes >= 6
    terminated = 0  # (over all envs: under load one env may get too few steps to end one)
    for sub in buffer.buffers:
        assert len(sub) > 20
        batch = sub[np.arange(len(sub))]
        done = batch.terminated | batch.truncated
        chained = (batch.obs[1:] == batch.obs_next[:-1]).all(-1)
        assert chained[~done[:-1]].all() and not chained[done[:-1]].any()
        outside = (np.abs(batch.obs_next[:, 0]) > 2.4) | (np.abs(batch.obs_next[:, 2]) > 0.2094)
        assert outside[batch.terminated].all()
        terminated += int(batch.terminated.sum())
    assert terminated >= 6  # (the episodes the second collect counted, at least)


def test_wait_num_and_timeout_are_checked_with_the_fix() -> None:
    envs = envfactory.make_vec(overrides=["num_envs=2"])
    with pytest.raises(ValueError, match=r"needs envfactory's async pool.*batch_size"):
        to_tianshou(envs, wait_num=1)
    with pytest.raises(ValueError, match=r"wait_num should be in \[1, 2\]"):
        to_tianshou(envs, wait_num=3)
    with pytest.raises(ValueError, match="timeout must be None or seconds > 0"):
        to_tianshou(envs, timeout=0)
    assert not to_tianshou(envs, wait_num=2).is_async  # (all envs: synchronous, as Tianshou)
    envs.close()
    pool = envfactory.make_vec(
        overrides=[
            "num_envs=2",
            "vectorizer=subproc",
            "vectorizer.batch_size=1",
            "autoreset_mode=disabled",
        ]
    )
    with pytest.raises(ValueError, match="needs autoreset_mode=next_step"):
        to_tianshou(pool, wait_num=1)
    pool.close()
