"""Ctrl-C during a synchronous ``subproc`` step or reset (issue 18): as gymnasium's
``AsyncVectorEnv``, the interrupted call can be finished (``step_wait()`` /
``reset_wait()`` returns it) or the next call drains it (its results dropped); only a
worker that is really gone or whose stream an interrupt left in an unknown place leaves
the env broken (or rebuilt, with ``restart=true``).

The interrupts are real: a ``SIGINT`` sent to this process by a timer thread while the
envs sleep in a slow step (what Ctrl-C in a terminal, or a notebook's interrupt, does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from faulty_envs import Maker, cut_next_read, interrupt_next_send

from envfactory.errors import VecEnvBrokenError, WorkerDiedError
from envfactory.vectorizers.subproc import SubprocVecEnv

STEP = 0.4  # seconds each env's step (or reset) takes: the interrupt lands in it
ONES = np.ones(4, np.int64)  # through the shared control slots
PIPE_ONES = ONES.astype(np.int32)  # another dtype than the space's: by pipe


@pytest.fixture(autouse=True)
def _default_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in an interactive Python."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def ctrl_c_after(seconds: float) -> Iterator[None]:
    """A real SIGINT to this process ``seconds`` from now, expected to interrupt the
    block (``pytest.raises(KeyboardInterrupt)``)."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        timer.cancel()


def slow_envs(context: str = "fork", in_parent: int = 0, **kwargs: Any) -> SubprocVecEnv:
    """4 envs whose step (``reset_sleep``: reset) takes STEP seconds, 2 per worker."""
    maker = Maker(**{"step_sleep": STEP, **kwargs.pop("maker", {})})
    return SubprocVecEnv([maker] * 4, in_series=2, context=context, in_parent=in_parent, **kwargs)


def steps_of(obs: np.ndarray) -> list[int]:
    """Each env's step count in its episode (FaultyEnv's observation is t / 1000)."""
    return np.rint(obs[:, 0] * 1000).astype(int).tolist()


@pytest.mark.parametrize(
    ("context", "actions", "restart"),
    [
        ("fork", "slot", False),
        ("forkserver", "slot", False),
        ("fork", "pipe", False),
        ("fork", "slot", True),
        ("forkserver", "pipe", True),
    ],
)
def test_step_wait_after_ctrl_c_returns_the_interrupted_step(
    context: str, actions: str, restart: bool
) -> None:
    batch = ONES if actions == "slot" else PIPE_ONES
    with slow_envs(context, restart=restart) as envs:
        envs.reset(seed=0)
        with ctrl_c_after(STEP / 3):
            envs.step(batch)
        obs, rewards, _, truncations, infos = envs.step_wait()
        assert steps_of(obs) == [1, 1, 1, 1]
        assert rewards.tolist() == [1.0] * 4 and not truncations.any()
        assert "restarted" not in infos
        obs, *_ = envs.step(batch)
        assert steps_of(obs) == [2, 2, 2, 2]
        assert envs.restarts == [0, 0]


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_the_next_call_after_ctrl_c_drains_the_interrupted_step(context: str) -> None:
    with slow_envs(context) as envs:
        envs.reset(seed=0)
        with ctrl_c_after(STEP / 3):
            envs.step(ONES)
        obs, *_ = envs.step(ONES)  # the interrupted step is finished, its results dropped
        assert steps_of(obs) == [2, 2, 2, 2]
        with ctrl_c_after(STEP / 3):
            envs.step(PIPE_ONES)
        assert envs.get_attr("t") == (3, 3, 3, 3)  # any call drains it
        with ctrl_c_after(STEP / 3):
            envs.step(ONES)
        obs, _ = envs.reset(seed=1)
        assert steps_of(obs) == [0, 0, 0, 0]
        assert envs.get_attr("steps") == (4, 4, 4, 4)  # every env stepped exactly 4 times


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_reset_wait_after_ctrl_c_returns_the_interrupted_reset(context: str) -> None:
    with slow_envs(context, maker={"step_sleep": 0.0, "reset_sleep": STEP}) as envs:
        with ctrl_c_after(STEP / 3):
            envs.reset(seed=7)
        obs, _ = envs.reset_wait()
        assert steps_of(obs) == [0, 0, 0, 0]
        assert envs.np_random_seed == (7, 8, 9, 10)
        with ctrl_c_after(STEP / 3):
            envs.reset(seed=3)
        obs, *_ = envs.step(ONES)  # drains the reset, then steps
        assert steps_of(obs) == [1, 1, 1, 1]
        assert envs.np_random_seed == (3, 4, 5, 6)


def test_ctrl_c_cutting_the_parents_own_step_ends_those_episodes_truncated() -> None:
    """The parent's own envs (``in_parent``) step in this process, first: a Ctrl-C cuts
    one in the middle of its ``step``, which can be neither finished nor redone. Their
    episodes end truncated at the last observation seen (``infos["restarted"]``, as a
    rebuilt worker's envs), they reset at their next step, and the workers' envs lose
    nothing."""
    with slow_envs(in_parent=2) as envs:
        envs.reset(seed=0)
        envs.step(ONES)
        with ctrl_c_after(STEP / 3):  # inside env 2's step, in this process
            envs.step(ONES)
        obs, rewards, _, truncations, infos = envs.step_wait()
        assert steps_of(obs) == [2, 2, 1, 1]  # envs 2 and 3: the observation seen last
        assert rewards.tolist() == [1.0, 1.0, 0.0, 0.0]
        assert truncations.tolist() == [False, False, True, True]
        assert infos["_restarted"].tolist() == [False, False, True, True]
        obs, rewards, _, truncations, _ = envs.step(ONES)
        assert steps_of(obs) == [3, 3, 0, 0]  # (next_step autoreset: reset)
        assert not truncations.any()
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [4, 4, 1, 1]


def test_ctrl_c_cutting_a_message_part_way_kills_that_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with slow_envs(maker={"step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        cut_next_read(monkeypatch, envs.workers[1].fileno())
        with pytest.raises(KeyboardInterrupt):
            envs.step(PIPE_ONES)  # (its answer comes by pipe)
        pid = envs.pids[1]
        with pytest.raises(WorkerDiedError, match="cut a message to or from it part-way"):
            envs.step_wait()
        with pytest.raises(VecEnvBrokenError, match="cut a message"):
            envs.step(ONES)
    assert not psutil_alive(pid)


def test_with_restart_a_worker_whose_message_was_cut_is_rebuilt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with slow_envs(maker={"step_sleep": 0.0}, restart=True) as envs:
        envs.reset(seed=0)
        cut_next_read(monkeypatch, envs.workers[1].fileno())
        with pytest.raises(KeyboardInterrupt):
            envs.step(PIPE_ONES)
        with pytest.warns(RuntimeWarning, match="restarting after: .*cut a message"):
            obs, _, _, truncations, infos = envs.step_wait()
        assert truncations.tolist() == [False, False, True, True]
        assert infos["_restarted"].tolist() == [False, False, True, True]
        assert envs.restarts == [0, 1]
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [2, 2, 0, 0]


def test_ctrl_c_between_the_sends_of_a_step_is_finished_by_step_wait() -> None:
    """Worker 0 has the step, worker 1 not yet: step_wait() sends it to worker 1, and
    every env steps exactly once."""
    with slow_envs(maker={"step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        interrupt_next_send(envs.workers[1])
        with pytest.raises(KeyboardInterrupt):
            envs.step(PIPE_ONES)
        obs, *_ = envs.step_wait()
        assert steps_of(obs) == [1, 1, 1, 1]
        assert envs.get_attr("steps") == (1, 1, 1, 1)


def psutil_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
