"""Issue 37, items 4 and 5: the split is one plan (`plan_split` -> `Split`), decided once
before any env is built and consumed by every build; the merge rule and the recovery rule
are public in the author API (`envfactory.vectorizers.remote`) and used by the core."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from test_infos import _assert_same

import envfactory
from envfactory import _compat
from envfactory.errors import ConfigError
from envfactory.vectorizers import remote
from envfactory.vectorizers.dummy import DummyVecEnv
from envfactory.vectorizers.remote import (
    Recover,
    Recoverable,
    Split,
    after_reset,
    after_step,
    keep_rows,
    merge_block,
    merge_infos,
    plan_split,
    split_infos,
)
from envfactory.vectorizers.subproc import SubprocVecEnv


def test_the_plan_is_the_split_the_build_starts_and_the_record_reports() -> None:
    """A plan handed to the front is what starts (the workers' slices, this process's
    share) and what ``run_record`` reports: nothing downstream re-derives it."""
    plan = Split((1, 2), 1, "given")
    fns = [lambda: gym.make("CartPole-v1")] * 4
    with SubprocVecEnv(fns, split=plan, context="fork") as envs:
        assert [(w.start, w.stop) for w in envs.workers] == plan.slices() == [(0, 1), (1, 3)]
        assert envs.in_parent == 1 and envs.run_record.split is plan
        assert envs.reset(seed=0)[0].shape == (4, 4)


def test_plan_split_checks_its_options_once_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^vectorizer.in_series must be an integer >= 1"):
        plan_split(4, in_series=0)
    with pytest.raises(ConfigError, match=r"vectorizer.batch_size=9: expected an integer in"):
        plan_split(4, batch_size=9)
    assert plan_split(7, in_series=3).workers == (3, 2, 2)
    pool = plan_split(16, batch_size=8, in_series=None, in_parent=None)
    assert pool.in_parent == 0 and max(pool.workers) <= 8
    assert pool.reason == "the async pool (batch_size=8), every env in a worker"
    keep = plan_split(8, timeout=1.0, in_parent=None, load=0.0)
    assert keep.in_parent == 0 and "timeout set" in keep.reason
    other = plan_split(64, in_parent=None, load=0.0, cpus=16)  # (a backend's own machines)
    assert other.in_parent == 4 and other.workers == (4,) * 15 and "on 16 cpus" in other.reason
    dummy = plan_split(4, fallback=True, in_parent=None, load=99.0)
    assert dummy.workers == () and dummy.in_parent == 4
    assert dummy.reason.startswith("auto fell back to every env in this process")


def test_one_pool_build_checks_the_split_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: ``check_split`` ran three times on one pool build; the plan runs it once."""
    import envfactory.vectorizers.plan.plan as plan

    cfg = envfactory.compose(["vectorizer=subproc", "num_envs=4", "vectorizer.batch_size=2"])
    calls: list[Any] = []
    real = plan.check_split
    monkeypatch.setattr(plan, "check_split", lambda *a: calls.append(a) or real(*a))
    with envfactory.make_vec(cfg) as envs:
        assert envs.run_record.split is not None
    assert len(calls) == 1, calls


# -- the recovery rule ------------------------------------------------------------------
def test_the_recovery_rule_per_mode() -> None:
    assert after_step([True, False], "next_step") == [Recover.RESET_FLAGGED, Recover.LOST]
    assert after_step([True, False], "same_step") == [Recover.LOST, Recover.LOST]
    assert after_step([True], "disabled") == [Recover.LOST]
    mask, done = [True, False, False], [True, True, False]
    assert after_reset(mask, done, "next_step") == [Recover.REDONE, Recover.RESET, Recover.LOST]
    assert after_reset(mask, done, "disabled") == [Recover.REDONE, Recover.NONE, Recover.LOST]
    assert after_reset(mask, done, "same_step") == [Recover.REDONE, Recover.LOST, Recover.LOST]
    assert after_reset(None, done, "next_step") == [Recover.REDONE] * 3


def test_a_recoverable_env_ends_its_lost_episode_as_the_rule_says() -> None:
    env = Recoverable(gym.make("CartPole-v1"), "same_step")
    env.reset(seed=0)
    last = np.full(4, 0.5, np.float32)
    env.set_wrapper_attr(Recoverable.ATTR, (Recover.LOST, last))
    obs, reward, term, trunc, info = env.step(0)
    assert obs is last and (reward, term, trunc, info) == (0.0, False, True, {"restarted": True})
    assert env.reset(seed=1)[1] == {"restarted": True}  # (same_step: the reset that follows)
    env.set_wrapper_attr(Recoverable.ATTR, Recover.RESET_FLAGGED)
    obs, reward, term, trunc, info = env.step(0)
    assert (reward, term, trunc, info) == (0.0, False, False, {"restarted": True})
    assert env.step(0)[4] == {}  # (disarmed: a plain step)
    for nothing in (Recover.REDONE, Recover.NONE):  # (nothing to recover: a plain step)
        env.set_wrapper_attr(Recoverable.ATTR, nothing)
        assert env.step(0)[4] == {}


# -- the merge rule ---------------------------------------------------------------------
ROWS = [
    (0, {"a": 1, "e": {"r": 1.0}}),
    (1, {"s": "text"}),
    (3, {"a": 2.5, "v": np.ones(2)}),
    (4, {"e": {"r": 2.0, "l": 3}, "final_obs": np.zeros(2)}),
]


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_blocks_merged_equal_the_envs_merged_one_by_one(cut: int) -> None:
    """A worker's already-merged infos (a block), merged into the batch, equal every env's
    info merged one by one with gymnasium's ``_add_info``: one rule for both paths."""
    want: dict = {}
    for k, info in ROWS:
        want = _compat.add_info(want, info, k, 6)
    first = merge_infos([r for r in ROWS if r[0] < cut], cut)
    second = merge_infos([(k - cut, i) for k, i in ROWS if k >= cut], 6 - cut)
    _assert_same(merge_block(merge_block({}, first, 0, 6), second, cut, 6), want)
    kept = keep_rows(want, np.array([k < cut for k in range(6)]))
    _assert_same(kept, merge_block({}, first, 0, 6))
    a = {"x": np.array([1, 0]), "_x": np.array([True, False])}  # (the docstrings' examples)
    assert merge_block({}, a, 2, 4)["x"].tolist() == [0, 0, 1, 0]
    assert split_infos({"k": np.array([0.0, 0.5]), "_k": np.array([False, True])}, 2) == [
        {},
        {"k": 0.5},
    ]


class _ScalarFinalObs(gym.Env):
    """An env whose info has a scalar named ``final_obs`` (gymnasium's merge keeps that key
    in an object array)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple:
        return np.zeros(1, np.float32), 0.0, False, False, {"final_obs": 1.5, "x": 2}


def test_a_scalar_info_named_final_obs_merges_as_gymnasiums_through_the_columns() -> None:
    """Issue 37: the info columns kept a scalar ``final_obs`` as float64 where gymnasium,
    ``dummy`` and the pipe path give an object array: one merge rule, whichever path."""
    fns = [_ScalarFinalObs] * 2
    with DummyVecEnv(fns) as dummy:
        dummy.reset(seed=0)
        want = [dummy.step(np.zeros(2, np.int64))[4] for _ in range(4)]
    with SubprocVecEnv(fns, in_series=1, context="fork") as envs:
        envs.reset(seed=0)
        got = [envs.step(np.zeros(2, np.int64))[4] for _ in range(4)]
    for a, b in zip(want, got):
        _assert_same(b, a)


def test_the_author_api_exports_the_plan_and_the_rules() -> None:
    for name in ("plan_split", "Split", "merge_infos", "merge_block", "keep_rows"):
        assert name in remote.__all__
    for name in ("after_step", "after_reset", "Recover", "Recoverable", "RecoverableFn"):
        assert name in remote.__all__


@pytest.mark.parametrize(
    ("options", "workers", "reason"),
    [  # 8 envs, every env in a worker, the load given: each branch of in_series null
        ({"load": 1.0}, (8,), "one worker per core free at build time"),
        ({"load": 0.0}, (4, 4), "one worker per cpu (every core free at build time)"),
        ({"load": 5.0}, (4, 4), "one worker per cpu (no core free at build time)"),
        (
            {"load": 1.0, "images": True},
            (4, 4),
            "one worker per cpu (subproc-atari: image envs, whatever the load)",
        ),
        (
            {"load": 0.0, "cpus": 8, "probe": lambda: 10e-6},
            (2, 2, 2, 2),
            "one worker per two cpus (a cheap env: a step of 10 us, under 50 us, on 8+ cpus)",
        ),
        (
            {"load": 0.0, "cpus": 8, "probe": lambda: 1e-3},
            (1,) * 8,
            "one worker per cpu (every core free at build time)",
        ),
    ],
)
def test_the_split_reason_says_what_the_default_did(
    options: dict[str, Any], workers: tuple[int, ...], reason: str
) -> None:
    """It said "one worker per core free at build time" when no core was free (every cpu
    then gets a worker) and for subproc-atari (a worker per cpu whatever the load), and
    named the cheap-env rule on 8+ cpus whether or not it applied."""
    plan = plan_split(8, in_parent=0, **{"cpus": 2, **options})
    assert plan.workers == workers
    assert plan.reason.startswith(f"in_series null: {reason}; in_parent=0 ("), plan.reason
    shared = plan_split(8, in_parent=None, load=0.0, cpus=2)
    assert shared.in_parent == 4 and shared.reason.startswith(
        "in_series null: one worker per core but the one left to this process; in_parent null: "
        "this process steps 4 (a core was idle)"
    ), shared.reason
