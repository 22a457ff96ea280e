"""What a user reads from the ``ray`` vectorizer when something goes wrong (messages a user
trial found hard to read), on a real local Ray (the ``ray_session`` fixture of conftest.py, 2
CPUs)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from envfactory_ray.plugin import build_ray
from envfactory_ray.vecenv import RayVecEnv

import envfactory

pytestmark = pytest.mark.slow  # a local Ray takes 10-20 s to start here
ACTIONS = np.zeros(2, dtype=np.int64)


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_session: Any) -> Any:
    import ray.cloudpickle

    # the envs below travel to the actors by value (this module is not importable there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray_session


class BreaksAtStep2(gym.Env):
    """obs = step count / 1000; its second step raises ``ValueError`` when ``breaks``."""

    def __init__(self, breaks: bool = False) -> None:
        self.breaks, self.t = breaks, 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        if self.breaks and self.t == 2:
            raise ValueError("env broke at step 2")
        return np.full(4, self.t / 1000, np.float32), 1.0, False, False, {}


def one_actor(*breaks: bool, **options: Any) -> RayVecEnv:
    """One actor holding an env per entry of ``breaks`` (one actor: one process to start)."""
    fns = [lambda b=b: BreaksAtStep2(b) for b in breaks]
    return build_ray(fns, in_series=len(fns), num_cpus=1, **options)


def test_an_actor_killed_by_sigkill_says_so_in_one_short_line() -> None:
    """Before: ``died (The actor is dead because its worker process has died. Worker exit type:
    SYSTEM_ERROR Worker exit detail: ... Some common causes include: (1) the process was killed
    by the OOM killer ... uninformed kernel OOM killing.)``, Ray's guesses at length."""
    with one_actor(False, False) as envs:
        envs.reset(seed=0)
        pid = envs.pids[0]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(envfactory.WorkerDiedError) as info:
            envs.step(ACTIONS)
    err = info.value
    text = str(err)
    assert err.worker == 0 and err.env_indices == [0, 1] and err.pid == pid
    assert text.startswith(f"worker 0 (pid {pid}, envs [0, 1], env ")
    assert f"[Ray actor {err.actor_id[:12]} on node {err.node_ip} ({err.node_id[:12]})]" in text
    assert text.endswith(
        "] died (killed (SIGKILL: by a user or the kernel's OOM killer) or crashed; Ray says: "
        "Worker unexpectedly exits with a connection error code 2. End of file.) during step"
    ), text
    assert "\n" not in text and "Some common causes" not in text and len(text) < 400


def test_the_restart_warning_is_one_line_and_keeps_the_traceback_on_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: the warning carried the whole remote traceback (``--- remote traceback ---``
    and every frame of the actor's stack). It is now the warning's ``failure`` and a DEBUG
    record of the ``envfactory`` logger."""
    caplog.set_level(logging.DEBUG, logger="envfactory")
    with one_actor(False, True, restart=True) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        pid = envs.pids[0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, _, _, trunc, _ = envs.step(ACTIONS)
        assert trunc.tolist() == [True, True] and envs.restarts == [1]
    [warning] = [w for w in caught if "restarting after" in str(w.message)]
    text = str(warning.message)
    assert text.startswith(f"restarting after: worker 0 (pid {pid}, envs [0, 1], env "), text
    assert text.endswith("raised builtins.ValueError during step: env broke at step 2"), text
    assert "\n" not in text and "traceback" not in text
    assert warning.filename == __file__  # (still the user's line)
    failure = warning.message.failure  # type: ignore[union-attr]
    assert isinstance(failure, ValueError) and isinstance(failure, envfactory.RemoteEnvError)
    assert 'raise ValueError("env broke at step 2")' in failure.remote_traceback
    [debug] = [r for r in caplog.records if r.getMessage().startswith("restarting after")]
    assert debug.levelno == logging.DEBUG and debug.getMessage() == f"restarting after: {failure}"
    assert 'raise ValueError("env broke at step 2")' in debug.getMessage()


def test_the_in_series_hint_is_given_only_where_it_can_help() -> None:
    """One actor that needs more CPUs than the local Ray has: fewer actors cannot help, so the
    error says to lower ``num_cpus`` (before: ``1 actors ... raise vectorizer.in_series``)."""
    with pytest.raises(envfactory.ConfigError) as one:
        build_ray([BreaksAtStep2] * 2, in_series=2, num_cpus=4)
    assert str(one.value) == (
        "vectorizer=ray: 1 actor x num_cpus=4 needs 4 CPUs, but the local Ray has 2; lower "
        "vectorizer.num_cpus to 2 or less (fractions such as 0.5 are allowed): one actor cannot "
        "take more CPUs than the local Ray has; or join a Ray cluster with a node of 4 CPUs "
        "(vectorizer.address)"
    )
    with pytest.raises(envfactory.ConfigError) as several:  # fewer actors would fit
        build_ray([BreaksAtStep2] * 4, in_series=1, num_cpus=1)
    assert str(several.value) == (
        "vectorizer=ray: 4 actors x num_cpus=1 need 4 CPUs, but the local Ray has 2; raise "
        "vectorizer.in_series (envs per actor, now 1), lower vectorizer.num_cpus (fractions such "
        "as 0.5 are allowed), or set vectorizer.in_series=null"
    )
    with pytest.raises(envfactory.ConfigError) as too_big:  # not even one actor fits
        build_ray([BreaksAtStep2] * 4, in_series=2, num_cpus=3)
    assert str(too_big.value) == (
        "vectorizer=ray: 2 actors x num_cpus=3 need 6 CPUs, but the local Ray has 2; lower "
        "vectorizer.num_cpus to 2 or less (fractions such as 0.5 are allowed) and raise "
        "vectorizer.in_series (envs per actor, now 2) or set it to null; or join a Ray cluster "
        "with a node of 3 CPUs (vectorizer.address)"
    )
