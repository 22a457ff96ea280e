"""The async env pool (``vectorizer.batch_size``) of ``subproc`` and ``subproc-atari``.

Real worker processes and real envs throughout. The conformance core: every env's
trajectory in the pool (whatever order the envs come back in) equals ``dummy``'s for the
same per-env actions and seeds, in every autoreset mode, with uneven splits and under
every start method; faults, timeouts, restart and close behave as in synchronous mode.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from faulty_envs import Maker

import envfactory
from envfactory.errors import (
    AlreadyPendingError,
    ClosedError,
    ConfigError,
    InvalidActionError,
    InvalidSeedError,
    NoPendingCallError,
    RemoteEnvError,
    ResetNeededError,
    VecEnvBrokenError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from envfactory.testing.pool import _record, dummy_trajectories, pool_trajectories
from envfactory.testing.pool import pool_action as action
from envfactory.vectorizers.asyncpool.pool import SPIN_WAIT, SubprocPool
from envfactory.vectorizers.subproc import SubprocVecEnv

MODES = ("next_step", "same_step", "disabled")
CONTEXTS = ("fork", "forkserver", "spawn")


def _descendants() -> set[int]:
    from multiprocessing import forkserver, resource_tracker

    infra = {
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    }
    return {p.pid for p in psutil.Process().children(recursive=True)} - infra


@pytest.fixture
def no_leaks() -> Iterator[None]:
    before = _descendants()
    yield
    left = _descendants() - before
    for _ in range(200):
        left = {p for p in left if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"}
        if not left:
            break
        time.sleep(0.01)
    assert not left, f"processes left after close(): {left}"


def _pool(overrides: list[str], **opts: Any) -> SubprocPool:
    over = [*overrides, "vectorizer=subproc"]
    over += [f"vectorizer.{k}={'null' if v is None else v}" for k, v in opts.items()]
    envs = envfactory.make_vec(overrides=over)
    assert isinstance(envs, SubprocPool)
    return envs


def _check_equal(ref: list[list[tuple]], got: list[list[tuple]]) -> None:
    for i, (a, b) in enumerate(zip(ref, got)):
        n = min(len(a), len(b))
        assert n > 1, f"env {i}: nothing compared"
        assert a[:n] == b[:n], f"env {i} differs from dummy"


# -- conformance: per-env trajectories ---------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_pool_matches_dummy_in_every_autoreset_mode(mode: str, no_leaks: None) -> None:
    over = ["env=gym", "num_envs=5", f"autoreset_mode={mode}"]
    ref = dummy_trajectories(over, 60)
    with _pool(over, batch_size=2, in_series=2, context="fork") as envs:  # uneven: 2+2+1
        got = pool_trajectories(envs, 60)
    _check_equal(ref, got)
    if mode != "disabled":
        assert all(len(t) == 61 for t in got)
        assert sum(r[2] or r[3] for t in got for r in t) >= 5  # episodes ended and went on
    if mode == "same_step":
        assert any(r[4] is not None for t in got for r in t)  # final_obs kept


@pytest.mark.parametrize("context", CONTEXTS)
def test_pool_matches_dummy_under_every_start_method(context: str, no_leaks: None) -> None:
    over = ["env=mountaincar", "num_envs=4"]
    ref = dummy_trajectories(over, 30)
    with _pool(over, batch_size=3, in_series=3, context=context) as envs:  # 3+1, batch 3
        _check_equal(ref, pool_trajectories(envs, 30))


@pytest.mark.parametrize("batch_size", [1, 4, 6])
def test_any_batch_size_with_any_in_series(batch_size: int, no_leaks: None) -> None:
    """The batch unit is the env: a worker's extra ready envs wait for the next recv."""
    over = ["env=gym", "num_envs=6"]
    ref = dummy_trajectories(over, 25)
    with _pool(over, batch_size=batch_size, in_series=4, context="fork") as envs:  # 3+3
        _check_equal(ref, pool_trajectories(envs, 25))


def test_pickled_observations_without_shared_memory(no_leaks: None) -> None:
    over = ["env=gym", "num_envs=4", "autoreset_mode=same_step"]
    ref = dummy_trajectories(over, 40)
    with _pool(over, batch_size=2, in_series=1, context="fork", shared_memory=False) as envs:
        assert not envs.group._shm_obs
        _check_equal(ref, pool_trajectories(envs, 40))


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_subproc_atari_pool_matches_dummy(no_leaks: None) -> None:
    over = ["env=atari", "env.id=ALE/Pong-v5", "num_envs=3", "env.noop_max=5"]
    ref = dummy_trajectories(over, 12)
    envs = envfactory.make_vec(
        overrides=[*over, "vectorizer=subproc-atari", "vectorizer.batch_size=2"]
    )
    with envs:
        assert isinstance(envs, SubprocPool) and envs.batch_size == 2
        got = pool_trajectories(envs, 12)
    _check_equal(ref, got)


def test_step_with_env_ids_is_send_then_recv_and_order_does_not_matter(
    no_leaks: None,
) -> None:
    """Envs sent in any grouping and order give the trajectories of ``dummy``."""
    over = ["env=gym", "num_envs=4"]
    ref = dummy_trajectories(over, 20)
    got: list[list[tuple]] = [[] for _ in range(4)]
    with _pool(over, batch_size=2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=3)
        pending: list[int] = []
        for _ in range(2):
            obs, rew, term, trunc, infos = envs.recv()
            for row, i in enumerate(infos["env_id"].tolist()):
                got[i].append(_record(obs, rew, term, trunc, infos, row))
                pending.append(i)
        rng = np.random.default_rng(0)
        while min(len(t) for t in got) <= 20:
            rng.shuffle(pending)
            ids, pending = pending[:2], pending[2:]  # two envs, maybe of one worker
            obs, rew, term, trunc, infos = envs.step(
                np.array([action(i, len(got[i]) - 1) for i in ids]), np.array(ids)
            )
            for row, i in enumerate(infos["env_id"].tolist()):
                got[i].append(_record(obs, rew, term, trunc, infos, row))
                pending.append(i)
    _check_equal(ref, got)


# -- the pool is a gymnasium VectorEnv --------------------------------------------------
def test_pool_is_a_vector_env_whose_reset_and_step_are_synchronous(no_leaks: None) -> None:
    over = ["env=gym", "num_envs=4", "autoreset_mode=same_step"]
    sync = envfactory.make_vec(overrides=[*over, "vectorizer=subproc"])
    with _pool(over, batch_size=2, in_series=2, context="fork") as pool, sync:
        assert type(sync) is SubprocVecEnv and isinstance(pool, gym.vector.VectorEnv)
        for envs in (pool, sync):
            envs.reset(seed=1)
        pool = gym.wrappers.vector.RecordEpisodeStatistics(pool)
        for k in range(40):
            acts = np.array([action(i, k) for i in range(4)])
            a, b = pool.step(acts), sync.step(acts)
            for x, y in zip(a[:4], b[:4]):
                np.testing.assert_array_equal(x, y)
        # then the pool calls, from the state the synchronous calls left
        base = pool.unwrapped
        base.send(np.zeros(4, np.int64), np.arange(4))
        with pytest.raises(AlreadyPendingError, match="in flight"):
            pool.step(np.zeros(4, np.int64))  # synchronous: not while envs are in flight
        obs, *_ = base.recv()
        assert obs.shape == (2, 4)
        assert base.get_attr("gravity") == (9.8,) * 4  # a call while envs are in flight
        assert base.recv()[0].shape == (2, 4)  # nothing was lost by the call


def test_async_reset_after_synchronous_steps_returns_reward_zero_and_no_flags(
    no_leaks: None,
) -> None:
    """``async_reset`` promises rewards 0 and no flags on the reset rows, also after
    synchronous steps left rewards (and an episode end) in the batch buffers, and again on
    a second ``async_reset``."""
    with _pool(["env=gym", "num_envs=4"], batch_size=2, in_series=2, context="fork") as envs:
        envs.reset(seed=0)
        for _ in range(30):  # CartPole pays 1.0 a step; some episodes end (flags set)
            envs.step(np.ones(4, np.int64))
        for _ in range(2):
            envs.async_reset(seed=1)
            for _ in range(2):
                _, rew, term, trunc, infos = envs.recv()
                assert rew.tolist() == [0.0, 0.0], infos["env_id"]
                assert not term.any() and not trunc.any()


def test_calls_while_envs_are_in_flight_lose_nothing(no_leaks: None) -> None:
    with _pool(["env=gym", "num_envs=4"], batch_size=2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        first = envs.recv()[4]["env_id"].tolist()
        envs.send(np.zeros(2, np.int64), np.array(first))
        assert envs.env_method("get_wrapper_attr", "np_random_seed") == [0, 1, 2, 3]
        envs.set_attr("gravity", 1.0, indices=[0])
        seen = envs.recv()[4]["env_id"].tolist() + envs.recv()[4]["env_id"].tolist()
        assert sorted(seen) == [0, 1, 2, 3]


# -- bad input: one clear error each ------------------------------------------------------
def test_batch_size_out_of_range_fails_at_compose_time() -> None:
    with pytest.raises(ConfigError) as err:
        envfactory.compose(["vectorizer=subproc", "num_envs=4", "vectorizer.batch_size=5"])
    assert str(err.value) == (
        "vectorizer.batch_size=5: expected an integer in [1, num_envs=4] or null (null: a "
        "synchronous VecEnv). Lower vectorizer.batch_size or raise num_envs (now 4)"
    )
    for bad in ("0", "-1", "true"):
        with pytest.raises(ConfigError, match=r"vectorizer.batch_size"):
            envfactory.compose(["vectorizer=subproc-atari", f"vectorizer.batch_size={bad}"])
    with pytest.raises(ConfigError) as err:
        envfactory.compose(
            ["vectorizer=subproc", "vectorizer.batch_size=2", "vectorizer.in_parent=1"]
        )
    assert str(err.value) == (
        "vectorizer.in_parent=1: expected 0 or null with vectorizer.batch_size=2 (the async "
        "pool steps every env in a worker). Set vectorizer.in_parent=0 (or null), or "
        "vectorizer.batch_size=null"
    )
    # validated once (issue 26): the constructor raises the schema's error, word for word
    with pytest.raises(ConfigError) as direct:
        SubprocPool([Maker(), Maker()], 3)
    assert str(direct.value) == (
        "vectorizer.batch_size=3: expected an integer in [1, num_envs=2] or null (null: a "
        "synchronous VecEnv). Lower vectorizer.batch_size or raise num_envs (now 2)"
    )


def test_out_of_order_and_wrong_calls_say_what_to_do(no_leaks: None) -> None:
    with _pool(["env=gym", "num_envs=4"], batch_size=2, in_series=2, context="fork") as envs:
        with pytest.raises(ResetNeededError, match="async_reset"):
            envs.send(np.zeros(2, np.int64), np.array([0, 1]))
        with pytest.raises(NoPendingCallError, match="needs 2 envs"):
            envs.recv()  # nothing in flight: it would wait forever
        envs.async_reset(seed=0)
        with pytest.raises(AlreadyPendingError, match="recv"):
            envs.async_reset()
        with pytest.raises(AlreadyPendingError, match="in flight"):
            envs.reset()
        ids = envs.recv()[4]["env_id"]
        with pytest.raises(ValueError, match="not received yet"):
            envs.send(np.zeros(2, np.int64), np.array([j for j in range(4) if j not in ids]))
        with pytest.raises(ValueError, match="at most once"):
            envs.send(np.zeros(2, np.int64), np.array([ids[0], ids[0]]))
        with pytest.raises(ValueError, match="out of range"):
            envs.send(np.zeros(1, np.int64), np.array([7]))
        with pytest.raises(InvalidActionError):
            envs.send(np.array([0, 5]), ids)
        envs.send(np.zeros(2, np.int64), ids)  # still usable after the refusals
        envs.recv()
        envs.recv()
        with pytest.raises(
            NoPendingCallError,
            match=r"needs 2 envs \(batch_size\) in flight, but 0 are ready and 0",
        ):
            envs.recv()
    with pytest.raises(ClosedError):
        envs.recv()
    with pytest.raises(ClosedError):
        envs.send(np.zeros(2, np.int64), ids)


def test_disabled_mode_refuses_a_finished_env_until_reset(no_leaks: None) -> None:
    fns = [Maker(episode_len=2) for _ in range(2)]
    with SubprocPool(fns, 1, in_series=1, context="fork", autoreset_mode="disabled") as envs:
        envs.async_reset(seed=0)
        for _ in range(2):
            i = envs.recv()[4]["env_id"]
            envs.send(np.ones(1, np.int64), i)
        done = []
        while len(done) < 2:
            _, _, term, _, infos = envs.recv()
            i = infos["env_id"]
            if term[0]:
                done.append(int(i[0]))
                with pytest.raises(ResetNeededError, match="disabled"):
                    envs.send(np.ones(1, np.int64), i)
            else:
                envs.send(np.ones(1, np.int64), i)
        envs.reset(options={"reset_mask": np.array([True, True])})  # drained: allowed
        envs.send(np.ones(2, np.int64), np.arange(2))
        assert envs.recv()[1].tolist() == [1.0]


# -- faults: the synchronous mode's errors ------------------------------------------------
def _faulty_pool(fault: str, **kwargs: Any) -> SubprocPool:
    maker = {k: kwargs.pop(k) for k in ("once_file",) if k in kwargs}
    fns = [Maker(), Maker(), Maker(), Maker(fault, 3, **maker)]
    kwargs.setdefault("timeout", 1.0)
    kwargs.setdefault("context", "fork")
    return SubprocPool(fns, 2, in_series=2, **kwargs)


def _run_pool(envs: SubprocPool, recvs: int, seconds: float = 0.0) -> list[tuple]:
    """``recvs`` recv/send rounds, and more until ``seconds`` have passed (a hung worker is
    noticed after its timeout while the other worker keeps the pool going)."""
    seen = []
    end = time.monotonic() + seconds
    k = 0
    while k < recvs or time.monotonic() < end:
        k += 1
        _, rew, _, trunc, infos = envs.recv()
        ids = infos["env_id"]
        for row, i in enumerate(ids.tolist()):
            restarted = bool(infos.get("_restarted", np.zeros(2, bool))[row])
            seen.append((i, float(rew[row]), bool(trunc[row]), restarted))
        envs.send(np.ones(len(ids), np.int64), ids)
    return seen


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("raise", ValueError),
        ("exit", WorkerDiedError),
        ("sigkill", WorkerDiedError),
        ("hang", WorkerTimeoutError),
    ],
)
def test_faults_raise_the_synchronous_errors(fault: str, error: type, no_leaks: None) -> None:
    with _faulty_pool(fault) as envs:
        envs.async_reset(seed=0)
        with pytest.raises(error) as err:
            _run_pool(envs, 20, seconds=3.0)  # (a loaded machine may starve a worker)
        assert err.value.worker == 1 and err.value.env_indices == [2, 3]
        assert err.value.env_id == "Faulty-v0"
        if fault == "raise":
            assert isinstance(err.value, RemoteEnvError) and "faulty_envs.py" in str(
                err.value.remote_traceback
            )
        if fault == "hang":
            assert isinstance(err.value, multiprocessing.TimeoutError)
        with pytest.raises(VecEnvBrokenError, match="unusable since"):
            envs.recv()  # never stale data
        with pytest.raises(VecEnvBrokenError):
            envs.send(np.ones(1, np.int64), np.array([0]))


def test_recv_timeout_argument(no_leaks: None) -> None:
    fns = [Maker(step_sleep=0.5), Maker()]
    with SubprocPool(fns, 2, in_series=1, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send(np.ones(2, np.int64), np.arange(2))
        with pytest.raises(WorkerTimeoutError, match=r"within 0.1 s"):
            envs.recv(timeout=0.1)


def test_recv_timeout_0_polls_and_leaves_the_pool_usable(no_leaks: None) -> None:
    """``recv(timeout=0)`` is a poll: the batch if it is ready, else a TimeoutError (as
    gymnasium's ``step_wait``) that stopped no worker. Before, it killed a healthy worker
    (``WorkerTimeoutError: ... within 0 s``) and the pool was broken."""
    fns = [Maker(step_sleep=0.4), Maker(step_sleep=0.4)]
    with SubprocPool(fns, 2, in_series=1, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send(np.ones(2, np.int64), np.arange(2))
        for kwargs in ({}, {"env_ids": [1, 0]}):
            with pytest.raises(TimeoutError) as err:
                envs.recv(timeout=0, **kwargs)
            assert isinstance(err.value, multiprocessing.TimeoutError)
            assert not isinstance(err.value, WorkerTimeoutError)
            assert "no worker was stopped" in str(err.value), err.value
        _, rew, *_ = envs.recv()  # the envs stepped on: nothing lost, nothing killed
        assert rew.tolist() == [1.0, 1.0] and envs.restarts == [0, 0]
        envs.send(np.zeros(2, np.int64), np.arange(2))
        time.sleep(1.0)
        _, rew, _, _, infos = envs.recv(timeout=0)  # ready: the poll returns the batch
        assert rew.tolist() == [0.0, 0.0] and sorted(infos["env_id"].tolist()) == [0, 1]


@pytest.mark.parametrize(
    ("fault", "context"), [("sigkill", "fork"), ("hang", "fork"), ("sigkill", "forkserver")]
)
def test_restart_in_pool_mode_truncates_the_lost_episodes(
    fault: str, context: str, tmp_path: Path, no_leaks: None
) -> None:
    once = str(tmp_path / "once")
    with _faulty_pool(fault, once_file=once, restart=True, context=context) as envs:
        envs.async_reset(seed=0)
        with pytest.warns(RuntimeWarning, match="restarting after: worker 1"):
            seen = _run_pool(envs, 30, seconds=1.5)
        assert envs.restarts == [0, 1]
        lost = [s for s in seen if s[3]]
        assert {s[0] for s in lost} == {2, 3}  # both envs of the rebuilt worker
        assert all(s[2] and s[1] == 0.0 for s in lost)  # truncated, reward 0
        assert not any(s[3] or s[2] for s in seen if s[0] in (0, 1))  # the others go on


def test_fault_during_async_reset(no_leaks: None) -> None:
    fns = [Maker(), Maker("raise", 0)]
    with SubprocPool(fns, 1, in_series=1, context="fork", timeout=5) as envs:
        envs.async_reset(seed=0)
        with pytest.raises(ValueError, match="fails on purpose"):
            envs.recv()
            envs.recv()


# -- close and leaks -----------------------------------------------------------------------
def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _cycles(n: int, context: str) -> None:
    for k in range(n):
        envs = SubprocPool([Maker(), Maker(), Maker()], 2, in_series=2, context=context)
        envs.async_reset(seed=k)
        ids = envs.recv()[4]["env_id"]
        envs.send(np.ones(2, np.int64), ids)  # closed with envs in flight
        envs.close()


def test_close_with_envs_in_flight_leaves_nothing(no_leaks: None) -> None:
    _cycles(1, "fork")
    fds, shm = _fds(), _shm()
    _cycles(5, "fork")
    assert _fds() == fds and _shm() <= shm


@pytest.mark.slow
@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_no_leaks_over_200_build_close_cycles(context: str, no_leaks: None) -> None:
    _cycles(2, context)
    fds, shm, procs = _fds(), _shm(), _descendants()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _cycles(200, context)
    assert _fds() == fds, "file descriptors leaked"
    assert _shm() <= shm, "/dev/shm entries leaked"
    assert _descendants() <= procs


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_pool_matches_dummy_long_runs(mode: str, no_leaks: None) -> None:
    over = ["env=gym", "num_envs=7", f"autoreset_mode={mode}"]
    ref = dummy_trajectories(over, 600)
    with _pool(over, batch_size=3, in_series=3, context="forkserver") as envs:
        _check_equal(ref, pool_trajectories(envs, 600))


@pytest.mark.slow
def test_restart_again_and_again_keeps_the_other_envs_exact(no_leaks: None) -> None:
    """An env that dies now and then (every 7th step): the pool goes on with restart."""
    fns = [Maker(episode_len=10) for _ in range(3)] + [Maker("sigkill", every=7)]
    with SubprocPool(
        fns, 2, in_series=2, context="fork", restart=True, max_restarts=100, timeout=5
    ) as envs:
        envs.async_reset(seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            seen = _run_pool(envs, 200)
            # how many steps the dying env gets depends on the machine: a batch is the first
            # worker ready, and a restarting worker is slower, so it is in fewer batches (on
            # 2 busy cores the other worker can take 95% of them: 2,200 rounds once gave it
            # one restart). Again and again is what counts: go on until it has had two
            end = time.monotonic() + 60
            while sum(envs.restarts) < 2 and time.monotonic() < end:
                seen += _run_pool(envs, 200)
        assert sum(envs.restarts) >= 2
        assert not any(s[3] or s[2] for s in seen if s[0] < 2)  # worker 0 never noticed
        assert any(s[3] for s in seen if s[0] == 3)


def test_default_in_series_fits_a_worker_into_one_batch(no_leaks: None) -> None:
    """in_series null: one worker per core, none with more envs than batch_size."""
    cpus = os.cpu_count() or 1
    with _pool(["env=gym", "num_envs=6"], batch_size=2) as envs:
        sizes = [w.stop - w.start for w in envs.workers]
        assert max(sizes) == min(2, math.ceil(6 / cpus)) and sum(sizes) == 6
    atari = ["env=atari", "env.id=ALE/Pong-v5", "num_envs=2", "vectorizer=subproc-atari"]
    with envfactory.make_vec(overrides=[*atari, "vectorizer.batch_size=1"]) as envs:
        assert [w.stop - w.start for w in envs.workers] == [1, 1]
    with _pool(["env=gym", "num_envs=4"], batch_size=2, in_series=3) as envs:  # as set
        assert [w.stop - w.start for w in envs.workers] == [2, 2]


# -- the two modes share no state: either follows the other with fresh data ---------------
@pytest.mark.parametrize("shared_memory", [True, False])
def test_synchronous_steps_after_async_rounds_return_fresh_data(
    shared_memory: bool, no_leaks: None
) -> None:
    """Async rounds (every env sent each round, returned in any order), then synchronous
    steps from where they left off, then a synchronous reset: each result equals
    ``dummy``'s for the same actions (no row, flag or info left over from the other mode)."""
    over = ["env=gym", "num_envs=4", "autoreset_mode=same_step"]
    ref = dummy_trajectories(over, 60)
    with _pool(
        over, batch_size=2, in_series=2, context="fork", shared_memory=shared_memory
    ) as envs:
        got: list[list[tuple]] = [[] for _ in range(4)]
        envs.async_reset(seed=3)
        for k in range(31):  # the reset, then 30 async steps of every env
            if k:
                envs.send(np.array([action(i, k - 1) for i in range(4)]), np.arange(4))
            for _ in range(2):
                obs, rew, term, trunc, infos = envs.recv()
                for row, i in enumerate(infos["env_id"].tolist()):
                    got[i].append(_record(obs, rew, term, trunc, infos, row))
        assert sum(r[2] or r[3] for t in got for r in t) >= 1  # an episode ended async
        for k in range(30, 60):  # then synchronous steps, from the same state
            obs, rew, term, trunc, infos = envs.step(np.array([action(i, k) for i in range(4)]))
            assert "env_id" not in infos
            for i in range(4):
                got[i].append(_record(obs, rew, term, trunc, infos, i))
        _check_equal(ref, got)
        assert all(len(t) == 61 for t in got)
        obs, infos = envs.reset(seed=3)  # a synchronous reset after all that: dummy's
        assert [np.asarray(obs[i]).tobytes() for i in range(4)] == [t[0][0] for t in ref]


def test_second_async_reset_after_recv_rounds_returns_reward_zero_and_no_flags(
    no_leaks: None,
) -> None:
    """Rounds of send/recv leave rewards, ended episodes and infos in the pool; a second
    ``async_reset`` returns every env with reward 0, no flags and none of those infos."""
    fns = [Maker(episode_len=3) for _ in range(4)]
    with SubprocPool(fns, 2, in_series=2, context="fork", autoreset_mode="same_step") as envs:
        envs.async_reset(seed=0)
        ids = np.concatenate([envs.recv()[4]["env_id"], envs.recv()[4]["env_id"]])
        ended = 0
        for _ in range(5):
            envs.send(np.ones(4, np.int64), np.arange(4))
            for _ in range(2):
                _, rew, term, _, infos = envs.recv()
                assert rew.tolist() == [1.0, 1.0]
                ended += int(term.sum())
        assert ended >= 4 and sorted(ids.tolist()) == [0, 1, 2, 3]
        envs.async_reset(seed=1)
        seen = []
        for _ in range(2):
            _, rew, term, trunc, infos = envs.recv()
            assert rew.tolist() == [0.0, 0.0] and not term.any() and not trunc.any()
            assert "final_obs" not in infos and "_final_obs" not in infos
            seen += infos["env_id"].tolist()
        assert sorted(seen) == [0, 1, 2, 3]


# -- a subset step: recv(env_ids=...) returns exactly those envs --------------------------
def test_recv_env_ids_returns_exactly_the_envs_asked_for(no_leaks: None) -> None:
    with SubprocPool([Maker() for _ in range(4)], 1, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        for _ in range(4):
            envs.recv()
        envs.send(np.array([0, 1, 1, 0]), np.array([0, 1, 2, 3]))
        obs, rew, term, trunc, infos = envs.recv(env_ids=[2, 1])  # any batch_size
        assert infos["env_id"].tolist() == [2, 1] and rew.tolist() == [1.0, 1.0]
        assert obs.shape == (2, 4) and term.shape == trunc.shape == (2,)
        with pytest.raises(ValueError, match=r"envs \[2\] are not in flight; send\(\) them"):
            envs.recv(env_ids=[2])
        rest = sorted(int(envs.recv()[4]["env_id"][0]) for _ in range(2))
        assert rest == [0, 3]  # the others waited, ready, for recv()
        envs.send(np.array([1, 1]), [3, 0])
        assert envs.recv(env_ids=np.array([3, 0]))[4]["env_id"].tolist() == [3, 0]


# -- bad input: recv's timeout, send's batch length -------------------------------------
def test_recv_refuses_a_negative_or_nan_timeout_before_waiting(no_leaks: None) -> None:
    with SubprocPool([Maker(step_sleep=0.2), Maker()], 2, in_series=1, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send(np.ones(2, np.int64), np.arange(2))
        for bad in (-1, -0.5, float("nan"), "1"):
            with pytest.raises(ValueError, match=r"timeout must be None .* seconds >= 0") as err:
                envs.recv(timeout=bad)  # type: ignore[arg-type]
            assert str(err.value).startswith(f"recv(timeout={bad!r}): ")
        _, rew, *_ = envs.recv(timeout=10)  # nothing was waited on, no worker killed
        assert rew.tolist() == [1.0, 1.0] and envs.restarts == [0, 0]


def test_send_with_the_wrong_number_of_actions_names_env_ids(no_leaks: None) -> None:
    with _pool(["env=gym", "num_envs=2"], batch_size=2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        for actions, what in ((np.ones(3, np.int64), "3 actions"), ([1], "1 actions")):
            with pytest.raises(InvalidActionError) as err:
                envs.send(actions, [0, 1])
            assert str(err.value) == (
                f"send(actions, env_ids): {what} for 2 env_ids [0, 1]; pass one action per "
                "env id, e.g. np.stack([envs.single_action_space.sample() for _ in env_ids])"
            )
        with pytest.raises(InvalidActionError, match=r"a single action \(no batch axis\) for 1"):
            envs.send(np.int64(1), [0])
        envs.send(np.ones(2, np.int64), [0, 1])  # still usable
        assert envs.recv()[1].tolist() == [1.0, 1.0]


# -- Ctrl-C during recv: the pool stays usable, no answer is lost --------------------------
def _slow_to_unpickle() -> str:
    """Runs in the parent while it reads an answer (see `_SlowInfo`)."""
    time.sleep(0.8)
    return "read"


class _SlowInfo:
    """An info value whose unpickling takes 0.8 s: a Ctrl-C then lands while the parent
    reads the answer that carries it."""

    def __reduce__(self) -> tuple:
        return (_slow_to_unpickle, ())


class _SlowAnswer(gym.Wrapper):
    def step(self, action: Any) -> Any:
        obs, rew, term, trunc, info = self.env.step(action)
        return obs, rew, term, trunc, {**info, "slow": _SlowInfo()}


def _slow_answer_env() -> gym.Env:
    return _SlowAnswer(Maker()())


def _sigint_in(seconds: float) -> threading.Timer:
    """A real SIGINT to this process (its main thread: a terminal's Ctrl-C) in ``seconds``."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_while_recv_waits_keeps_the_pool_usable(no_leaks: None) -> None:
    with SubprocPool(
        [Maker(step_sleep=1.0) for _ in range(2)], 2, in_series=1, context="fork"
    ) as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send(np.ones(2, np.int64), np.arange(2))
        timer = _sigint_in(0.2)
        with pytest.raises(KeyboardInterrupt):
            envs.recv()
        timer.join()
        _, rew, _, _, infos = envs.recv()  # the interrupted recv's envs, nothing lost
        assert sorted(infos["env_id"].tolist()) == [0, 1] and rew.tolist() == [1.0, 1.0]
        envs.send(np.zeros(2, np.int64), np.arange(2))
        assert envs.recv()[1].tolist() == [0.0, 0.0]


def test_ctrl_c_while_an_answer_is_read_is_held_until_it_is_recorded(no_leaks: None) -> None:
    """The hard case: a Ctrl-C in the middle of reading a worker's answer. It is raised
    once the answer is recorded; the next recv returns that answer, and the pool goes on."""
    handler = signal.getsignal(signal.SIGINT)
    with SubprocPool([_slow_answer_env, _slow_answer_env], 2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send(np.ones(2, np.int64), np.arange(2))
        time.sleep(0.3)  # the answer is there: recv reads it at once, for 0.8 s
        timer = _sigint_in(0.3)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            envs.recv()
        assert time.monotonic() - t0 >= 0.7  # held until the answer was read
        timer.join()
        _, rew, _, _, infos = envs.recv()
        assert infos["env_id"].tolist() == [0, 1] and rew.tolist() == [1.0, 1.0]
        assert infos["slow"].tolist() == ["read", "read"]
        envs.send(np.zeros(2, np.int64), np.arange(2))
        assert envs.recv()[1].tolist() == [0.0, 0.0]
    assert signal.getsignal(signal.SIGINT) is handler  # the hold is gone with the pool


def test_a_second_ctrl_c_interrupts_a_held_read_at_once_and_the_next_recv_resumes_it(
    no_leaks: None,
) -> None:
    """Holding is no trap: a second Ctrl-C cuts the read at once. The pool stays usable:
    the next recv goes on with that read (here it decodes the answer again) and returns
    the batch, and the pool goes on. (Before, the pool was then unusable:
    ``VecEnvBrokenError: step was interrupted (KeyboardInterrupt) while reading``.)"""
    with SubprocPool([_slow_answer_env, _slow_answer_env], 2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        pids = list(envs.pids)
        envs.send(np.ones(2, np.int64), np.arange(2))
        time.sleep(0.3)
        timers = [_sigint_in(0.15), _sigint_in(0.35)]
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            envs.recv()
        assert time.monotonic() - t0 < 0.7  # not held until the answer was read
        for timer in timers:
            timer.join()
        _, rew, _, _, infos = envs.recv()
        assert infos["env_id"].tolist() == [0, 1] and rew.tolist() == [1.0, 1.0]
        assert infos["slow"].tolist() == ["read", "read"]
        envs.send(np.zeros(2, np.int64), np.arange(2))
        assert envs.recv()[1].tolist() == [0.0, 0.0]
        assert envs.pids == pids  # no worker was killed or rebuilt


# -- the parent's waiting: no spin while every core steps a worker -----------------------
def test_parent_spins_only_with_a_core_left_or_short_waits(no_leaks: None) -> None:
    """The pool's parent spins through a wait only while fewer workers are in flight than
    there are cores, or while its waits average below SPIN_WAIT: with a worker in flight
    on every core and steps of milliseconds (Atari), a spin would only take CPU time
    from the workers, and the pipe's writer wakes the parent anyway."""
    cpus = os.cpu_count() or 1
    fns = [Maker(step_sleep=0.003, episode_len=10**6) for _ in range(2 * cpus)]
    with SubprocPool(fns, cpus, in_series=1, spin_us=5000, context="fork") as envs:
        envs.async_reset(seed=0)
        acts = np.zeros(cpus, np.int64)
        for _ in range(30):  # its waits are learnt: milliseconds
            envs.send(acts, envs.recv()[4]["env_id"])
        site = envs.pool.backend
        # at least a worker per core in flight (one whose answer came before recv() looked
        # is read into the queue by it, so "every env" depended on timing)
        assert len(envs.pool.in_flight()) >= cpus
        assert site.waiter.avg > SPIN_WAIT
        owing = len(envs.pool.in_flight())  # (in_series=1: as many workers)
        assert not site._spins(owing)  # every core has a worker in flight: sleep
        envs.recv()  # (the others stay in flight)
    if cpus >= 2:
        with SubprocPool([Maker(step_sleep=0.003)], 1, context="fork") as envs:
            envs.async_reset(seed=0)
            for _ in range(10):
                envs.send(np.zeros(1, np.int64), envs.recv()[4]["env_id"])
            owing = len(envs.pool.in_flight())
            assert envs.pool.backend._spins(owing)  # a core is left to the parent
    fns = [Maker() for _ in range(2 * cpus)]  # short steps: short waits, spun through
    with SubprocPool(fns, cpus, in_series=1, context="fork") as envs:
        envs.async_reset(seed=0)
        acts = np.zeros(cpus, np.int64)
        for _ in range(200):
            envs.send(acts, envs.recv()[4]["env_id"])
        waits = envs.pool.backend.waiter.avg
        owing = len(envs.pool.in_flight())
        assert envs.pool.backend._spins(owing) == (waits < SPIN_WAIT)


# -- the hand-off: a whole worker's step through its control slot -------------------------
def test_a_whole_workers_step_goes_through_its_slot_and_a_part_by_pipe(no_leaks: None) -> None:
    """A ``send`` of every env of a worker writes their actions into the shared buffer and
    the step number into the worker's slot (nothing pickled, nothing on its pipe: ~15 us a
    worker less of the parent's CPU); a ``send`` of some of its envs is a message on its
    pipe. Both come back the same (the trajectories match ``dummy``'s elsewhere)."""
    with SubprocPool([Maker() for _ in range(4)], 2, in_series=2, context="fork") as envs:
        w0, w1 = envs.group.workers
        envs.async_reset(seed=0)
        envs.recv(env_ids=np.array([0, 1]))
        envs.send(np.ones(2, np.int64), np.array([1, 0]))  # all of worker 0, any order
        assert w0.via_slot and not w1.via_slot
        _, rew, _, _, infos = envs.recv(env_ids=np.array([0, 1]))
        assert rew.tolist() == [1.0, 1.0] and infos["env_id"].tolist() == [0, 1]
        envs.recv(env_ids=np.array([2, 3]))
        envs.send(np.array([0]), np.array([3]))  # one env of worker 1: by pipe
        assert not w1.via_slot
        _, rew, _, _, infos = envs.recv(env_ids=np.array([3]))
        assert rew.tolist() == [0.0] and infos["env_id"].tolist() == [3]


def test_a_sleeping_pool_parent_is_woken_by_a_slot_step(no_leaks: None) -> None:
    """With every core stepping a worker the parent does not spin: it sleeps in one poll
    over the pipes and the slots' eventfds, flagged in the slots so that a worker that
    finishes a step wakes it at once (a lost wake-up would cost a 200 ms sleep slice)."""
    cpus = os.cpu_count() or 1
    fns = [Maker(step_sleep=0.03, episode_len=10**6) for _ in range(cpus)]
    with SubprocPool(fns, cpus, in_series=1, context="fork") as envs:
        site = envs.pool.backend
        site._spins = lambda owing: False  # (sleep at once, as with a busy core per worker)
        envs.async_reset(seed=0)
        envs.recv()
        took = []
        for _ in range(5):
            envs.send(np.ones(cpus, np.int64), np.arange(cpus))
            assert all(w.via_slot for w in envs.group.workers)
            t0 = time.monotonic()
            _, rew, *_ = envs.recv()
            took.append(time.monotonic() - t0)
            assert rew.tolist() == [1.0] * cpus
        assert sorted(took)[2] < 0.15, took  # woken by the workers, not by the slice


def test_an_idle_worker_that_dies_costs_no_busy_wait_and_is_reported_at_its_send(
    no_leaks: None,
) -> None:
    """A worker's pipe stays registered between its messages (not once per message): one
    that dies while it owes nothing hangs up its pipe, and the parent's sleep, waiting for
    another worker, must not spin on that hang-up; the death is reported when the dead
    worker's env is next sent."""
    fns = [Maker(step_sleep=0.0), Maker(step_sleep=0.5)]
    with SubprocPool(fns, 1, in_series=1) as envs:
        envs.async_reset(seed=0)
        envs.recv(env_ids=[0])
        envs.recv(env_ids=[1])
        envs.send(np.zeros(1, np.int64), [0])
        envs.recv(env_ids=[0])  # worker 0 answered: idle, its pipe still registered
        dead = envs.group.workers[0].pid
        os.kill(dead, signal.SIGKILL)
        while not _gone(dead):
            time.sleep(0.01)
        envs.send(np.zeros(1, np.int64), [1])
        t0, cpu0 = time.monotonic(), time.process_time()
        envs.recv(env_ids=[1])  # 0.5 s asleep, with worker 0's hang-up on a polled pipe
        wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
        assert wall > 0.4 and cpu < 0.2 * wall, (wall, cpu)
        envs.send(np.zeros(1, np.int64), [0])
        with pytest.raises(WorkerDiedError, match=r"worker 0 .* died during step"):
            envs.recv(env_ids=[0])


def test_send_without_env_ids_is_every_env_as_in_envpool(no_leaks: None) -> None:
    """``send(actions)`` reads as envpool's ``send(action, env_id=None)``: every env. With
    fewer actions it says what to pass (it was Python's own TypeError for a missing
    argument)."""
    with SubprocPool([Maker() for _ in range(4)], 2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv()
        with pytest.raises(
            InvalidActionError,
            match=r"without env_ids steps every env .*"
            r"2 actions for 4 envs.*envs.send\(actions, infos\['env_id'\]\)",
        ):
            envs.send(np.zeros(2, np.int64))
        envs.recv()
        envs.send(np.ones(4, np.int64))  # every env is back: all four step
        _, rew, *_ = envs.recv(env_ids=np.arange(4))
        assert rew.tolist() == [1.0] * 4


def test_a_dead_worker_is_reported_while_the_others_are_always_ready(no_leaks: None) -> None:
    """With 2 ms of learner work per batch the other workers are always done when ``recv``
    asks, so the wait never sleeps (where every pipe is polled): a SIGKILLed worker was
    reported 0.6-2.5 s late (a hostile trial). The wait now looks at every pipe at least every
    `PIPE_LOOK` (10 ms)."""
    with SubprocPool([Maker() for _ in range(6)], 2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        for _ in range(20):
            *_, infos = envs.recv()
            time.sleep(0.002)
            envs.send(np.ones(2, np.int64), infos["env_id"])
        victim = envs.pids[0]
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"worker 0 .*died"):
            while time.monotonic() - killed < 5.0:
                *_, infos = envs.recv()
                time.sleep(0.002)
                envs.send(np.ones(2, np.int64), infos["env_id"])
        assert time.monotonic() - killed < 0.3


@pytest.mark.parametrize("seed", [-1, "x", [0, 1]])
def test_a_bad_seed_of_async_reset_names_async_reset(seed: Any, no_leaks: None) -> None:
    """It said ``reset(seed=-1)`` (a hostile trial); the pool stays usable."""
    with SubprocPool([Maker() for _ in range(4)], 2, in_series=2, context="fork") as envs:
        with pytest.raises(InvalidSeedError, match=r"^async_reset\(seed="):
            envs.async_reset(seed=seed)
        envs.async_reset(seed=0)
        assert len(envs.recv()[1]) == 2


def test_a_bad_action_in_a_send_names_its_env_id(no_leaks: None) -> None:
    """A send's rows are named by their env ids (a hostile trial: ``actions[2] = 7`` of
    ``send(..., [4, 5, 6, 7])`` said "env 2", and a shape error said ``num_envs=4`` of an
    8-env pool with advice that gives 8 rows); the pool stays usable."""
    with SubprocPool([Maker() for _ in range(8)], 4, in_series=4, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv(env_ids=[4, 5, 6, 7])
        with pytest.raises(InvalidActionError, match=r"^actions\[2\] = 7 \(env 6\) is not in"):
            envs.send(np.array([0, 1, 7, 0]), [4, 5, 6, 7])
        with pytest.raises(
            InvalidActionError,
            match=r"expects \(4,\) \(4 env_ids \[4, 5, 6, 7\], single_action_space=.*\); pass "
            r"one action per env id, e\.g\. np\.stack\(\[envs\.single_action_space\.sample",
        ):
            envs.send(np.zeros((4, 2), np.int64), [4, 5, 6, 7])
        envs.send(np.ones(4, np.int64), [4, 5, 6, 7])
        assert envs.recv(env_ids=[4, 5, 6, 7])[1].tolist() == [1.0] * 4


def test_step_without_env_ids_after_recv_says_to_pass_the_ids(no_leaks: None) -> None:
    """``step(actions)`` with a batch's actions after ``recv`` points at ``step(actions,
    env_ids)`` (the shape check's advice, one action per env, led to ``AlreadyPendingError``);
    the env is still usable after it."""
    with SubprocPool([Maker() for _ in range(4)], 2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        *_, infos = envs.recv()
        with pytest.raises(
            InvalidActionError,
            match=r"step\(actions\) without env_ids is the synchronous step of every env: 2 "
            r"actions for 4 envs; .*envs.step\(actions, infos\['env_id'\]\)",
        ):
            envs.step(np.zeros(2, np.int64))
        _, rew, *_ = envs.step(np.ones(2, np.int64), infos["env_id"])
        assert len(rew) == 2


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie counts: it runs no more)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _bare_board(handles: list) -> Any:
    """A `Board` over fake workers (the unit under test): no process, no shared region."""
    from envfactory.vectorizers.transport.board import SLOT_WORDS, Board

    control = np.zeros((len(handles), SLOT_WORDS), np.int64)
    for k, h in enumerate(handles):
        h.slot = control[k]
    return Board(handles, control, None)


def _fake_handle(index: int, fd: int) -> Any:
    from types import SimpleNamespace

    h = SimpleNamespace(index=index, _fd=fd, done=os.eventfd(0), via_slot=False, seq=1, unsent=b"")
    h.spin_us, h.stop = 0, index + 1
    h.fileno = lambda: h._fd
    return h


def test_a_pipe_number_reused_by_another_rebuilt_worker_stays_polled() -> None:
    """The pool waits on the group's board, which polls every worker's pipe, registered
    afresh when a worker is rebuilt (`Board.forget_fds`), and a closed pipe's number can be
    reused by another worker's new pipe: worker B idle, rebuilt (its number Y closed),
    worker C rebuilt onto Y, then B's next message must not hide Y from C (found by a
    review: C's answers were then never seen, and a later unregister raised KeyError)."""
    a_r, _a_w = os.pipe()
    rb, _wb = os.pipe()
    b = _fake_handle(1, rb)
    board = _bare_board([_fake_handle(0, a_r), b, _fake_handle(2, os.pipe()[0])])
    c = board.workers[2]
    assert board.ready([b], 0, False) == []
    os.close(rb)  # B rebuilt: its number closed, C's new pipe takes it
    rc, wc = os.pipe()
    assert rc == rb  # (the lowest free number: B's old one)
    c._fd = rc
    b._fd, _ = os.pipe()  # B's new pipe
    board.forget_fds()  # (what `SubprocGroup.respawn` does)
    os.write(wc, b"x")  # C answers by pipe
    assert c in board.ready([b, c], 0, False)
    assert board.ready([b, c], 0.01, False) == [c]  # (the wait, too)
    c._fd, _ = os.pipe()  # C rebuilt again
    board.forget_fds()  # (raised KeyError before)
    assert board.ready([b, c], 0, False) == [] and sorted(board._pipes.values()) == [0, 1, 2]


def test_recv_ready_returns_every_env_done_once_at_least_are_or_wait_passed(
    no_leaks: None,
) -> None:
    """Issue 38: ``recv_ready(at_least, wait)`` (Tianshou's ``wait_num`` / ``timeout``, what
    ``to_tianshou``'s asynchronous collection uses): every env done, in the order they finished,
    once ``at_least`` are, or once ``wait`` seconds passed and one is, whatever
    ``batch_size``; the others keep stepping, and each env's step is exactly its own."""
    fns = [Maker(step_sleep=s) for s in (0.05, 0.1, 0.6, 1.0)]
    envs = SubprocPool(fns, 1, in_series=1, context="fork")
    try:
        envs.async_reset(seed=0)
        ready = envs.recv_ready(at_least=4)
        assert sorted(ready[4]["env_id"].tolist()) == [0, 1, 2, 3]
        envs.send(envs.action_space.sample(), [0, 1, 2, 3])
        obs, rew, _, _, infos = envs.recv_ready(at_least=2)
        assert sorted(infos["env_id"].tolist()) == [0, 1] and len(obs) == len(rew) == 2
        t0 = time.monotonic()
        _, _, _, _, infos = envs.recv_ready(at_least=2, wait=0.2)  # only env 2 is done by then
        assert infos["env_id"].tolist() == [2] and time.monotonic() - t0 >= 0.2
        _, _, _, _, infos = envs.recv_ready(at_least=4)  # capped at the 1 env still stepping
        assert infos["env_id"].tolist() == [3]
        with pytest.raises(NoPendingCallError, match="no env is in flight"):
            envs.recv_ready()
        with pytest.raises(ValueError, match=r"at_least must be an int in \[1, 4\]"):
            envs.recv_ready(at_least=0)
        with pytest.raises(ValueError, match="wait must be None or seconds > 0"):
            envs.recv_ready(wait=0)
    finally:
        envs.close()
