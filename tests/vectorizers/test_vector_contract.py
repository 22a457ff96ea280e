"""The common VecEnv contract (DESIGN.md, "The common VecEnv interface") for every built-in
vectorizer: ``dummy``, ``subproc`` and ``subproc-atari``.

The generic rules come from [`envfactory.testing`][envfactory.testing] (run here through its pytest
suite, as a third-party vectorizer would); the rest of this file checks envfactory's own
promises: ``seed + i`` seeding and ``seeding=spawn``, ``reset_mask`` validation, checked
async halves, ``call``/``get_attr``/``set_attr`` with SB3's ``indices=``, ``render`` and
``tile_images``, ``close``, the action batch check and the ``disabled`` autoreset guard.
Wherever a call must leave the env untouched, the env is then compared step by step with a
``dummy`` reference that never saw the call.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv, VectorEnv, VectorWrapper

import envfactory
from envfactory import AsyncCallError, ClosedError
from envfactory.factory import env_thunks
from envfactory.testing import (
    VecEnvConformance,
    assert_tree_equal,
    check_interface,
    check_reset_mask,
    check_reset_seeding,
    check_rollout,
    sample_actions,
)

CARTPOLE = ("env=gym", "env.id=CartPole-v1")
# fire_reset=false: FireReset's own steps would count in the episode length and time limit.
ATARI = ("env=atari", "env.id=ALE/Pong-v5", "env.fire_reset=false", "env.max_episode_steps=15")
CASES: dict[str, tuple[str, ...]] = {
    "dummy": (*CARTPOLE, "vectorizer=dummy", "num_envs=5"),
    # 5 envs, 2 per worker: an uneven split (2, 2, 1) over three workers
    "subproc": (*CARTPOLE, "vectorizer=subproc", "vectorizer.in_series=2", "num_envs=5"),
    "subproc-atari": (*ATARI, "vectorizer=subproc-atari", "vectorizer.in_series=2", "num_envs=3"),
}
CPU_CASES = ["dummy", "subproc"]


def make(*overrides: str) -> VectorEnv:
    return envfactory.make_vec(envfactory.compose(list(overrides)))


def as_dummy(overrides: Sequence[str]) -> tuple[str, ...]:
    """The same config under the ``dummy`` vectorizer (the reference)."""
    kept = [o for o in overrides if not o.startswith("vectorizer")]
    return (*kept, "vectorizer=dummy")


def pair(case: str, *extra: str) -> tuple[VectorEnv, VectorEnv]:
    """(the env under test, a dummy reference) for ``CASES[case] + extra``."""
    overrides = (*CASES[case], *extra)
    return make(*overrides), make(*as_dummy(overrides))


def assert_same(a: Any, b: Any, what: str) -> None:
    assert_tree_equal(a, b, (what,))


def step_both(envs: VectorEnv, ref: VectorEnv, actions: Sequence[Any], what: str) -> None:
    for t, a in enumerate(actions):
        assert_same(envs.step(a), ref.step(a), f"{what}, step {t}")


def proc_gone(pid: int) -> bool:
    """True once ``pid`` is neither running nor a zombie (it was reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "X"


# --------------------------------------------------------------------------------------
# the conformance suite (envfactory.testing) on every built-in vectorizer
# --------------------------------------------------------------------------------------
def _conformance_params() -> list[Any]:
    params = []
    for mode in ("next_step", "same_step", "disabled"):
        for vec in ("dummy", "subproc"):
            params.append(pytest.param((*CASES[vec], f"autoreset_mode={mode}"), id=f"{vec}-{mode}"))
        params.append(
            pytest.param(
                ("env=mountaincar", "env.max_episode_steps=30", "num_envs=3",
                 "vectorizer=subproc", "vectorizer.shared_memory=false",
                 f"autoreset_mode={mode}"),
                id=f"subproc-noshm-mountaincar-{mode}",
            )
        )  # fmt: skip
    return params


class TestConformance(VecEnvConformance):
    """CartPole and MountainCar (time limit 30: truncations) under dummy and subproc."""

    steps = 150
    min_episodes = 5

    @pytest.fixture(params=_conformance_params())
    def make_vecenv(self, request: pytest.FixtureRequest) -> Callable[[], VectorEnv]:
        cfg = envfactory.compose(list(request.param))
        return lambda: envfactory.make_vec(cfg)


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
class TestAtariConformance(VecEnvConformance):
    """Pong under subproc-atari, with a 15-step time limit so episodes end."""

    steps = 40
    min_episodes = 3

    @pytest.fixture(params=["next_step", "same_step", "disabled"])
    def make_vecenv(self, request: pytest.FixtureRequest) -> Callable[[], VectorEnv]:
        cfg = envfactory.compose([*CASES["subproc-atari"], f"autoreset_mode={request.param}"])
        return lambda: envfactory.make_vec(cfg)


class TestSpawnSeedingConformance(VecEnvConformance):
    """``seeding=spawn``: everything but gymnasium's ``seed + i`` convention."""

    steps = 100
    seed_offsets = False

    @pytest.fixture(params=["dummy", "subproc"])
    def make_vecenv(self, request: pytest.FixtureRequest) -> Callable[[], VectorEnv]:
        cfg = envfactory.compose([*CASES[request.param], "seeding=spawn"])
        return lambda: envfactory.make_vec(cfg)


class TestSyncVectorEnvConformance(VecEnvConformance):
    """The suite accepts gymnasium's own SyncVectorEnv (it encodes gymnasium's rules)."""

    steps = 150
    error_classes = False  # SyncVectorEnv checks no actions and works after close()
    call_fn = False  # SyncVectorEnv.call takes attribute names only, not call(fn)

    @pytest.fixture(params=["NextStep", "SameStep", "Disabled"])
    def make_vecenv(self, request: pytest.FixtureRequest) -> Callable[[], VectorEnv]:
        thunks = env_thunks(envfactory.compose([*CASES["dummy"]]))
        mode = gym.vector.AutoresetMode(request.param)
        return lambda: SyncVectorEnv(thunks, autoreset_mode=mode)


# --------------------------------------------------------------------------------------
# the suite catches broken vectorizers
# --------------------------------------------------------------------------------------
class _Float32Rewards(VectorWrapper):
    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = self.env.step(actions)
        return obs, rew.astype(np.float32), term, trunc, infos


class _NoEpisodeStats(VectorWrapper):
    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = self.env.step(actions)
        infos.pop("episode_stats", None)
        infos.pop("_episode_stats", None)
        return obs, rew, term, trunc, infos


class _IgnoresResetMask(VectorWrapper):
    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        options = dict(options or {})
        options.pop("reset_mask", None)
        return self.env.reset(seed=seed, options=options or None)


class _IgnoresSeed(VectorWrapper):
    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return self.env.reset(seed=None, options=options)


class _NoAutoresetMetadata(VectorWrapper):
    @property
    def metadata(self) -> dict[str, Any]:
        return {}


class _NoNextStepReset(VectorWrapper):
    """Pretends to be next_step while the envs are same_step."""

    @property
    def metadata(self) -> dict[str, Any]:
        return {**self.env.metadata, "autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = self.env.step(actions)
        final = infos.pop("final_info", {})
        for key in ("final_obs", "_final_obs", "_final_info"):
            infos.pop(key, None)
        for key in ("episode_stats", "_episode_stats"):  # keep the episode statistics in sight
            if key in final:
                infos[key] = final[key]
        return obs, rew, term, trunc, infos


@pytest.mark.parametrize(
    ("wrapper", "extra", "check", "message"),
    [
        (_Float32Rewards, (), check_rollout, "float64"),
        (_NoEpisodeStats, (), check_rollout, "without infos\\['episode_stats'\\]"),
        (_NoNextStepReset, ("autoreset_mode=same_step",), check_rollout, "next_step"),
        (_IgnoresResetMask, (), check_reset_mask, "unmasked env"),
        (_IgnoresSeed, (), check_reset_seeding, "differ"),
        (_NoAutoresetMetadata, (), None, "autoreset_mode"),
    ],
    ids=lambda x: getattr(x, "__name__", None) if callable(x) else None,
)
def test_suite_catches_broken_vectorizers(
    wrapper: type, extra: tuple[str, ...], check: Any, message: str
) -> None:
    cfg = envfactory.compose([*CASES["dummy"], *extra])

    def make_broken() -> VectorEnv:
        return wrapper(envfactory.make_vec(cfg))

    with pytest.raises(AssertionError, match=message):
        if check is None:
            envs = make_broken()
            try:
                check_interface(envs)
            finally:
                envs.close()
        else:
            check(make_broken)


def test_import_envfactory_does_not_import_the_suite_and_the_suite_needs_no_pytest() -> None:
    code = (
        "import sys, envfactory\n"
        "assert 'envfactory.testing' not in sys.modules\n"
        "import envfactory.testing\n"
        "assert 'pytest' not in sys.modules, 'envfactory.testing imported pytest'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# --------------------------------------------------------------------------------------
# seeding
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_int_seed_gives_env_i_seed_plus_i(case: str) -> None:
    cfg = envfactory.compose(list(CASES[case]))
    with envfactory.make_vec(cfg) as envs:
        n = envs.num_envs
        obs, _ = envs.reset(seed=10)
        assert envs.get_attr("np_random_seed") == tuple(10 + i for i in range(n))
        actions = sample_actions(envs.single_action_space, n, 5, seed=1)
        steps = [envs.step(a)[0] for a in actions]
        for i in range(n):
            single = envfactory.make_env(cfg)
            o, _ = single.reset(seed=10 + i)
            assert_same(o, obs[i], f"env {i} reset vs a single env reset with seed {10 + i}")
            for t, a in enumerate(actions):
                o = single.step(a[i])[0]
                assert_same(o, steps[t][i], f"env {i} step {t} vs the single env")
            single.close()


@pytest.mark.parametrize("case", CPU_CASES)
def test_seeding_spawn_gives_different_but_reproducible_seeds(case: str) -> None:
    spawn_cfg = envfactory.compose([*CASES[case], "seeding=spawn"])
    with envfactory.make_vec(spawn_cfg) as a, envfactory.make_vec(spawn_cfg) as b:
        n = a.num_envs
        obs_a, _ = a.reset(seed=10)
        obs_b, _ = b.reset(seed=10)
        assert_same(obs_a, obs_b, "seeding=spawn: two instances, same seed")
        seeds = a.get_attr("np_random_seed")
        assert seeds == b.get_attr("np_random_seed")
        assert len(set(seeds)) == n, f"spawned seeds are not distinct: {seeds}"
        assert not set(seeds) & set(range(10, 10 + n)), f"spawn seeds look like seed+i: {seeds}"
        obs_c, _ = a.reset(seed=11)
        assert not set(a.get_attr("np_random_seed")) & set(seeds), "seed 11 reuses seed 10's"
        assert not np.array_equal(obs_a, obs_c)
        for i, s in enumerate(seeds):  # each env got exactly its spawned seed
            single = envfactory.make_env(spawn_cfg)
            assert_same(single.reset(seed=s)[0], obs_a[i], f"env {i} vs single env seed {s}")
            single.close()
    with envfactory.make_vec(envfactory.compose(list(CASES[case]))) as offset:
        obs_o, _ = offset.reset(seed=10)
        for i in range(n):
            assert not np.array_equal(obs_o[i], obs_a[i]), f"env {i}: spawn == offset seeding"
    # bit-identical across vectorizers under spawn seeding as well
    with make(*as_dummy(CASES[case]), "seeding=spawn") as ref:
        assert_same(ref.reset(seed=10)[0], obs_a, "seeding=spawn: dummy vs " + case)


# --------------------------------------------------------------------------------------
# reset_mask validation: the same error types as gymnasium's SyncVectorEnv
# --------------------------------------------------------------------------------------
BAD_MASKS: dict[str, Callable[[int], Any]] = {
    "list-not-array": lambda n: [True] * n,
    "int-dtype": lambda n: np.ones(n, dtype=np.int64),
    "too-long": lambda n: np.ones(n + 1, dtype=np.bool_),
    "2d": lambda n: np.ones((n, 1), dtype=np.bool_),
    "all-false": lambda n: np.zeros(n, dtype=np.bool_),
}


@pytest.mark.parametrize("bad", list(BAD_MASKS))
@pytest.mark.parametrize("case", CPU_CASES)
def test_reset_mask_validation_matches_gymnasium(case: str, bad: str) -> None:
    cfg = envfactory.compose(list(CASES[case]))
    sync = SyncVectorEnv(env_thunks(cfg))
    envs, ref = pair(case)
    with envs, ref:
        n = envs.num_envs
        sync.reset(seed=0)
        with pytest.raises(Exception) as gym_err:
            sync.reset(options={"reset_mask": BAD_MASKS[bad](n)})
        sync.close()
        assert_same(envs.reset(seed=3), ref.reset(seed=3), "reset")
        with pytest.raises(gym_err.type, match="reset_mask"):
            envs.reset(options={"reset_mask": BAD_MASKS[bad](n)})
        # nothing was reset and nothing is left pending
        step_both(envs, ref, sample_actions(envs.single_action_space, n, 5, 0), "after the error")


@pytest.mark.parametrize("case", CPU_CASES)
def test_reset_options_reach_every_env(case: str) -> None:
    """Options besides ``reset_mask`` go to each env's ``reset`` (CartPole: ``low``/``high``)."""
    sync = SyncVectorEnv(env_thunks(envfactory.compose(list(CASES[case]))))
    with make(*CASES[case]) as envs:
        n = envs.num_envs
        opts = {"low": -0.001, "high": 0.001}
        obs, _ = envs.reset(seed=0, options=dict(opts))
        assert np.abs(obs).max() <= 0.001
        assert_same(obs, sync.reset(seed=0, options=dict(opts))[0], "vs SyncVectorEnv")
        mask = np.arange(n) % 2 == 1
        wide = {"low": -0.5, "high": 0.5}
        obs, _ = envs.reset(seed=1, options={"reset_mask": mask, **wide})
        assert np.abs(obs[mask]).max() > 0.01 and np.abs(obs[~mask]).max() <= 0.001
        ref = sync.reset(seed=1, options={"reset_mask": mask.copy(), **wide})
        assert_same(obs, ref[0], "masked reset with options vs SyncVectorEnv")
    sync.close()


# --------------------------------------------------------------------------------------
# async halves
# --------------------------------------------------------------------------------------
def _start(envs: VectorEnv, kind: str | None, a: Any, seed: int | None) -> None:
    if kind == "step":
        envs.step_async(a)
    elif kind == "reset":
        envs.reset_async(seed=seed)


def _finish(envs: VectorEnv, kind: str | None) -> Any:
    if kind == "step":
        return envs.step_wait()
    if kind == "reset":
        return envs.reset_wait()
    return None


def _full(envs: VectorEnv, kind: str | None, a: Any, seed: int | None) -> Any:
    if kind == "step":
        return envs.step(a)
    if kind == "reset":
        return envs.reset(seed=seed)
    return None


STEP_PENDING = r"a step_async\(\) is pending"
RESET_PENDING = r"a reset_async\(\) is pending"
# name: (what is pending, the out-of-order call, the message it must give)
MISUSES: dict[str, tuple[str | None, Callable[[VectorEnv, Any], Any], str]] = {
    "step_wait-without-step_async": (
        None, lambda e, a: e.step_wait(),
        r"step_wait\(\) called but nothing is pending; call step_async\(actions\) first",
    ),
    "reset_wait-without-reset_async": (
        None, lambda e, a: e.reset_wait(),
        r"reset_wait\(\) called but nothing is pending; call reset_async\(.*\) first",
    ),
    "step_async-twice": (
        "step", lambda e, a: e.step_async(a),
        rf"step_async\(\) called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "step-while-step-pending": (
        "step", lambda e, a: e.step(a),
        rf"step_async\(\) called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "reset_async-while-step-pending": (
        "step", lambda e, a: e.reset_async(seed=1),
        rf"reset_async\(\) called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "reset-while-step-pending": (
        "step", lambda e, a: e.reset(seed=1),
        rf"reset_async\(\) called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "reset_wait-while-step-pending": (
        "step", lambda e, a: e.reset_wait(),
        rf"reset_wait\(\) called but {STEP_PENDING}; call reset_async\(.*\) first",
    ),
    "step_wait-while-reset-pending": (
        "reset", lambda e, a: e.step_wait(),
        rf"step_wait\(\) called but {RESET_PENDING}; call step_async\(actions\) first",
    ),
    "step_async-while-reset-pending": (
        "reset", lambda e, a: e.step_async(a),
        rf"step_async\(\) called while {RESET_PENDING}; call reset_wait\(\) first",
    ),
    "reset_async-twice": (
        "reset", lambda e, a: e.reset_async(seed=2),
        rf"reset_async\(\) called while {RESET_PENDING}; call reset_wait\(\) first",
    ),
    "call-while-step-pending": (
        "step", lambda e, a: e.call("get_wrapper_attr", "spec"),
        rf"call\(\) called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "get_attr-while-step-pending": (
        "step", lambda e, a: e.get_attr("spec"),
        rf"get_attr\(\) called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "set_attr-while-reset-pending": (
        "reset", lambda e, a: e.set_attr("tag", 1),
        rf"set_attr\(\) called while {RESET_PENDING}; call reset_wait\(\) first",
    ),
    "env_method-while-step-pending": (
        "step", lambda e, a: e.env_method("get_wrapper_attr", "spec", indices=[0]),
        rf"called while {STEP_PENDING}; call step_wait\(\) first",
    ),
    "render-while-step-pending": (
        "step", lambda e, a: e.render(), rf"called while {STEP_PENDING}; call step_wait\(\) first"
    ),
}  # fmt: skip


def _check_misuse(envs: VectorEnv, ref: VectorEnv, name: str, seed: int | None = 7) -> None:
    """``seed=None``: no seeded reset (a seeded ALE reset reloads the ROM: ~0.1 s per env)."""
    pending, misuse, message = MISUSES[name]
    n = envs.num_envs
    actions = sample_actions(envs.single_action_space, n, 4, seed=5)
    if seed is not None:
        assert_same(envs.reset(seed=seed), ref.reset(seed=seed), f"{name}: reset")
    reset_seed = None if seed is None else seed + 1
    _start(envs, pending, actions[0], reset_seed)
    with pytest.raises(AsyncCallError, match=message):
        misuse(envs, actions[0])
    # the call that was pending completes normally, with the right data
    assert_same(
        _finish(envs, pending), _full(ref, pending, actions[0], reset_seed), f"{name}: pending"
    )
    step_both(envs, ref, actions[1:], f"{name}: afterwards")


@pytest.mark.parametrize("name", list(MISUSES))
@pytest.mark.parametrize("case", CPU_CASES)
def test_async_calls_out_of_order_raise_async_call_error(case: str, name: str) -> None:
    envs, ref = pair(case)
    with envs, ref:
        _check_misuse(envs, ref, name)


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_async_calls_out_of_order_subproc_atari() -> None:
    envs, ref = pair("subproc-atari")
    with envs, ref:
        assert_same(envs.reset(seed=7), ref.reset(seed=7), "reset")
        for name in MISUSES:
            _check_misuse(envs, ref, name, seed=None)


@pytest.mark.parametrize("case", list(CASES))
def test_async_halves_match_the_sync_calls(case: str) -> None:
    envs, ref = pair(case)
    with envs, ref:
        envs.reset_async(seed=4)
        assert_same(envs.reset_wait(), ref.reset(seed=4), "reset_async/reset_wait")
        for t, a in enumerate(sample_actions(envs.single_action_space, envs.num_envs, 20, 3)):
            envs.step_async(a)
            assert_same(envs.step_wait(timeout=30), ref.step(a), f"step_async/step_wait {t}")
        envs.reset_async(seed=[5 + i for i in range(envs.num_envs)], options={})
        assert_same(envs.reset_wait(timeout=30), ref.reset(seed=5), "reset_async(seed=list)")


@pytest.mark.parametrize("case", CPU_CASES)
def test_close_while_a_step_is_pending(case: str) -> None:
    envs = make(*CASES[case])
    envs.reset(seed=0)
    pids = list(getattr(envs, "pids", []))
    envs.step_async(envs.action_space.sample())
    envs.close()
    assert envs.closed
    assert all(proc_gone(p) for p in pids)


# --------------------------------------------------------------------------------------
# call / get_attr / set_attr / env_method (SB3 spellings with indices=)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_call_get_attr_set_attr_env_method(case: str) -> None:
    with make(*CASES[case]) as envs:
        n = envs.num_envs
        envs.reset(seed=0)
        env_id = envs.get_attr("spec")[0].id
        assert [s.id for s in envs.get_attr("spec")] == [env_id] * n

        envs.set_attr("tag", "all")  # one value for every env
        assert envs.get_attr("tag") == ("all",) * n
        envs.set_attr("tag", [f"t{i}" for i in range(n)])  # one value per env
        assert envs.get_attr("tag") == tuple(f"t{i}" for i in range(n))
        envs.set_attr("tag", ["last", "first"], indices=[n - 1, 0])  # SB3 indices=
        expected = ["first", *[f"t{i}" for i in range(1, n - 1)], "last"]
        assert envs.get_attr("tag") == tuple(expected)
        assert envs.get_attr("tag", indices=[n - 1, 0]) == ("last", "first")
        assert envs.get_attr("tag", indices=1) == ("t1",)
        assert envs.get_attr("tag", indices=[-1]) == ("last",)
        envs.set_attr("tag", "x", indices=[0, 1])  # one value for the listed envs
        assert envs.get_attr("tag", indices=[0, 1, n - 1]) == ("x", "x", "last")

        # call: a method with positional args, then with keyword args
        assert envs.call("get_wrapper_attr", "tag") == tuple(envs.get_attr("tag"))
        results = envs.call("reset", seed=42)
        assert isinstance(results, tuple) and len(results) == n
        single = envfactory.make_env(envfactory.compose(list(CASES[case])))
        assert_same(results[0][0], single.reset(seed=42)[0], "call('reset', seed=42)")
        single.close()
        # env_method(name, *args, indices=..., **kwargs): a list, in the order of indices
        got = envs.env_method("get_wrapper_attr", "tag", indices=[n - 1, 1])
        assert got == ["last", "x"] and isinstance(got, list)
        assert envs.env_method("get_wrapper_attr", "tag") == list(envs.get_attr("tag"))

        with pytest.raises(ValueError, match=r"set_attr\('tag'\) got 2 values for 3 envs"):
            envs.set_attr("tag", [1, 2], indices=[0, 1, 2])
        with pytest.raises(IndexError, match=rf"\[{n}\] out of range for num_envs={n}"):
            envs.get_attr("tag", indices=[0, n])
        # still in step after the errors
        envs.reset(seed=1)
        envs.step(envs.action_space.sample())


@pytest.mark.parametrize(
    "case",
    [
        "dummy",
        "subproc",
    ],
)
def test_missing_attribute_raises_and_leaves_the_env_usable(case: str) -> None:
    envs, ref = pair(case)
    with envs, ref:
        assert_same(envs.reset(seed=0), ref.reset(seed=0), "reset")
        errors = (AttributeError, envfactory.RemoteEnvError)
        with pytest.raises(errors, match="no_such_attribute"):
            envs.get_attr("no_such_attribute")
        with pytest.raises(errors, match="no_such_method"):
            envs.call("no_such_method", 1)
        with pytest.raises(errors, match="no_such_method"):
            envs.env_method("no_such_method", indices=[1])
        actions = sample_actions(envs.single_action_space, envs.num_envs, 5, 0)
        step_both(envs, ref, actions, "after the failed calls")
        assert envs.get_attr("spec", indices=[0])[0].id == "CartPole-v1"
        # the env and the closest name, not gymnasium's "wrapper EpisodeStatistics has no ..."
        with pytest.raises(errors, match=r"CartPole-v1 has no attribute 'gravty' .*'gravity'\?"):
            envs.get_attr("gravty")


@pytest.mark.parametrize("case", CPU_CASES)
def test_gymnasium_vector_wrappers_take_it_unchanged(case: str) -> None:
    """A VectorEnv for gymnasium's vector wrappers (``RecordEpisodeStatistics`` with its
    default key, next to envfactory's own ``infos["episode_stats"]``)."""
    from gymnasium.wrappers.vector import NormalizeObservation, RecordEpisodeStatistics

    def wrap(envs: VectorEnv) -> VectorEnv:
        return RecordEpisodeStatistics(NormalizeObservation(envs))

    envs, ref = pair(case)
    with envs, ref:
        wrapped, wrapped_ref = wrap(envs), wrap(ref)
        assert_same(wrapped.reset(seed=0), wrapped_ref.reset(seed=0), "reset")
        actions = sample_actions(envs.single_action_space, envs.num_envs, 60, 0)
        for t, a in enumerate(actions):
            out, out_ref = wrapped.step(a), wrapped_ref.step(a)
            assert_tree_equal(out, out_ref, (f"step {t}",), ignore=("episode.t", "episode_stats.t"))
        wrapped.close()
        assert envs.closed


# --------------------------------------------------------------------------------------
# render and tile_images
# --------------------------------------------------------------------------------------
RENDER = ("env=gym", "env.id=ALE/Pong-v5", "+env.kwargs.render_mode=rgb_array", "num_envs=3")


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize(
    "vectorizer",
    [("vectorizer=dummy",), ("vectorizer=subproc", "vectorizer.in_series=2"),
     ("vectorizer=subproc-atari", "vectorizer.context=spawn")],
    ids=["dummy", "subproc", "subproc-atari-spawn"],
)  # fmt: skip
def test_render_one_frame_per_env_and_tile_images(vectorizer: tuple[str, ...]) -> None:
    import ale_py

    gym.register_envs(ale_py)  # a gymnasium id registered in the parent only
    with make(*RENDER, *vectorizer) as envs, make(*RENDER, "vectorizer=dummy") as ref:
        assert envs.render_mode == "rgb_array"
        envs.reset(seed=0)
        ref.reset(seed=0)
        actions = sample_actions(envs.single_action_space, 3, 5, 0)
        step_both(envs, ref, actions, "rendered env")
        frames = envs.render()
        assert isinstance(frames, tuple) and len(frames) == 3
        for f in frames:
            assert isinstance(f, np.ndarray) and f.shape == (210, 160, 3) and f.dtype == np.uint8
        assert_same(frames, ref.render(), "frames vs dummy")
        tiled = envfactory.tile_images(frames)
        assert tiled.shape == (420, 320, 3) and tiled.dtype == np.uint8  # 2 x 2 grid
        assert np.array_equal(tiled[:210, :160], frames[0])
        assert np.array_equal(tiled[:210, 160:], frames[1])
        assert np.array_equal(tiled[210:, :160], frames[2])
        assert not tiled[210:, 160:].any()  # padding is black
        assert envfactory.tile_images(frames, ncols=3).shape == (210, 480, 3)


# --------------------------------------------------------------------------------------
# close, ClosedError, context manager
# --------------------------------------------------------------------------------------
AFTER_CLOSE: dict[str, Callable[[VectorEnv], Any]] = {
    "reset": lambda e: e.reset(seed=0),
    "step": lambda e: e.step(e.action_space.sample()),
    "reset_async": lambda e: e.reset_async(),
    "reset_wait": lambda e: e.reset_wait(),
    "step_async": lambda e: e.step_async(e.action_space.sample()),
    "step_wait": lambda e: e.step_wait(),
    "call": lambda e: e.call("get_wrapper_attr", "spec"),
    "get_attr": lambda e: e.get_attr("spec"),
    "set_attr": lambda e: e.set_attr("tag", 1),
    "env_method": lambda e: e.env_method("get_wrapper_attr", "spec", indices=[0]),
    "render": lambda e: e.render(),
}


@pytest.mark.parametrize("case", list(CASES))
def test_close_is_idempotent_and_use_after_close_raises(case: str) -> None:
    envs = make(*CASES[case])
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    pids = list(getattr(envs, "pids", []))
    assert len(pids) == (0 if case == "dummy" else -(-envs.num_envs // 2))
    envs.close()
    assert envs.closed
    envs.close()
    envs.close(timeout=1, terminate=True)
    assert envs.closed
    assert all(proc_gone(p) for p in pids), "a worker outlived close()"
    for name, use in AFTER_CLOSE.items():
        with pytest.raises(ClosedError, match=rf"^{name}\(\) on a closed .*make_vec"):
            use(envs)


@pytest.mark.parametrize("case", list(CASES))
def test_context_manager_closes(case: str) -> None:
    with make(*CASES[case]) as envs:
        assert isinstance(envs, VectorEnv)
        envs.reset(seed=0)
        pids = list(getattr(envs, "pids", []))
    assert envs.closed and all(proc_gone(p) for p in pids)
    with pytest.raises(RuntimeError, match="boom"), make(*CASES[case]) as envs:
        pids = list(getattr(envs, "pids", []))
        envs.reset(seed=0)
        raise RuntimeError("boom")
    assert envs.closed and all(proc_gone(p) for p in pids)


# --------------------------------------------------------------------------------------
# the action batch is checked before anything is stepped
# --------------------------------------------------------------------------------------
MCC = ("env=mountaincar", "env.id=MountainCarContinuous-v0", "num_envs=4")
ACTION_CASES = {
    **{k: v for k, v in CASES.items()},
    "dummy-box": (*MCC, "vectorizer=dummy"),
    "subproc-box": (*MCC, "vectorizer=subproc", "vectorizer.in_series=3",
                    "vectorizer.shared_memory=false"),
}  # fmt: skip


def _bad_actions(space: gym.Space, n: int) -> list[Any]:
    if isinstance(space, gym.spaces.Discrete):
        return [np.zeros(n + 1, np.int64), np.zeros(n - 1, np.int64),
                np.zeros((n, 1), np.int64), np.int64(0), [0] * (n + 1)]  # fmt: skip
    return [np.zeros(n, np.float32), np.zeros((n + 1, 1), np.float32),
            np.zeros((n, 2), np.float32), np.zeros((1, n), np.float32)]  # fmt: skip


@pytest.mark.parametrize("case", list(ACTION_CASES))
def test_wrong_action_batch_shape_raises_before_stepping(case: str) -> None:
    overrides = ACTION_CASES[case]
    with make(*overrides) as envs, make(*as_dummy(overrides)) as ref:
        n = envs.num_envs
        expected = re.escape(str(envs.action_space.shape))
        actions = sample_actions(envs.single_action_space, n, 8, seed=2)
        assert_same(envs.reset(seed=3), ref.reset(seed=3), "reset")
        step_both(envs, ref, actions[:2], "before")
        for bad in _bad_actions(envs.single_action_space, n):
            with pytest.raises(ValueError, match=rf"expects {expected}"):
                envs.step(bad)
            with pytest.raises(ValueError, match=rf"expects {expected}"):
                envs.step_async(bad)
            with pytest.raises(AsyncCallError, match="nothing is pending"):
                envs.step_wait()
        # nothing was stepped: the env (every worker) is exactly where the reference is
        step_both(envs, ref, actions[2:], "after the rejected batches")


# --------------------------------------------------------------------------------------
# autoreset_mode=disabled: a finished env must be reset (with a mask) before stepping
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_disabled_autoreset_refuses_to_step_a_finished_env(case: str) -> None:
    envs, ref = pair(case, "autoreset_mode=disabled")
    with envs, ref:
        n = envs.num_envs
        actions = sample_actions(envs.single_action_space, n, 300, seed=9)
        assert_same(envs.reset(seed=1), ref.reset(seed=1), "reset")
        for t, a in enumerate(actions):
            out = envs.step(a)
            assert_same(out, ref.step(a), f"step {t}")
            done = out[2] | out[3]
            if done.any():
                break
        else:
            pytest.fail("no episode ended")
        finished = re.escape(str(np.flatnonzero(done).tolist()))
        message = (
            rf"envs {finished} finished an episode and autoreset_mode is 'disabled'.*reset_mask"
        )
        with pytest.raises(AsyncCallError, match=message):
            envs.step(actions[t + 1])
        with pytest.raises(AsyncCallError, match=message):
            envs.step_async(actions[t + 1])
        with pytest.raises(AsyncCallError, match="nothing is pending"):
            envs.step_wait()
        if not done.all():  # resetting only other envs does not unlock the finished ones
            assert_same(
                envs.reset(options={"reset_mask": ~done}),
                ref.reset(options={"reset_mask": ~done}),
                "reset of the unfinished envs",
            )
            with pytest.raises(AsyncCallError, match=message):
                envs.step(actions[t + 1])
        mask = done.copy()
        assert_same(
            envs.reset(options={"reset_mask": mask}),
            ref.reset(options={"reset_mask": mask.copy()}),
            "reset with the mask of finished envs",
        )
        step_both(envs, ref, actions[t + 1 : t + 6], "after the masked reset")


def _attr_envs(vectorizer: str) -> Any:
    from faulty_envs import AttrEnv

    from envfactory.vectorizers.dummy import DummyVecEnv
    from envfactory.vectorizers.subproc import SubprocVecEnv

    if vectorizer == "dummy":
        return DummyVecEnv([AttrEnv, AttrEnv])
    return SubprocVecEnv([AttrEnv, AttrEnv], context="fork")


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_call_passes_an_indices_keyword_to_the_env_method(vectorizer: str) -> None:
    """gymnasium's call forwards every keyword; only env_method/get_attr take indices=."""
    with _attr_envs(vectorizer) as envs:
        envs.reset(seed=0)
        assert envs.call("pick", indices=[0, 1]) == ("got [0, 1]", "got [0, 1]")
        assert envs.env_method("pick", [7], indices=[1]) == ["got [7]"]


def test_unpicklable_attribute_is_an_error_not_a_dead_worker() -> None:
    with _attr_envs("subproc") as envs:
        envs.reset(seed=0)
        with pytest.raises(envfactory.RemoteEnvError, match="during call") as info:
            envs.get_attr("lock")
        assert "lock" in info.value.remote_traceback
        envs.step(np.zeros(2, dtype=np.int64))  # the worker is alive and in step


def test_make_vec_closes_what_it_built_when_a_vector_wrapper_fails() -> None:
    import psutil

    def workers() -> set[int]:
        return {
            p.pid
            for p in psutil.Process().children(recursive=True)
            if (p.status() != psutil.STATUS_ZOMBIE and "envfactory-worker" in " ".join(p.cmdline()))
            or (p.status() != psutil.STATUS_ZOMBIE and p.ppid() == os.getpid())
        }

    before = workers()
    overrides = [
        "vectorizer=subproc",
        "vectorizer.context=fork",
        "num_envs=2",
        "vector_wrappers=[{name: reshape_observation, shape: [3, 3]}]",
    ]
    with pytest.raises(ValueError, match="shape") as info:
        envfactory.make_vec(overrides=overrides)
    assert info.value is not None  # the exception (and its traceback) is still referenced
    assert workers() <= before


# --------------------------------------------------------------------------------------
# gymnasium's error classes (envfactory's are subclasses, so both except clauses work)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CPU_CASES)
def test_errors_are_gymnasium_classes(case: str) -> None:
    envs, ref = pair(case)
    with envs, ref:
        actions = sample_actions(envs.single_action_space, envs.num_envs, 3, seed=1)
        assert_same(envs.reset(seed=2), ref.reset(seed=2), "reset")
        with pytest.raises(gym.error.NoAsyncCallError) as no_call:
            envs.step_wait()
        assert isinstance(no_call.value, AsyncCallError) and no_call.value.name == ""
        envs.step_async(actions[0])
        with pytest.raises(gym.error.AlreadyPendingCallError) as pending:
            envs.reset_async(seed=1)
        assert isinstance(pending.value, envfactory.AlreadyPendingError)
        assert pending.value.name == "step"
        with pytest.raises(gym.error.NoAsyncCallError, match=r"a step_async.. is pending"):
            envs.reset_wait()
        assert_same(envs.step_wait(), ref.step(actions[0]), "the pending step")
        with pytest.raises(TypeError) as wrong:  # gymnasium's class for a wrong batch
            envs.step(np.zeros(envs.num_envs + 1, np.int64))
        assert isinstance(wrong.value, ValueError)
        assert isinstance(wrong.value, envfactory.InvalidActionError)
        step_both(envs, ref, actions[1:], "after the errors")
    for call in (lambda: envs.step(actions[0]), lambda: envs.reset(seed=0), envs.step_wait):
        with pytest.raises(gym.error.ClosedEnvironmentError):
            call()


@pytest.mark.parametrize("case", CPU_CASES)
def test_close_with_a_pending_call_warns_as_gymnasium(case: str) -> None:
    envs = make(*CASES[case])
    envs.reset(seed=0)
    envs.step_async(envs.action_space.sample())
    with pytest.warns(UserWarning, match=r"close\(\) called while a step_async\(\) is pending"):
        envs.close()
    assert envs.closed


def test_space_mismatch_is_a_runtime_error_as_in_gymnasium() -> None:
    from envfactory.vectorizers.dummy import build_dummy

    fns = [lambda: gym.make("CartPole-v1"), lambda: gym.make("MountainCar-v0")]
    with pytest.raises(RuntimeError, match=r"env 1.*observation space") as info:
        build_dummy(fns)
    assert isinstance(info.value, envfactory.SpaceMismatchError)
    assert isinstance(info.value, ValueError)


class _TwoArgError(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


class _Slotted(Exception):
    __slots__ = ("x",)


def test_remote_env_error_is_also_the_original_type() -> None:
    from envfactory.errors import remote_env_error

    fields: dict[str, Any] = dict(worker=1, pid=42, env_indices=[2, 3], env_id="X-v0",
                                  remote_traceback="Traceback ...\nKeyError: 'k'")  # fmt: skip
    err = remote_env_error("raised KeyError", exc_type="builtins.KeyError",
                           original=KeyError("k"), **fields)  # fmt: skip
    assert isinstance(err, KeyError) and isinstance(err, envfactory.RemoteEnvError)
    assert type(err).__name__ == "RemoteEnvError(KeyError)"
    assert str(err).startswith("worker 1 (pid 42, envs [2, 3], env 'X-v0') raised KeyError")
    assert "--- remote traceback ---" in str(err)
    again = remote_env_error("raised KeyError", exc_type="builtins.KeyError",
                             original=KeyError("j"), **fields)  # fmt: skip
    assert type(again) is type(err)  # one cached class per original type
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is type(err) and clone.env_indices == [2, 3] and str(clone) == str(err)
    # an original that could not be pickled back: its type is found by name if imported
    by_name = remote_env_error("raised OSError", exc_type="builtins.FileNotFoundError",
                               original=None, **fields)  # fmt: skip
    assert isinstance(by_name, FileNotFoundError) and by_name.__cause__ is None
    # an __init__ with other arguments is not called; an unknown type falls back
    two = remote_env_error("raised", exc_type="x._TwoArgError", original=_TwoArgError(1, "a"),
                           **fields)  # fmt: skip
    assert isinstance(two, _TwoArgError) and isinstance(two.__cause__, _TwoArgError)
    for exc_type, original in (("nowhere.Gone", None), ("m._Slotted", _Slotted())):
        plain = remote_env_error("raised", exc_type=exc_type, original=original, **fields)
        assert isinstance(plain, envfactory.RemoteEnvError)
    assert type(remote_env_error("r", exc_type="nowhere.Gone", original=None, **fields)) is (
        envfactory.RemoteEnvError
    )


class _RaisesKeyError(gym.Wrapper):
    def step(self, action: Any) -> Any:
        raise KeyError("no such key, on purpose")


def _cartpole_raising_key_error() -> gym.Env:
    return _RaisesKeyError(gym.make("CartPole-v1"))


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_an_env_exception_is_caught_as_its_own_type_under_every_vectorizer(
    vectorizer: str,
) -> None:
    from envfactory.vectorizers import builtin, dummy

    build = dummy.build_dummy if vectorizer == "dummy" else builtin.build_subproc
    with build([_cartpole_raising_key_error] * 2) as envs:
        envs.reset(seed=0)
        with pytest.raises(KeyError, match="on purpose") as info:
            envs.step(np.zeros(2, np.int64))
    if vectorizer == "subproc":
        err = info.value
        assert isinstance(err, envfactory.RemoteEnvError)
        assert err.exc_type == "builtins.KeyError" and isinstance(err.__cause__, KeyError)
        assert "KeyError: 'no such key, on purpose'" in err.remote_traceback


# --------------------------------------------------------------------------------------
# mistakes the parent can see never reach a worker: the env stays usable
# --------------------------------------------------------------------------------------
MISTAKE_CASES = {
    "dummy": CASES["dummy"],
    "subproc": CASES["subproc"],
    "subproc-noshm": (*CASES["subproc"], "vectorizer.shared_memory=false"),
}


def _mistakes(n: int) -> list[tuple[str, Callable[[VectorEnv], Any], type, str]]:
    out_of_range = np.zeros(n, np.int64)
    out_of_range[2] = 7
    negative = np.zeros(n, np.int64)
    negative[-1] = -1
    return [
        ("action 7", lambda e: e.step(out_of_range), envfactory.InvalidActionError,
         r"actions\[2\] = 7 \(env 2\) is not in single_action_space Discrete\(2\): valid "
         r"values are 0\.\.1"),
        ("action -1", lambda e: e.step(negative), envfactory.InvalidActionError,
         rf"actions\[{n - 1}\] = -1 \(env {n - 1}\)"),
        ("float actions", lambda e: e.step(np.full(n, 0.5)), envfactory.InvalidActionError,
         r"actions must be integers for single_action_space Discrete\(2\), got dtype float64"),
        ("str actions", lambda e: e.step(["a"] * n), envfactory.InvalidActionError,
         "actions must be integers"),
        ("async action", lambda e: e.step_async(out_of_range), envfactory.InvalidActionError,
         r"actions\[2\] = 7"),
        ("seed -1", lambda e: e.reset(seed=-1), envfactory.InvalidSeedError,
         r"reset\(seed=-1\): the seed must be an int >= 0"),
        ("seed 1.5", lambda e: e.reset(seed=1.5), envfactory.InvalidSeedError,
         r"reset\(seed=1\.5\).*got float"),
        ("seed '3'", lambda e: e.reset(seed="3"), envfactory.InvalidSeedError, "got str"),
        ("seed list", lambda e: e.reset(seed=[0, -4, *range(n - 2)]), envfactory.InvalidSeedError,
         r"seed for env 1 must be an int >= 0 or None, got -4"),
        ("seed list type", lambda e: e.reset_async(seed=[0.5] * n), envfactory.InvalidSeedError,
         "seed for env 0 must be an int >= 0 or None, got float 0.5"),
    ]  # fmt: skip


@pytest.mark.parametrize("case", list(MISTAKE_CASES))
def test_mistakes_are_caught_in_the_parent_and_leave_the_env_usable(case: str) -> None:
    overrides = MISTAKE_CASES[case]
    with make(*overrides) as envs, make(*as_dummy(overrides)) as ref:
        n = envs.num_envs
        actions = sample_actions(envs.single_action_space, n, 6, seed=4)
        with pytest.raises(envfactory.ResetNeededError, match=r"step\(\) before reset\(\)"):
            envs.step(actions[0])
        with pytest.raises(gym.error.ResetNeeded):
            envs.step_async(actions[0])
        # a masked reset first would leave the other envs with no observation at all
        with pytest.raises(envfactory.ResetNeededError, match="before the first full reset"):
            envs.reset(seed=0, options={"reset_mask": np.arange(n) < 2})
        assert_same(envs.reset(seed=1), ref.reset(seed=1), "reset")
        for t, (what, mistake, cls, message) in enumerate(_mistakes(n)):
            with pytest.raises(cls, match=message):
                mistake(envs)
            # the env is where the reference is, and steps on
            assert_same(envs.step(actions[t % 6]), ref.step(actions[t % 6]), f"after {what}")
        assert_same(envs.reset(seed=[3] * n), ref.reset(seed=[3] * n), "a valid reset")
        step_both(envs, ref, actions, "at the end")


def test_action_check_is_vectorised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Array action spaces are checked with numpy on the batch, never ``contains`` per env."""
    from envfactory.vectorizers.front.base import action_checker

    def fail(*args: Any) -> None:
        raise AssertionError("contains() ran in the hot path")

    for cls in (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary,
                gym.spaces.Box):  # fmt: skip
        monkeypatch.setattr(cls, "contains", fail)
    for space in (gym.spaces.Discrete(2), gym.spaces.MultiDiscrete([2, 3]),
                  gym.spaces.MultiBinary(3), gym.spaces.Box(-1, 1, (2,))):  # fmt: skip
        for n in (8, 100):
            batch = gym.vector.utils.batch_space(space, n)
            batch.seed(0)
            action_checker(space, n)(batch.sample())


# --------------------------------------------------------------------------------------
# np_random_seed / np_random as gymnasium's vector envs
# --------------------------------------------------------------------------------------
def _states(gens: Sequence[np.random.Generator]) -> list[Any]:
    return [g.bit_generator.state for g in gens]


@pytest.mark.parametrize("case", CPU_CASES)
def test_np_random_seed_and_np_random_match_gymnasium(case: str) -> None:
    cfg = envfactory.compose([*CASES[case], "num_envs=3"])
    sync = SyncVectorEnv(env_thunks(cfg))
    with envfactory.make_vec(cfg) as envs, contextlib.closing(sync):
        before = envs.np_random_seed  # each env's own random seed, as gymnasium
        assert isinstance(before, tuple) and len(before) == 3
        assert all(isinstance(s, int) for s in before)
        envs.reset(seed=42)
        sync.reset(seed=42)
        assert envs.np_random_seed == sync.np_random_seed == (42, 43, 44)
        gens = envs.np_random
        assert isinstance(gens, tuple) and all(isinstance(g, np.random.Generator) for g in gens)
        assert _states(gens) == _states(sync.np_random)
        a = np.zeros(3, np.int64)
        envs.step(a)
        sync.step(a)
        assert _states(envs.np_random) == _states(sync.np_random)
        envs.reset(seed=[7, None, 9], options={"reset_mask": np.array([True, False, True])})
        sync.reset(seed=[7, None, 9], options={"reset_mask": np.array([True, False, True])})
        assert envs.np_random_seed == sync.np_random_seed == (7, 43, 9)
        envs.reset()  # unseeded: the generators go on, the seeds stay
        sync.reset()
        assert envs.np_random_seed == sync.np_random_seed == (7, 43, 9)
        assert _states(envs.np_random) == _states(sync.np_random)
    spawn = envfactory.compose([*CASES[case], "num_envs=3", "seeding=spawn"])
    with envfactory.make_vec(spawn) as envs:
        envs.reset(seed=42)
        children = np.random.SeedSequence(42).spawn(3)
        expected = tuple(int(c.generate_state(1, dtype=np.uint64)[0]) for c in children)
        assert envs.np_random_seed == expected


# --------------------------------------------------------------------------------------
# every public VecEnv method documents itself with an example that runs
# --------------------------------------------------------------------------------------
PUBLIC_METHODS = ("reset", "reset_async", "reset_wait", "step", "step_async", "step_wait",
                  "call", "env_method", "get_attr", "set_attr", "render", "close")  # fmt: skip


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_public_methods_have_google_docstrings_with_running_examples() -> None:
    """Every public method is documented and shown running: the contract page's script (run
    by tests/project/test_docs.py) calls each one, the class docstring's example runs."""
    import doctest
    from pathlib import Path

    from envfactory import errors
    from envfactory.vectorizers.front import base

    page = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "vecenv-contract.md"
    script = page.read_text().split("Every public method, in one script")[1]
    for name in PUBLIC_METHODS:
        assert f"envs.{name}" in script, f"the contract page's script does not call {name}"
        assert (base.VecEnvBase.__dict__.get(name) or getattr(base.VecEnvBase, name)).__doc__
        assert f"`{name}`" in (base.VecEnvBase.__doc__ or ""), f"class doc omits {name}"
    for module in (base, errors):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__
