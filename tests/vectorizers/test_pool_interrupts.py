"""Issue 26.4 for the async pool: real SIGINTs at random moments for seconds, landing in
``send`` and ``recv`` (their waits and their bookkeeping, a second one while the first is
held included). Every ``recv`` interrupted is simply called again, every ``send``
interrupted was done whole, no transition is lost and the pool stays usable."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest
from faulty_envs import BigActionMaker, CtrlCStorm, InfoMaker, Maker

from envfactory.errors import NoPendingCallError, NotReadyError
from envfactory.vectorizers.asyncpool.pool import SubprocPool


def _storm_rounds(
    envs: SubprocPool, seconds: float, seed: int
) -> tuple[list[tuple], int, np.ndarray | None]:
    """``async_reset``, then recv/send rounds under a `CtrlCStorm` for ``seconds``: an
    interrupted ``recv`` is called again, an interrupted ``send`` is finished by
    `_finish_send`. Returns the batches the caller got, how many
    interrupts landed and the envs received last but not sent yet (None: all were sent).
    (The storm's handler is set first, as a program's own is: the pool's hold goes over it
    at ``async_reset``.)"""
    batches: list[tuple] = []
    ids: np.ndarray | None = None
    with CtrlCStorm(seed) as storm:
        envs.async_reset(seed=0)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            actions = np.ones(envs.batch_size, np.int64)
            try:
                storm.armed = True
                if ids is not None:
                    envs.send(actions, ids)
                    ids = None
                out = envs.recv()
                storm.armed = False
                batches.append(out)
                ids = out[4]["env_id"]
            except KeyboardInterrupt:
                storm.armed = False
                if ids is not None:
                    _finish_send(envs, actions, ids)
                    ids = None
        return batches, storm.raised, ids


def _finish_send(envs: SubprocPool, actions: np.ndarray, ids: np.ndarray) -> None:
    """After a Ctrl-C in ``send``, as async-pool.md says: send ``ids`` again; a send of
    envs in flight is refused with a message naming them, and the others are sent."""
    try:
        envs.send(actions, ids)
    except ValueError as err:
        named = re.match(r"send\(\) for envs \[([\d, ]+)\] whose last step", str(err))
        assert named, err
        flight = {int(i) for i in named.group(1).split(",")}
        rest = [i for i in ids.tolist() if i not in flight]
        if rest:
            envs.send(actions[: len(rest)], rest)


def _check_each_env_steps_once_a_batch(batches: list[tuple], num_envs: int) -> None:
    """Each env's observation goes up one step per batch it is in, back to 0 only right
    after an episode end the caller saw (next_step autoreset): no step was dropped."""
    last = [-1] * num_envs
    done = [True] * num_envs  # (async_reset's batch: t = 0)
    for k, (obs, _, term, trunc, infos) in enumerate(batches):
        restarted = infos.get("_restarted", np.zeros(len(obs), bool))
        for row, i in enumerate(infos["env_id"].tolist()):
            t = round(float(obs[row, 0]) * 1000)
            if restarted[row]:  # a rebuilt worker's env: its episode ends where it was seen
                assert t == last[i] and trunc[row], (k, i, t, last[i])
            else:
                assert t == (0 if done[i] else last[i] + 1), (k, i, t, last[i], done[i])
            last[i], done[i] = t, bool(term[row] or trunc[row])


@pytest.mark.parametrize(
    ("in_series", "options"),
    [
        (1, {}),
        (2, {}),
        (2, {"restart": True, "max_restarts": 1000, "fault": "sigkill", "every": 97}),
    ],
    ids=["one-env-workers", "two-env-workers", "restart"],
)
@pytest.mark.filterwarnings("ignore:restarting after:RuntimeWarning")
def test_random_ctrl_c_storm_over_the_pool_loses_no_transition(
    in_series: int, options: dict
) -> None:
    fault = {k: options.pop(k) for k in ("fault", "every") if k in options}
    maker = Maker(step_sleep=0.0005, episode_len=7, **fault)
    with SubprocPool([maker] * 4, 2, in_series=in_series, context="forkserver", **options) as envs:
        seconds = 6.0 if fault else 3.0  # (issue 37: held Ctrl-Cs land as one, see there)
        batches, raised, unsent = _storm_rounds(envs, seconds, seed=in_series)
        assert raised > 50 and len(batches) > 50
        _check_each_env_steps_once_a_batch(batches, 4)
        assert all(w.alive for w in envs.group.workers) or fault  # (was: none suspect)
        if fault:
            assert sum(envs.restarts) > 0  # workers were rebuilt during the storm
        if unsent is not None:  # usable after the storm
            envs.send(np.ones(2, np.int64), unsent)
        more = envs.recv()
        _check_each_env_steps_once_a_batch([*batches, more], 4)


def test_ctrl_c_while_send_waits_for_a_busy_worker_is_raised_at_once_and_loses_nothing() -> None:
    """A send whose message is larger than the pipe holds, to a worker busy stepping
    another env for 1 s, waits for the worker to read it. A Ctrl-C then is raised at once
    (before, it was held until the worker read the message, and a stopped worker held it
    for good); the message counts as sent, so its env is in flight (a second send of it is
    refused) and the next recvs return both envs' steps, each stepped once."""
    with SubprocPool([BigActionMaker(step_sleep=1.0)] * 2, 1, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        pids = list(envs.pids)
        first = int(envs.recv()[4]["env_id"][0])
        second = 1 - first
        big = np.full((1, 100_000), 0.5, np.float32)
        envs.send(big, [first])  # the worker reads it at once, then steps for 1 s
        assert envs.recv()[4]["env_id"].tolist() == [second]  # (ready since the reset)
        time.sleep(0.1)
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            envs.send(big, [second])  # waits: the worker is stepping ``first``
        assert time.monotonic() - t0 < 0.6  # not held until the worker read it
        timer.join()
        with pytest.raises(ValueError, match="not received yet"):
            envs.send(big, [second])
        got = {}
        for _ in range(2):
            obs, rew, *_, infos = envs.recv()
            got[int(infos["env_id"][0])] = (float(obs[0, 0]), float(rew[0]))
        assert got == {first: (1.0, 0.5), second: (1.0, 0.5)}
        assert envs.pids == pids


def test_a_send_cut_by_ctrl_c_is_finished_before_its_answer_is_awaited() -> None:
    """The same cut send to a worker with nothing else in flight (stopped for 0.5 s, as a
    descheduled worker is): the pool's wait for the first ready worker writes the rest of
    the message first. Before, only a read of that worker wrote it, and the pool's wait
    never named the worker: ``recv`` waited until ``timeout`` killed it (a hostile trial)."""
    with SubprocPool([BigActionMaker()] * 4, 2, in_series=2, timeout=5.0, context="fork") as envs:
        envs.async_reset(seed=0)
        envs.recv(env_ids=[0, 1, 2, 3])
        pid = envs.pids[0]
        os.kill(pid, signal.SIGSTOP)
        cont = threading.Timer(0.5, os.kill, (pid, signal.SIGCONT))
        cut = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        cont.start(), cut.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                envs.send(np.full((2, 100_000), 0.25), [0, 1])  # float64: by pipe, in parts
        finally:
            cont.join(), cut.join()
        t0 = time.monotonic()
        obs, rew, *_ = envs.recv(env_ids=[0, 1])
        assert time.monotonic() - t0 < 2.0
        assert rew.tolist() == [0.25, 0.25] and obs[:, 0].tolist() == [1.0, 1.0]
        assert envs.pids[0] == pid


# -- a second Ctrl-C at a precise place (issue 26.4; found by a review of the change) ----
def _pool(**maker: float) -> SubprocPool:
    """4 envs in 2 workers of 2, ``batch_size=1``, every env's first result received."""
    envs = SubprocPool([Maker(**maker)] * 4, 1, in_series=2, context="fork")
    envs.async_reset(seed=0)
    for _ in range(4):
        envs.recv()
    return envs


def test_an_interrupt_after_the_read_before_it_is_recorded_loses_nothing() -> None:
    """The answer was read (and kept by the handle) but not recorded: the pipe and slot no
    longer look ready, so the next recv must ask that worker first (it hung before)."""
    with _pool() as envs:
        site = envs.pool.backend
        real = site.answer

        def answer_then_interrupt(*args: Any) -> Any:
            site.answer = real
            real(*args)
            raise KeyboardInterrupt

        site.answer = answer_then_interrupt
        envs.send(np.ones(1, np.int64), [0])
        with pytest.raises(KeyboardInterrupt):
            envs.recv(timeout=5)
        obs, rew, *_, infos = envs.recv(timeout=5)
        assert infos["env_id"].tolist() == [0] and rew.tolist() == [1.0]
        assert round(float(obs[0, 0]) * 1000) == 1


def test_a_cut_read_survives_a_settle_of_another_worker_and_a_send_to_its_own() -> None:
    """Worker 0's read is cut after its answer was decoded into the handle; then a
    ``get_attr`` settles worker 1 only, and a send goes to worker 0's other env. The next
    recv of env 0 still gets its answer, and env 1's comes after (both hung before: the
    first settle forgot the cut read, the send wiped the kept answer)."""
    with _pool() as envs:
        w0 = envs.group.workers[0]
        real = w0._take

        def take_then_interrupt(call: str) -> None:
            del w0._take  # (back to the class's)
            real(call)
            raise KeyboardInterrupt

        envs.send(np.ones(2, np.int64), [0, 2])
        time.sleep(0.1)
        w0._take = take_then_interrupt  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            envs.recv(env_ids=[0], timeout=5)
        assert envs.get_attr("every", indices=[2]) == (0,)  # settles worker 1 only
        envs.send(np.ones(1, np.int64), [1])
        for i in (0, 1):
            obs, rew, *_, infos = envs.recv(env_ids=[i], timeout=5)
            assert infos["env_id"].tolist() == [i] and rew.tolist() == [1.0]
            assert round(float(obs[0, 0]) * 1000) == 1


def test_a_ctrl_c_while_send_waits_leaves_the_later_workers_envs_unsent_and_says_which() -> None:
    """Both workers are busy for 1 s; a send of an env of each with a 400 KB action waits
    for the first to read. A Ctrl-C there: the first message counts as sent, the second was
    not handed over. Sending both again names the one in flight; sending the other works,
    and each env steps once."""
    with SubprocPool([BigActionMaker(step_sleep=1.0)] * 4, 1, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        for _ in range(4):
            envs.recv()
        big = np.full((2, 100_000), 0.5, np.float32)
        envs.send(big, [0, 2])  # both workers step for 1 s
        time.sleep(0.1)
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            envs.send(big, [1, 3])
        timer.join()
        with pytest.raises(ValueError, match=r"send\(\) for envs \[1\] whose last step"):
            envs.send(big, [1, 3])
        envs.send(big[:1], [3])
        steps = {}
        for _ in range(4):
            obs, _, _, _, infos = envs.recv()
            steps[int(infos["env_id"][0])] = float(obs[0, 0])
        assert steps == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}


def test_a_poll_after_a_cut_read_waits_for_nothing() -> None:
    """``recv(timeout=0)`` finishes a cut read whose answer is in hand, and skips one whose
    worker has not answered yet (before, it waited for that worker with no limit: found
    by a review); a blocking recv then finishes it."""
    with _pool(step_sleep=0.0) as envs:  # a cut read whose answer is in hand
        w0 = envs.group.workers[0]
        real = w0._take

        def take_then_interrupt(call: str) -> None:
            del w0._take
            real(call)
            raise KeyboardInterrupt

        envs.send(np.ones(1, np.int64), [0])
        time.sleep(0.1)
        w0._take = take_then_interrupt  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            envs.recv(timeout=5)
        assert envs.recv(timeout=0)[4]["env_id"].tolist() == [0]
    with _pool(step_sleep=1.0) as envs:  # a settle cut while its worker steps for 1 s
        envs.send(np.ones(1, np.int64), [0])
        # (issue 37: one Ctrl-C; it goes through at once, the settle being a wait; it
        # took two before, the first held)
        timers = [threading.Timer(t, os.kill, (os.getpid(), signal.SIGINT)) for t in (0.2,)]
        for timer in timers:
            timer.start()
        with pytest.raises(KeyboardInterrupt):
            envs.get_attr("every", indices=[0])  # waits for env 0's step: cut there
        for timer in timers:
            timer.join()
        t0 = time.monotonic()
        with pytest.raises(NotReadyError):
            envs.recv(timeout=0)
        assert time.monotonic() - t0 < 0.3
        obs, *_, infos = envs.recv(timeout=5)
        assert infos["env_id"].tolist() == [0] and round(float(obs[0, 0]) * 1000) == 1


# -- a Ctrl-C in the caller's own lines, between recv and send (issue 37) ------------------
def _same_batch(a: tuple, b: tuple) -> None:
    for x, y in zip(a[:4], b[:4], strict=True):
        np.testing.assert_array_equal(x, y)
    assert sorted(a[4]) == sorted(b[4])
    for key in a[4]:
        np.testing.assert_array_equal(a[4][key], b[4][key])


def test_a_ctrl_c_between_recv_and_send_loses_no_env_unsent_hands_the_batch_back() -> None:
    """A real SIGINT after ``recv`` returned, in the caller's own lines before its ``send``
    (the batch's env ids were never kept): ``unsent()`` hands that batch back, the same rows
    and infos, as often as asked; a ``send`` takes the envs out of it, and they step on.
    Before, those envs were idle for good: nothing in flight, nothing said which, and after
    enough such Ctrl-Cs ``recv()`` said that no env was ready or in flight."""
    with SubprocPool([InfoMaker(k) for k in range(4)], 2, in_series=2, context="fork") as envs:
        envs.async_reset(seed=0)
        assert envs.unsent() is None  # (every env in flight)
        envs.send(np.ones(2, np.int64), envs.recv()[4]["env_id"])
        first = envs.recv()
        ids = first[4]["env_id"].tolist()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # the caller's own line: a Ctrl-C lands
            time.sleep(5)  # (never: raised at once)
        again = envs.unsent()
        assert again is not None and again[4]["env_id"].tolist() == ids
        _same_batch(again, first)
        _same_batch(envs.unsent(), first)  # it changes nothing
        second = envs.recv()  # the other envs; unsent now names all four, in that order
        assert envs.unsent()[4]["env_id"].tolist() == ids + second[4]["env_id"].tolist()
        with pytest.raises(
            NoPendingCallError,
            match=r"but 0 are ready and 0 in flight; envs \[[\d, ]+\] were returned but not "
            r"sent; envs\.unsent\(\) returns them again: send\(\) their actions",
        ):
            envs.recv()
        envs.send(np.zeros(2, np.int64), ids)
        assert envs.unsent()[4]["env_id"].tolist() == second[4]["env_id"].tolist()
        envs.send(np.zeros(2, np.int64), second[4]["env_id"])
        assert envs.unsent() is None
        got = {}
        for _ in range(2):
            infos = envs.recv()[4]
            got.update(zip(infos["env_id"].tolist(), infos["t"].tolist(), strict=True))
        t_before = {
            int(i): t
            for b in (first, second)
            for i, t in zip(b[4]["env_id"], b[4]["t"], strict=True)
        }
        assert got == {i: t + 1 for i, t in t_before.items()}  # each env stepped once more
        envs.reset(seed=1)  # a synchronous reset or step supersedes every pool result
        assert envs.unsent() is None


def _storm_everywhere(envs: SubprocPool, seconds: float, seed: int) -> tuple[list, int]:
    """recv/send rounds with a Ctrl-C storm armed everywhere (the caller's own lines
    too), written as async-pool.md says: ``envs.unsent() or envs.recv()`` at the top of
    every round, every KeyboardInterrupt caught and the loop continued. Returns
    ``(again, batch)`` for each batch the caller got (``again``: from `unsent`) and how
    many interrupts landed."""
    seen: list[tuple[bool, tuple]] = []
    with CtrlCStorm(seed) as storm:  # (the program's handler first: the pool's hold goes over it)
        envs.async_reset(seed=0)
        deadline = time.monotonic() + seconds
        storm.armed = True
        while storm.armed:  # (a second Ctrl-C as the first is caught lands outside the try)
            with contextlib.suppress(KeyboardInterrupt):
                _rounds(envs, storm, deadline, seen)
        return seen, storm.raised


def _rounds(envs: SubprocPool, storm: CtrlCStorm, deadline: float, seen: list) -> None:
    while True:
        try:
            if time.monotonic() >= deadline:
                storm.armed = False
                return
            out = envs.unsent()
            again = out is not None
            out = out or envs.recv()
            seen.append((again, out))
            envs.send(np.ones(len(out[0]), np.int64), out[4]["env_id"])
        except KeyboardInterrupt:
            continue


@pytest.mark.parametrize(
    ("in_series", "batch", "options"),
    [
        (1, 2, {}),
        (2, 3, {}),
        (2, 2, {"restart": True, "max_restarts": 1000, "fault": "sigkill", "every": 97}),
    ],
    ids=["one-env-workers", "two-env-workers-batch-3", "restart"],
)
@pytest.mark.filterwarnings("ignore:restarting after:RuntimeWarning")
def test_a_ctrl_c_storm_armed_everywhere_loses_no_env(
    in_series: int, batch: int, options: dict
) -> None:
    """Issue 37: real SIGINTs every 1-15 ms for seconds over the loop async-pool.md
    gives, landing anywhere (the caller's lines between ``recv`` and ``send`` too). Every
    env keeps stepping to the end, one step per new batch (a batch ``unsent`` hands back
    again repeats what the caller saw), and afterwards every env comes back. Before (no
    ``unsent``, the ids of a batch cut off lost), envs dropped out one batch at a time
    until ``recv()`` raised NoPendingCallError within seconds."""
    fault = {k: options.pop(k) for k in ("fault", "every") if k in options}
    maker = Maker(step_sleep=0.0005, episode_len=7, **fault)
    with SubprocPool([maker] * 6, batch, in_series=in_series, context="fork", **options) as envs:
        seen, raised = _storm_everywhere(envs, 3.0, seed=in_series)
        assert raised > 50 and len(seen) > 50
        last, done = [-1] * 6, [True] * 6
        for k, (again, (obs, _, term, trunc, infos)) in enumerate(seen):
            restarted = infos.get("_restarted", np.zeros(len(obs), bool))
            for row, i in enumerate(infos["env_id"].tolist()):
                t = round(float(obs[row, 0]) * 1000)
                if restarted[row]:  # a rebuilt worker's env: its episode ends where it was
                    assert t == last[i] and trunc[row], (k, i, t, last[i])
                elif again and t == last[i]:
                    continue  # a batch handed back again: the caller saw it
                else:
                    assert t == (0 if done[i] else last[i] + 1), (k, i, t, last[i], done[i])
                last[i], done[i] = t, bool(term[row] or trunc[row])
        if fault:
            assert sum(envs.restarts) > 0  # workers were rebuilt during the storm
        tail = {int(i) for _, b in seen[-len(seen) // 4 :] for i in b[4]["env_id"]}
        assert tail == set(range(6))  # every env stepped in the storm's last quarter
        out = envs.unsent()
        if out is not None:
            envs.send(np.ones(len(out[0]), np.int64), out[4]["env_id"])
        back = [i for _ in range(6 // batch) for i in envs.recv()[4]["env_id"].tolist()]
        assert sorted(back) == list(range(6))  # every env was in flight: each comes back
