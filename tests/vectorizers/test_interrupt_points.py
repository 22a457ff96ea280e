"""Issue 26.4, point by point: a Ctrl-C at *every* place CPython can raise one during a
``step`` (on entering a Python function, after a C call returns) and again at every such
place of the ``step_wait()`` that finishes it. The random storms of test_interrupts.py
find a bad spot now and then (CI did, 1 run in ~40); this walks them all, deterministically.

A real Ctrl-C (SIGINT to this process, `signal.raise_signal`) is sent by a trace
(``sys.settrace``: function entries) or profile (``sys.setprofile``: C returns) hook at
its n-th event, for n = 1, 2, ... until a call runs through. Every step the envs took
must reach the caller, once, in order. (Issue 37, a changed contract: the hooks used to
raise KeyboardInterrupt themselves, right at that point; a real Ctrl-C comes through the
SIGINT handler, which holds it for a call's bookkeeping and lets it through at the
call's wait, ``ctrl_c``.)

Each walk runs in a forked child of the test process (`_in_a_child`): CPython 3.11 now and
then crashes (SIGSEGV, at a traced function's entry, in its own code as in ours) when SIGINT
is raised from a trace or profile hook; 3 runs of this file in 30 did, on code that passes
otherwise. A child that crashes is run again (twice at most); a failed assertion never is."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from faulty_envs import Maker
from test_interrupts import ONES, PIPE_ONES, _check_no_transition_lost, steps_of

from envfactory.errors import NoPendingCallError
from envfactory.vectorizers.subproc import SubprocVecEnv


class _InterruptAt:
    """Send a real Ctrl-C (SIGINT) at the ``n``-th interruptible point of the code it hooks
    (``how``: "entry", a Python function's start; "c-return", after a C call), skipping
    this test module's own frames. ``where`` names the point it hit."""

    def __init__(self, n: int, how: str) -> None:
        self.n, self.how, self.count, self.where = n, how, 0, ""

    def _hit(self, frame: Any, what: str) -> None:
        if frame.f_code.co_filename == __file__:
            return
        self.count += 1
        if self.count == self.n:
            sys.settrace(None)
            sys.setprofile(None)
            code = frame.f_code
            name = code.co_filename.rsplit("/", 1)[-1]
            self.where = f"{name}:{code.co_name}:{frame.f_lineno} {what}"
            signal.raise_signal(signal.SIGINT)

    def _trace(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self._hit(frame, "entry")

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_return":
            self._hit(frame, f"after {getattr(arg, '__name__', arg)}")

    def run(self, fn: Callable[[], Any]) -> tuple[Any, bool]:
        """``(fn(), False)``, or ``(None, True)`` if the interrupt cut it."""
        try:
            if self.how == "entry":
                sys.settrace(self._trace)
            else:
                sys.setprofile(self._profile)
            return fn(), False
        except KeyboardInterrupt:
            return None, True
        finally:
            sys.settrace(None)
            sys.setprofile(None)


def _in_a_child(walk: Callable[[], None], tries: int = 3) -> None:
    """Run ``walk`` in a forked child; its failure (the traceback) fails the test here. A child
    killed by a signal (the interpreter crashed) is run again, up to ``tries`` times in all."""
    crashes = []
    for _ in range(tries):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run the walk, report, leave without the parent's clean-up
            os.close(r)
            code, text = 0, b""
            try:
                walk()
            except BaseException:
                code, text = 1, traceback.format_exc().encode()
            with os.fdopen(w, "wb") as out:
                out.write(text)
            os._exit(code)
        os.close(w)
        status = None
        try:
            with os.fdopen(r, "rb") as report:
                text = report.read().decode()
            _, status = os.waitpid(pid, 0)
        finally:
            if status is None:  # (this test was cut short: pytest-timeout, a Ctrl-C)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        if os.WIFEXITED(status):
            if os.WEXITSTATUS(status):
                raise AssertionError(f"in the child:\n{text}")
            return
        crashes.append(signal.Signals(os.WTERMSIG(status)).name)
    raise AssertionError(f"the child crashed {tries} times: {crashes}")


@pytest.mark.parametrize("how", ["entry", "c-return"])
@pytest.mark.parametrize(
    ("variant", "options", "actions"),
    [
        ("workers", {}, ONES),
        ("in_parent", {"in_parent": 2}, ONES),
        ("by pipe", {"in_parent": 1}, PIPE_ONES),
        ("restart", {"in_parent": 2, "restart": True}, ONES),
    ],
)
def test_a_ctrl_c_anywhere_in_a_step_and_its_step_wait_loses_nothing(
    how: str, variant: str, options: dict, actions: np.ndarray
) -> None:
    _in_a_child(lambda: _walk_a_step(how, options, actions))


def _walk_a_step(how: str, options: dict, actions: np.ndarray) -> None:
    """Each point n1 of ``step``, then each point n2 of the ``step_wait()`` that finishes
    it (until one runs through): ``step_wait()`` returns the step (or NoPendingCallError
    if it had not started), and no transition is lost or doubled. Before this test: a
    Ctrl-C in the memory fence left its lock held (the next step hung for good), one
    between the write of the step numbers and the handles' bookkeeping sent the step
    again by pipe (a double step), one in the first batch's check dropped the batch, and
    one in the parent's own envs' writing of their results ended their episodes with the
    new observation as the one the caller saw."""
    maker = Maker(step_sleep=0.0001, episode_len=3)
    batches, points = [], []
    with SubprocVecEnv([maker] * 4, in_series=2, context="fork", **options) as envs:
        envs.reset(seed=0)
        n1 = 0
        while True:
            n1 += 1
            first = _InterruptAt(n1, how)
            out, cut = first.run(lambda: envs.step(actions))
            if not cut:
                batches.append(out)
                break  # past the step's last point
            for n2 in range(1, 500):
                again = _InterruptAt(n2, how)
                try:
                    out, cut = again.run(envs.step_wait)
                except NoPendingCallError:
                    out, cut = None, False  # the step had not started: nothing to finish
                if not cut:
                    break
            else:
                raise AssertionError(f"step_wait() after a Ctrl-C at {first.where} never ends")
            points.append(f"batch {len(batches)}: {first.where}")
            if out is not None:
                batches.append(out)
        assert n1 > 20  # the hooks saw the step's code
        try:
            _check_no_transition_lost(batches, 4)
        except AssertionError as exc:  # (i, t, last, batch): say where the Ctrl-Cs were
            raise AssertionError(f"{exc}; the Ctrl-Cs: {points}") from None
        envs.step(actions)  # usable after it all


@pytest.mark.parametrize("how", ["entry", "c-return"])
@pytest.mark.parametrize("in_parent", [0, 2])
def test_a_ctrl_c_anywhere_in_a_reset_and_its_reset_wait_resets_once(
    how: str, in_parent: int
) -> None:
    _in_a_child(lambda: _walk_a_reset(how, in_parent))


def _walk_a_reset(how: str, in_parent: int) -> None:
    """The same walk over ``reset(seed=...)`` (after a step) and its ``reset_wait()``: the
    caller gets every env at the start of its episode, and the next step is the first."""
    maker = Maker(step_sleep=0.0001, episode_len=3)
    with SubprocVecEnv([maker] * 4, in_series=2, context="fork", in_parent=in_parent) as envs:
        envs.reset(seed=0)
        n1 = 0
        while True:
            n1 += 1
            envs.step(ONES)
            first = _InterruptAt(n1, how)
            out, cut = first.run(lambda: envs.reset(seed=1))
            for n2 in range(1, 500):
                if not cut:
                    break
                try:
                    out, cut = _InterruptAt(n2, how).run(envs.reset_wait)
                except NoPendingCallError:  # it had not started
                    out, cut = envs.reset(seed=1), False
            assert steps_of(out[0]) == [0, 0, 0, 0], first.where
            assert steps_of(envs.step(ONES)[0]) == [1, 1, 1, 1], first.where
            if not first.where:
                break  # past the reset's last point
        assert n1 > 20
