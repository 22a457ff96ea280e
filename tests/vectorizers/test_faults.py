"""Fault tests of the ``subproc`` vectorizer: real worker processes, real signals.

Every failure must give one structured exception (worker index, pid, env indices, env id,
exit code or signal, remote traceback) within about two seconds, and ``close()`` must leave
no process behind (the ``no_leaks`` fixture checks the test process's descendants, except
multiprocessing's own forkserver and resource tracker).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from functools import partial
from multiprocessing import forkserver, resource_tracker
from pathlib import Path
from typing import Any

import faulty_envs
import gymnasium as gym
import numpy as np
import psutil
import pytest
from faulty_envs import FaultyEnv, Maker, interrupt_after_next_write, interrupt_next_send

import envfactory
from envfactory.errors import (
    AlreadyPendingError,
    AsyncCallError,
    ClosedError,
    ConfigError,
    RemoteEnvError,
    SpaceMismatchError,
    UnpicklableEnvError,
    VecEnvBrokenError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
)
from envfactory.testing import check_restarts
from envfactory.vectorizers.subproc import SubprocVecEnv

CONTEXTS = ("fork", "forkserver", "spawn")
PICKLING_CONTEXTS = ("forkserver", "spawn")
FAULT_SECONDS = 3.0  # upper bound for "within about 2 seconds"
TIMEOUT = 1.0  # vectorizer.timeout used by these tests
ACTIONS = np.ones(4, np.int64)
# a batch of another dtype than the action space's goes by pipe (ACTIONS goes through the
# shared control slots): the tests of an interrupted pipe message use it
PIPE_ACTIONS = ACTIONS.astype(np.int32)
FAULTY_WORKER, FAULTY_ENVS = 1, [2, 3]  # env 3 misbehaves; in_series=2 puts it in worker 1


# -- helpers ---------------------------------------------------------------------------
def _infrastructure() -> set[int]:
    """multiprocessing's own helper processes, which outlive any one vec env."""
    pids = {
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    }
    return {p for p in pids if p}


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _descendants(pid: int | None = None) -> set[int]:
    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {p.pid for p in procs} - _infrastructure()


def _wait_gone(pids: set[int] | list[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to exit; return those still running."""
    deadline = time.monotonic() + seconds
    left = {p for p in pids if _running(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = {p for p in left if _running(p)}
    return left


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """After the test (which closes its envs), no new descendant process may remain."""
    before = _descendants()
    yield
    left = _wait_gone(_descendants() - before, 2.0)
    assert not left, f"processes left after close(): {[psutil.Process(p).cmdline() for p in left]}"


def subproc(fns: list[Any], context: str = "fork", **kwargs: Any) -> SubprocVecEnv:
    kwargs.setdefault("timeout", TIMEOUT)
    return SubprocVecEnv(fns, in_series=2, context=context, **kwargs)


def faulty(fault: str, context: str = "fork", at_step: int = 3, **kwargs: Any) -> SubprocVecEnv:
    """4 envs in 2 workers; env 3 (worker 1) misbehaves on its ``at_step``-th step."""
    maker_kw = {k: kwargs.pop(k) for k in ("once_file", "step_sleep") if k in kwargs}
    fns = [Maker(), Maker(), Maker(), Maker(fault, at_step, **maker_kw)]
    return subproc(fns, context, **kwargs)


def _assert_names(err: WorkerError, envs: SubprocVecEnv, worker: int, indices: list[int]) -> None:
    """The exception names the worker, its pid, its env indices and the env id."""
    pid = envs.pids[worker]
    assert (err.worker, err.pid, err.env_indices, err.env_id) == (worker, pid, indices, "Faulty-v0")
    text = str(err)
    for part in (f"worker {worker}", f"pid {pid}", f"envs {indices}", "'Faulty-v0'"):
        assert part in text, (part, text)


def _assert_broken(envs: SubprocVecEnv) -> None:
    """After a failure no call may return (stale) data."""
    with pytest.raises(VecEnvBrokenError, match="unusable since"):
        envs.step(ACTIONS)
    with pytest.raises(VecEnvBrokenError):
        envs.reset()
    with pytest.raises(VecEnvBrokenError):
        envs.get_attr("steps")


def _kill_and_wait(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    assert not _wait_gone([pid], 2.0)


# -- 1. an env raises in step / reset ------------------------------------------------
@pytest.mark.parametrize("context", CONTEXTS)
def test_env_raising_in_step_gives_remote_env_error(context: str, no_leaks: None) -> None:
    envs = faulty("raise", context)
    try:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        t0 = time.monotonic()
        with pytest.raises(RemoteEnvError) as info:
            envs.step(ACTIONS)  # env 3's third step raises
        assert time.monotonic() - t0 < FAULT_SECONDS
        err = info.value
        _assert_names(err, envs, FAULTY_WORKER, FAULTY_ENVS)
        assert isinstance(err.__cause__, ValueError)
        assert "fails on purpose at step 3" in str(err.__cause__)
        assert err.exc_type == "builtins.ValueError"
        assert err.exitcode is None and err.signal is None  # it raised; it is alive
        assert err.call == "step" and "during step" in str(err)
        assert "ValueError: FaultyEnv fails on purpose at step 3" in err.remote_traceback
        assert "faulty_envs.py" in err.remote_traceback  # where it was raised, remotely
        assert err.remote_traceback.rstrip() in str(err)
        _assert_broken(envs)
    finally:
        envs.close()


@pytest.mark.parametrize("in_parent", [0, 2])
def test_an_envs_own_timeout_error_is_its_error_not_a_worker_timeout(
    in_parent: int, no_leaks: None
) -> None:
    """An env raising TimeoutError (its simulator's) gives a RemoteEnvError that is also a
    TimeoutError, as any other exception: its worker is not taken for a hung one, killed
    and reported as a WorkerTimeoutError (in a worker or in the parent)."""
    envs = faulty("raise-timeout", in_parent=in_parent)
    try:
        envs.reset(seed=0)
        pids = envs.pids
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        with pytest.raises(RemoteEnvError) as info:
            envs.step(ACTIONS)
        err = info.value
        assert isinstance(err, TimeoutError) and not isinstance(err, WorkerTimeoutError)
        assert "timed out on purpose at step 3" in str(err.__cause__)
        assert err.exc_type == "builtins.TimeoutError" and err.exitcode is None
        assert envs.pids == pids and all(_running(pid) for pid in pids)  # nobody was killed
    finally:
        envs.close()


def test_env_raising_in_reset_gives_remote_env_error(no_leaks: None) -> None:
    with faulty("raise", at_step=0) as envs, pytest.raises(RemoteEnvError) as info:
        envs.reset(seed=0)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.call == "reset" and "in reset" in info.value.remote_traceback
    _assert_names(info.value, envs, FAULTY_WORKER, FAULTY_ENVS)


def test_unpicklable_remote_exception_still_gives_type_and_traceback(no_leaks: None) -> None:
    with faulty("raise-unpicklable") as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        with pytest.raises(RemoteEnvError) as info:
            envs.step(ACTIONS)
    err = info.value
    assert err.__cause__ is None  # could not be sent back: type name and text still are
    assert err.exc_type == "faulty_envs.UnpicklableError"
    assert "UnpicklableError: carries a lock" in err.remote_traceback


def test_env_raising_through_make_vec_names_the_config_env_id(no_leaks: None) -> None:
    envs = envfactory.make_vec(
        overrides=[
            "vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
            "vectorizer.context=forkserver", f"vectorizer.timeout={TIMEOUT}", "env.id=Faulty-v0",
            "+env.kwargs.fault=raise", "+env.kwargs.at_step=2",
        ]
    )  # fmt: skip
    with envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        with pytest.raises(RemoteEnvError) as info:
            envs.step(ACTIONS)  # every env raises: the first worker is reported
    _assert_names(info.value, envs, 0, [0, 1])
    assert isinstance(info.value.__cause__, ValueError)


# -- 2. a worker is killed or exits ------------------------------------------------------
@pytest.mark.parametrize("context", CONTEXTS)
def test_worker_sigkilled_between_steps_gives_worker_died_error(
    context: str, no_leaks: None
) -> None:
    envs = subproc([Maker() for _ in range(4)], context)
    try:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        pid = envs.pids[0]
        _kill_and_wait(pid)
        t0 = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:  # not BrokenPipeError from the send
            envs.step(ACTIONS)
        assert time.monotonic() - t0 < FAULT_SECONDS
        err = info.value
        _assert_names(err, envs, 0, [0, 1])
        assert (err.exitcode, err.signal) == (-signal.SIGKILL, "SIGKILL")
        assert "died during step; exit code -9 (SIGKILL)" in str(err)
        _assert_broken(envs)
    finally:
        envs.close()


def test_worker_sigkilled_mid_step_gives_worker_died_error(no_leaks: None) -> None:
    with faulty("none", "forkserver", step_sleep=0.5) as envs:
        envs.reset(seed=0)
        envs.step_async(ACTIONS)
        time.sleep(0.1)  # worker 1 is inside env 3's slow step
        t0 = time.monotonic()
        os.kill(envs.pids[FAULTY_WORKER], signal.SIGKILL)
        with pytest.raises(WorkerDiedError) as info:
            envs.step_wait()
        assert time.monotonic() - t0 < FAULT_SECONDS
    _assert_names(info.value, envs, FAULTY_WORKER, FAULTY_ENVS)
    assert info.value.signal == "SIGKILL"


@pytest.mark.parametrize(
    ("fault", "exitcode", "sig"), [("exit", 3, None), ("sigkill", -signal.SIGKILL, "SIGKILL")]
)
def test_worker_dying_mid_step_gives_worker_died_error(
    fault: str, exitcode: int, sig: str | None, no_leaks: None
) -> None:
    with faulty(fault) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        t0 = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:
            envs.step(ACTIONS)
        assert time.monotonic() - t0 < FAULT_SECONDS
        _assert_broken(envs)
    err = info.value
    _assert_names(err, envs, FAULTY_WORKER, FAULTY_ENVS)
    assert (err.exitcode, err.signal) == (exitcode, sig)
    assert f"exit code {exitcode}" in str(err)


# -- 3. a hung env times out; nothing stale afterwards ------------------------------------
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_hung_env_times_out_and_breaks_the_vec_env(context: str, no_leaks: None) -> None:
    envs = faulty("hang", context)
    try:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        pid = envs.pids[FAULTY_WORKER]
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeoutError) as info:
            envs.step(ACTIONS)
        elapsed = time.monotonic() - t0
        assert TIMEOUT - 0.05 <= elapsed < FAULT_SECONDS
        err = info.value
        assert isinstance(err, TimeoutError)
        _assert_names(err, envs, FAULTY_WORKER, FAULTY_ENVS)
        assert f"did not answer within {TIMEOUT:g} s and was killed" in str(err)
        assert err.signal == "SIGKILL" and not _running(pid)
        _assert_broken(envs)  # no later call returns the previous step's data
        with pytest.raises(VecEnvBrokenError):
            envs.step_async(ACTIONS)
    finally:
        envs.close()


def test_step_wait_timeout_argument_applies_to_one_call(no_leaks: None) -> None:
    with faulty("hang", timeout=None) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        envs.step_async(ACTIONS)
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeoutError, match=r"within 0\.5 s"):
            envs.step_wait(timeout=0.5)
        assert time.monotonic() - t0 < FAULT_SECONDS
        _assert_broken(envs)


# -- 4. the parent is SIGKILLed -----------------------------------------------------------
PARENT_SCRIPT = """
import json, time
import envfactory

if __name__ == "__main__":
    envs = []
    for ctx in ("fork", "forkserver", "spawn"):
        e = envfactory.make_vec(overrides=[
            "vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
            f"vectorizer.context={ctx}",
        ])
        e.reset(seed=0)
        envs.append(e)
    print(json.dumps([p for e in envs for p in e.pids]), flush=True)
    time.sleep(600)
"""


def _script(tmp_path: Path, text: str, *args: str) -> subprocess.Popen[str]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(text))
    return subprocess.Popen(
        [sys.executable, str(path), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path, start_new_session=True,
    )  # fmt: skip


def _read_line(proc: subprocess.Popen[str], seconds: float = 60.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"script printed nothing (exit {proc.returncode}):\n{err}")
    return line


@pytest.mark.slow
def test_parent_sigkill_leaves_no_worker(tmp_path: Path) -> None:
    proc = _script(tmp_path, PARENT_SCRIPT)
    try:
        workers = set(json.loads(_read_line(proc)))
        everything = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        assert len(workers) == 6 and workers <= everything
        t0 = time.monotonic()
        proc.kill()
        proc.wait()
        left = _wait_gone(workers, 2.0)
        elapsed = time.monotonic() - t0
        assert not left, f"workers alive after the parent was SIGKILLed: {left}"
        assert elapsed < FAULT_SECONDS
        # multiprocessing's forkserver and resource tracker follow (EOF on their pipes)
        assert not _wait_gone(everything, 2.0)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


# -- 5. Ctrl-C in the parent ---------------------------------------------------------------
CTRL_C_SCRIPT = """
import json, signal, sys, time
import envfactory

if __name__ == "__main__":
    # as in an interactive shell (a background job of a non-interactive one ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    envs = envfactory.make_vec(overrides=[
        "vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
        f"vectorizer.context={sys.argv[1]}",
    ])
    envs.reset(seed=0)
    steps = 0
    try:
        while True:
            envs.step(envs.action_space.sample())
            steps += 1
            if steps == 200:
                print(json.dumps(envs.pids), flush=True)
    except KeyboardInterrupt:
        t0 = time.monotonic()
        envs.close()
        print(f"closed after {steps} steps in {time.monotonic() - t0:.3f} s", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("context", CONTEXTS)
def test_ctrl_c_in_parent_closes_cleanly(context: str, tmp_path: Path) -> None:
    proc = _script(tmp_path, CTRL_C_SCRIPT, context)
    try:
        workers = json.loads(_read_line(proc))
        time.sleep(0.2)  # well inside the stepping loop
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        out, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "closed after" in out and "Traceback" not in err, (out, err)
    assert elapsed < FAULT_SECONDS, out
    assert not _wait_gone(workers, 1.0)


@pytest.mark.timeout(30)
def test_interrupt_in_the_middle_of_a_message_neither_hangs_nor_leaks(no_leaks: None) -> None:
    """An interrupt right after a pipe write (a step's actions by pipe): the next call
    refuses, ``step_wait()`` finishes the step, and close leaves nothing. (Before, that
    worker was killed: ``WorkerDiedError: ... cut a message``, then ``VecEnvBrokenError``;
    since issue 37 a call holds a Ctrl-C until its wait, see ``ctrl_c``.)"""
    envs = subproc([Maker() for _ in range(4)], timeout=None)
    envs.reset(seed=0)
    interrupt_after_next_write(envs.workers[1])
    with pytest.raises(KeyboardInterrupt):
        envs.step(PIPE_ACTIONS)
    with pytest.raises(AlreadyPendingError, match=r"call step_wait\(\)"):
        envs.step(ACTIONS)  # (issue 26: the next call refuses; it used to drain the step)
    obs, *_ = envs.step_wait()
    assert np.rint(obs[:, 0] * 1000).tolist() == [1, 1, 1, 1]
    envs.step(ACTIONS)
    t0 = time.monotonic()
    envs.close()
    assert time.monotonic() - t0 < FAULT_SECONDS
    assert not any(_running(p) for p in envs.pids)


def test_an_env_that_fails_to_start_reads_the_same_after_its_worker_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose env raises while it is built reports the error and ends (exit code
    0). Read after the worker ended (a slow, loaded parent), the error must read as it
    does before: no "; exit code 0" (the CLI test of a wrapper refusing its env saw one
    under load)."""
    from envfactory.vectorizers.transport.pipe import PipeHandle

    flag = tmp_path / "built"
    flag.write_text("")  # FaultyEnv's constructor raises when this exists
    real = PipeHandle.remote_error

    def after_exit(self: Any, call: str, failure: Any) -> Any:
        self.process.join(5.0)  # (the worker has ended by now)
        return real(self, call, failure)

    monkeypatch.setattr(PipeHandle, "remote_error", after_exit)
    with pytest.raises(RemoteEnvError) as err:
        SubprocVecEnv([Maker(rebuild_file=str(flag))] * 2, in_series=2)
    first = str(err.value).split("\n", 1)[0]
    assert "exit code" not in first, first
    assert first.endswith("during start: FaultyEnv cannot be rebuilt, on purpose"), first


# -- 6, 7. close() while a call is pending, terminate, twice; use after close -------------
def test_close_with_a_pending_step(no_leaks: None) -> None:
    envs = faulty("none", step_sleep=0.3)
    envs.reset(seed=0)
    envs.step_async(ACTIONS)
    t0 = time.monotonic()
    envs.close()
    assert time.monotonic() - t0 < FAULT_SECONDS
    assert envs.closed and not any(_running(p) for p in envs.pids)
    envs.close()  # twice: a no-op


def test_close_terminate_with_a_hung_pending_step(no_leaks: None) -> None:
    envs = faulty("hang", at_step=1, timeout=None)
    envs.reset(seed=0)
    envs.step_async(ACTIONS)  # worker 1 hangs for good
    time.sleep(0.1)
    t0 = time.monotonic()
    envs.close(terminate=True)
    assert time.monotonic() - t0 < 1.0
    assert not any(_running(p) for p in envs.pids)
    envs.close(terminate=True)


def test_close_timeout_bounds_a_graceful_close_of_a_hung_worker(no_leaks: None) -> None:
    envs = faulty("hang", at_step=1, timeout=None)
    envs.reset(seed=0)
    envs.step_async(ACTIONS)
    t0 = time.monotonic()
    envs.close(timeout=0.5)
    assert time.monotonic() - t0 < FAULT_SECONDS
    assert not any(_running(p) for p in envs.pids)


def test_close_twice_and_use_after_close(no_leaks: None) -> None:
    envs = subproc([Maker() for _ in range(4)], "forkserver")
    envs.reset(seed=0)
    envs.step(ACTIONS)
    envs.close()
    envs.close()
    calls = [
        lambda: envs.step(ACTIONS),
        lambda: envs.reset(),
        lambda: envs.step_async(ACTIONS),
        lambda: envs.step_wait(),
        lambda: envs.reset_wait(),
        lambda: envs.call("render"),
        lambda: envs.get_attr("steps"),
        lambda: envs.set_attr("steps", 0),
        lambda: envs.render(),
    ]
    for call in calls:
        with pytest.raises(ClosedError, match="closed SubprocVecEnv"):
            call()


def test_close_after_a_failure_closes_the_other_workers_promptly(no_leaks: None) -> None:
    envs = faulty("raise")
    envs.reset(seed=0)
    envs.step(ACTIONS)
    envs.step(ACTIONS)
    with pytest.raises(RemoteEnvError):
        envs.step(ACTIONS)
    t0 = time.monotonic()
    envs.close()
    assert time.monotonic() - t0 < 1.0  # every worker answers "close"; none waits to be killed
    assert not any(_running(p) for p in envs.pids)


# -- 8. unpicklable env constructor -------------------------------------------------------
@pytest.mark.parametrize("context", PICKLING_CONTEXTS)
def test_unpicklable_env_fn_fails_before_any_process_starts(context: str) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    fns = [Maker(), Maker(), Maker(), faulty_envs.unpicklable_maker()]
    with pytest.raises(UnpicklableEnvError) as info:
        subproc(fns, context)
    msg = str(info.value)
    assert "env 3 ('make')" in msg and f"context={context!r}" in msg and "lock" in msg
    assert "vectorizer.context=fork" in msg  # how to fix it
    assert {p.pid for p in psutil.Process().children(recursive=True)} == before


def test_unpicklable_env_fn_works_with_fork(no_leaks: None) -> None:
    with subproc([faulty_envs.unpicklable_maker() for _ in range(4)], "fork") as envs:
        obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 4)


# -- 9. spaces differ ---------------------------------------------------------------------
def test_space_mismatch_names_the_env_and_both_spaces(no_leaks: None) -> None:
    fns = [Maker(), Maker(), Maker(), Maker(obs_dim=5)]
    with pytest.raises(SpaceMismatchError) as info:
        subproc(fns, "forkserver")
    msg = str(info.value)
    assert "env 3 (Faulty-v0)" in msg
    assert "Box(-1.0, 1.0, (5,), float32)" in msg and "Box(-1.0, 1.0, (4,), float32)" in msg


# -- 10. wrong action batch ---------------------------------------------------------------
def test_wrong_action_shape_is_rejected_before_sending(no_leaks: None) -> None:
    with subproc([Maker() for _ in range(4)]) as envs:
        envs.reset(seed=0)
        obs, *_ = envs.step(ACTIONS)
        seq = [w.seq for w in envs.workers]
        for bad in (np.ones(3, np.int64), np.ones((4, 2), np.int64)):
            with pytest.raises(ValueError, match=r"expects \(4,\)"):
                envs.step(bad)
            with pytest.raises(ValueError):
                envs.step_async(bad)
        assert [w.seq for w in envs.workers] == seq  # nothing was sent to any worker
        obs2, rew, *_ = envs.step(ACTIONS)  # the workers are still in step
        np.testing.assert_allclose(obs2, obs + 0.001)  # exactly one step later
        assert rew.tolist() == [1.0] * 4


# -- 11. restart=True ---------------------------------------------------------------------
def _run_on(envs: SubprocVecEnv, steps: int) -> None:
    for _ in range(steps):
        obs, _, _, trunc, infos = envs.step(ACTIONS)
        assert obs.shape == (4, 4) and not trunc.any() and "restarted" not in infos


@pytest.mark.parametrize(
    ("context", "shared_memory"), [("fork", True), ("forkserver", False), ("spawn", True)]
)
def test_restart_rebuilds_a_killed_worker(
    context: str, shared_memory: bool, no_leaks: None
) -> None:
    with subproc(
        [Maker() for _ in range(4)], context, restart=True, shared_memory=shared_memory
    ) as envs:
        envs.reset(seed=0)
        _run_on(envs, 5)
        old = envs.pids[0]
        _kill_and_wait(old)
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match=r"restarting after: worker 0 .* died"):
            obs, _, _, trunc, infos = envs.step(ACTIONS)
        elapsed = time.monotonic() - t0
        assert trunc.tolist() == [True, True, False, False]
        assert infos["_restarted"].tolist() == [True, True, False, False]
        assert infos["restarted"][:2].tolist() == [True, True]
        np.testing.assert_allclose(obs[:2], 0.005)  # the lost episodes end where last seen
        np.testing.assert_allclose(obs[2:], 0.006)  # the others just went on
        assert envs.pids[0] != old and _running(envs.pids[0])
        # spawn starts a fresh interpreter (imports and all): seconds on a loaded 2-core box
        assert elapsed < FAULT_SECONDS + (3.0 if context == "spawn" else 0.0)
        obs, rew, *_ = envs.step(ACTIONS)  # the autoreset step of the truncated envs
        np.testing.assert_allclose(obs[:2], 0.0)
        assert rew.tolist() == [0.0, 0.0, 1.0, 1.0] and envs.restarts == [1, 0]
        _run_on(envs, 100)


def test_restart_rebuilds_a_hung_worker(tmp_path: Path, no_leaks: None) -> None:
    once = str(tmp_path / "hung-once")
    with faulty("hang", "forkserver", at_step=5, once_file=once, restart=True) as envs:
        envs.reset(seed=0)
        _run_on(envs, 4)
        old = envs.pids[FAULTY_WORKER]
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match="did not answer within 1 s"):
            _, _, _, trunc, infos = envs.step(ACTIONS)
        assert time.monotonic() - t0 < FAULT_SECONDS
        assert trunc.tolist() == [False, False, True, True]
        assert infos["_restarted"].tolist() == [False, False, True, True]
        assert not _running(old) and envs.pids[FAULTY_WORKER] != old
        envs.step(ACTIONS)
        _run_on(envs, 100)


def test_restart_during_a_seeded_reset_keeps_the_seeds(tmp_path: Path, no_leaks: None) -> None:
    once = str(tmp_path / "exit-once")
    with faulty("exit", "fork", at_step=0, once_file=once, restart=True) as envs:
        with pytest.warns(RuntimeWarning, match="died"):
            _, infos = envs.reset(seed=42)
        assert infos["_restarted"].tolist() == [False, False, True, True]
        assert envs.get_attr("np_random_seed") == (42, 43, 44, 45)
        _run_on(envs, 20)


MODES = ("next_step", "same_step", "disabled")


@pytest.mark.parametrize("mode", MODES)
def test_restart_ends_the_lost_episode_per_autoreset_mode(
    mode: str, tmp_path: Path, no_leaks: None
) -> None:
    once = str(tmp_path / "exit-once")
    with faulty("exit", at_step=5, once_file=once, restart=True, autoreset_mode=mode) as envs:
        envs.reset(seed=0)
        _run_on(envs, 4)
        with pytest.warns(RuntimeWarning, match="died"):
            obs, rew, term, trunc, infos = envs.step(ACTIONS)
        assert trunc.tolist() == [False, False, True, True] and not term.any()
        assert rew.tolist() == [1.0, 1.0, 0.0, 0.0]
        assert infos["_restarted"].tolist() == [False, False, True, True]
        if mode == "same_step":  # reset at once; the lost episode's end in final_obs
            np.testing.assert_allclose(obs[2:], 0.0)
            assert infos["_final_obs"].tolist() == [False, False, True, True]
            np.testing.assert_allclose(np.stack(infos["final_obs"][2:]), 0.004)
            assert infos["final_info"]["restarted"][2:].tolist() == [True, True]
        else:  # ends at the last observation seen
            np.testing.assert_allclose(obs[2:], 0.004)
            assert "final_obs" not in infos
        if mode == "disabled":
            with pytest.raises(AsyncCallError, match=r"envs \[2, 3\] finished"):
                envs.step(ACTIONS)
            envs.reset(options={"reset_mask": trunc.copy()})
        obs, rew, _, trunc, _ = envs.step(ACTIONS)
        expected = [0.0, 0.0] if mode == "next_step" else [0.001, 0.001]  # autoreset step
        np.testing.assert_allclose(obs[2:, 0], expected)
        assert not trunc.any() and envs.restarts == [0, 1]
        _run_on(envs, 10)


@pytest.mark.parametrize("mode", MODES)
def test_restart_during_a_masked_reset(mode: str, tmp_path: Path, no_leaks: None) -> None:
    # env 2 dies in its second reset, a masked one; env 3 (same worker, not masked) lost
    # its episode: it keeps its observation now and ends that episode at its next step
    fns = [Maker(), Maker(), Maker("exit", at_step=-1, at_reset=2, once_file=str(tmp_path / "x")),
           Maker()]  # fmt: skip
    with subproc(fns, restart=True, autoreset_mode=mode) as envs:
        envs.reset(seed=0)
        _run_on(envs, 3)
        mask = np.array([False, False, True, False])
        with pytest.warns(RuntimeWarning, match="died during reset"):
            obs, infos = envs.reset(seed=[0, 1, 52, 3], options={"reset_mask": mask})
        np.testing.assert_allclose(obs[:, 0], [0.003, 0.003, 0.0, 0.003])
        assert infos["_restarted"].tolist() == mask.tolist()
        assert envs.get_attr("np_random_seed")[2] == 52  # the masked reset's seed
        _, rew, _, trunc, _ = envs.step(ACTIONS)
        assert trunc.tolist() == [False, False, False, True]
        assert rew.tolist() == [1.0, 1.0, 1.0, 0.0]
        if mode == "disabled":
            envs.reset(options={"reset_mask": trunc.copy()})
        envs.step(ACTIONS)
        _run_on(envs, 10)


def test_restart_that_cannot_rebuild_leaves_the_env_unusable(
    tmp_path: Path, no_leaks: None
) -> None:
    flag = tmp_path / "rebuild"
    fns = [Maker(rebuild_file=str(flag)) for _ in range(4)]
    with subproc(fns, restart=True) as envs:
        envs.reset(seed=0)
        flag.touch()
        _kill_and_wait(envs.pids[0])
        with pytest.warns(RuntimeWarning), pytest.raises(RemoteEnvError, match="restart"):
            envs.step(ACTIONS)
        _assert_broken(envs)


def test_restart_checks_the_rebuilt_spaces(tmp_path: Path, no_leaks: None) -> None:
    flag = tmp_path / "rebuild"
    fns = [Maker(rebuild_file=str(flag), rebuild_fault="obs5") for _ in range(4)]
    with subproc(fns, restart=True) as envs:
        envs.reset(seed=0)
        flag.touch()
        _kill_and_wait(envs.pids[1])
        with pytest.warns(RuntimeWarning), pytest.raises(SpaceMismatchError) as info:
            envs.step(ACTIONS)
        assert "env 2 (Faulty-v0) was rebuilt" in str(info.value) and "(5,)" in str(info.value)
        _assert_broken(envs)


def test_restart_of_a_rebuild_that_hangs_honours_the_timeout(
    tmp_path: Path, no_leaks: None
) -> None:
    flag = tmp_path / "rebuild"
    fns = [Maker(rebuild_file=str(flag), rebuild_fault="hang-reset") for _ in range(4)]
    with subproc(fns, restart=True, autoreset_mode="same_step") as envs:
        envs.reset(seed=0)
        flag.touch()
        _kill_and_wait(envs.pids[0])
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning), pytest.raises(WorkerTimeoutError) as info:
            envs.step(ACTIONS)  # same_step resets the rebuilt envs at once: that hangs
        assert time.monotonic() - t0 < FAULT_SECONDS
        assert f"did not answer within {TIMEOUT:g} s" in str(info.value)
        assert "during restart" in str(info.value)
        _assert_broken(envs)


def test_restart_cap_raises_the_fault(no_leaks: None) -> None:
    with subproc([Maker() for _ in range(4)], restart=True, max_restarts=1) as envs:
        envs.reset(seed=0)
        _kill_and_wait(envs.pids[0])
        with pytest.warns(RuntimeWarning):
            envs.step(ACTIONS)
        assert envs.restarts == [1, 0]
        _kill_and_wait(envs.pids[0])
        with pytest.raises(WorkerDiedError) as info:
            envs.step(ACTIONS)
        assert "not restarted: worker 0 was already restarted 1 times in the last 60 s" in str(
            info.value
        )
        assert "vectorizer.max_restarts=1" in str(info.value)
        _assert_broken(envs)


@pytest.mark.parametrize("mode", MODES)
def test_conformance_with_an_env_that_dies_now_and_then(mode: str, no_leaks: None) -> None:
    def make() -> SubprocVecEnv:
        fns = [Maker(), Maker("exit", at_step=-1, every=23), Maker(), Maker("raise", -1, every=31)]
        return subproc(fns, restart=True, max_restarts=100, autoreset_mode=mode)

    assert check_restarts(make, steps=120) >= 4


def test_infinite_timeout_waits_forever(no_leaks: None) -> None:
    with subproc([Maker() for _ in range(4)], timeout=float("inf")) as envs:
        assert envs.timeout is None
        envs.reset(seed=0)
        envs.step_async(ACTIONS)
        envs.step_wait(timeout=float("inf"))
    with pytest.raises(ConfigError, match="timeout must be > 0 seconds or null, got nan"):
        subproc([Maker()], timeout=float("nan"))


# -- 16. threads, process groups, forks ---------------------------------------------------
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_vec_env_built_in_a_short_lived_thread_keeps_its_workers(
    context: str, no_leaks: None
) -> None:
    # the parent-death signal fires when the *thread* that started a worker ends
    box: dict[str, SubprocVecEnv] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("envs", subproc([Maker()] * 4, context))
    )
    thread.start()
    thread.join()
    with box["envs"] as envs:
        time.sleep(0.3)
        assert all(_running(p) for p in envs.pids)
        envs.reset(seed=0)
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs, 0.001)


def _helpers_end_with_workers(envs: SubprocVecEnv, end: Any) -> None:
    helpers = envs.get_attr("helper_pid")
    assert all(_running(h) for h in helpers)
    end()
    assert not _wait_gone(helpers, 2.0), "an env's helper process outlived its worker"


def test_env_helper_processes_end_with_close_terminate(no_leaks: None) -> None:
    envs = subproc([Maker(helper=True) for _ in range(4)])
    envs.reset(seed=0)
    _helpers_end_with_workers(envs, lambda: envs.close(terminate=True))


def test_env_helper_processes_end_with_a_timeout_kill(no_leaks: None) -> None:
    with subproc([Maker("hang", helper=True) for _ in range(4)]) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)

        def step_into_the_timeout() -> None:
            with pytest.raises(WorkerTimeoutError):
                envs.step(ACTIONS)

        _helpers_end_with_workers(envs, step_into_the_timeout)


def test_interrupt_between_two_sends_of_a_step_is_not_silent(no_leaks: None) -> None:
    """Worker 0 got the step and worker 1 not: ``step_wait()`` sends worker 1 its part
    and returns the step (issue 26: the next other call refuses; it used to finish the
    step and drop its results), so every env stepped once (none twice, none lost)."""
    envs = subproc([Maker() for _ in range(4)], timeout=None)
    envs.reset(seed=0)
    interrupt_next_send(envs.workers[1])  # worker 0 gets the step, worker 1 not
    with pytest.raises(KeyboardInterrupt):
        envs.step(PIPE_ACTIONS)
    with pytest.raises(AlreadyPendingError):
        envs.step(ACTIONS)
    envs.step_wait()
    envs.step(ACTIONS)
    assert envs.get_attr("steps") == (2, 2, 2, 2)
    t0 = time.monotonic()
    envs.close()
    assert time.monotonic() - t0 < FAULT_SECONDS


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="stepper")
    thread.start()
    time.sleep(0.2)  # well inside the slow step
    return thread, box


def test_two_threads_calling_one_vec_env_get_a_clear_error(no_leaks: None) -> None:
    with subproc([Maker(step_sleep=0.5) for _ in range(4)], timeout=None) as envs:
        envs.reset(seed=0)
        thread, box = _in_thread(lambda: envs.step(ACTIONS))
        with pytest.raises(RuntimeError, match=r"step_wait\(\) called from thread 'MainThread' "
                           r"while step_wait\(\) is in progress in thread 'stepper'"):  # fmt: skip
            envs.step_wait()
        with pytest.raises(RuntimeError):  # AsyncCallError: a step is pending
            envs.step(ACTIONS)
        thread.join()
        assert "error" not in box, box
        np.testing.assert_allclose(box["result"][0], 0.001)  # exactly one step, intact
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs, 0.002)


def test_close_from_another_thread_during_a_step(no_leaks: None) -> None:
    envs = subproc([Maker(step_sleep=2.0) for _ in range(4)], timeout=None)
    envs.reset(seed=0)
    thread, box = _in_thread(lambda: envs.step(ACTIONS))
    t0 = time.monotonic()
    envs.close()
    thread.join(5)
    assert time.monotonic() - t0 < FAULT_SECONDS
    assert isinstance(box.get("error"), ClosedError), box
    assert "closed from thread 'MainThread' meanwhile" in str(box["error"])
    assert str(box["error"]).startswith("step() did not finish")
    assert not any(_running(p) for p in envs.pids)


def test_close_from_another_thread_during_a_pool_recv_names_recv(no_leaks: None) -> None:
    """It said ``step() did not finish`` (the pool's kind of message; a hostile trial)."""
    from envfactory.vectorizers.asyncpool.pool import SubprocPool

    envs = SubprocPool([Maker(step_sleep=2.0) for _ in range(4)], 4, in_series=2, context="fork")
    envs.async_reset(seed=0)
    envs.recv()
    envs.send(ACTIONS, [0, 1, 2, 3])  # (a step of 2 s)
    thread, box = _in_thread(envs.recv)
    envs.close()
    thread.join(5)
    assert isinstance(box.get("error"), ClosedError), box
    assert str(box["error"]).startswith("recv() did not finish: the SubprocPool was closed")


FORK_SCRIPT = """
import os, sys
sys.path.insert(0, TESTS)
import numpy as np
import faulty_envs
from envfactory.vectorizers.subproc import SubprocVecEnv

if __name__ == "__main__":
    envs = SubprocVecEnv([faulty_envs.Maker()] * 4, in_series=2, context=sys.argv[1], timeout=5)
    envs.reset(seed=0)
    envs.step(np.ones(4, np.int64))
    pid = os.fork()
    if pid == 0:
        try:
            envs.step(np.ones(4, np.int64))
        except RuntimeError as exc:
            print("child:", exc, flush=True)
        sys.exit(0)  # a normal exit, atexit hooks and all
    os.waitpid(pid, 0)
    obs = envs.step(np.ones(4, np.int64))[0]
    print("parent:", [round(float(x), 6) for x in obs[:, 0]], flush=True)
    envs.close()
"""


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_a_forked_child_neither_uses_nor_ends_the_parents_workers(
    context: str, tmp_path: Path
) -> None:
    script = FORK_SCRIPT.replace("TESTS", repr(str(Path(__file__).parents[1])))
    proc = _script(tmp_path, script, context)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    child, parent = out.splitlines()
    assert "was forked from it and does not own its workers" in child, out
    assert parent == "parent: [0.002, 0.002, 0.002, 0.002]", (out, err)


# -- 12. resource hygiene -----------------------------------------------------------------
def _shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


CARTPOLE_FORKSERVER = [
    "vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
    "vectorizer.context=forkserver", "vectorizer.timeout=30",
]  # fmt: skip


@pytest.mark.slow
def test_build_close_cycles_leave_nothing_behind() -> None:
    me = psutil.Process()
    cfg = envfactory.compose(CARTPOLE_FORKSERVER)
    envfactory.make_vec(cfg).close()  # starts the forkserver (and resource tracker) once

    def snapshot() -> tuple[int, int, set[str]]:
        return len(me.children(recursive=True)), me.num_fds(), _shm_entries()

    procs0, fds0, shm0 = snapshot()
    t0 = time.monotonic()
    for i in range(200):
        envs = envfactory.make_vec(cfg)
        envs.reset(seed=i)
        envs.step(envs.action_space.sample())
        envs.close()
    per_cycle = (time.monotonic() - t0) / 200
    procs, fds, shm = snapshot()
    assert procs == procs0, me.children(recursive=True)
    assert fds == fds0, f"fds {fds0} -> {fds} after 200 build/close cycles"
    assert shm == shm0
    assert per_cycle < 1.0


@pytest.mark.slow
def test_memory_is_flat_over_20k_steps() -> None:
    def rss(envs: Any) -> int:
        return psutil.Process().memory_info().rss + sum(
            psutil.Process(p).memory_info().rss for p in envs.pids
        )

    with envfactory.make_vec(overrides=CARTPOLE_FORKSERVER) as envs:
        envs.reset(seed=0)
        actions = [envs.action_space.sample() for _ in range(64)]
        for i in range(2_000):
            envs.step(actions[i % 64])
        at_2k = rss(envs)
        for i in range(18_000):
            envs.step(actions[i % 64])
        at_20k = rss(envs)
    assert at_20k - at_2k < 4 * 2**20, f"RSS grew {(at_20k - at_2k) / 2**20:.1f} MB"


# -- 13. gymnasium ids registered in the parent, and module:Env-v0 ids, in workers --------
@pytest.fixture
def tmp_env_id() -> Iterator[str]:
    gym.register("EnvfactoryTmp-v0", entry_point=FaultyEnv, kwargs={"obs_dim": 3})
    try:
        yield "EnvfactoryTmp-v0"
    finally:
        del gym.registry["EnvfactoryTmp-v0"]


@pytest.mark.parametrize("context", CONTEXTS)
def test_id_registered_at_run_time_works_in_workers(
    context: str, tmp_env_id: str, no_leaks: None
) -> None:
    overrides = ["vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
                 f"vectorizer.context={context}", f"env.id={tmp_env_id}"]  # fmt: skip
    with envfactory.make_vec(overrides=overrides) as envs:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (4, 3)
        envs.step(ACTIONS)
        assert envs.get_attr("steps") == (1, 1, 1, 1)  # FaultyEnv, in the workers


@pytest.mark.parametrize("context", CONTEXTS)
def test_module_prefixed_id_is_imported_in_workers(context: str, no_leaks: None) -> None:
    # gym.make("faulty_envs:Faulty-v0") in the worker imports faulty_envs, which registers
    # Faulty-v0 there: nothing of faulty_envs is pickled with this constructor
    fns = [partial(gym.make, "faulty_envs:Faulty-v0") for _ in range(4)]
    with subproc(fns, context) as envs:
        obs, _ = envs.reset(seed=0)
        envs.step(ACTIONS)
        assert obs.shape == (4, 4) and envs.get_attr("steps") == (1, 1, 1, 1)


def test_module_prefixed_id_through_make_vec(no_leaks: None) -> None:
    overrides = ["vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
                 "vectorizer.context=spawn", "env.id=faulty_envs:Faulty-v0"]  # fmt: skip
    with envfactory.make_vec(overrides=overrides) as envs:
        obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 4)


# -- 15. unguarded scripts; classes of the user's __main__ --------------------------------
UNGUARDED_SCRIPT = """
# no `if __name__ == "__main__":` guard, as a first script often is
import sys
import gymnasium as gym
import numpy as np
import envfactory
from envfactory.vectorizers.subproc import SubprocVecEnv

context = sys.argv[1]
cfg = envfactory.compose(["vectorizer=subproc", "num_envs=4", f"vectorizer.context={context}"])
with envfactory.make_vec(cfg) as envs:
    obs, infos = envs.reset(seed=42)
    obs, rew, term, trunc, infos = envs.step(envs.action_space.sample())
    print(obs.shape)

class Marker:  # crosses in infos, call results and set_attr values
    def __init__(self, n):
        self.n = n

class Ring(gym.spaces.Box):  # a space class of the user's own
    pass

class MainEnv(gym.Env):
    def __init__(self):
        self.observation_space = Ring(-1.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.value = Marker(-1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {"marker": Marker(0)}

    def step(self, action):
        return np.ones(3, np.float32), 1.0, False, False, {"marker": Marker(1)}

    def thing(self):
        return Marker(7)

gym.register("MainEnv-v0", entry_point=MainEnv)
overrides = ["vectorizer=subproc", "num_envs=2", "env.id=MainEnv-v0",
             f"vectorizer.context={context}"]
with envfactory.make_vec(overrides=overrides) as envs:
    envs.reset(seed=0)
    infos = envs.step(np.array([0, 1]))[4]
    envs.set_attr("value", Marker(3))
    print(type(envs.single_observation_space).__name__, type(infos["marker"][1]).__name__,
          infos["marker"][1].n, envs.call("thing")[0].n, envs.get_attr("value")[1].n)
with SubprocVecEnv([MainEnv, MainEnv], context=context, shared_memory=False) as envs:
    envs.reset(seed=0)
    print(envs.step(np.array([0, 1]))[4]["marker"][1].n)
"""


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("context", CONTEXTS)
def test_unguarded_script_with_classes_in_main(context: str, tmp_path: Path) -> None:
    # workers never re-run the user's main module (an unguarded script would build its
    # vec env again in every worker), and whatever is defined there crosses by value,
    # both ways
    proc = _script(tmp_path, UNGUARDED_SCRIPT, context)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.split("\n")[:3] == ["(4, 4)", "Ring Marker 1 7 3", "1"], (out, err)
    assert "Traceback" not in err, err


# -- 14. inside a daemonic process --------------------------------------------------------
def _in_daemon(start_method: str) -> dict[str, Any]:
    ctx = mp.get_context(start_method)
    queue = ctx.Queue()
    proc = ctx.Process(target=faulty_envs.run_in_daemon, args=(list(CONTEXTS), queue), daemon=True)
    proc.start()
    try:
        results = dict(queue.get(timeout=60) for _ in range(1 + len(CONTEXTS)))
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join()
    assert proc.exitcode == 0
    return results


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_inside_a_daemonic_forked_process(no_leaks: None) -> None:
    # the parent has a forkserver running (as after any forkserver vec env): the forked
    # daemon must start its own rather than fail on the inherited one
    subproc([Maker() for _ in range(2)], "forkserver").close()
    results = _in_daemon("fork")
    assert results.pop("daemon") is True
    assert results == {ctx: ((4, 4), 2) for ctx in CONTEXTS}, results


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_inside_a_daemonic_process(start_method: str, no_leaks: None) -> None:
    results = _in_daemon(start_method)
    assert results.pop("daemon") is True
    assert results == {ctx: ((4, 4), 2) for ctx in CONTEXTS}, results


def test_faulty_env_module_is_what_the_tests_assume() -> None:
    # the helper itself: a misconfigured fault must not silently test nothing
    with pytest.raises(ValueError, match="fault must be one of"):
        FaultyEnv("explode")
    env = gym.make("Faulty-v0", fault="raise", at_step=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="on purpose"):
        env.step(0)


def test_a_backend_answer_of_the_wrong_count_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: what a backend's worker handle answers is checked at the boundary: too few
    results used to be a bare KeyError, too many were ignored, a string was split into
    characters. Now each is one error naming the backend, the worker and the call."""
    with subproc([Maker() for _ in range(4)], timeout=None) as envs:
        envs.reset(seed=0)
        w = envs.workers[0]
        for wrong, says in (([1], "with 1 results"), ([1, 2, 3], "with 3 results"),
                            ("ab", "with 'ab'")):  # fmt: skip
            monkeypatch.setattr(w, "recv", lambda deadline, call, wrong=wrong: wrong)
            with pytest.raises(
                RuntimeError,
                match=f"SubprocGroup: worker 0 answered call "
                f"for 2 envs {says}; a worker handle must",
            ):
                envs.get_attr("t")


def test_close_kills_every_worker_even_if_one_kill_raises(
    monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """Issue 26: ``close()`` stopped at the first handle whose ``kill()`` raised, and the
    other workers were never killed. Every worker is killed, then the error is raised."""
    envs = subproc([Maker() for _ in range(4)], timeout=None)
    envs.reset(seed=0)
    pids = envs.pids
    real = envs.workers[0].kill

    def broken() -> None:
        real()
        raise OSError("cannot kill, on purpose")

    monkeypatch.setattr(envs.workers[0], "kill", broken)
    with pytest.raises(OSError, match="on purpose"):
        envs.close(terminate=True)
    assert envs.closed and not any(_running(p) for p in pids)


def test_the_restart_warning_points_at_the_users_line(tmp_path: Path, no_leaks: None) -> None:
    """The re-trial (issue 28): the ``restarting after: ...`` warning pointed at a line
    inside envfactory (``remote_env.py: batch = self._collect(...)``); it points at the
    caller's own line, whatever path the step took inside."""
    with faulty("sigkill", once_file=str(tmp_path / "once"), restart=True) as envs:
        envs.reset(seed=0)
        with pytest.warns(RuntimeWarning, match="restarting after") as record:
            for _ in range(4):
                envs.step(ACTIONS)
    assert record[0].filename == __file__, record[0].filename
