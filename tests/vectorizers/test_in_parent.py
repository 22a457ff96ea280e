"""The synchronous ``subproc`` step path: steps through shared control slots (no pipe round
trip), adaptive spin-then-sleep wake-ups, and the parent stepping a share of the envs
itself (``vectorizer.in_parent``). Real worker processes, compared bit for bit with
``dummy``."""

from __future__ import annotations

import itertools
import math
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_equivalence import (
    CARTPOLE,
    MOUNTAINCAR,
    MOUNTAINCAR_BOX,
    RICH,
    _compose,
    _run,
    dummy_rollout,
)

import envfactory
from envfactory.errors import AlreadyPendingError, ConfigError, VecEnvBrokenError, WorkerDiedError
from envfactory.testing import assert_rollouts_equal
from envfactory.vectorizers.plan.options import SubprocAtariConfig
from envfactory.vectorizers.plan.plan import others_running, plan_split
from envfactory.vectorizers.subproc import SubprocVecEnv

MODES = ("next_step", "same_step", "disabled")
CASES = list(
    itertools.product(
        (("cartpole", CARTPOLE), ("mountaincar", MOUNTAINCAR), ("rich", RICH)),
        MODES,
        ((1, "true"), (2, "false")),
    )
)


@pytest.mark.parametrize(
    ("env", "mode", "split"),
    CASES,
    ids=[f"{e[0]}-{m}-in_parent{k}-shm{s}" for e, m, (k, s) in CASES],
)
def test_in_parent_matches_dummy(env: Any, mode: str, split: tuple[int, str]) -> None:
    """The parent's own envs and the workers' give dummy's trajectories bit for bit (obs,
    rewards, flags, infos, final obs, masked resets), with and without shared memory."""
    (_, overrides), (in_parent, shm) = env, split
    env_over, steps = (*overrides, "num_envs=5"), 120
    envs = envfactory.make_vec(
        _compose(
            *env_over, "vectorizer=subproc", f"vectorizer.in_parent={in_parent}",
            f"vectorizer.shared_memory={shm}", "vectorizer.context=fork", f"autoreset_mode={mode}",
        )
    )  # fmt: skip
    assert envs.in_parent == in_parent
    assert_rollouts_equal(_run(envs, steps), dummy_rollout(env_over, mode, steps))


@pytest.mark.parametrize("spin_us", [0, 5])
def test_sleeping_sides_are_woken(spin_us: int) -> None:
    """With no (or almost no) spinning every wait sleeps on the eventfd handshake: the
    results are still dummy's, and a step after a long pause (both sides asleep) is quick."""
    env_over, steps = (*MOUNTAINCAR_BOX, "num_envs=4"), 80
    envs = envfactory.make_vec(
        _compose(*env_over, "vectorizer=subproc", "vectorizer.in_series=2",
                 f"vectorizer.spin_us={spin_us}")
    )  # fmt: skip
    assert_rollouts_equal(_run(envs, steps), dummy_rollout(env_over, "next_step", steps))
    with envfactory.make_vec(
        overrides=["vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
                   f"vectorizer.spin_us={spin_us}"]
    ) as envs:  # fmt: skip
        envs.reset(seed=0)
        for _ in range(3):
            time.sleep(0.3)  # both workers sleep now
            t0 = time.perf_counter()
            envs.step(np.zeros(4, np.int64))
            assert time.perf_counter() - t0 < 0.15  # woken, not waiting out a sleep slice


def test_actions_of_another_dtype_go_by_pipe_and_keep_their_dtype() -> None:
    """A batch whose dtype differs from the action space's (float64 for a float32 Box) is
    not cast through the shared buffer: the envs get what dummy's get."""
    env_over, steps = (*MOUNTAINCAR_BOX, "num_envs=4"), 60
    actions = [np.random.default_rng(t).uniform(-1, 1, (4, 1)) for t in range(steps)]  # float64
    got = []
    for vec in ("vectorizer=dummy", "vectorizer=subproc"):
        options = ["vectorizer.in_parent=1"] if vec.endswith("subproc") else []
        with envfactory.make_vec(_compose(*env_over, vec, *options)) as envs:
            obs, _ = envs.reset(seed=3)
            got.append([obs] + [envs.step(a)[0] for a in actions])
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def test_auto_share_and_bad_values() -> None:
    cpus = os.cpu_count() or 1
    share = 8 // cpus if cpus >= 2 else 0
    assert plan_split(8, in_parent=None, load=0.0).in_parent == share
    assert plan_split(1, in_parent=None, load=0.0).in_parent == 0
    # no idle core for the parent: the workers step every env
    assert plan_split(8, in_parent=None, load=cpus - 1.0).in_parent == 0
    # what only a worker process gives: no share unless asked for
    assert plan_split(8, in_parent=None, in_series=2, load=0.0).in_parent == 0
    assert plan_split(8, in_parent=None, timeout=5.0, load=0.0).in_parent == 0
    assert plan_split(8, in_parent=None, restart=True, load=0.0).in_parent == 0
    atari = SubprocAtariConfig.in_parent  # subproc-atari's default
    assert plan_split(8, in_parent=atari, images=True, load=0.0).in_parent == 0
    assert plan_split(8, in_parent=3, in_series=2, timeout=5.0).in_parent == 3  # explicit wins
    with pytest.raises(ConfigError) as info:  # (checked once, by the plan)
        plan_split(4, in_parent=4)
    msg = str(info.value)
    assert "vectorizer.in_parent=4: expected an integer in [0, num_envs - 1 = 3]" in msg
    assert "vectorizer=dummy" in msg
    # validated once: the constructor's check is the schema's, word for word (issue 26)
    with pytest.raises(ConfigError) as composed:
        envfactory.compose(["vectorizer=subproc", "num_envs=4", "vectorizer.in_parent=4"])
    assert msg in str(composed.value)
    with pytest.raises(Exception, match="in_parent"):
        envfactory.compose(["vectorizer=subproc", "vectorizer.in_parent=-1"])
    with envfactory.make_vec(overrides=["vectorizer=subproc", "num_envs=8"]) as envs:
        assert envs.in_parent in (0, share)  # (0 while the machine is busy)
        assert sum(w.stop - w.start for w in envs.workers) == 8 - envs.in_parent


@pytest.mark.parametrize(
    ("cpus", "load", "in_series"),
    [
        (2, None, 4),  # no load measured: one worker per core
        (2, 0.0, 4),  # idle: one per core
        (2, 1.0, 8),  # one core busy: one worker, on the free core
        (2, 4.0, 4),  # oversubscribed: one per core (more processes, more share)
        (16, 0.0, 1),  # 16 idle cores, 16 envs: one each
        (16, 1.2, 2),  # a learner busy: 15 cores free, 2 envs a worker (in_series is one number)
    ],
)
def test_the_default_split_uses_the_cores_left_free(
    monkeypatch: pytest.MonkeyPatch, cpus: int, load: float | None, in_series: int
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    num_envs, unread = 8 if cpus == 2 else 16, load is None  # (subproc-atari reads no load)
    plan = plan_split(num_envs, images=unread, load=0.0 if unread else load)
    assert plan.workers == _split(num_envs, in_series)
    shared = plan_split(9, in_parent=1, load=load)  # a parent share: no load
    assert shared.workers == _split(8, 8 // min(cpus - 1, 8))


def _split(num_envs: int, in_series: int) -> tuple[int, ...]:
    """The envs of each worker with ``in_series`` envs per worker."""
    return plan_split(num_envs, in_series=in_series).workers


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_on_many_cores_cheap_envs_share_a_worker_expensive_ones_do_not(
    monkeypatch: pytest.MonkeyPatch, context: str
) -> None:
    """Issue 26: on 8+ cpus the default times one env's step in a throwaway process before
    the envs are built (no env runs in the parent): CartPole (a step of microseconds) goes
    two to a worker, one worker per two cpus; an env whose step takes a millisecond keeps
    one worker per cpu. On fewer cpus nothing is probed."""
    import gymnasium as gym
    from faulty_envs import Maker

    import envfactory.vectorizers.plan.plan as options
    import envfactory.vectorizers.subproc as subproc

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(options, "others_running", lambda: 0.0)  # (this machine may be busy)
    probed: list[float | None] = []
    real = subproc.step_seconds

    def spy(*args: Any) -> float | None:
        probed.append(real(*args))
        return probed[-1]

    monkeypatch.setattr(subproc, "step_seconds", spy)
    cartpole = [lambda: gym.make("CartPole-v1")] * 16
    with SubprocVecEnv(cartpole, context=context) as envs:
        assert [w.stop - w.start for w in envs.group.workers] == [2] * 8
        assert envs.reset(seed=0)[0].shape == (16, 4)
    slow = [Maker(step_sleep=0.001)] * 16
    with SubprocVecEnv(slow, context=context) as envs:
        assert [w.stop - w.start for w in envs.group.workers] == [1] * 16
    assert len(probed) == 2 and probed[0] < 50e-6 <= probed[1]  # type: ignore[operator]
    with SubprocVecEnv(cartpole, context=context, in_series=1) as envs:  # asked: no probe
        assert len(envs.group.workers) == 16
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    with SubprocVecEnv(cartpole, context=context) as envs:  # fewer cpus: no probe
        assert [w.stop - w.start for w in envs.group.workers] == [4] * 4
    assert len(probed) == 2


def test_a_probe_that_cannot_build_the_env_leaves_the_default_and_the_error_to_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An env that cannot be built: the probe answers None (the split is the default) and
    the workers' start reports the error, as without a probe."""
    from faulty_envs import Maker

    import envfactory.vectorizers.plan.plan as options
    import envfactory.vectorizers.subproc as subproc
    from envfactory.vectorizers.plan.launch import start_process, step_seconds

    ctx = __import__("multiprocessing").get_context("fork")
    assert step_seconds(ctx, [Maker(fault="bogus")], start_process) is None
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(options, "others_running", lambda: 0.0)
    with pytest.raises(Exception, match="fault must be one of"):
        SubprocVecEnv([Maker(fault="bogus")] * 16, context="fork")
    assert subproc.step_seconds is step_seconds


def test_subproc_atari_split_keeps_a_parent_share_while_a_core_is_idle() -> None:
    """A synchronous step leaves the parent idle while it waits: subproc-atari steps a
    worker's share in it when a core is idle (one worker steps the rest), else one worker
    per core with the parent out (and out whenever only a worker gives what is asked)."""
    cpus = os.cpu_count() or 1
    if cpus < 2:
        pytest.skip("one core: no parent share")
    share = 8 // cpus
    rest = math.ceil((8 - share) / (cpus - 1))

    def image_split(in_parent: int | None, **options: Any) -> tuple[int, tuple[int, ...]]:
        plan = plan_split(8, in_parent=in_parent, images=True, **options)
        return plan.in_parent, plan.workers

    assert image_split(None, load=0.0) == (share, _split(8 - share, rest))
    per_core = _split(8, math.ceil(8 / cpus))
    assert image_split(None, load=float(cpus)) == (0, per_core)  # busy
    assert image_split(None, timeout=5.0, load=0.0) == (0, per_core)  # timeout
    assert image_split(None, restart=True, load=0.0) == (0, per_core)  # restart
    assert image_split(0, load=0.0) == (0, per_core)
    assert image_split(3, load=99.0) == (3, _split(5, math.ceil(5 / (cpus - 1))))
    with envfactory.make_vec(
        overrides=["env=atari", "env.id=ALE/Pong-v5", "num_envs=3", "vectorizer=subproc-atari",
                   "vectorizer.in_parent=1"]
    ) as envs:  # fmt: skip
        assert envs.in_parent == 1 and [(w.start, w.stop) for w in envs.workers] == [(0, 2)]
        obs, _ = envs.reset(seed=0)
        assert obs.dtype == np.uint8 and obs[2].any()  # the parent's env wrote its frame


class _KeyErrorEnv:
    """CartPole whose step raises KeyError after 2 steps."""

    def __new__(cls) -> Any:
        import gymnasium as gym

        class Raising(gym.Wrapper):
            n = 0

            def step(self, action: Any) -> Any:
                self.n += 1
                if self.n > 2:
                    raise KeyError("parent env, on purpose")
                return self.env.step(action)

        return Raising(gym.make("CartPole-v1"))


def test_a_parent_env_raising_is_a_remote_env_error_and_the_workers_stay_in_step() -> None:
    import gymnasium as gym

    fns = [lambda: gym.make("CartPole-v1")] * 3 + [_KeyErrorEnv]
    envs = SubprocVecEnv(fns, context="fork", in_parent=1)
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        envs.step(np.zeros(4, np.int64))
        with pytest.raises(KeyError) as info:
            envs.step(np.zeros(4, np.int64))
        err = info.value
        assert isinstance(err, envfactory.RemoteEnvError)
        assert (err.worker, err.pid, err.env_indices) == (-1, os.getpid(), [3])
        assert "the parent process (in_parent)" in str(err)
        assert "parent env, on purpose" in err.remote_traceback
        with pytest.raises(VecEnvBrokenError, match="parent env, on purpose"):
            envs.step(np.zeros(4, np.int64))
    finally:
        t0 = time.monotonic()
        envs.close()
        assert time.monotonic() - t0 < 5
    assert all(not _alive(p) for p in envs.pids)


def test_call_get_attr_set_attr_span_the_parent_and_the_workers() -> None:
    with envfactory.make_vec(
        overrides=["vectorizer=subproc", "num_envs=4", "vectorizer.in_parent=2"]
    ) as envs:  # fmt: skip
        envs.reset(seed=7)
        assert envs.np_random_seed == (7, 8, 9, 10)
        envs.set_attr("gravity", [1.0, 2.0, 3.0, 4.0])
        assert envs.get_attr("gravity") == (1.0, 2.0, 3.0, 4.0)
        assert envs.get_attr("gravity", indices=[3, 0]) == (4.0, 1.0)
        assert envs.env_method("get_wrapper_attr", "gravity", indices=[1, 2]) == [2.0, 3.0]
        with pytest.raises(AttributeError) as info:
            envs.get_attr("no_such_attribute", indices=[2])
        assert isinstance(info.value, envfactory.RemoteEnvError)
        envs.step(np.zeros(4, np.int64))  # still in step (a call's error is recoverable)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:
        return False


def test_a_worker_killed_while_the_parent_sleeps_is_reported_in_milliseconds() -> None:
    """The parent sleeps in poll on the worker's eventfd *and* its pipe: a SIGKILL wakes it
    at once (no waiting for a time-out)."""
    from faulty_envs import Maker

    envs = SubprocVecEnv([Maker("none", step_sleep=0.5)] * 2, context="fork", in_series=1,
                         spin_us=0)  # fmt: skip
    assert envs.in_parent == 0
    try:
        envs.reset(seed=0)
        envs.step_async(np.ones(2, np.int64))
        time.sleep(0.1)  # both workers are in their slow step, the parent not waiting yet
        os.kill(envs.pids[1], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:
            envs.step_wait()
        assert time.monotonic() - t0 < 0.8  # worker 0's step (0.5 s) + a few ms
        assert info.value.worker == 1 and info.value.signal == "SIGKILL"
    finally:
        envs.close()


def test_interrupt_while_waiting_for_a_step_in_shared_memory_is_not_silent() -> None:
    """Ctrl-C while the parent sleeps on the workers' step (the group hand-off's sleep):
    ``step_wait()`` finishes that step (never a stale or shifted step; issue 26: the next
    other call refuses instead of dropping it), and the env closes promptly."""
    from faulty_envs import Maker

    envs = SubprocVecEnv([Maker("none", step_sleep=0.05)] * 4, context="fork", in_series=2)
    envs.reset(seed=0)
    g = envs.group.board
    assert g is not None

    def interrupted(*args: Any) -> bool:
        raise KeyboardInterrupt

    g.waiter.max_spin = 0  # no spinning: straight to the (interrupted) sleep
    real, g._sleep = g._sleep, interrupted  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            envs.step(np.ones(4, np.int64))
        g._sleep = real  # type: ignore[method-assign]
        with pytest.raises(AlreadyPendingError):
            envs.step(np.ones(4, np.int64))
        obs, *_ = envs.step_wait()  # each worker's own wait finishes it
        assert np.allclose(obs[:, 0], 0.001)
        obs, *_ = envs.step(np.ones(4, np.int64))
        assert envs.get_attr("steps") == (2, 2, 2, 2)
        assert np.allclose(obs[:, 0], 0.002)  # the second step of each env, not the first
    finally:
        g._sleep = real  # type: ignore[method-assign]
        t0 = time.monotonic()
        envs.close()
        assert time.monotonic() - t0 < 5


def test_interrupt_between_two_posts_of_a_step_is_not_silent() -> None:
    """A real Ctrl-C as the workers' step numbers are written to the control slots (issue
    37: it used to be raised right there, and ``step_wait()`` wrote them, each handle's
    ``resume``): it is held until the step's wait, and every env steps exactly once."""
    envs = envfactory.make_vec(
        overrides=["vectorizer=subproc", "num_envs=4", "vectorizer.in_series=2",
                   "vectorizer.context=fork"]
    )  # fmt: skip
    envs.reset(seed=0)
    g = envs.group.board
    assert g is not None

    real = g.cmd

    class _Column:
        def __setitem__(self, key: Any, value: Any) -> None:
            signal.raise_signal(signal.SIGINT)
            real[key] = value

    g.cmd = _Column()
    try:
        with pytest.raises(KeyboardInterrupt):
            envs.step(np.zeros(4, np.int64))
        g.cmd = real
        envs.step_wait()  # finishes the interrupted step
        envs.step(np.zeros(4, np.int64))
        assert envs.get_attr("_elapsed_steps") == (2, 2, 2, 2)  # (TimeLimit's count)
    finally:
        g.cmd = real
        envs.close()


def test_the_group_hand_off_is_what_a_step_uses() -> None:
    """(guards the two tests above: a step of ``subproc`` goes through the group
    hand-off, whose sleep is one select.poll over every worker's eventfd and pipe)"""
    with envfactory.make_vec(overrides=["vectorizer=subproc", "num_envs=2"]) as envs:
        envs.reset(seed=0)
        g = envs.group.board
        g.waiter.max_spin = 0
        for _ in range(200):  # (a step whose workers were done before it waited sleeps not)
            envs.step(np.zeros(2, np.int64))
            if g._poll is not None:
                break
        assert isinstance(g._poll, type(select.poll()))


def test_poll_is_what_the_wait_uses() -> None:
    """(a worker's own wait, after an interrupt or a fault: its board's select.poll on
    eventfd + pipe)"""
    with envfactory.make_vec(overrides=["vectorizer=subproc", "num_envs=2"]) as envs:
        board = envs.workers[0].board
        assert board is envs.group.board
        assert isinstance(board._fds(), type(select.poll()))


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs /proc/loadavg")
def test_the_idle_probe_sees_a_busy_process_and_forgets_it_when_it_exits() -> None:
    """The auto ``in_parent`` share looks at what runs *now*: a CPU-bound process counts
    while it runs and stops counting as soon as it exits (the 1-minute load average would
    remember it for a minute, and so denied the parent its share right after a previous
    vec env's workers had exited)."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        during = others_running(samples=50)
    finally:
        busy.kill()
        busy.wait()
    after = others_running(samples=50)
    assert during >= 0.75, during
    assert during - after >= 0.5, (during, after)


BOOTING_FORK_SERVER = """
import multiprocessing as mp, time
from multiprocessing import forkserver
from envfactory import _compat
from envfactory.vectorizers.plan.plan import others_running
mp.get_context("forkserver").set_forkserver_preload(["busy_boot"])
forkserver.ensure_running()
time.sleep(0.3)  # (the server is importing busy_boot: 3 s of CPU)
ours, diffs = _compat.helper_pids, []
for _ in range(20):  # (pairs a few ms apart, so the machine's other load cancels out)
    left_out = others_running(samples=5)
    _compat.helper_pids = lambda: []  # (a probe that counts every running thread)
    diffs.append(others_running(samples=5) - left_out)
    _compat.helper_pids = ours
print(sum(diffs) / len(diffs))
"""


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs /proc/loadavg")
def test_the_idle_probe_leaves_out_this_programs_booting_fork_server(tmp_path: Path) -> None:
    """A fork server still importing its preloads (started while Hydra composes) is no
    load a worker will meet: counting it put 8 Pongs in one worker instead of two, and the
    first reset took twice as long (issue 28, start-up). The probe counts about one thread
    fewer than one that counts everything, measured in pairs: an absolute count read the
    CI machine's other load (2.78 running)."""
    (tmp_path / "busy_boot.py").write_text(
        "import time\nt = time.time() + 3\nwhile time.time() < t:\n    pass\n"
    )
    # (the fork server reads PYTHONPATH, not the parent's sys.path)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", BOOTING_FORK_SERVER],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip().splitlines()[-1]) >= 0.5, out.stdout


def test_the_waiter_naps_through_a_steady_short_wait_and_sleeps_through_a_long_one() -> None:
    """A steady 1.2 ms wait (a CartPole step of 16 envs in one worker, here): nap until
    NAP_MARGIN before its expected end, then spin past it, so neither side pays a wake-up;
    a 50 ms wait (a learner's update): no nap, no spin, sleep until woken; spin_us=0:
    neither. The first waits (nothing learnt yet) only spin."""
    from envfactory.vectorizers.transport.board import MAX_NAP, NAP_MARGIN, RECENT, Waiter

    w = Waiter(200e-6)
    assert w.plan() == (0.0, 200e-6)
    for _ in range(RECENT):
        w.record(1.2e-3)
    nap, spin = w.plan()
    assert nap == pytest.approx(1.2e-3 - NAP_MARGIN)
    assert spin == pytest.approx(NAP_MARGIN + 200e-6)
    w.record(0.1e-3)  # one short wait: the shortest of the recent ones predicts
    assert w.plan() == (0.0, pytest.approx(0.3e-3))
    for _ in range(RECENT):
        w.record(50e-3)
    assert MAX_NAP < 50e-3 and w.plan() == (0.0, 0.0)
    off = Waiter(0.0)
    for _ in range(RECENT):
        off.record(1.2e-3)
    assert off.plan() == (0.0, 0.0)

    # a nap ends early enough to catch the answer spinning (a timer wakes ~0.1 ms late; a
    # 5 ms spin budget so that a loaded machine's preemption does not end the spin first)
    w = Waiter(5e-3)
    asleep = lambda: False  # noqa: E731 (the sleeping half gives up: only the nap and spin)
    for _ in range(RECENT):
        w.record(2e-3)
    t0 = time.perf_counter()
    assert w.until(lambda: time.perf_counter() - t0 >= 2e-3, asleep)
    assert w.backoff == 0 and w.skip == 0
    t0 = time.perf_counter()
    assert not w.until(lambda: False, asleep)  # never ready: the caller then sleeps until woken
    assert time.perf_counter() - t0 >= 2e-3 + 5e-3 - 1e-5  # napped, then spun it all
    # a wasted spin (an oversubscribed machine): the next wait sleeps at once, then 3 ...
    assert w.backoff == 1 and w.skip == 1
    assert not w.until(lambda: False, asleep)  # no nap, no spin
    assert w.backoff == 1 and w.skip == 0
    assert not w.until(lambda: False, asleep)  # spins again, fails again
    assert w.skip == 3 and w.backoff == 3
    while w.skip:
        assert not w.until(lambda: False, asleep)
    assert w.backoff == 3
    # an answer caught after the nap or while spinning ends the back-off
    t0 = time.perf_counter()
    assert w.until(lambda: time.perf_counter() - t0 >= 2e-3, asleep) and w.backoff == 0


def test_the_poller_waits_for_pipes_by_the_waiters_policy() -> None:
    """Pipe waits (a worker's answer, a worker's next message, the pool's first ready
    worker) use the one policy: the answer at once when it is there, a sleep bounded by
    the timeout otherwise, after a spin (no nap: a pipe's writer wakes the reader)."""
    import multiprocessing as mp
    import threading

    from envfactory.vectorizers.transport.board import Poller

    a, b = mp.Pipe()
    try:
        poller = Poller([a.fileno()], 200e-6)
        t0 = time.perf_counter()
        assert poller.wait(0.05) == []  # nothing came: it returns once the timeout passed
        assert 0.045 <= time.perf_counter() - t0 < 2.0
        assert poller.waiter.plan() == (0.0, 200e-6)  # spin, never nap
        b.send(1)
        assert [fd for fd, _ in poller.wait(None)] == [a.fileno()]
        a.recv()
        timer = threading.Timer(0.05, lambda: b.send(2))
        timer.start()
        t0 = time.perf_counter()
        assert [fd for fd, _ in poller.wait(10.0)] == [a.fileno()]  # woken by the answer
        assert time.perf_counter() - t0 < 5.0
        timer.join()
    finally:
        a.close()
        b.close()


def test_subproc_keeps_every_env_in_a_worker_by_default() -> None:
    """Issue 26: the user picked ``subproc`` for isolation, and run-time placement gave it
    up silently: cheap envs moved into the parent, and an env that calls ``os._exit(3)``
    there ended the user's whole program with exit 3 and no message. By default every env
    stays in a worker process for good: that env is one ``WorkerDiedError``."""
    script = textwrap.dedent(
        """
        import numpy as np
        import envfactory
        from faulty_envs import Maker
        from envfactory.errors import WorkerDiedError
        from envfactory.vectorizers.subproc import SubprocVecEnv

        envs = SubprocVecEnv([Maker("exit", at_step=1500)] * 2)
        assert envs.in_parent == 0 and not hasattr(envs, "placement")
        envs.reset(seed=0)
        try:
            for _ in range(3000):
                envs.step(np.zeros(2, np.int64))
        except WorkerDiedError as err:
            print("caught:", str(err).splitlines()[0])
        envs.close()
        cfg = envfactory.compose(["vectorizer=subproc", "num_envs=16"])
        assert cfg.vectorizer.in_parent == 0
        """
    )
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # faulty_envs.py
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "caught: worker 0" in out.stdout and "exit code 3" in out.stdout


def test_auto_trades_isolation_for_speed_decided_before_any_env_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``vectorizer=auto``: with cores free, ``subproc`` with ``in_parent=null`` (a
    worker's share in the parent, decided at build time); with no core free for a worker,
    every env in this process (``dummy``): decided once, before any env is built, never by
    moving a live env. Either gives the same trajectories as ``dummy``."""
    import envfactory.vectorizers.plan.plan as opts

    cfg = envfactory.compose(["vectorizer=auto", "num_envs=4"])
    assert cfg.vectorizer.name == "auto" and cfg.vectorizer.in_parent is None
    kinds = []
    for load in (0.0, 5.0):  # idle; every core busy
        monkeypatch.setattr(opts, "others_running", lambda load=load, **_: load)
        with envfactory.make_vec(cfg) as envs:
            kinds.append(type(envs).__name__)
            obs, _ = envs.reset(seed=3)
            with envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=4"]) as ref:
                expected, _ = ref.reset(seed=3)
                assert np.array_equal(obs, expected)
                for _ in range(40):
                    a = np.array([0, 1, 1, 0])
                    got, want = envs.step(a), ref.step(a)
                    assert all(np.array_equal(x, y) for x, y in zip(got[:4], want[:4]))
    cpus = os.cpu_count() or 1
    assert kinds == (["SubprocVecEnv"] if cpus >= 2 else ["DummyVecEnv"]) + ["DummyVecEnv"]
    with envfactory.make_vec(
        overrides=["vectorizer=auto", "num_envs=4", "vectorizer.restart=true"]
    ) as envs:
        assert type(envs).__name__ == "SubprocVecEnv"  # (restart needs worker processes)
