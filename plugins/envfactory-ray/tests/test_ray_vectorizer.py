"""envfactory-ray, pip-installed and found through its entry point, on a real local Ray
(one per module: the ``ray_session`` fixture of conftest.py, 2 CPUs, no dashboard)."""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from envfactory_ray.plugin import RayConfig, build_ray
from envfactory_ray.pool import RayPool
from envfactory_ray.vecenv import RayVecEnv

import envfactory
from envfactory.testing import (
    SpacesConformance,
    VecEnvConformance,
    check_entry_point,
    check_pool_same_as_dummy,
    check_restarts,
    check_same_as_dummy,
)

MODES = ("next_step", "same_step", "disabled")
# a local Ray takes 10-20 s to start here: the whole module is left out of the quick loop
# (-m "not slow"); CI runs it
pytestmark = pytest.mark.slow
FAULT_SECONDS = 30.0  # bound on noticing a fault (the machine is small and shared)


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_session: Any) -> Any:
    import ray.cloudpickle

    # the envs below travel to the actors by value (this module is not importable there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray_session


class FaultyEnv(gym.Env):
    """A tiny deterministic env (obs = step count / 1000) that misbehaves on its
    ``at_step``-th step (or every ``every``-th): ``raise`` (ValueError), ``hang``, ``exit``
    (``os._exit(3)``); with ``once_file`` only while that file does not exist (a rebuilt
    env behaves)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        fault: str = "none",
        at_step: int = 3,
        every: int = 0,
        once_file: str | None = None,
        episode_len: int = 50,
    ) -> None:
        self.fault, self.at_step, self.every, self.once_file = fault, at_step, every, once_file
        self.episode_len = episode_len
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.calls = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> Any:
        self.calls += 1
        due = self.calls == self.at_step or (self.every and self.calls % self.every == 0)
        if due and self.fault != "none" and self._armed():
            if self.fault == "raise":
                raise ValueError(f"env broke at step {self.calls}")
            if self.fault == "hang":
                time.sleep(3600)
            if self.fault == "exit":
                os._exit(3)
        if self.fault == "slow":  # every step takes 1 s
            time.sleep(1.0)
        self.t += 1
        obs = np.full(4, self.t / 1000, np.float32)
        return obs, 1.0, self.t >= self.episode_len, False, {}

    def _armed(self) -> bool:
        if self.once_file is None:
            return True
        if os.path.exists(self.once_file):
            return False
        Path(self.once_file).touch()
        return True


def faulty(*fns: Any, **options: Any) -> RayVecEnv:
    options.setdefault("in_series", 2)
    return build_ray(
        list(fns), autoreset_mode=options.pop("autoreset_mode", "next_step"), **options
    )


def maker(*args: Any, **kwargs: Any) -> Any:
    return lambda: FaultyEnv(*args, **kwargs)


ACTIONS = np.zeros(4, dtype=np.int64)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_gone(
    pids: list[int], seconds: float = 15.0, what: str = "actor processes outlived close()"
) -> None:
    end = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], what


# -- the conformance kits ------------------------------------------------------------------
class TestRayConformance(VecEnvConformance):
    """envfactory's vectorizer conformance suite, every autoreset mode: ``next_step`` on 2
    actors holding 2 + 1 envs, the others on one actor (each actor is a process that
    imports gymnasium: about a second to start on a busy 2-core machine)."""

    steps = 120

    @pytest.fixture(params=[("next_step", 2), ("same_step", 3), ("disabled", 3)], ids=str)
    def make_vecenv(self, request: pytest.FixtureRequest) -> Any:
        mode, in_series = request.param
        cfg = envfactory.compose(
            [
                "vectorizer=ray",
                "num_envs=3",
                f"vectorizer.in_series={in_series}",
                f"autoreset_mode={mode}",
            ]
        )
        return lambda: envfactory.make_vec(cfg)


@pytest.mark.slow  # every gymnasium space, three modes: 20 s each
class TestRaySpaces(SpacesConformance):
    """Observations of every space gymnasium ships (arrays through the object store as
    one batch per actor; Text, Graph, Sequence, OneOf as one list per actor)."""

    copies = (True,)
    num_envs = 2

    def build_vecenv(self, env_fns: Any, **options: Any) -> Any:
        return build_ray(env_fns, in_series=2, **options)

    @pytest.mark.slow
    def test_spaces_next_step(self) -> None:
        super().test_spaces_next_step()

    @pytest.mark.slow
    def test_spaces_disabled(self) -> None:
        super().test_spaces_disabled()


def test_registered_through_the_entry_point() -> None:
    check_entry_point("envfactory-ray", entry_point="envfactory_ray", vectorizers=["ray"])


@pytest.mark.parametrize(
    "overrides",
    [
        ["num_envs=5", "vectorizer.in_series=2", "autoreset_mode=same_step"],
        ["num_envs=4", "autoreset_mode=next_step", "seeding=spawn"],
        ["env=mountaincar", "num_envs=3", "vectorizer.in_series=1", "autoreset_mode=disabled"],
        ["env=atari", "num_envs=2", "env.max_episode_steps=40", "vectorizer.copy=false"],
    ],
    ids=["cartpole-5", "spawn", "mountaincar", "pong"],
)
def test_same_trajectories_as_dummy(overrides: list[str]) -> None:
    """The same config and seed give bit-identical rollouts under ``dummy`` and ``ray``."""
    check_same_as_dummy(overrides, "ray", steps=60, seed=7)


def test_one_ray_call_per_actor_per_step_and_one_batch_per_actor() -> None:
    import ray

    cfg = ["vectorizer=ray", "num_envs=5", "vectorizer.in_series=3"]
    with envfactory.make_vec(overrides=cfg) as envs:
        assert isinstance(envs, RayVecEnv) and len(envs.actors) == 2
        envs.reset(seed=0)
        envs.action_space.seed(0)  # (no episode ends in these 11 steps: no infos below)
        n = 0
        original = ray.actor.ActorMethod._remote
        sent: list[str] = []

        def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(self._method_name)
            return original(self, *args, **kwargs)

        ray.actor.ActorMethod._remote = counting  # type: ignore[method-assign]
        try:
            for _ in range(10):
                envs.step(envs.action_space.sample())
                n += 1
        finally:
            ray.actor.ActorMethod._remote = original  # type: ignore[method-assign]
        assert sent == ["step"] * (2 * n)
        # what one actor sends back: one float32 array for its 3 envs, not 3 pickled obs
        status, (obs, rew, *_, calls) = ray.get(envs.actors[0].step.remote(np.zeros(3, np.int64)))
        assert status == "ok" and isinstance(obs, np.ndarray) and obs.shape == (3, 4)
        assert rew.shape == (3,) and calls == []


def test_call_get_set_attr_env_method_render() -> None:
    cfg = [
        "vectorizer=ray",
        "num_envs=3",
        "vectorizer.in_series=2",
        "env.render_mode=rgb_array",
    ]
    with envfactory.make_vec(overrides=cfg) as envs:
        envs.reset(seed=5)
        assert envs.np_random_seed == (5, 6, 7)
        assert envs.env_method("get_wrapper_attr", "np_random_seed", indices=[0, 2]) == [5, 7]
        assert envs.get_attr("gravity", indices=1) == (9.8,)
        envs.set_attr("gravity", [1.0, 2.0], indices=[2, 0])
        assert envs.get_attr("gravity") == (2.0, 9.8, 1.0)
        envs.set_attr("gravity", 3.5)
        assert envs.call("get_wrapper_attr", "gravity") == (3.5, 3.5, 3.5)
        frames = envs.render()
        assert len(frames) == 3 and all(f.shape == (400, 600, 3) for f in frames)
        assert envfactory.tile_images(frames).shape == (800, 1200, 3)
        with pytest.raises(AttributeError):  # an env's error, raised as its own type
            envs.get_attr("no_such_attribute")
        envs.step(envs.action_space.sample())  # and the env stays usable


def test_async_halves() -> None:
    with envfactory.make_vec(overrides=["vectorizer=ray", "num_envs=2"]) as envs:
        envs.reset_async(seed=1)
        obs, _ = envs.reset_wait(timeout=60)
        envs.step_async(np.array([0, 1]))
        with pytest.raises(gym.error.AlreadyPendingCallError):
            envs.step_async(np.array([0, 1]))
        obs2, rew, *_ = envs.step_wait(timeout=60)
        assert obs.shape == obs2.shape == (2, 4) and rew.tolist() == [1.0, 1.0]


def test_close_kills_the_actors_and_leaves_the_users_ray_running() -> None:
    import ray

    envs = envfactory.make_vec(overrides=["vectorizer=ray", "num_envs=3", "vectorizer.in_series=2"])
    envs.reset(seed=0)
    pids = envs.pids
    assert len(pids) == 2 and all(alive(p) for p in pids)
    envs.close()
    assert_gone(pids)
    assert ray.is_initialized()  # this module's own ray.init(): envfactory leaves it alone
    with pytest.raises(gym.error.ClosedEnvironmentError):
        envs.step(np.zeros(3, np.int64))
    envs.close()


# -- faults: the error classes of subproc, naming actor, node, env indices ------------------
def test_env_raising_gives_remote_env_error_of_its_own_type() -> None:
    with faulty(maker(), maker(), maker("raise", at_step=2), maker()) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        with pytest.raises(ValueError, match="env broke at step 2") as info:
            envs.step(ACTIONS)
        err = info.value
        assert isinstance(err, envfactory.RemoteEnvError)
        assert err.worker == 1 and err.env_indices == [2, 3] and err.pid == envs.pids[1]
        assert err.exc_type == "builtins.ValueError" and err.call == "step"
        assert isinstance(err.__cause__, ValueError)
        assert "raise ValueError" in err.remote_traceback
        text = str(err)
        assert f"worker 1 (pid {err.pid}, envs [2, 3]" in text
        assert f"Ray actor {err.actor_id[:12]} on node {err.node_ip}" in text
        assert err.node_id[:12] in text
        with pytest.raises(envfactory.VecEnvBrokenError, match="unusable since"):
            envs.step(ACTIONS)


def test_actor_killed_gives_worker_died_error() -> None:
    with faulty(maker(), maker(), maker(), maker()) as envs:
        envs.reset(seed=0)
        pid = envs.pids[0]
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(envfactory.WorkerDiedError) as info:
            envs.step(ACTIONS)
        assert time.monotonic() - t0 < FAULT_SECONDS
        err = info.value
        assert err.worker == 0 and err.env_indices == [0, 1] and err.pid == pid
        assert "died" in str(err) and "Ray actor" in str(err) and err.node_id


class MissingOnTheNode:
    """An env constructor that unpickles only where the package ``no_such_simulator`` is
    installed (as one pickled by reference to a package the node lacks)."""

    def __call__(self) -> gym.Env:
        return FaultyEnv()

    def __reduce__(self) -> Any:
        return importlib.import_module, ("no_such_simulator",)


def test_actor_dying_before_it_starts_says_ray_s_reason() -> None:
    t0 = time.monotonic()
    with pytest.raises(envfactory.WorkerDiedError) as info:
        faulty(maker(), MissingOnTheNode())
    assert time.monotonic() - t0 < FAULT_SECONDS
    text = str(info.value)
    assert "[Ray actor " in text and "not started] died before it started (an error in its" in text
    assert text.endswith(
        "creation task: ModuleNotFoundError: No module named 'no_such_simulator') during start"
    ), text


def test_actor_exiting_mid_step_gives_worker_died_error() -> None:
    with faulty(maker(), maker("exit", at_step=2), maker(), maker()) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        with pytest.raises(envfactory.WorkerDiedError, match=r"worker 0 .*envs \[0, 1\]"):
            envs.step(ACTIONS)


def test_hung_env_times_out_and_breaks_the_vec_env() -> None:
    with faulty(maker(), maker(), maker("hang", at_step=2), maker(), timeout=2.0) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        pid = envs.pids[1]
        t0 = time.monotonic()
        with pytest.raises(multiprocessing.TimeoutError) as info:
            envs.step(ACTIONS)
        assert 1.9 < time.monotonic() - t0 < FAULT_SECONDS
        assert isinstance(info.value, envfactory.WorkerTimeoutError)
        assert "did not answer within 2 s and was killed" in str(info.value)
        assert_gone([pid])  # killed, not left hanging
        with pytest.raises(envfactory.VecEnvBrokenError):
            envs.step(ACTIONS)


def test_restart_rebuilds_a_killed_actor() -> None:
    with faulty(maker(), maker(), maker(), maker(), restart=True) as envs:
        envs.reset(seed=0)
        for _ in range(5):
            envs.step(ACTIONS)
        old = envs.pids[0]
        os.kill(old, signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"restarting after: worker 0 .*died"):
            obs, _, _, trunc, infos = envs.step(ACTIONS)
        assert trunc.tolist() == [True, True, False, False]
        assert infos["_restarted"].tolist() == [True, True, False, False]
        np.testing.assert_allclose(obs[:2], 0.005)  # the lost episodes end where last seen
        np.testing.assert_allclose(obs[2:], 0.006)  # the others went on
        assert envs.pids[0] != old and alive(envs.pids[0]) and envs.restarts == [1, 0]
        obs, rew, *_ = envs.step(ACTIONS)  # the autoreset step of the truncated envs
        np.testing.assert_allclose(obs[:2], 0.0)
        assert rew.tolist() == [0.0, 0.0, 1.0, 1.0]


def test_restart_rebuilds_a_hung_actor(tmp_path: Path) -> None:
    once = str(tmp_path / "hung-once")
    fns = [maker(), maker(), maker("hang", at_step=3, once_file=once), maker()]
    with faulty(*fns, restart=True, timeout=2.0) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        envs.step(ACTIONS)
        with pytest.warns(RuntimeWarning, match="did not answer within 2 s"):
            _, _, _, trunc, _ = envs.step(ACTIONS)
        assert trunc.tolist() == [False, False, True, True] and envs.restarts == [0, 1]


def test_restart_cap_raises_the_fault() -> None:
    with faulty(maker(), maker(), maker(), maker(), restart=True, max_restarts=1) as envs:
        envs.reset(seed=0)
        os.kill(envs.pids[0], signal.SIGKILL)
        with pytest.warns(RuntimeWarning):
            envs.step(ACTIONS)
        os.kill(envs.pids[0], signal.SIGKILL)
        with pytest.raises(envfactory.WorkerDiedError, match="not restarted: actor 0 was"):
            envs.step(ACTIONS)


@pytest.mark.parametrize(
    "mode",
    [pytest.param("next_step", marks=pytest.mark.slow), "same_step",
     pytest.param("disabled", marks=pytest.mark.slow)],
)  # fmt: skip
@pytest.mark.slow
def test_restart_conformance_with_an_env_that_fails_now_and_then(mode: str) -> None:
    def make() -> RayVecEnv:
        fns = [maker(), maker("exit", at_step=-1, every=37), maker(), maker("raise", -1, every=41)]
        return faulty(*fns, restart=True, max_restarts=100, autoreset_mode=mode)

    assert check_restarts(make, steps=80) >= 2


# -- Ctrl-C -------------------------------------------------------------------------------
def ctrl_c_during(call: Any, seconds: float = 0.3) -> None:
    """``call()`` with a real SIGINT to this process ``seconds`` into it, which must
    interrupt it (a KeyboardInterrupt)."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()


def test_step_wait_after_ctrl_c_returns_the_interrupted_step() -> None:
    """Found by a user trial: Ctrl-C in a step left a ray env broken for good
    (VecEnvBrokenError) and step_wait() said nothing was pending. An actor handle is
    resumable now: the step stays pending, step_wait() returns it whole, the env goes on
    (faults.md's promise for worker vectorizers)."""
    with faulty(maker("slow"), maker("slow"), maker("slow"), maker("slow")) as envs:
        envs.reset(seed=0)
        ctrl_c_during(lambda: envs.step(ACTIONS))
        with pytest.raises(envfactory.AlreadyPendingError, match="step_wait"):
            envs.reset()
        obs, rew, _, trunc, _ = envs.step_wait()
        np.testing.assert_allclose(obs, 0.001)
        assert rew.tolist() == [1.0] * 4 and not trunc.any()
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs, 0.002)
        envs.step_async(ACTIONS)  # interrupted in step_wait: asked again, the same answer
        ctrl_c_during(envs.step_wait)
        obs, *_ = envs.step_wait()
        np.testing.assert_allclose(obs, 0.003)
        assert envs.restarts == [0, 0]


# -- the async pool over actors (vectorizer.batch_size) ----------------------------------
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_pool_over_actors_matches_dummy(mode: str) -> None:
    """Issue 27: envpool's send/recv over Ray actors (envfactory's pool front over the Ray
    group): every env's trajectory, whatever order the actors answer in, is dummy's."""
    check_pool_same_as_dummy(
        [
            "env=gym",
            "num_envs=5",
            f"autoreset_mode={mode}",
            "vectorizer=ray",
            "vectorizer.batch_size=2",
            "vectorizer.in_series=2",
        ],
        steps=40,
    )


def test_pool_over_actors_rebuilds_a_killed_actor_and_reports_its_envs_truncated() -> None:
    with faulty(maker(), maker(), maker(), maker(), restart=True, batch_size=2) as envs:
        assert isinstance(envs, RayPool) and envs.batch_size == 2
        envs.async_reset(seed=0)
        for _ in range(2):
            _, _, _, _, infos = envs.recv()
            envs.send(np.zeros(2, dtype=np.int64), infos["env_id"])
        for _ in range(2):  # every env returned: none in flight
            envs.recv()
        old = envs.pids[0]
        os.kill(old, signal.SIGKILL)
        envs.send(ACTIONS, np.arange(4))
        seen: dict[int, tuple[bool, bool]] = {}
        with pytest.warns(RuntimeWarning, match=r"restarting after: worker 0 .*died"):
            for _ in range(2):
                _, _, _, trunc, infos = envs.recv()
                restarted = infos.get("_restarted", np.zeros(2, bool))
                for row, i in enumerate(infos["env_id"].tolist()):
                    seen[i] = (bool(trunc[row]), bool(restarted[row]))
        assert seen == {0: (True, True), 1: (True, True), 2: (False, False), 3: (False, False)}
        assert envs.pids[0] != old and envs.restarts == [1, 0]


def test_pool_options_are_checked_at_compose_time() -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.compose(["vectorizer=ray", "num_envs=4", "vectorizer.batch_size=5"])
    assert str(info.value).startswith(
        "vectorizer.batch_size=5: expected an integer in [1, num_envs=4] or null"
    )
    with pytest.raises(envfactory.ConfigError) as info:  # (a pool of whole node actors)
        envfactory.compose(
            ["vectorizer=ray", "num_envs=6", "vectorizer.batch_size=2",
             "vectorizer.in_actor=subproc", "vectorizer.in_series=3"]
        )  # fmt: skip
    assert str(info.value).startswith(
        "vectorizer.batch_size=2: expected a multiple of vectorizer.in_series=3 with "
        "vectorizer.in_actor, as num_envs=6 must be"
    )


# -- config ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("vectorizer.num_cpus=0", "vectorizer.num_cpus=0.0: expected a number of CPUs per actor"),
        ("vectorizer.timeout=-1", "vectorizer.timeout=-1.0: expected a number of seconds > 0"),
        ("vectorizer.in_series=0", "vectorizer.in_series=0: expected an integer >= 1 or null"),
        ("vectorizer.address=''", "vectorizer.address='': expected null (start or join a local"),
        ("vectorizer.max_restarts=-1", "vectorizer.max_restarts=-1: expected an integer >= 0"),
        ("+vectorizer.num_gpu=1", "unknown key vectorizer.num_gpu"),
    ],
)
def test_bad_options_fail_at_compose_time_in_one_line(override: str, message: str) -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.compose(["vectorizer=ray", override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_timeout_inf_means_none() -> None:
    assert RayConfig(timeout=float("inf")).timeout is None


def test_more_actors_than_the_local_ray_has_cpus_is_one_clear_error() -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.make_vec(
            overrides=[
                "vectorizer=ray",
                "num_envs=3",
                "vectorizer.in_series=1",
                "vectorizer.num_cpus=1",
            ]
        )
    assert str(info.value).startswith(
        "vectorizer=ray: 3 actors x num_cpus=1 need 3 CPUs, but the local Ray has 2;"
    )


def test_placement_reaches_the_actors_and_a_missing_local_resource_is_one_clear_error() -> None:
    """Issue 27: the placement options are Ray's own (here runtime_env's env_vars, seen by the
    env in its actor, and SPREAD); a resource the local Ray lacks is one line at build time,
    not an actor waiting for ``start_timeout``."""
    with envfactory.make_vec(
        overrides=[
            "vectorizer=ray",
            "num_envs=2",
            "vectorizer.in_series=1",
            "vectorizer.scheduling_strategy=SPREAD",
            "vectorizer.runtime_env={env_vars: {ENVFACTORY_PLACED: 'yes'}}",
        ]
    ) as envs:
        assert envs.call(lambda env: os.environ.get("ENVFACTORY_PLACED")) == ("yes", "yes")
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.make_vec(overrides=["vectorizer=ray", "vectorizer.resources={sim_license: 1}"])
    assert str(info.value).startswith(
        "vectorizer.resources: the local Ray has no sim_license for an actor (it has CPU=2"
    )
    assert "\n" not in str(info.value)


def test_malformed_address_is_one_clear_error() -> None:
    """In a fresh process (this one has its own Ray, which make_vec would use as is)."""
    code = (
        "import envfactory\n"
        "try:\n"
        "    envfactory.make_vec(overrides=['vectorizer=ray', 'num_envs=2',"
        " 'vectorizer.address=not-an-address'])\n"
        "except envfactory.ConfigError as e:\n"
        "    print('ERR', e)\n"
    )
    env = {**os.environ, "RAY_ADDRESS": ""}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("ERR")] or [proc.stderr]
    assert line == (
        "ERR vectorizer=ray: cannot start or join the Ray cluster at 'not-an-address': "
        "ValueError: Invalid address format: not-an-address (set vectorizer.address=null for "
        "a local Ray, or the address of a running cluster such as 'ray://head:10001' or "
        "'head:6379')"
    )


# -- envfactory's own Ray: started by make_vec, shut down by close ---------------------------
SCRIPT = """
import json, sys, psutil, ray
from envfactory.cli.main import main
sys.argv = ["envfactory", "vectorizer=ray", "num_envs=8", "run.total_steps=800",
            "run.progress=false", "hydra.run.dir=" + sys.argv[1]]
before = {p.pid for p in psutil.Process().children(recursive=True)}
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
left = [p.pid for p in psutil.wait_procs(new, 30)[1]]
print(json.dumps({"code": code, "initialized": ray.is_initialized(), "left": left}))
"""


@pytest.mark.slow  # starts its own Ray (about 10-20 s)
def test_cli_main_job_starts_ray_and_close_shuts_it_down(tmp_path: Path) -> None:
    """The acceptance line, ``envfactory vectorizer=ray num_envs=8``, run in a fresh
    process with no Ray: envfactory starts a local Ray, runs the main job, and the env's
    close() shuts that Ray down: afterwards, still in that process, Ray is not initialized
    and no process it started is left (this module's own Ray is another instance)."""
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # (not this module's Ray's)
    env = {**os.environ, "RAY_ADDRESS": "", "RAY_TMPDIR": ray_tmp}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"code": 0, "initialized": False, "left": []}, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["vectorizer"] == "ray" and summary["num_envs"] == 8, summary


@pytest.mark.parametrize("where", ["in the read", "after the read"])
def test_pool_over_actors_a_read_cut_by_a_ctrl_c_is_asked_again(where: str) -> None:
    """Issue 26.4 over actors: a Ctrl-C that cuts reading an actor's answer (in Ray's
    ``get``, or after it, before the pool recorded it) leaves the pool usable. The next recv
    asks that call again, also after the actor was sent another call meanwhile (which
    replaces its handle's ref): each env gets its own step, once."""
    with faulty(*[maker()] * 4, batch_size=1) as envs:
        envs.async_reset(seed=0)
        for _ in range(4):
            envs.recv()
        envs.send(np.ones(1, np.int64), [0])
        envs.recv(env_ids=[0], timeout=30)  # env 0 is a step ahead of env 1
        site = envs.pool.backend
        group, real_wait, real_answer = site.group, site.group.wait, site.answer

        def wait_then_interrupt(*args: Any) -> Any:
            group.wait = real_wait
            real_wait(*args)
            raise KeyboardInterrupt

        def answer_then_interrupt(*args: Any) -> Any:
            site.answer = real_answer
            real_answer(*args)
            raise KeyboardInterrupt

        if where == "in the read":
            group.wait = wait_then_interrupt
        else:
            site.answer = answer_then_interrupt
        envs.send(np.ones(1, np.int64), [0])
        with pytest.raises(KeyboardInterrupt):
            envs.recv(env_ids=[0], timeout=30)
        envs.send(np.zeros(1, np.int64), [1])  # the same actor: its handle's ref is replaced
        for i, t in ((0, 2), (1, 1)):
            # env 0: a poll finishes the cut read (its answer is there: no wait)
            obs, *_, infos = envs.recv(env_ids=[i], timeout=0 if i == 0 else 30)
            assert infos["env_id"].tolist() == [i]
            np.testing.assert_allclose(obs[0], t / 1000)  # its own step, once
        assert envs.restarts == [0, 0]
