"""Faults of the synchronous ``subproc`` path found by an adversarial pass (issue 18):
a bad ``timeout`` argument, a broken env answered with "call reset first", a large
message to a stopped worker that blocked past the timeout, the advice of the broken
message, and workers that outlived a SIGKILLed parent under forkserver.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from faulty_envs import Maker

from envfactory.errors import VecEnvBrokenError, WorkerDiedError, WorkerTimeoutError
from envfactory.vectorizers.subproc import SubprocVecEnv

ONES = np.ones(4, np.int64)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    left = [p for p in pids if _running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if _running(p)]
    return left


def envs4(**kwargs: object) -> SubprocVecEnv:
    return SubprocVecEnv([Maker()] * 4, in_series=2, context="fork", in_parent=0, **kwargs)


# -- 1. a bad timeout argument ----------------------------------------------------------
@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, "1", True])
def test_a_bad_wait_timeout_is_a_value_error_and_the_env_stays_usable(bad: object) -> None:
    with envs4() as envs:
        pids = envs.pids
        envs.reset_async(seed=0)
        with pytest.raises(ValueError, match=r"reset_wait\(timeout=.*\): timeout must be a number"):
            envs.reset_wait(timeout=bad)  # type: ignore[arg-type]
        envs.reset_wait()
        envs.step_async(ONES)
        with pytest.raises(ValueError, match=r"step_wait\(timeout=.*\): timeout must be a number"):
            envs.step_wait(timeout=bad)  # type: ignore[arg-type]
        _, rewards, *_ = envs.step_wait(timeout=5)
        assert rewards.tolist() == [1.0] * 4
        assert envs.pids == pids and all(_running(p) for p in pids)
        envs.step_async(ONES)
        envs.step_wait(timeout=math.inf)  # inf: no limit, as None


def test_an_infinite_timeout_while_the_parent_sleeps_in_the_hand_off() -> None:
    """``step_wait(timeout=math.inf)`` is no limit also when the wait is long enough for the
    parent to sleep in the group hand-off (it raised OverflowError there, computing a
    poll timeout from an infinite deadline: seen only on a loaded machine, where the
    parent stopped spinning)."""
    with SubprocVecEnv(
        [Maker(step_sleep=0.05)] * 2, in_series=1, context="fork", in_parent=0
    ) as envs:
        envs.reset(seed=0)
        g = envs.group.board
        assert g is not None
        g.waiter.max_spin = 0  # (sleep at once)
        envs.step_async(np.ones(2, np.int64))
        _, rewards, *_ = envs.step_wait(timeout=math.inf)
        assert rewards.tolist() == [1.0, 1.0]


# -- 2. and 6. broken first, with advice that fits the settings ---------------------------
def test_a_broken_env_says_so_before_asking_for_a_reset() -> None:
    with envs4() as envs:
        os.kill(envs.pids[1], signal.SIGKILL)
        with pytest.raises(WorkerDiedError):
            envs.reset(seed=0)
        with pytest.raises(
            VecEnvBrokenError, match=r"step\(\) on a SubprocVecEnv that is unusable"
        ):
            envs.step(ONES)  # (never reset successfully: was "call envs.reset() first")
        with pytest.raises(VecEnvBrokenError):
            envs.step_async(np.zeros(3))  # even a wrong batch


def test_the_broken_message_does_not_recommend_restart_when_it_is_on() -> None:
    with SubprocVecEnv(
        [Maker(), Maker(), Maker(), Maker("sigkill", at_step=2)],
        in_series=2,
        context="fork",
        restart=True,
        max_restarts=0,
    ) as envs:
        envs.reset(seed=0)
        envs.step(ONES)
        with pytest.raises(WorkerDiedError):
            envs.step(ONES)
        with pytest.raises(VecEnvBrokenError) as info:
            envs.step(ONES)
        text = str(info.value)
        assert "set vectorizer.restart=true" not in text
        assert "vectorizer.max_restarts" in text, text


# -- 3. a large message to a stopped worker ---------------------------------------------
@pytest.mark.parametrize("restart", [False, True])
def test_a_large_message_to_a_stopped_worker_is_bounded_by_the_timeout(restart: bool) -> None:
    """float64 actions of a float32 Box go by pipe: 2 envs x 40,000 x 8 bytes = 640 KB per
    worker, more than a socket buffer holds. A stopped worker never reads it."""
    act = 40_000
    envs = SubprocVecEnv(
        [Maker(act_dim=act)] * 4, in_series=2, context="fork", timeout=1.0, restart=restart
    )
    try:
        envs.reset(seed=0)
        actions = np.zeros((4, act))  # float64
        envs.step(actions)  # (a running worker reads it)
        stopped = envs.pids[1]
        os.kill(stopped, signal.SIGSTOP)
        t0 = time.monotonic()
        if restart:
            with pytest.warns(RuntimeWarning, match="restarting after: .*did not read"):
                _, _, _, truncations, _ = envs.step(actions)
            assert truncations.tolist() == [False, False, True, True]
        else:
            with pytest.raises(WorkerTimeoutError, match=r"did not read a \d+-byte message"):
                envs.step(actions)
        assert time.monotonic() - t0 < 4.0
        assert not _wait_gone([stopped], 2.0)  # killed
    finally:
        envs.close(terminate=True)


# -- 5. the parent is SIGKILLed while its workers are busy or stopped -----------------------
BUSY_PARENT = """
import json, os, signal, sys, time
sys.path.insert(0, sys.argv[2])
from faulty_envs import Maker
from envfactory.vectorizers.subproc import SubprocVecEnv
import multiprocessing.forkserver as fs, multiprocessing.resource_tracker as rt
import numpy as np

if __name__ == "__main__":
    envs = SubprocVecEnv([Maker(step_sleep=600)] * 4, in_series=2, context=sys.argv[1],
                         in_parent=0)
    envs.reset(seed=0)
    if sys.argv[3] == "stopped":
        os.kill(envs.pids[0], signal.SIGSTOP)
    envs.step_async(np.ones(4, np.int64))  # a 600 s step: the workers are busy
    helpers = [fs._forkserver._forkserver_pid, rt._resource_tracker._pid]
    print(json.dumps([envs.pids, [h for h in helpers if h]]), flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("context", "state"),
    [("forkserver", "busy"), ("forkserver", "stopped"), ("fork", "busy"), ("spawn", "stopped")],
)
def test_parent_sigkill_leaves_no_busy_or_stopped_worker(
    context: str, state: str, tmp_path: Path
) -> None:
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(BUSY_PARENT))
    tests = str(Path(__file__).parents[1])  # faulty_envs.py
    proc = subprocess.Popen(
        [sys.executable, str(script), context, tests, state],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    workers: list[int] = []
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate()[1]
        workers, helpers = json.loads(line)
        time.sleep(0.5)  # well inside the step
        proc.kill()
        proc.wait()
        left = _wait_gone(workers, 3.0)
        assert not left, f"workers alive 3 s after the parent was SIGKILLed: {left}"
        assert not _wait_gone(helpers, 3.0), "forkserver / resource tracker still alive"
    finally:
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_a_wait_cut_by_ctrl_c_keeps_the_calls_deadline() -> None:
    """``vectorizer.timeout`` is one deadline from the step's post: a ``step_wait()`` after a
    Ctrl-C waits for what is left of it, not a fresh ``timeout`` (a hostile trial: a Ctrl-C
    every 0.5 s with ``timeout=2`` and a hung worker never timed out in 20 s; the pool already
    kept its deadline)."""
    envs = SubprocVecEnv([Maker(fault="hang", at_step=2)] + [Maker()] * 3, in_series=2,
                         context="fork", timeout=1.0)  # fmt: skip
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        t0 = time.monotonic()
        envs.step_async(np.zeros(4, np.int64))  # env 0 hangs
        for _ in range(2):
            timer = threading.Timer(0.35, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                envs.step_wait()
            timer.join()
        with pytest.raises(WorkerTimeoutError, match=r"worker 0 .*did not answer within 1 s"):
            envs.step_wait()
        assert time.monotonic() - t0 < 1.3  # (a fresh second a wait: 1.7 s)
    finally:
        envs.close()
