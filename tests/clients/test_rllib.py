"""RLlib and TorchRL on envfactory envs (docs/guides/rllib.md): the page's scripts run as written,
and every RLlib spelling of its table is trained (PPO, 2 iterations, a local Ray of its own).

Where they run: the test extra installs RLlib's dependencies (``envfactory[rllib]``, without ray's
``gymnasium==1.2.2`` pin) and the sb3/tianshou plugins of the test set-up install torch, so CI
runs the RLlib tests; torchrl is in no install of the project, so its test runs only where it
is installed (``pip install torchrl``: 4 s next to torch). Each is skipped, with what is missing,
elsewhere. Ray runs in a subprocess with ``RAY_TMPDIR`` of its own, so it never joins a Ray that
something else started on the machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mdblocks import ROOT, page_blocks

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "guides" / "rllib.md"


def _missing(*modules: str) -> str | None:
    """None if ``modules`` import in a fresh interpreter, else the import error's last line."""
    code = "\n".join(f"import {m}" for m in modules)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120
    )
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or ["?"])[-1]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def rllib() -> None:
    missing = _missing("ray.rllib.algorithms.ppo", "torch")
    if missing:
        pytest.skip(
            f"RLlib cannot run here ({missing}): pip install -e '.[rllib]' torch==2.13.0 "
            "(the test set-up of the README has both)"
        )


@pytest.fixture
def ray_tmpdir() -> Iterator[str]:
    """A short temp dir for Ray's sessions and sockets (unix socket paths are limited)."""
    path = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _script(name: str) -> str:
    [block] = [b for b in page_blocks(PAGE) if b.path == name]
    return block.text


def _run(script: Path, ray_tmpdir: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        capture_output=True,
        text=True,
        env=_env(RAY_TMPDIR=ray_tmpdir),
        timeout=280,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script.name} exited {proc.returncode}:\n{out[-5000:]}"
    return proc.stdout


def test_rllib_ppo_recipe(rllib: None, ray_tmpdir: str, tmp_path: Path) -> None:
    """The page's script, as written: PPO on envfactory/CartPole-v1, subproc in the env runner."""
    script = tmp_path / "rllib_ppo.py"
    script.write_text(_script("rllib_ppo.py"))
    lines = [ln for ln in _run(script, ray_tmpdir).splitlines() if ln.startswith("iteration")]
    assert [ln.split(":")[0] for ln in lines] == ["iteration 1", "iteration 2"]
    steps = [int(ln.split(": ")[1].split()[0]) for ln in lines]
    assert 0 < steps[0] < steps[1]


MODES = """
import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.tune.registry import register_env

import envfactory


def train(env, env_config, mode, runners=1):
    config = (
        PPOConfig()
        .environment(env, env_config=env_config)
        .env_runners(
            num_env_runners=runners, num_envs_per_env_runner=2, gym_env_vectorize_mode=mode
        )
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
    )
    algo = config.build_algo()
    try:
        steps = [algo.train()["env_runners"]["num_env_steps_sampled_lifetime"] for _ in range(2)]
        kinds = algo.env_runner_group.foreach_env_runner(
            lambda r: type(r.env.unwrapped).__name__, local_env_runner=False
        )
        print("RESULT", env, mode, ",".join(kinds), steps[0] < steps[1])
    finally:
        algo.stop()


if __name__ == "__main__":
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    register_env("envfactory", envfactory.make_vec)
    register_env("envfactory-env", envfactory.make_env)
    train("envfactory", {"env": "gym", "vectorizer": "subproc"}, "vector_entry_point")
    train("envfactory.gym_ids:envfactory/CartPole-v1", {}, "sync")
    train("envfactory-env", {"env": "mountaincar"}, "sync")
    try:
        train("envfactory", {"env": "gym"}, "sync", runners=0)
    except envfactory.ConfigError as exc:
        print("REFUSED", exc)
    ray.shutdown()
"""


def test_rllib_spellings_and_modes(rllib: None, ray_tmpdir: str, tmp_path: Path) -> None:
    """The page's table: register_env(make_vec) with vector_entry_point is envfactory's
    VectorEnv; a gym id and register_env(make_env) under RLlib's default mode are gymnasium's
    SyncVectorEnv of envfactory envs; register_env(make_vec) under it is one clear error."""
    script = tmp_path / "rllib_modes.py"
    script.write_text(MODES)
    out = _run(script, ray_tmpdir).splitlines()
    results = [ln.split()[1:] for ln in out if ln.startswith("RESULT")]
    assert results == [
        ["envfactory", "vector_entry_point", "SubprocVecEnv", "True"],
        ["envfactory.gym_ids:envfactory/CartPole-v1", "sync", "SyncVectorEnv", "True"],
        ["envfactory-env", "sync", "SyncVectorEnv", "True"],
    ]
    [refused] = [ln for ln in out if ln.startswith("REFUSED")]
    assert "gym_env_vectorize_mode='vector_entry_point'" in refused
    assert "envfactory.make_env" in refused


def test_torchrl_recipe(tmp_path: Path) -> None:
    """TorchRL's GymWrapper over make_vec's env, as the page says: the script runs as written,
    and under ``disabled`` and ``same_step`` every terminated step's next observation is the
    real terminal one, every other step's the next step's observation; ``next_step`` is
    refused by TorchRL."""
    missing = _missing("torchrl")
    if missing:
        pytest.skip(f"torchrl is not installed here ({missing}); pip install torchrl")
    script = tmp_path / "torchrl_rollout.py"
    script.write_text(_script("torchrl_rollout.py"))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "torch.Size([4]) torch.Size([4, 300, 4])" in proc.stdout
    check = tmp_path / "torchrl_check.py"
    check.write_text(TORCHRL_CHECK)
    proc = subprocess.run(
        [sys.executable, str(check)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    modes = ("disabled", "same_step", "next_step")  # (TorchRL logs to stdout too)
    said = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith(modes)]
    assert said == [["disabled", "ok"], ["same_step", "ok"], ["next_step", "refused"]]


def test_torchrl_gymenv_takes_an_envfactory_id(tmp_path: Path) -> None:
    """Issue 38: TorchRL's ``GymEnv("envfactory/CartPole-v1")`` passes ``frameskip=`` and drops
    it on a ``TypeError`` saying "unexpected keyword argument 'frameskip'" (as gymnasium's
    ``make`` raises): envfactory's unknown-keyword error is that ``TypeError``, so it builds
    and rolls out (before: ``ConfigError`` only, and GymEnv failed)."""
    missing = _missing("torchrl")
    if missing:
        pytest.skip(f"torchrl is not installed here ({missing}); pip install torchrl")
    script = tmp_path / "torchrl_gymenv.py"
    script.write_text(TORCHRL_GYMENV)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "GYMENV torch.Size([20, 4]) 1" in proc.stdout, proc.stdout[-2000:]


TORCHRL_GYMENV = """
import envfactory.gym_ids
from torchrl.envs import GymEnv

env = GymEnv("envfactory/CartPole-v1")
env.set_seed(0)
td = env.rollout(20, break_when_any_done=False)
print("GYMENV", td["next", "observation"].shape, env.wrapper_frame_skip)
env.close()
"""


TORCHRL_CHECK = """
import envfactory
from torchrl.envs import GymWrapper

if __name__ == "__main__":
    for mode in ("disabled", "same_step", "next_step"):
        overrides = ["num_envs=4", "vectorizer=subproc", f"autoreset_mode={mode}"]
        try:
            env = GymWrapper(envfactory.make_vec(overrides=overrides))
        except RuntimeError as exc:
            assert "SAME_STEP or DISABLED" in str(exc), exc
            print(mode, "refused")
            continue
        env.set_seed(0)
        td = env.rollout(400, break_when_any_done=False)
        obs, nxt = td["observation"], td["next", "observation"]
        term = td["next", "terminated"].squeeze(-1)
        done = td["next", "done"].squeeze(-1)[:, :-1]
        outside = (nxt[..., 0].abs() > 2.4) | (nxt[..., 2].abs() > 0.2094)  # 12 degrees, x 2.4
        chained = (obs[:, 1:] == nxt[:, :-1]).all(-1)
        assert term.sum() > 10 and outside[term].all(), mode
        assert chained[~done].all() and not chained[done].any(), mode
        env.close()
        print(mode, "ok")
"""
