"""The core's rules where a careful user found them broken (issue 37), each run the way a
user meets it: a timeout that holds, an env kept in the parent that never ends the program,
a backend built as the plugin guide's that closes after a timeout and whose own bug is
named as one, one info-merge rule for ``final_obs``, a call re-entered from a signal
handler refused, and a Ctrl-C during ``call`` that leaves the call pending."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from faulty_envs import Maker

from envfactory.errors import (
    AlreadyPendingError,
    RemoteEnvError,
    VecEnvBrokenError,
    WorkerError,
    WorkerTimeoutError,
)
from envfactory.vectorizers.dummy import DummyVecEnv
from envfactory.vectorizers.subproc import SubprocVecEnv

ZEROS = np.zeros(2, np.int64)


# -- a timeout holds: a step slower than ``timeout`` fails within timeout + 50 ms ------------
@pytest.mark.parametrize("step_seconds", [0.3, 0.45])
@pytest.mark.parametrize("in_parent", [0, 1])
def test_a_step_slower_than_the_timeout_fails_within_it(
    step_seconds: float, in_parent: int
) -> None:
    """Before, the shared-memory wait ran out at ``timeout`` and the per-worker wait then
    started a new one: a step of 0.3-0.45 s under ``timeout=0.25`` was returned as if
    nothing were wrong, and a slower one failed only near 2x the timeout."""
    timeout = 0.25
    with SubprocVecEnv(
        [Maker()] * 3, in_series=1, context="fork", in_parent=in_parent, timeout=timeout
    ) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(3, np.int64))  # (the hand-off's first step: learnt the waits)
        envs.set_attr("step_sleep", step_seconds, indices=[0])
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeoutError, match=r"within 0\.25 s"):
            envs.step(np.zeros(3, np.int64))
        took = time.monotonic() - t0
    assert took < timeout + 0.15, f"timeout={timeout} s fired after {took:.3f} s"


# -- an env in the parent never ends the program -------------------------------------------
class _Exits(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)  # (as Maker's envs)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> Any:
        raise SystemExit(7)


def test_an_env_in_the_parent_that_raises_systemexit_is_a_remote_env_error() -> None:
    """Before, ``SystemExit`` from an env kept in the parent (``in_parent``) ended the
    caller's program with its exit code; in a worker it was a ``WorkerError``."""
    envs = SubprocVecEnv([Maker(), _Exits], in_parent=1, context="fork")
    try:
        envs.reset(seed=0)
        with pytest.raises(
            RemoteEnvError, match=r"the parent process .* raised builtins.SystemExit"
        ):
            envs.step(ZEROS)
        with pytest.raises(VecEnvBrokenError):  # out of step, as a worker's env would be
            envs.step(ZEROS)
    finally:
        envs.close()


# -- a backend built as the plugin guide's -------------------------------------------------
def _guide_threads() -> Any:
    """The plugin guide's example backend, imported as a reader saves it
    (docs/guides/write-a-plugin.md's ``my_threads.py``)."""
    import importlib.util
    import re
    import sys
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "guides" / "write-a-plugin.md"
    block = re.search(r"```python\n# my_threads.py\n(.*?)```", page.read_text(), re.S)
    assert block is not None
    spec = importlib.util.spec_from_loader("my_threads", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["my_threads"] = module  # (its dataclasses look their module up)
    exec(compile(block.group(1), "my_threads.py", "exec"), module.__dict__)
    return module.__dict__


def test_the_guides_backend_implements_the_backend_protocol() -> None:
    from envfactory.vectorizers.remote import Backend

    assert isinstance(_guide_threads()["MyThreads"]([Maker()] * 2), Backend)


def test_the_guides_backend_closes_after_a_timeout() -> None:
    """Before, ``close()`` after a ``WorkerTimeoutError`` asked the killed worker to close
    and raised ``RuntimeError: cannot schedule new futures after shutdown``."""
    guide = _guide_threads()
    envs = guide["MyThreadsVecEnv"]([Maker()] * 2, "next_step", timeout=0.2)
    envs.reset(seed=0)
    envs.set_attr("step_sleep", 1.0, indices=[1])
    with pytest.raises(WorkerTimeoutError):
        envs.step(ZEROS)
    envs.close()  # must not raise
    envs.close()


def test_a_backend_bug_in_recv_is_named_as_one_not_as_a_ctrl_c() -> None:
    """Before, a handle whose ``recv`` raised ``RuntimeError`` left an env that said "step
    was interrupted (RuntimeError)": a bug reported as a Ctrl-C, its message lost."""
    guide = _guide_threads()
    handle_cls = guide["ThreadHandle"]
    real_recv = handle_cls.recv

    def buggy_recv(self: Any, deadline: Any, call: str) -> Any:
        if call == "step":
            raise RuntimeError("the handle lost its future")
        return real_recv(self, deadline, call)

    handle_cls.recv = buggy_recv
    envs = guide["MyThreadsVecEnv"]([Maker()] * 2, "next_step")
    try:
        envs.reset(seed=0)
        with pytest.raises(
            WorkerError, match=r"ThreadHandle\.recv raised RuntimeError: the handle lost"
        ) as err:
            envs.step(ZEROS)
        assert "interrupted" not in str(err.value)
        with pytest.raises(VecEnvBrokenError, match="the handle lost its future"):
            envs.step(ZEROS)
    finally:
        envs.close()


# -- one merge rule: ``final_obs`` is gymnasium's object array under every path ------------
class _FinalObsInfo(gym.Env):
    """Reports a scalar info named ``final_obs`` every step (a user's own key)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(2, np.float32), 0.0, False, False, {"final_obs": 1.5, "x": 2}


def test_a_scalar_info_named_final_obs_merges_as_gymnasium_under_subproc() -> None:
    """Before, the info columns kept it as a float64 array; gymnasium, ``dummy`` and the
    pipe path give an object array (its merge keeps ``final_obs`` apart)."""
    with (
        DummyVecEnv([_FinalObsInfo] * 2) as dummy,
        SubprocVecEnv([_FinalObsInfo] * 2, in_series=1, context="fork") as sub,
    ):
        dummy.reset(seed=0)
        sub.reset(seed=0)
        for _ in range(3):  # (the columns take over from the second step)
            want = dummy.step(ZEROS)[4]
            got = sub.step(ZEROS)[4]
            assert got["final_obs"].dtype == want["final_obs"].dtype == object
            assert list(got["final_obs"]) == list(want["final_obs"])
            assert got["x"].dtype == want["x"].dtype


# -- a call re-entered from a signal handler is refused, never nested -----------------------
def _slow_tag(env: Any, seconds: float) -> str:
    time.sleep(seconds)
    return "slow"


def test_a_call_from_a_signal_handler_during_a_call_is_refused_not_nested() -> None:
    """Before, a SIGALRM handler's ``envs.get_attr(...)`` ran inside the main loop's
    ``envs.call(slow)``, and the outer call returned the inner call's answer."""
    refused: list[str] = []
    answered: list[Any] = []

    def handler(signum: int, frame: Any) -> None:
        try:
            answered.append(envs.get_attr("t"))
        except AlreadyPendingError as err:
            refused.append(str(err))

    envs = SubprocVecEnv([Maker()] * 2, in_series=1, context="fork")
    old = signal.signal(signal.SIGALRM, handler)
    try:
        envs.reset(seed=0)
        signal.setitimer(signal.ITIMER_REAL, 0.007, 0.007)
        for _ in range(5):
            assert envs.call(_slow_tag, 0.03) == ("slow", "slow")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    try:
        assert envs.get_attr("t") == (0, 0)  # usable after it all
    finally:
        envs.close()
    assert refused, "the handler's call was never refused: it never landed during a call"
    assert "re-entered" in refused[0] and "\n" not in refused[0], refused[0]
    assert all(a == (0, 0) for a in answered)  # (those that landed between two calls)


# -- a Ctrl-C during call() leaves the call pending, as a step -------------------------------
def _ctrl_c_in(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


class _SlowAttr(_Exits):
    """An env whose attribute ``slow`` takes 0.6 s to read and to write."""

    def step(self, action: Any) -> Any:
        return np.zeros(4, np.float32), 0.0, False, False, {}

    @property
    def slow(self) -> str:
        time.sleep(0.6)
        return "slow"

    @slow.setter
    def slow(self, value: Any) -> None:
        time.sleep(0.6)


@pytest.mark.parametrize("how", ["call", "env_method", "get_attr", "set_attr"])
def test_a_ctrl_c_during_a_call_on_a_slow_env_leaves_it_pending(how: str) -> None:
    """Before, a Ctrl-C while ``call`` waited on a slow (or hung) env left nothing
    pending: the next ``step()`` was posted behind the still-running call and waited for
    it (forever for a hung env, with ``timeout`` unset)."""
    with SubprocVecEnv([_SlowAttr] * 2, in_series=1, context="fork") as envs:
        envs.reset(seed=0)
        slow = {
            "call": lambda: envs.call(_slow_tag, 0.6),
            "env_method": lambda: envs.env_method(_slow_tag, 0.6, indices=[1]),
            "get_attr": lambda: envs.get_attr("slow"),
            "set_attr": lambda: envs.set_attr("slow", 1),
        }[how]
        _ctrl_c_in(0.15)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            slow()
        assert time.monotonic() - t0 < 0.55
        says = rf"{how}\(\) called while a call\(\) interrupted by Ctrl-C is pending; "
        says += r"call call_wait\(\)"
        with pytest.raises(AlreadyPendingError, match=says.replace(how, "step_async", 1)):
            envs.step(ZEROS)
        with pytest.raises(AlreadyPendingError, match=says):
            slow()
        want = {"env_method": ("slow",), "set_attr": (None, None)}.get(how, ("slow", "slow"))
        assert envs.call_wait() == want
        _, rewards, *_ = envs.step(ZEROS)  # usable, in step
        assert rewards.tolist() == [0.0, 0.0]


def test_close_abandons_a_call_a_ctrl_c_left_pending() -> None:
    envs = SubprocVecEnv([Maker()] * 2, in_series=1, context="fork")
    pids = envs.pids
    envs.reset(seed=0)
    _ctrl_c_in(0.1)
    with pytest.raises(KeyboardInterrupt):
        envs.call(_slow_tag, 30.0)
    t0 = time.monotonic()
    envs.close()
    assert time.monotonic() - t0 < 15
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_call_async_and_call_wait_are_gymnasiums() -> None:
    with SubprocVecEnv([Maker()] * 2, in_series=1, context="fork") as envs:
        envs.reset(seed=0)
        envs.call_async(_slow_tag, 0.0)
        with pytest.raises(AlreadyPendingError):
            envs.step(ZEROS)
        assert envs.call_wait(timeout=5) == ("slow", "slow")
        from envfactory.errors import NoPendingCallError

        with pytest.raises(
            NoPendingCallError, match=r"call_wait\(\) called but nothing is pending"
        ):
            envs.call_wait()
