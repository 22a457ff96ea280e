"""``vectorizer.in_actor=subproc``: each actor hosts its envs in a ``subproc`` of its own (one
worker process per CPU it reserves), on a real local Ray of 4 logical CPUs (the ``ray_session``
fixture of conftest.py, in a Ray temp dir of its own): the same trajectories as ``dummy``, the
conformance kit, one Ray call per actor per step, the faults of an inner env, an inner worker and
the actor, ``restart``, and no process left behind."""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from envfactory_ray.plugin import build_ray
from envfactory_ray.vecenv import RayVecEnv
from test_ray_vectorizer import assert_gone as gone

import envfactory
from envfactory.testing import VecEnvConformance, check_restarts, check_same_as_dummy

# a local Ray takes 10-20 s to start here: the whole module is left out of the quick loop
pytestmark = pytest.mark.slow
RAY_CPUS = 4  # logical CPUs (conftest's ray_session): two node actors of 2 CPUs each
MODES = ("next_step", "same_step", "disabled")
FAULT_SECONDS = 30.0  # bound on noticing a fault (the machine is small and shared)


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_session: Any) -> Any:
    import ray.cloudpickle

    # the envs below travel to the actors by value (this module is not importable there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray_session


class FaultyEnv(gym.Env):
    """A tiny deterministic env (obs = step count / 1000) that misbehaves on its ``at_step``-th
    step (or every ``every``-th, or its ``at_reset``-th reset): ``raise`` (ValueError), ``hang``,
    ``exit`` (``os._exit(3)``); with ``once_file`` only while that file does not exist."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        fault: str = "none",
        at_step: int = 3,
        every: int = 0,
        at_reset: int = 0,
        once_file: str | None = None,
        episode_len: int = 50,
    ) -> None:
        self.fault, self.at_step, self.every, self.at_reset = fault, at_step, every, at_reset
        self.once_file, self.episode_len = once_file, episode_len
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.calls = self.resets = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.resets += 1
        if self.resets == self.at_reset:
            self._misbehave()
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> Any:
        self.calls += 1
        due = self.calls == self.at_step or (self.every and self.calls % self.every == 0)
        if due or self.fault == "slow":
            self._misbehave()
        self.t += 1
        obs = np.full(4, self.t / 1000, np.float32)
        return obs, 1.0, self.t >= self.episode_len, False, {}

    def _misbehave(self) -> None:
        if self.fault == "none" or not self._armed():
            return
        if self.fault == "raise":
            raise ValueError(f"env broke at step {self.calls}, reset {self.resets}")
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "exit":
            os._exit(3)
        if self.fault == "slow":  # (every step: 1 s)
            time.sleep(1.0)

    def _armed(self) -> bool:
        if self.once_file is None:
            return True
        if os.path.exists(self.once_file):
            return False
        Path(self.once_file).touch()
        return True


def maker(*args: Any, **kwargs: Any) -> Any:
    return lambda: FaultyEnv(*args, **kwargs)


def node(*fns: Any, **options: Any) -> RayVecEnv:
    """Two node actors of 2 CPUs (2 inner workers) for the envs ``fns``."""
    options.setdefault("in_series", (len(fns) + 1) // 2)
    options.setdefault("num_cpus", 2)
    mode = options.pop("autoreset_mode", "next_step")
    envs = build_ray(list(fns), autoreset_mode=mode, in_actor="subproc", **options)
    assert isinstance(envs, RayVecEnv)
    return envs


def worker_pid(env: Any) -> int:
    """What ``envs.call(worker_pid)`` answers for each env: the pid of its inner worker."""
    return os.getpid()


ACTIONS = np.zeros(4, dtype=np.int64)


def test_step_wait_after_ctrl_c_returns_the_interrupted_step_by_the_channel() -> None:
    """A node actor's channel is resumable too: a Ctrl-C while its answer is awaited leaves
    the step pending, and step_wait() reads the answer (found by a user trial: the env was
    broken for good)."""
    from test_ray_vectorizer import ctrl_c_during

    with node(*[maker("slow")] * 4) as envs:
        envs.reset(seed=0)
        ctrl_c_during(lambda: envs.step(ACTIONS))
        obs, rew, *_ = envs.step_wait()
        np.testing.assert_allclose(obs, 0.001)
        assert rew.tolist() == [1.0] * 4
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs, 0.002)
        assert envs.restarts == [0, 0]


def assert_gone(pids: list[int], seconds: float = 15.0) -> None:
    gone(pids, seconds, "processes outlived their actor")


def processes(envs: RayVecEnv) -> list[int]:
    """Every actor's process and the processes it started (inner workers, fork server)."""
    return [p for h in envs.group.handles for p in [h.pid, *h.children] if p is not None]


# -- same as dummy, the conformance kit ------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_same_trajectories_as_dummy_in_every_autoreset_mode(mode: str) -> None:
    """Two actors (3 + 2 envs) of two inner workers each; ``disabled``'s rollout resets the
    finished envs with a ``reset_mask`` (an actor none of whose envs it resets answers so)."""
    over = ["num_envs=5", f"autoreset_mode={mode}", "vectorizer.in_actor=subproc"]
    over += ["vectorizer.in_series=3", "vectorizer.num_cpus=2"]
    check_same_as_dummy(over, "ray", steps=80, seed=7)


@pytest.mark.parametrize(
    "overrides",
    [
        ["num_envs=6", "seeding=spawn"],
        ["env=mountaincar", "num_envs=3", "vectorizer.num_cpus=1", "autoreset_mode=same_step"],
        ["env=atari", "num_envs=2", "env.max_episode_steps=40", "vectorizer.copy=false"],
    ],
    ids=["one-actor-4-workers", "mountaincar-3-actors", "pong"],
)
def test_same_trajectories_as_dummy(overrides: list[str]) -> None:
    check_same_as_dummy([*overrides, "vectorizer.in_actor=subproc"], "ray", steps=60, seed=3)


class TestNodeConformance(VecEnvConformance):
    """envfactory's vectorizer conformance suite, every autoreset mode: 3 envs on one actor of
    two inner workers (``num_cpus=2``), or on two actors of one."""

    steps = 120

    @pytest.fixture(params=[("next_step", 3, 2), ("same_step", 2, 1), ("disabled", 3, 2)], ids=str)
    def make_vecenv(self, request: pytest.FixtureRequest) -> Any:
        mode, in_series, cpus = request.param
        cfg = envfactory.compose(
            [
                "vectorizer=ray",
                "num_envs=3",
                "vectorizer.in_actor=subproc",
                f"vectorizer.in_series={in_series}",
                f"vectorizer.num_cpus={cpus}",
                f"autoreset_mode={mode}",
            ]
        )
        return lambda: envfactory.make_vec(cfg)


def test_num_cpus_null_is_the_whole_node_and_one_message_per_actor_per_step() -> None:
    """One message per actor per step, by the actor's direct channel (no Ray call on the hot
    path: a Ray actor call costs ~1 ms here, a channel round trip ~0.1 ms)."""
    import ray

    with envfactory.make_vec(
        overrides=["vectorizer=ray", "num_envs=8", "vectorizer.in_actor=subproc"]
    ) as envs:
        assert isinstance(envs, RayVecEnv)
        assert envs.num_cpus == RAY_CPUS and len(envs.actors) == 1
        envs.reset(seed=0)
        assert len(set(envs.call(worker_pid))) == RAY_CPUS  # one inner worker per CPU
    with node(*[maker()] * 4) as envs:
        envs.reset(seed=0)
        sent: list[str] = []
        original = ray.actor.ActorMethod._remote

        def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(self._method_name)
            return original(self, *args, **kwargs)

        messages = []
        for h in envs.group.handles:
            assert h.channel is not None
            real = h.channel.send_bytes

            def counted(data: bytes, real: Any = real, index: int = h.index) -> None:
                messages.append(index)
                real(data)

            h.channel.send_bytes = counted
        ray.actor.ActorMethod._remote = counting  # type: ignore[method-assign]
        try:
            for _ in range(10):
                envs.step(ACTIONS)
        finally:
            ray.actor.ActorMethod._remote = original  # type: ignore[method-assign]
        assert sent == []  # no Ray call per step
        assert sorted(messages) == [0] * 10 + [1] * 10  # two actors, ten steps
        assert len(set(envs.call(worker_pid))) == 4  # two inner workers per actor


def test_a_step_crosses_the_channel_as_raw_arrays_both_ways() -> None:
    """A step's actions and its batch are raw bytes after a small header (its layout once:
    `envfactory_ray.wire`), not pickles, and the batch is the same."""
    with node(*[maker()] * 4) as envs:
        envs.reset(seed=0)
        marks: list[bytes] = []
        for h in envs.group.handles:
            send, recv = h.channel.send_bytes, h.channel.recv_bytes

            def sent(data: bytes, send: Any = send) -> None:
                marks.append(b"send " + bytes(data[:1]))
                send(data)

            def read(recv: Any = recv) -> bytes:
                data = recv()
                marks.append(b"read " + data[:1])
                return data  # type: ignore[no-any-return]

            h.channel.send_bytes, h.channel.recv_bytes = sent, read
        for _ in range(3):
            obs, rewards, _, _, _ = envs.step(ACTIONS)
        assert marks[:2] == [b"send N", b"send N"]  # (the answers' layout came with the reset)
        step = [b"send K", b"send K", b"read K", b"read K"]
        assert marks[2:] == [b"read K", b"read K", *step, *step]
        np.testing.assert_allclose(obs, np.full((4, 4), 0.003, np.float32))
        assert rewards.tolist() == [1.0] * 4
        obs[0, 0] = 1.0  # (writable, as a pickled batch was)


def test_async_halves_and_calls() -> None:
    with node(*[maker()] * 4) as envs:
        envs.reset_async(seed=1)
        envs.reset_wait(timeout=60)
        envs.step_async(ACTIONS)
        with pytest.raises(gym.error.AlreadyPendingCallError):
            envs.step_async(ACTIONS)
        obs, rew, *_ = envs.step_wait(timeout=60)
        np.testing.assert_allclose(obs, 0.001)
        assert rew.tolist() == [1.0] * 4
        assert envs.get_attr("episode_len", indices=[1, 3]) == (50, 50)
        envs.set_attr("episode_len", [7, 8], indices=[3, 0])
        assert envs.env_method("get_wrapper_attr", "episode_len") == [8, 50, 50, 7]
        with pytest.raises(AttributeError):  # an env's error, raised as its own type
            envs.get_attr("no_such_attribute")
        envs.step(ACTIONS)  # and the env stays usable


# -- faults: one clear error naming the actor, its node, the inner worker, the envs ----------
def test_env_raising_in_the_inner_subproc_is_its_own_type_naming_the_inner_worker() -> None:
    # (env 2: the first of actor 1's envs, which its inner worker steps; the actor steps the
    # last itself, actor_share)
    with node(maker(), maker(), maker("raise", at_step=2), maker()) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        inner_pid = envs.call(worker_pid)[2]
        assert inner_pid != envs.pids[1] and envs.call(worker_pid)[3] == envs.pids[1]
        with pytest.raises(ValueError, match="env broke at step 2") as info:
            envs.step(ACTIONS)
        err = info.value
        assert isinstance(err, envfactory.RemoteEnvError)
        assert err.worker == 1 and err.env_indices == [2, 3] and err.pid == envs.pids[1]
        assert err.exc_type == "builtins.ValueError" and err.call == "step"
        assert isinstance(err.__cause__, ValueError)
        assert "in _misbehave\nValueError: env broke at step 2" in err.remote_traceback
        text = str(err)
        assert text.startswith(f"worker 1 (pid {err.pid}, envs [2, 3], env ")
        where = f"[Ray actor {err.actor_id[:12]} on node {err.node_ip} ({err.node_id[:12]}), "
        assert where in text
        assert f"in its subproc worker 0 (pid {inner_pid}, envs [2])] raised builtins." in text
        with pytest.raises(envfactory.VecEnvBrokenError, match="unusable since"):
            envs.step(ACTIONS)


def cannot_build() -> gym.Env:
    raise ValueError("no such simulator here")


def test_env_constructor_raising_in_the_inner_subproc_names_the_actor_and_the_worker() -> None:
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="no such simulator here") as info:
        node(maker(), maker(), cannot_build, maker())  # (env 2: in actor 1's inner worker)
    assert time.monotonic() - t0 < FAULT_SECONDS
    err = info.value
    assert isinstance(err, envfactory.RemoteEnvError) and err.call == "start"
    assert err.worker == 1 and err.env_indices == [2, 3] and err.pid is not None
    text = str(err)
    assert f"[Ray actor {err.actor_id[:12]} on node {err.node_ip} ({err.node_id[:12]}), " in text
    assert "in its subproc worker 0 (pid " in text
    assert ", envs [2])] raised builtins.ValueError during start: no such simulator here" in text


def test_inner_worker_dying_is_worker_died_error_and_close_leaves_no_process() -> None:
    envs = node(*[maker()] * 4)
    try:
        envs.reset(seed=0)
        inner = envs.call(worker_pid)
        everything = processes(envs)
        assert set(inner) <= set(everything) and len(everything) >= 2 + 4
        assert inner[1] == envs.pids[0]  # (env 1: the actor's own share, actor_share)
        os.kill(inner[0], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(envfactory.WorkerDiedError) as info:
            envs.step(ACTIONS)
        assert time.monotonic() - t0 < FAULT_SECONDS
        err = info.value
        assert err.worker == 0 and err.env_indices == [0, 1] and err.pid == envs.pids[0]
        assert str(err).endswith(
            f"lost its subproc worker 0 (pid {inner[0]}, envs [0]), which died (SIGKILL) "
            "during step"
        ), str(err)
        with pytest.raises(envfactory.VecEnvBrokenError):
            envs.step(ACTIONS)
    finally:
        envs.close()
    assert_gone(everything)


def test_actor_killed_takes_its_inner_workers_with_it() -> None:
    with node(*[maker()] * 4) as envs:
        envs.reset(seed=0)
        handle = envs.group.handles[1]
        mine = [handle.pid, *handle.children]
        os.kill(envs.pids[1], signal.SIGKILL)
        with pytest.raises(envfactory.WorkerDiedError) as info:
            envs.step(ACTIONS)
        err = info.value
        assert err.worker == 1 and err.env_indices == [2, 3] and "Ray actor" in str(err)
        assert " died (" in str(err) and err.node_id
        assert_gone(mine)  # the fork server and the workers follow the actor


def test_hung_inner_env_times_out_and_the_actor_and_its_workers_are_killed() -> None:
    with node(maker(), maker("hang", at_step=2), maker(), maker(), timeout=2.0) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        handle = envs.group.handles[0]
        mine = [handle.pid, *handle.children]
        t0 = time.monotonic()
        with pytest.raises(envfactory.WorkerTimeoutError, match="within 2 s and was killed"):
            envs.step(ACTIONS)
        assert 1.9 < time.monotonic() - t0 < FAULT_SECONDS
        assert_gone(mine)


# -- restart: the actor and its inner vectorizer are rebuilt -----------------------------------
def test_restart_rebuilds_the_actor_when_an_inner_worker_dies() -> None:
    with node(*[maker()] * 4, restart=True) as envs:
        envs.reset(seed=0)
        for _ in range(5):
            envs.step(ACTIONS)
        old = processes(envs)[:1] + envs.group.handles[0].children
        os.kill(envs.call(worker_pid)[0], signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"restarting after: worker 0 .*lost its subproc"):
            obs, rew, term, trunc, infos = envs.step(ACTIONS)
        assert trunc.tolist() == [True, True, False, False] and not term.any()
        assert infos["_restarted"].tolist() == [True, True, False, False]
        assert rew.tolist() == [0.0, 0.0, 1.0, 1.0]
        np.testing.assert_allclose(obs[:2], 0.005)  # the lost episodes end where last seen
        np.testing.assert_allclose(obs[2:], 0.006)  # the others went on
        assert envs.restarts == [1, 0] and envs.pids[0] != old[0]
        obs, rew, *_ = envs.step(ACTIONS)  # the autoreset step of the truncated envs
        np.testing.assert_allclose(obs[:2], 0.0)
        assert rew.tolist() == [0.0, 0.0, 1.0, 1.0]
        assert_gone(old)


def test_restart_during_a_masked_reset_redoes_it_and_ends_the_other_lost_episode(
    tmp_path: Path,
) -> None:
    once = str(tmp_path / "reset-once")
    fns = [maker("raise", at_step=-1, at_reset=2, once_file=once), maker(), maker(), maker()]
    with node(*fns, restart=True) as envs:
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(ACTIONS)
        mask = np.array([True, False, False, False])
        with pytest.warns(RuntimeWarning, match="restarting after: .*env broke at step 3, reset 2"):
            obs, infos = envs.reset(options={"reset_mask": mask})
        np.testing.assert_allclose(obs[0], 0.0)  # reset again, on the new actor
        np.testing.assert_allclose(obs[1:], 0.003)  # the others keep what the caller saw
        assert infos["_restarted"].tolist() == [True, False, False, False]
        obs, rew, term, trunc, infos = envs.step(ACTIONS)
        assert trunc.tolist() == [False, True, False, False] and not term.any()  # env 1's lost
        assert infos["_restarted"].tolist() == [False, True, False, False]
        np.testing.assert_allclose(obs, [[0.001] * 4, [0.003] * 4, [0.004] * 4, [0.004] * 4])
        assert rew.tolist() == [1.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("mode", MODES)
def test_restart_conformance_with_envs_that_fail_now_and_then(mode: str) -> None:
    def make() -> RayVecEnv:
        fns = [maker(), maker("exit", at_step=-1, every=37), maker(), maker("raise", -1, every=41)]
        return node(*fns, restart=True, max_restarts=100, autoreset_mode=mode)

    assert check_restarts(make, steps=80) >= 2


def test_the_actor_steps_a_share_of_its_envs_itself_unless_a_timeout_is_set() -> None:
    """The actor is one of its node's processes: it steps a worker's share while its inner
    workers step theirs (64 CartPoles on 2 cores: 0.60x ``subproc``, 0.50x with every env in
    an inner worker). An env of its own that raises is the env's own error naming the actor;
    with ``timeout`` every env is in an inner worker, where the inner subproc can time it out."""
    from envfactory_ray.node import actor_share

    assert actor_share(64, 2, None) == (32, 32) and actor_share(63, 2, None) == (32, 31)
    assert actor_share(64, 2, 5.0) == (32, 0) and actor_share(4, 1, None) == (4, 0)
    with node(maker(), maker(), maker(), maker("raise", at_step=2)) as envs:
        envs.reset(seed=0)
        assert envs.call(worker_pid)[3] == envs.pids[1]  # env 3: actor 1's own
        envs.step(ACTIONS)
        with pytest.raises(ValueError, match="env broke at step 2") as info:
            envs.step(ACTIONS)
        err = info.value
        assert isinstance(err, envfactory.RemoteEnvError) and err.worker == 1
        assert err.env_indices == [2, 3] and err.exc_type == "builtins.ValueError"
    with node(*[maker()] * 4, timeout=30) as envs:
        envs.reset(seed=0)
        assert not set(envs.call(worker_pid)) & set(envs.pids)  # every env in an inner worker


def test_an_actor_of_one_cpu_steps_every_env_itself_without_an_inner_worker() -> None:
    """One CPU and no ``timeout``: the actor hosts its envs in a ``dummy`` of its own (no inner
    worker, one process hop less a step); an env raising is the env's own error naming the actor;
    with ``timeout`` an inner worker steps them, which the inner subproc can time out."""
    with node(maker(), maker(), maker(), maker("raise", at_step=2), num_cpus=1) as envs:
        envs.reset(seed=0)
        assert envs.call(worker_pid) == (envs.pids[0],) * 2 + (envs.pids[1],) * 2
        assert [h.children for h in envs.group.handles] == [[], []]
        envs.step(ACTIONS)
        with pytest.raises(ValueError, match="env broke at step 2") as info:
            envs.step(ACTIONS)
        assert isinstance(info.value, envfactory.RemoteEnvError) and info.value.worker == 1
    with node(*[maker()] * 4, num_cpus=1, timeout=30) as envs:
        envs.reset(seed=0)
        assert not set(envs.call(worker_pid)) & set(envs.pids)  # every env in an inner worker


def dies_once_built(flag: str) -> Any:
    """A `FaultyEnv` maker whose call ends its process (``os._exit``) once, when ``flag``
    exists (removed first, so the next build succeeds)."""

    def make() -> gym.Env:
        if os.path.exists(flag):
            os.remove(flag)
            os._exit(3)
        return FaultyEnv()

    return make


@pytest.mark.parametrize("max_restarts", [5, 1])
def test_a_rebuilt_actor_that_dies_before_it_starts_is_tried_again_within_the_budget(
    tmp_path: Path, max_restarts: int
) -> None:
    """Actor 1 killed, its replacement's process ends while it builds its env (as a replacement
    placed on a lost node that Ray still lists alive dies before it starts): it is tried again
    (a warning says so) and the env goes on, the try counted against ``max_restarts``; with a
    budget of 1 the try is past it and the step raises the replacement's death, naming the
    budget (was: ``AttributeError: 'Supervisor' object has no attribute 'count'``)."""
    import ray

    flag = tmp_path / "die"
    fns = [dies_once_built(str(flag))] * 2
    with build_ray(fns, in_series=1, restart=True, max_restarts=max_restarts) as envs:
        envs.reset(seed=0)
        flag.touch()
        pid = envs.pids[1]
        ray.kill(envs.actors[1], no_restart=True)
        assert_gone([pid])  # ray.kill returns before the actor dies: a step sent now may beat it
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if max_restarts == 1:
                with pytest.raises(envfactory.WorkerDiedError) as info:
                    envs.step(np.zeros(2, dtype=np.int64))
                assert "died before it started" in str(info.value), info.value
                assert "its restart budget is spent" in str(info.value), info.value
                return
            _, _, _, trunc, infos = envs.step(np.zeros(2, dtype=np.int64))
        tried = [str(w.message) for w in caught if "trying again" in str(w.message)]
        assert len(tried) == 1 and "died before it started" in tried[0], caught
        assert trunc.tolist() == [False, True] and infos["_restarted"].tolist() == [False, True]
        assert envs.restarts == [0, 2] and not flag.exists()
        envs.step(np.zeros(2, dtype=np.int64))
