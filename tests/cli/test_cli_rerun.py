"""Re-running a saved job (issue 18): ``envfactory --rerun RUN_DIR``, and Hydra's spelling
``--config-dir RUN_DIR/.hydra --config-name config``, which ran the default CartPole job
(envfactory's own ``config.yaml`` shadowed the saved one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envfactory.cli.rerun import rerun_arguments
from envfactory.errors import ConfigError

BIN = Path(sys.executable).parent
JOB = [  # not the default job in any way that shows in the summary
    "env=mountaincar",
    "num_envs=3",
    "vectorizer=gym-sync",
    "run.total_steps=300",
    "run.policy=noop",
    "seed=7",
    "env.max_episode_steps=40",
]
SAME = ("env", "family", "vectorizer", "num_envs", "policy", "seed", "steps", "episodes")


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.Popen(
        [str(BIN / "envfactory"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return _finish(_start(args, cwd))


def _job(out: Path) -> tuple[dict, dict]:
    summary = json.loads((out / "summary.json").read_text())
    return summary, yaml.safe_load((out / ".hydra" / "config.yaml").read_text())


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_rerun_of_a_saved_job_runs_the_same_job(tmp_path: Path) -> None:
    first = tmp_path / "first"
    proc = _cli([*JOB, "run.progress=false", f"hydra.run.dir={first}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary, config = _job(first)
    assert summary["episodes"] > 0 and summary["family"] == "mountaincar"
    reruns = {  # side by side: each is a real envfactory process
        name: _start([*argv, f"hydra.run.dir={tmp_path / name}"], tmp_path)
        for name, argv in (
            ("rerun", ["--rerun", str(first)]),
            ("rerun-eq", [f"--rerun={first}"]),
            ("hydra", ["--config-dir", str(first / ".hydra"), "--config-name", "config"]),
            ("hydra-cd", ["-cd", str(first / ".hydra")]),
            ("seed8", ["--rerun", str(first), "seed=8"]),  # given now: wins over the saved
        )
    }
    for name, running in reruns.items():
        again, proc = tmp_path / name, _finish(running)
        assert proc.returncode == 0, (name, proc.stderr)
        if name == "seed8":
            continue
        assert "MountainCar-v0 (family mountaincar)" in proc.stdout, name
        new_summary, new_config = _job(again)
        assert new_config == config, name  # the same composed config
        assert {k: new_summary[k] for k in SAME} == {k: summary[k] for k in SAME}, name
        assert new_summary["mean_return"] == summary["mean_return"]
        assert new_summary["overrides"] == summary["overrides"]
        assert new_summary["output_dir"] == str(again)  # a new run dir; the first is kept
    assert _job(first) == (summary, config)
    changed, changed_config = _job(tmp_path / "seed8")
    assert changed["seed"] == 8 and changed_config == {**config, "seed": 8}
    kept = [o for o in JOB if not o.startswith("seed=")]
    assert changed["overrides"] == [*kept, "run.progress=false", "seed=8"]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_rerun_keeps_the_saved_config_dir(tmp_path: Path) -> None:
    """A job composed with ``--config-dir my_exps +experiment=...`` re-runs with it."""
    exps = tmp_path / "my_exps" / "experiment"
    exps.mkdir(parents=True)
    (exps / "short.yaml").write_text("# @package _global_\nnum_envs: 2\nrun:\n  total_steps: 30\n")
    first = tmp_path / "first"
    proc = _cli(
        ["--config-dir", str(tmp_path / "my_exps"), "+experiment=short", f"hydra.run.dir={first}"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    again = tmp_path / "again"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _cli(["--rerun", str(first), f"hydra.run.dir={again}"], elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert _job(again)[1] == _job(first)[1]
    assert (_job(again)[0]["num_envs"], _job(again)[0]["steps"]) == (2, 30)


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_rerun_of_a_dir_without_a_saved_job_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "sweep" / "0" / ".hydra").mkdir(parents=True)
    for name in ("overrides.yaml", "hydra.yaml"):
        (tmp_path / "sweep" / "0" / ".hydra" / name).write_text("[]\n")
    proc = _cli(["--rerun", str(tmp_path / "sweep")], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"envfactory: error: --rerun {tmp_path / 'sweep'}: no saved job there "
        f"(overrides.yaml and hydra.yaml not found in {tmp_path / 'sweep' / '.hydra'}); pass "
        f"the output dir of a job, where its summary.json is; it is a sweep dir: name one of "
        f"its jobs, e.g. --rerun {tmp_path / 'sweep' / '0'}\n"
    )
    assert not list(tmp_path.glob("outputs"))
    # (the re-trial: with only hydra.yaml gone, the message named overrides.yaml as missing)
    (tmp_path / "job" / ".hydra").mkdir(parents=True)
    (tmp_path / "job" / ".hydra" / "overrides.yaml").write_text("[]\n")
    proc = _cli(["--rerun", str(tmp_path / "job")], tmp_path)
    assert proc.returncode == 2 and "(hydra.yaml not found in" in proc.stderr, proc.stderr


def test_rerun_arguments_leave_other_command_lines_alone(tmp_path: Path) -> None:
    assert rerun_arguments(["num_envs=2", "-m", "seed=1,2"]) == ["num_envs=2", "-m", "seed=1,2"]
    mine = ["--config-dir", str(tmp_path), "--config-name", "config", "+experiment=x"]
    assert rerun_arguments(mine) == mine  # a config dir that is not a saved job
    with pytest.raises(ConfigError, match="no saved job there"):
        rerun_arguments(["--rerun", str(tmp_path / "nothing")])
