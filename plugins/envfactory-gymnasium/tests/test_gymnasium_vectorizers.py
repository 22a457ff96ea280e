"""envfactory-gymnasium, pip-installed and found through its entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from envfactory_gymnasium.plugin import build_async, build_sync, to_autoreset_mode
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import envfactory
from envfactory.testing import VecEnvConformance, check_entry_point, check_same_as_dummy

VECTORIZERS = ("gymnasium-sync", "gymnasium-async")
MODES = ("next_step", "same_step", "disabled")


class TestGymnasiumVectorizers(VecEnvConformance):
    """envfactory's vectorizer conformance suite, both vectorizers, every autoreset mode."""

    steps = 120
    # envfactory's own promises (actions checked in the parent, mistakes leave the env
    # usable, ClosedEnvironmentError after close) are not gymnasium's: a worker error ends
    # an AsyncVectorEnv, and SyncVectorEnv checks no actions
    error_classes = False

    @pytest.fixture(params=[(v, m) for v in VECTORIZERS for m in MODES], ids="-".join)
    def make_vecenv(self, request: pytest.FixtureRequest):
        vectorizer, mode = request.param
        cfg = envfactory.compose(
            [f"vectorizer={vectorizer}", "num_envs=3", f"autoreset_mode={mode}"]
        )
        return lambda: envfactory.make_vec(cfg)


def test_registered_through_the_entry_point() -> None:
    check_entry_point(
        "envfactory-gymnasium", entry_point="envfactory_gymnasium", vectorizers=VECTORIZERS
    )


@pytest.mark.parametrize(
    ("overrides", "cls", "attrs"),
    [
        (["vectorizer=gymnasium-sync", "vectorizer.copy=false"], SyncVectorEnv, {"copy": False}),
        (
            [
                "vectorizer=gymnasium-async",
                "vectorizer.shared_memory=false",
                "vectorizer.copy=false",
                "vectorizer.context=forkserver",
                "vectorizer.max_concurrency=1",
                "autoreset_mode=same_step",
            ],
            AsyncVectorEnv,
            {"shared_memory": False, "copy": False, "max_concurrency": 1},
        ),
    ],
)
def test_config_options_reach_gymnasium(overrides, cls, attrs) -> None:
    with envfactory.make_vec(overrides=[*overrides, "num_envs=2"]) as envs:
        assert isinstance(envs, cls)
        for key, value in attrs.items():
            assert getattr(envs, key) == value, key
        if "context=forkserver" in " ".join(overrides):
            assert all(type(p).__name__ == "ForkServerProcess" for p in envs.processes)
        expected = AutoresetMode.SAME_STEP if "same_step" in str(overrides) else "NextStep"
        assert envs.metadata["autoreset_mode"] == AutoresetMode(expected)
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())


@pytest.mark.parametrize("vectorizer", VECTORIZERS)
def test_same_trajectories_as_dummy(vectorizer: str) -> None:
    """The same config and seed give the same rollout as envfactory's dummy vectorizer."""
    check_same_as_dummy(["num_envs=3", "autoreset_mode=same_step"], vectorizer, seed=5)


def _tag_seed_pid(env: gym.Env, times: int, *, sep: str) -> tuple[str, int, int]:
    return env.get_wrapper_attr("tag") * times + sep, env.unwrapped.np_random_seed, os.getpid()


@pytest.mark.parametrize("vectorizer", VECTORIZERS)
def test_call_runs_a_function_on_each_env_and_names_still_work(vectorizer: str) -> None:
    """Issue 17: ``call(fn)`` raised ``attribute name must be string`` (sync) or ended every
    worker (async). Now ``fn(env, *args, **kwargs)`` runs on each env where it lives, one
    result per env in env order; a name works as before; a bad name is one line."""
    with envfactory.make_vec(overrides=[f"vectorizer={vectorizer}", "num_envs=3"]) as envs:
        envs.reset(seed=4)
        envs.set_attr("tag", ["a", "b", "c"])
        got = envs.call(_tag_seed_pid, 2, sep="!")
        assert [g[:2] for g in got] == [("aa!", 4), ("bb!", 5), ("cc!", 6)]
        pids = [g[2] for g in got]
        where = [os.getpid()] * 3 if vectorizer == "gymnasium-sync" else envs.processes
        assert pids == [getattr(p, "pid", p) for p in where]
        assert envs.call(lambda env, k: env.unwrapped.gravity * k, k=2) == (19.6, 19.6, 19.6)
        assert envs.call("tag") == envs.get_attr("tag") == ("a", "b", "c")
        assert envs.call("get_wrapper_attr", "tag") == ("a", "b", "c")
        assert [s.id for s in envs.call("spec")] == ["CartPole-v1"] * 3
        with pytest.raises(TypeError) as info:
            envs.call(5)
        assert str(info.value) == (
            "call(name): name must be a method or attribute name (str) or a function run as "
            "fn(env, *args, **kwargs), got int 5"
        )
        if vectorizer == "gymnasium-async":
            envs.call_async(_tag_seed_pid, 1, sep="")
            assert [g[0] for g in envs.call_wait()] == ["a", "b", "c"]
        envs.step(envs.action_space.sample())  # still usable


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP),
        ("SameStep", AutoresetMode.SAME_STEP),
        ("disabled", AutoresetMode.DISABLED),
        ("next_step", AutoresetMode.NEXT_STEP),
    ],
)
def test_autoreset_mode_enum_or_string(value, mode) -> None:
    assert to_autoreset_mode(value) is mode
    with build_sync([lambda: gym.make("CartPole-v1")], autoreset_mode=value) as envs:
        assert envs.metadata["autoreset_mode"] is mode


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["vectorizer=gymnasium-async", "vectorizer.context=fok"],
            "vectorizer=gymnasium-async: invalid context='fok'; valid choices: ",
        ),
        (
            ["vectorizer=gymnasium-sync", "vectorizer.observation_mode=other"],
            "vectorizer=gymnasium-sync: invalid observation_mode='other'; valid choices: "
            "same, different",
        ),
        (
            ["vectorizer=gymnasium-async", "vectorizer.max_concurrency=0"],
            "vectorizer=gymnasium-async: invalid max_concurrency=0; expected an integer >= 1",
        ),
    ],
)
def test_bad_options_are_one_line(overrides, message) -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.make_vec(overrides=overrides)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_bad_autoreset_mode() -> None:
    with pytest.raises(envfactory.ConfigError, match="autoreset_mode='sometimes' is not valid"):
        build_async([], autoreset_mode="sometimes")


@pytest.mark.slow
def test_sweep_compares_with_builtin_vectorizers(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("envfactory")
    cmd = [
        str(exe) if exe.exists() else str(shutil.which("envfactory")),
        "-m",
        "vectorizer=dummy,subproc,gymnasium-async",
        "run.total_steps=64",
        f"hydra.sweep.dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    jobs = json.loads((tmp_path / "sweep_summary.json").read_text())["jobs"]
    assert [(j["vectorizer"], j["status"]) for j in jobs] == [
        ("dummy", "ok"),
        ("subproc", "ok"),
        ("gymnasium-async", "ok"),
    ]
    assert all(np.isfinite(j["steps_per_second"]) for j in jobs)
