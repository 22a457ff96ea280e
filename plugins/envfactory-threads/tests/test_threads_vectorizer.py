"""envfactory-threads, pip-installed and found through its entry point."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from envfactory_threads.plugin import ThreadGroup, ThreadsConfig, ThreadVecEnv

import envfactory
from envfactory.errors import AlreadyPendingError, NoPendingCallError
from envfactory.testing import (
    SpacesConformance,
    VecEnvConformance,
    check_entry_point,
    check_restarts,
    check_same_as_dummy,
)


class TestThreadsConformance(VecEnvConformance):
    """envfactory's vectorizer conformance suite (``call(fn)`` included), every autoreset
    mode, on 2 threads holding 2 + 1 envs or 3 threads of one env."""

    @pytest.fixture(params=[("next_step", 2), ("same_step", 1), ("disabled", 2)], ids=str)
    def make_vecenv(self, request: pytest.FixtureRequest) -> Any:
        mode, in_series = request.param
        cfg = envfactory.compose(
            [
                "vectorizer=threads",
                "num_envs=3",
                f"vectorizer.in_series={in_series}",
                f"autoreset_mode={mode}",
            ]
        )
        return lambda: envfactory.make_vec(cfg)


class TestThreadsSpaces(SpacesConformance):
    """Observations of every space gymnasium ships."""

    num_envs = 3

    def build_vecenv(self, env_fns: Any, **options: Any) -> Any:
        return ThreadVecEnv(env_fns, in_series=2, **options)


def test_its_group_implements_the_backend_protocol() -> None:
    from envfactory.vectorizers.remote import Backend

    assert isinstance(ThreadGroup([lambda: gym.make("CartPole-v1")] * 2, in_series=1), Backend)


def test_registered_through_the_entry_point() -> None:
    check_entry_point(
        "envfactory-threads", entry_point="envfactory_threads", vectorizers=["threads"]
    )


@pytest.mark.parametrize(
    "overrides",
    [
        ["num_envs=5", "vectorizer.in_series=2", "autoreset_mode=same_step"],
        ["num_envs=4", "autoreset_mode=next_step", "seeding=spawn"],
        ["env=mountaincar", "num_envs=3", "vectorizer.in_series=1", "autoreset_mode=disabled"],
        pytest.param(
            ["env=atari", "num_envs=2", "env.max_episode_steps=40", "vectorizer.copy=false"],
            marks=pytest.mark.slow,
        ),
    ],
    ids=["cartpole-5", "spawn", "mountaincar", "pong"],
)
def test_same_trajectories_as_dummy(overrides: list[str]) -> None:
    """The same config and seed give bit-identical rollouts under ``dummy`` and ``threads``."""
    check_same_as_dummy(overrides, "threads", steps=60, seed=7)


class SlowEnv(gym.Env):
    """Sleeps ``seconds`` per step (the GIL is released, as by an emulator in C++),
    records the threads that touch it, and misbehaves on its ``at_step``-th step:
    ``raise`` (ValueError) or ``hang`` (5 s); with ``once_file`` only while that file does
    not exist (a rebuilt env behaves)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, seconds: float = 0.0, fault: str = "", at_step: int = 0, once: str = ""):
        self.seconds, self.fault, self.at_step, self.once = seconds, fault, at_step, once
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.threads = {threading.get_ident()}
        self.calls = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.threads.add(threading.get_ident())
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        self.threads.add(threading.get_ident())
        self.calls += 1
        if self.calls == self.at_step and not (self.once and Path(self.once).exists()):
            if self.once:
                Path(self.once).touch()
            if self.fault == "raise":
                raise ValueError(f"env broke at step {self.calls}")
            time.sleep(5.0)  # hang
        time.sleep(self.seconds)
        return np.full(2, self.calls / 1000, np.float32), 1.0, False, False, {}


ACTIONS = np.zeros(4, dtype=np.int64)


def test_each_env_stays_with_its_own_thread_and_the_threads_step_together() -> None:
    """4 envs that sleep 50 ms a step, 1 per thread: a step takes about 50 ms, not 200
    (they step at once), and each env is built, reset and stepped by one thread, a
    different one for each env and not the caller's."""
    with ThreadVecEnv([lambda: SlowEnv(0.05)] * 4, in_series=1) as envs:
        envs.reset(seed=0)
        t0 = time.perf_counter()
        for _ in range(5):
            envs.step(ACTIONS)
        assert (time.perf_counter() - t0) / 5 < 0.15
        threads = envs.call(lambda env: env.unwrapped.threads)
    assert all(len(t) == 1 for t in threads)
    assert len(set.union(*threads)) == 4 and threading.get_ident() not in set.union(*threads)


def test_env_raising_gives_remote_env_error_of_its_own_type() -> None:
    fns = [SlowEnv, SlowEnv, lambda: SlowEnv(fault="raise", at_step=2), SlowEnv]
    with ThreadVecEnv(fns, in_series=2) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        with pytest.raises(ValueError, match="env broke at step 2") as info:
            envs.step(ACTIONS)
        err = info.value
        assert isinstance(err, envfactory.RemoteEnvError) and isinstance(err.__cause__, ValueError)
        assert err.worker == 1 and err.env_indices == [2, 3] and err.call == "step"
        assert "[thread envfactory-threads-1] raised builtins.ValueError" in str(err)
        assert "raise ValueError" in err.remote_traceback
        with pytest.raises(envfactory.VecEnvBrokenError, match="unusable since"):
            envs.step(ACTIONS)


def test_passes_envfactorys_fault_suite() -> None:
    from envfactory.testing import check_faults

    check_faults(ThreadVecEnv, restart=True)


def test_hung_env_times_out_and_breaks_the_vec_env() -> None:
    fns = [SlowEnv, SlowEnv, lambda: SlowEnv(fault="hang", at_step=2), SlowEnv]
    with ThreadVecEnv(fns, in_series=2, timeout=0.5) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        t0 = time.perf_counter()
        with pytest.raises(envfactory.WorkerTimeoutError, match=r"did not answer within 0\.5 s"):
            envs.step(ACTIONS)
        assert time.perf_counter() - t0 < 3.0
        with pytest.raises(envfactory.VecEnvBrokenError):
            envs.step(ACTIONS)


def test_restart_rebuilds_the_envs_of_a_thread_that_raised_or_hung(tmp_path: Path) -> None:
    raises = lambda: SlowEnv(fault="raise", at_step=3, once=str(tmp_path / "r"))  # noqa: E731
    hangs = lambda: SlowEnv(fault="hang", at_step=5, once=str(tmp_path / "h"))  # noqa: E731
    with ThreadVecEnv(
        [raises, SlowEnv, SlowEnv, hangs], in_series=2, timeout=1.0, restart=True
    ) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        with pytest.warns(RuntimeWarning, match=r"restarting after: worker 0 .*ValueError"):
            obs, _, _, trunc, infos = envs.step(ACTIONS)
        assert trunc.tolist() == [True, True, False, False]
        assert infos["_restarted"].tolist() == [True, True, False, False]
        np.testing.assert_allclose(obs[:2], 0.002)  # the lost episodes end where last seen
        np.testing.assert_allclose(obs[2:], 0.003)
        envs.step(ACTIONS)
        with pytest.warns(RuntimeWarning, match="did not answer within 1 s"):
            _, _, _, trunc, _ = envs.step(ACTIONS)
        assert trunc.tolist() == [False, False, True, True] and envs.restarts == [1, 1]


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_restart_conformance_with_an_env_that_fails_now_and_then(mode: str) -> None:
    class Flaky(SlowEnv):
        def step(self, action: Any) -> Any:
            if self.np_random.random() < 0.03:
                raise ValueError("flaky")
            return super().step(action)

    def make() -> ThreadVecEnv:
        fns = [SlowEnv, Flaky, SlowEnv, Flaky]
        return ThreadVecEnv(fns, in_series=2, restart=True, max_restarts=100, autoreset_mode=mode)

    assert check_restarts(make, steps=80) >= 2


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("vectorizer.in_series=0", "vectorizer.in_series=0: expected an integer >= 1 or null"),
        ("vectorizer.timeout=-1", "vectorizer.timeout=-1.0: expected a number of seconds > 0"),
        ("vectorizer.max_restarts=-1", "vectorizer.max_restarts=-1: expected an integer >= 0"),
        ("+vectorizer.num_gpus=1", "unknown key vectorizer.num_gpus"),
    ],
)
def test_bad_options_fail_at_compose_time_in_one_line(override: str, message: str) -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.compose(["vectorizer=threads", override])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_timeout_inf_means_none() -> None:
    assert ThreadsConfig(timeout=float("inf")).timeout is None


@pytest.fixture
def _sigint_raises() -> Any:
    """SIGINT raises KeyboardInterrupt, as in an interactive Python."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _steps(obs: np.ndarray) -> list[int]:
    return np.rint(obs[:, 0] * 1000).astype(int).tolist()  # SlowEnv's obs: its steps / 1000


@pytest.mark.usefixtures("_sigint_raises")
def test_ctrl_c_in_step_is_finished_by_step_wait_as_under_subproc() -> None:
    """A real SIGINT while the threads step: as ``subproc`` (tests/test_interrupts.py),
    ``step_wait()`` returns the interrupted step, every other call refuses at once with
    ``AlreadyPendingError`` saying how to finish it, and the env steps on. Before, every
    later call raised ``VecEnvBrokenError`` ("step was interrupted ... while waiting for
    worker 0") and ``step_wait()`` said nothing was pending."""
    with ThreadVecEnv([lambda: SlowEnv(0.4)] * 4, in_series=2) as envs:
        envs.reset(seed=0)
        timer = threading.Timer(0.13, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            envs.step(ACTIONS)
        timer.join()
        says = r"step\(\) interrupted by Ctrl-C is pending; call step_wait\(\)"
        for call in (lambda: envs.step(ACTIONS), lambda: envs.get_attr("calls"), envs.reset):
            with pytest.raises(AlreadyPendingError, match=says):
                call()
        obs, rewards, *_ = envs.step_wait()
        assert _steps(obs) == [1, 1, 1, 1] and rewards.tolist() == [1.0] * 4
        obs, *_ = envs.step(ACTIONS)
        assert _steps(obs) == [2, 2, 2, 2]
        assert envs.get_attr("calls") == (2, 2, 2, 2)  # each env stepped exactly twice


def test_random_ctrl_c_storm_loses_no_step_and_never_bricks_the_env() -> None:
    """Real SIGINTs 1-10 ms apart for 1.5 s, raised while the test is inside a call of the
    env (also between a command's count and its queueing): every interrupted step is
    finished by ``step_wait()``, each env's steps reach the caller one at a time, none
    twice or lost."""
    armed, raised = [False], [0]

    def handler(signum: int, frame: Any) -> None:
        if armed[0]:
            raised[0] += 1
            raise KeyboardInterrupt

    stop, rng = threading.Event(), np.random.default_rng(0)

    def fire() -> None:
        while not stop.wait(rng.uniform(0.001, 0.01)):
            os.kill(os.getpid(), signal.SIGINT)

    old = signal.signal(signal.SIGINT, handler)
    firing = threading.Thread(target=fire, daemon=True)
    batches: list[list[int]] = []
    try:
        with ThreadVecEnv([lambda: SlowEnv(0.0005)] * 4, in_series=2) as envs:
            envs.reset(seed=0)
            firing.start()
            pending, deadline = False, time.monotonic() + 1.5
            while time.monotonic() < deadline or pending:
                assert time.monotonic() < deadline + 30, "the step could not be finished"
                try:
                    armed[0] = True
                    out = envs.step_wait() if pending else envs.step(ACTIONS)
                    armed[0] = pending = False
                    batches.append(_steps(out[0]))
                except KeyboardInterrupt:
                    armed[0], pending = False, True
                except NoPendingCallError:  # it landed before the step started
                    armed[0] = pending = False
            stop.set()
            firing.join()
            assert raised[0] > 20 and len(batches) > 20
            assert batches == [[k + 1] * 4 for k in range(len(batches))]
            assert envs.get_attr("calls") == (len(batches),) * 4
    finally:
        stop.set()
        signal.signal(signal.SIGINT, old)
