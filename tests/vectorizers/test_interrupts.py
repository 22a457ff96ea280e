"""Ctrl-C during a synchronous ``subproc`` step or reset (issues 18 and 26): as gymnasium's
``AsyncVectorEnv``, the interrupted call is finished by ``step_wait()`` /
``reset_wait()``, which returns it, and every other call refuses at once
(``AlreadyPendingError`` saying how to finish or abandon it): nothing is ever finished
behind the caller's back and dropped. Only a worker that is really gone or whose stream
an interrupt left in an unknown place leaves the env broken (or rebuilt, with
``restart=true``).

The interrupts are real: a ``SIGINT`` sent to this process by a timer thread while the
envs sleep in a slow step (what Ctrl-C in a terminal, or a notebook's interrupt, does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faulty_envs import (
    CtrlCStorm,
    InfoMaker,
    Maker,
    interrupt_after_next_read,
    interrupt_after_next_write,
    interrupt_next_send,
)

from envfactory.errors import AlreadyPendingError, VecEnvBrokenError
from envfactory.vectorizers.front.remote_env import CallGuard
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
def test_the_next_call_after_ctrl_c_refuses_at_once_and_step_wait_finishes_it(
    context: str,
) -> None:
    """Issue 26 (changed contract): the next call used to finish the interrupted step and
    drop its results ("drain"), so an episode that ended in it ended silently. Now every
    call but ``step_wait()`` (and ``close()``) refuses at once, as gymnasium does."""
    with slow_envs(context) as envs:
        envs.reset(seed=0)
        with ctrl_c_after(STEP / 3):
            envs.step(ONES)
        says = (
            r"step\(\) interrupted by Ctrl-C is pending; call step_wait\(\) .* or "
            r"close\(\) to abandon it"
        )
        for call in (lambda: envs.step(ONES), lambda: envs.get_attr("t"), envs.reset):
            with pytest.raises(AlreadyPendingError, match=says):
                call()
        obs, *_ = envs.step_wait()  # the interrupted step, whole
        assert steps_of(obs) == [1, 1, 1, 1]
        obs, *_ = envs.step(PIPE_ONES)
        assert steps_of(obs) == [2, 2, 2, 2]
        assert envs.get_attr("steps") == (2, 2, 2, 2)  # every env stepped exactly twice


def test_an_episode_that_ends_in_the_interrupted_step_is_reported() -> None:
    """Issue 26: an episode of 2 steps ends in the step that Ctrl-C interrupts; the caller
    sees ``terminated=True`` (the drain used to drop it: the next observation was
    already episode 2's first)."""
    with slow_envs(maker={"episode_len": 2}) as envs:
        envs.reset(seed=0)
        envs.step(ONES)
        with ctrl_c_after(STEP / 3):
            envs.step(ONES)
        with pytest.raises(AlreadyPendingError):
            envs.step(ONES)
        obs, _, terminations, _, _ = envs.step_wait()
        assert terminations.all() and steps_of(obs) == [2, 2, 2, 2]
        obs, *_ = envs.step(ONES)  # (next_step: the autoreset step)
        assert steps_of(obs) == [0, 0, 0, 0]


def test_a_hung_worker_after_ctrl_c_does_not_hang_the_next_call() -> None:
    """Issue 26: with ``timeout=null`` and a worker hung in the interrupted step, the
    next call used to drain it and hang again after the user pressed Ctrl-C to get out.
    Now it refuses at once, and ``close()`` ends the hung worker."""
    with slow_envs(maker={"fault": "hang", "at_step": 1, "step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        with ctrl_c_after(0.3):
            envs.step(ONES)
        t0 = time.monotonic()
        with pytest.raises(AlreadyPendingError):
            envs.step(ONES)
        assert time.monotonic() - t0 < 1.0
        pids = envs.pids
        envs.close()
    assert not any(psutil_alive(pid) for pid in pids)


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
        with pytest.raises(AlreadyPendingError, match=r"call reset_wait\(\)"):
            envs.step(ONES)  # (used to drain the reset, then step)
        envs.reset_wait()
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [1, 1, 1, 1]
        assert envs.np_random_seed == (3, 4, 5, 6)


def test_ctrl_c_during_the_parents_own_step_is_held_until_it_is_done() -> None:
    """The parent's own envs (``in_parent``) step in this process, first. Issue 37 (changed
    contract): a Ctrl-C there used to cut an env in the middle of its ``step``, and those
    episodes ended truncated at the last observation seen (``infos["restarted"]``). Now a
    call runs with Ctrl-C held but in its wait for the workers (`ctrl_c`): the parent's envs
    finish their step, the Ctrl-C is raised in the wait, and ``step_wait()`` returns the
    step whole, nothing truncated."""
    with slow_envs(in_parent=2) as envs:
        envs.reset(seed=0)
        envs.step(ONES)
        with ctrl_c_after(STEP / 3):  # inside env 2's step, in this process
            envs.step(ONES)
        obs, rewards, _, truncations, infos = envs.step_wait()
        assert steps_of(obs) == [2, 2, 2, 2]
        assert rewards.tolist() == [1.0, 1.0, 1.0, 1.0]
        assert not truncations.any() and "restarted" not in infos
        obs, rewards, _, truncations, _ = envs.step(ONES)
        assert steps_of(obs) == [3, 3, 3, 3]
        assert not truncations.any()
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [4, 4, 4, 4]


def test_ctrl_c_right_after_a_pipe_write_loses_nothing() -> None:
    """A real Ctrl-C right after a pipe write is held until the step's wait (issue 37):
    ``step_wait()`` returns the step whole and the worker lives on. (Before issue 26, an
    interrupt there killed the worker, its stream position unknown: ``WorkerDiedError:
    ... cut a message to or from it part-way``, then ``VecEnvBrokenError``.)"""
    with slow_envs(maker={"step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        pid = envs.pids[1]
        interrupt_after_next_write(envs.workers[1])
        with pytest.raises(KeyboardInterrupt):
            envs.step(PIPE_ONES)  # (its actions go by pipe)
        with pytest.raises(AlreadyPendingError, match=r"call step_wait\(\)"):
            envs.step(ONES)
        obs, rew, *_ = envs.step_wait()
        assert steps_of(obs) == [1, 1, 1, 1] and rew.tolist() == [1.0] * 4
        assert envs.pids[1] == pid and envs.workers[1].alive
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [2, 2, 2, 2]
    assert not psutil_alive(pid)


def test_ctrl_c_after_part_of_a_large_message_is_finished_by_step_wait() -> None:
    """A message larger than the pipe's buffer (float64 actions for a float32 Box: 4 MB a
    worker) is written in parts. A Ctrl-C while it is written is held (issue 37: a
    synchronous call's message goes whole; it used to leave the rest for ``step_wait()``)
    and raised in the step's wait: each env steps once, with the caller's actions
    (FaultyEnv's reward is their mean)."""
    maker = Maker(act_dim=2**18)
    with SubprocVecEnv([maker] * 4, in_series=2, context="fork") as envs:
        envs.reset(seed=0)
        interrupt_after_next_write(envs.workers[1])
        actions = np.ones((4, 2**18)) * np.arange(1, 5)[:, None] / 10  # float64: by pipe
        with pytest.raises(KeyboardInterrupt):
            envs.step(actions)
        with pytest.raises(AlreadyPendingError):  # (issue 37: the message went whole;
            envs.step(actions)  # it used to leave ``workers[1].unsent``, written first)
        obs, rew, *_ = envs.step_wait()
        assert steps_of(obs) == [1, 1, 1, 1]
        np.testing.assert_allclose(rew, [0.1, 0.2, 0.3, 0.4])
        obs, *_ = envs.step(actions)
        assert steps_of(obs) == [2, 2, 2, 2]


def test_ctrl_c_right_after_a_pipe_read_loses_nothing() -> None:
    """A real Ctrl-C right after a pipe read is held until the next wait (issue 37):
    ``step_wait()`` finishes reading the answer (a pipe step's) and returns the step whole;
    the worker lives on. (Before issue 26, an interrupt there killed the worker: its
    stream position was unknown.)"""
    with slow_envs(maker={"step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        envs.step(ONES)
        pid = envs.pids[1]
        interrupt_after_next_read(envs.workers[1])
        with pytest.raises(KeyboardInterrupt):
            envs.step(PIPE_ONES)  # (its answer comes by pipe)
        obs, *_ = envs.step_wait()
        assert steps_of(obs) == [2, 2, 2, 2]
        assert envs.pids[1] == pid and envs.workers[1].alive
        obs, *_ = envs.step(PIPE_ONES)
        assert steps_of(obs) == [3, 3, 3, 3]


@pytest.mark.timeout(30)
def test_ctrl_c_while_a_stopped_worker_holds_a_begun_answer_ends_it() -> None:
    """A begun pipe answer is read whole with Ctrl-C held; a worker stopped in the middle of
    writing it (a 4 MB answer: many writes) with no ``timeout`` held that read, and every
    Ctrl-C, for good. Now a held Ctrl-C and 0.2 s with nothing read kill it, as a message
    the worker does not read (`PipeHandle.flush`): a WorkerError naming the worker."""
    from envfactory.errors import WorkerError

    with SubprocVecEnv([Maker(obs_dim=2**20)] * 2, in_series=1, context="fork") as envs:
        envs.reset(seed=0)
        handle, pid = envs.workers[1], envs.pids[1]
        real = handle._read

        def stop_then_ctrl_c(n: int, call: str, first: bool = False) -> Any:
            got = real(n, call, first)
            if first and got is not None:  # the answer has begun: stop its writer
                del handle._read
                os.kill(pid, signal.SIGSTOP)
                signal.raise_signal(signal.SIGINT)  # (held: the read goes on)
            return got

        handle._read = stop_then_ctrl_c
        t0 = time.monotonic()
        with pytest.raises(BaseException) as info:
            envs.call("reset")  # each env's (obs, info): 4 MB by pipe
        assert time.monotonic() - t0 < 5.0
        err = info.value if isinstance(info.value, WorkerError) else info.value.__context__
        assert isinstance(err, WorkerError) and err.worker == 1, repr(info.value)
        assert "stopped mid-answer" in str(err)
        assert not psutil_alive(pid)
        with pytest.raises(VecEnvBrokenError, match=r"worker 1 .* stopped mid-answer"):
            envs.step(ONES[:2])  # (a dead worker's env: restart=true rebuilds it)


@pytest.mark.timeout(60)
def test_ctrl_c_while_an_env_error_is_raised_keeps_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An env's exception, read from the pipe, is raised by the handle; an interrupt while
    that error is built must not lose it: ``step_wait()`` decodes the kept answer again
    and raises the env's error (before, the message was dropped first, and the retry
    waited for good for a message the idle worker would never send; found by a review)."""
    from envfactory.errors import RemoteEnvError
    from envfactory.vectorizers.transport.pipe import PipeHandle

    real, calls = PipeHandle.remote_error, []

    def cut_once(self: Any, call: str, failure: Any) -> Any:
        calls.append(call)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(self, call, failure)

    with slow_envs(maker={"fault": "raise", "at_step": 2, "step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        envs.step(ONES)
        monkeypatch.setattr(PipeHandle, "remote_error", cut_once)
        with pytest.raises(KeyboardInterrupt):
            envs.step(ONES)
        with pytest.raises(RemoteEnvError, match="ValueError"):
            envs.step_wait()


def test_with_restart_a_cut_write_needs_no_rebuild() -> None:
    """With ``restart=true`` too, an interrupt right after a pipe write costs no worker:
    the step is finished whole, nothing is truncated. (Before, that worker was rebuilt
    and its envs' episodes truncated with ``infos["restarted"]``.)"""
    with slow_envs(maker={"step_sleep": 0.0}, restart=True) as envs:
        envs.reset(seed=0)
        interrupt_after_next_write(envs.workers[1])
        with pytest.raises(KeyboardInterrupt):
            envs.step(PIPE_ONES)
        obs, _, _, truncations, infos = envs.step_wait()
        assert truncations.tolist() == [False] * 4 and "restarted" not in infos
        assert envs.restarts == [0, 0]
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [2, 2, 2, 2]


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


def _storm_steps(envs: Any, seconds: float, seed: int) -> tuple[list[tuple], int]:
    """Step ``envs`` for ``seconds`` under a `CtrlCStorm`; after each interrupt, finish
    the call with ``step_wait()`` (or start anew if nothing was pending). Every later
    call must work; returns the batches the caller got and how many interrupts landed."""
    from envfactory.errors import NoPendingCallError

    batches: list[tuple] = []
    actions = np.ones(envs.num_envs, np.int64)
    pending = False
    deadline = time.monotonic() + seconds
    with CtrlCStorm(seed) as storm:
        while time.monotonic() < deadline or pending:
            if time.monotonic() > deadline + 30:
                raise AssertionError("the interrupted call could not be finished in 30 s")
            try:
                storm.armed = True
                out = envs.step_wait() if pending else envs.step(actions)
                storm.armed = False
                pending = False
                batches.append(out)
            except KeyboardInterrupt:
                storm.armed = False
                pending = True
            except NoPendingCallError:  # the interrupt landed before the step started
                storm.armed = False
                pending = False
        return batches, storm.raised


def _check_no_transition_lost(batches: list[tuple], num_envs: int) -> None:
    """Each env's observations go up one step at a time, back to 0 only right after an
    episode end the caller saw (next_step autoreset): no step was stepped and dropped. An
    env whose step was lost (``infos["restarted"]``) ends its episode truncated at the
    observation the caller saw, or, if that step was its autoreset, starts a new one."""
    last = [0] * num_envs
    done = [False] * num_envs
    for k, (obs, _, term, trunc, infos) in enumerate(batches):
        t = steps_of(obs)
        restarted = infos.get("_restarted", np.zeros(num_envs, bool))
        for i in range(num_envs):
            if restarted[i] and done[i]:  # its next_step autoreset, redone: a fresh episode
                assert t[i] == 0, (i, t[i], last[i], k)
            elif restarted[i]:  # a rebuilt worker's env: its episode ends where it was seen
                assert t[i] == last[i] and trunc[i], (i, t[i], last[i], k)
            elif done[i]:
                assert t[i] == 0, (i, t[i], last[i])
            else:
                assert t[i] == last[i] + 1, (i, t[i], last[i], k)
            last[i], done[i] = t[i], bool(term[i] or trunc[i])


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("workers", {}),
        ("in_parent", {"in_parent": 2}),
        (
            "restart",
            {"restart": True, "max_restarts": 1000, "maker": {"fault": "sigkill", "every": 97}},
        ),
    ],
)
@pytest.mark.filterwarnings("ignore:restarting after:RuntimeWarning")
def test_random_ctrl_c_storm_loses_no_transition_and_never_bricks_the_env(
    variant: str, options: dict
) -> None:
    """Issue 26: real SIGINTs at random moments for 3 seconds (hundreds of them, landing
    in the parent's bookkeeping as well as in waits): every interrupted step is finished
    by ``step_wait()``, every later call works, and no transition is lost (also the one
    an interrupt hit after the step was done, before ``step_wait`` returned)."""
    maker = {"step_sleep": 0.0005, "episode_len": 7, **options.pop("maker", {})}
    with slow_envs("forkserver", maker=maker, **options) as envs:
        envs.reset(seed=0)
        # (issue 37: a call holds the Ctrl-Cs of its bookkeeping, and a rebuild all of them,
        # into one, so fewer land a second: the storm with rebuilds lasts longer)
        seconds = 6.0 if variant == "restart" else 3.0
        batches, raised = _storm_steps(envs, seconds, seed=len(variant))
        assert raised > 50 and len(batches) > 50
        _check_no_transition_lost(batches, envs.num_envs)
        envs.step(ONES)  # usable after the storm
        if variant == "workers":  # every step an env took reached the caller
            autoresets = sum(int(t.sum()) for _, _, t, _, _ in batches)
            assert sum(envs.get_attr("steps")) == 4 * (len(batches) + 1) - autoresets


def test_random_ctrl_c_storm_keeps_infos_in_step_with_their_observations() -> None:
    """The info columns and the pipe under the storm. Each worker and the parent learn the
    info schema from the same answers, so no interrupt may leave them reading the columns
    by another schema; infos that change shape come by pipe, and an interrupt right after
    a pipe read must not lose what it read (it killed the worker before: the stream was
    out of step). Every batch's infos are those of its own observations (``t``, the env's
    number ``k``, and ``extra`` exactly at the steps that have it), and no worker died."""
    fns = [InfoMaker(k) for k in range(4)]
    with SubprocVecEnv(fns, in_series=2, context="forkserver") as envs:
        envs.reset(seed=0)
        batches, raised = _storm_steps(envs, 3.0, seed=11)
        assert raised > 50 and len(batches) > 50
        for k, (obs, _, _, _, infos) in enumerate(batches):
            t = np.rint(obs[:, 0] * 100).astype(int)
            assert infos["t"].tolist() == t.tolist() and infos["_t"].all(), k
            assert infos["k"].tolist() == [0, 1, 2, 3] and infos["k"].dtype == np.int32, k
            extra = infos.get("_extra", np.zeros(4, bool))
            assert extra.tolist() == (t % 7 == 3).tolist(), k
        assert sum(w.schemas for w in envs.group.workers) >= 4  # the columns were used
        assert envs.restarts == [0, 0] and all(w.alive for w in envs.group.workers)
        envs.step(ONES)  # usable after the storm


def test_ctrl_c_as_a_call_leaves_its_mark_does_not_lock_the_env_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: a Ctrl-C landing as a call releases its call guard (on entering
    ``CallGuard.leave``, where CPython checks for signals) left the guard taken for good: every
    later call raised "step_wait() called from thread 'MainThread' while step_wait() is
    in progress in thread 'MainThread'"."""
    with slow_envs(maker={"step_sleep": 0.0}) as envs:
        envs.reset(seed=0)
        leave = CallGuard.leave
        hits = []

        def interrupted_once(self: Any) -> None:
            if not hits:
                hits.append(1)
                raise KeyboardInterrupt  # (the signal, raised before the body runs)
            leave(self)

        monkeypatch.setattr(CallGuard, "leave", interrupted_once)
        with pytest.raises(KeyboardInterrupt):
            envs.step(ONES)
        monkeypatch.setattr(CallGuard, "leave", leave)
        obs, *_ = envs.step_wait()  # the interrupted step, whole
        assert steps_of(obs) == [1, 1, 1, 1]
        obs, *_ = envs.step(ONES)
        assert steps_of(obs) == [2, 2, 2, 2]


def test_ctrl_c_after_the_step_is_done_before_it_returns_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: a Ctrl-C landing after the workers' answers were collected, in the
    parent's last bookkeeping of the step (here: right after its ``np.logical_or``, a C
    call after which CPython runs signal handlers), used to drop the batch: the next
    ``step_wait()`` raised NoPendingCallError and the env was a step ahead of the
    caller. The batch is kept and ``step_wait()`` returns it."""
    import envfactory.vectorizers.front.env_calls as base

    real = np.logical_or
    hits = []

    def interrupted_after(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        if not hits and "out" in kwargs:
            hits.append(1)
            raise KeyboardInterrupt
        return out

    with slow_envs(maker={"step_sleep": 0.0, "episode_len": 1}) as envs:
        envs.reset(seed=0)
        monkeypatch.setattr(base.np, "logical_or", interrupted_after)
        with pytest.raises(KeyboardInterrupt):
            envs.step(ONES)
        monkeypatch.setattr(base.np, "logical_or", real)
        obs, _, terminations, _, _ = envs.step_wait()
        assert steps_of(obs) == [1, 1, 1, 1] and terminations.all()  # the episode end too
        obs, *_ = envs.step(ONES)  # the autoreset step: one step ahead, no more
        assert steps_of(obs) == [0, 0, 0, 0]
        assert envs.get_attr("steps") == (1, 1, 1, 1)


def test_ctrl_c_under_dummy_keeps_the_envs_in_step() -> None:
    """A new user's trial (issue 28's re-trial): Ctrl-C during ``dummy``'s step left one
    env stepped and the next not (per-env counters [2, 1] after the next step, one
    transition lost, no flag). The Ctrl-C is held until every env has stepped, then
    raised; ``step_wait()`` returns the step and other calls refuse, as under ``subproc``."""
    from envfactory.vectorizers.dummy import DummyVecEnv

    envs = DummyVecEnv([Maker(step_sleep=STEP)] * 2)
    try:
        envs.reset(seed=0)
        with ctrl_c_after(STEP / 2):  # inside env 0's step
            envs.step(np.ones(2, np.int64))
        with pytest.raises(AlreadyPendingError, match=r"call step_wait\(\)"):
            envs.step(np.ones(2, np.int64))
        obs, *_ = envs.step_wait()
        assert steps_of(obs) == [1, 1] and envs.get_attr("steps") == (1, 1)
        obs, *_ = envs.step(np.ones(2, np.int64))
        assert steps_of(obs) == [2, 2]
    finally:
        envs.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # (put back)


def test_ctrl_c_in_a_dummy_reset_is_finished_by_reset_wait() -> None:
    """The same for ``dummy``'s reset: every env is reset, ``reset_wait()`` returns it."""
    from envfactory.vectorizers.dummy import DummyVecEnv

    envs = DummyVecEnv([Maker(reset_sleep=STEP)] * 2)
    try:
        with ctrl_c_after(STEP / 2):
            envs.reset(seed=5)
        with pytest.raises(AlreadyPendingError, match=r"call reset_wait\(\)"):
            envs.step(np.ones(2, np.int64))
        obs, _ = envs.reset_wait()
        assert steps_of(obs) == [0, 0] and envs.np_random_seed == (5, 6)
        assert envs.get_attr("resets") == (1, 1)
    finally:
        envs.close()


@pytest.mark.filterwarnings("ignore:restarting after:RuntimeWarning")
def test_ctrl_c_during_a_rebuild_is_held_until_it_is_done_even_with_a_large_message(
    tmp_path: Path,
) -> None:
    """faults.md: a Ctrl-C during a worker's rebuild (``restart=true``) is held until the
    rebuild is done, then raised, and ``step_wait()`` returns the step. The rebuilt worker
    is sent its envs' last observations (400 KB here, more than a pipe holds, so the
    parent waits while the worker, slow to build its env, reads them): the hold lasts
    through that wait too (a change of the pool's send let it through, which left the env
    broken: found by a review)."""
    maker = Maker(
        fault="sigkill", at_step=2, once_file=str(tmp_path / "once"), obs_dim=100_000,
        rebuild_sleep=1.0,
    )  # fmt: skip
    with SubprocVecEnv([maker], restart=True, context="fork") as envs:
        envs.reset(seed=0)
        envs.step(np.ones(1, np.int64))
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            envs.step(np.ones(1, np.int64))  # the worker dies; its rebuild takes 1 s
        assert time.monotonic() - t0 >= 0.9  # held until the rebuild was done
        timer.join()
        assert envs._broken is None
        _, _, _, trunc, infos = envs.step_wait()
        assert trunc.tolist() == [True] and infos["restarted"].tolist() == [True]
        assert envs.restarts == [1]
        envs.step(np.ones(1, np.int64))
