"""Issue 26.4 for the async pool: real SIGINTs at random moments for seconds, landing in
``send`` and ``recv`` (their waits and their bookkeeping, a second one while the first is
held included). Every ``recv`` interrupted is simply called again, every ``send``
interrupted was done whole, no transition is lost and the pool stays usable."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from faulty_envs import BigActionMaker, CtrlCStorm, Maker

from envfactory.vectorizers.pool import SubprocPool


def _storm_rounds(
    envs: SubprocPool, seconds: float, seed: int
) -> tuple[list[tuple], int, np.ndarray | None]:
    """``async_reset``, then recv/send rounds under a `CtrlCStorm` for ``seconds``: an
    interrupted ``recv`` is called again; after an interrupted ``send`` its envs must be in
    flight (sending them again is refused). Returns the batches the caller got, how many
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
                if ids is not None:  # the send was done whole: the Ctrl-C was held
                    with pytest.raises(ValueError, match="not received yet"):
                        envs.send(actions, ids)
                    ids = None
        return batches, storm.raised, ids


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
        batches, raised, unsent = _storm_rounds(envs, 3.0, seed=in_series)
        assert raised > 50 and len(batches) > 50
        _check_each_env_steps_once_a_batch(batches, 4)
        assert not any(w.suspect for w in envs.group.workers)
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
