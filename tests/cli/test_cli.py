"""The ``envfactory`` Hydra app: the main job, its rollout, sweeps and the sweep table."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envfactory
from envfactory.cli.main import episode_returns, format_summary, noop_action, rollout, run
from envfactory.cli.sweep import collect_jobs, markdown_table

# not imported from conftest: with the plugin packages' test folders in testpaths, the name
# "conftest" can resolve to another folder's conftest module
BIN = Path(sys.executable).parent


def subprocess_env() -> dict[str, str]:
    """This environment for a real CLI subprocess, without knobs that change its output."""
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


SUMMARY_KEYS = {
    "env",
    "family",
    "vectorizer",
    "built",  # what the vectorizer built: auto's choice, subproc's workers
    "split",  # how it placed the envs and why (null: dummy decides nothing)
    "restarts",  # the workers' restarts, all together and per worker (issue 39)
    "restarts_by_worker",
    "num_envs",
    "autoreset_mode",
    "policy",
    "seed",
    "steps",
    "seconds",
    "steps_per_second",
    "episodes",
    "mean_return",
    "status",
    "overrides",
    "job_num",
    "output_dir",
}


def _check_summary(summary: dict[str, Any]) -> None:
    assert set(summary) == SUMMARY_KEYS
    assert summary["steps_per_second"] > 0 and summary["seconds"] > 0
    if summary["episodes"]:
        assert isinstance(summary["mean_return"], float)
    else:
        assert summary["mean_return"] is None


def test_main_job_with_no_arguments_from_any_cwd(run: Any, tmp_path: Path) -> None:
    proc = run(["envfactory"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [path] = tmp_path.glob("outputs/*/*/summary.json")
    summary = json.loads(path.read_text())
    _check_summary(summary)
    assert (summary["env"], summary["family"], summary["vectorizer"]) == (
        "CartPole-v1",
        "gym",
        "dummy",
    )
    assert (summary["num_envs"], summary["steps"], summary["overrides"]) == (4, 2000, [])
    assert summary["episodes"] > 0 and summary["mean_return"] > 0
    assert Path(summary["output_dir"]) == path.parent
    for text in (
        "envfactory summary",
        "CartPole-v1 (family gym)",
        "steps/s",
        "episodes",
        "mean return",
        str(path),
    ):
        assert text in proc.stdout
    assert proc.stderr == ""  # no warnings; no progress bar when stderr is not a terminal


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_main_job_of_a_non_editable_install(run: Any, wheel_site: Path, tmp_path: Path) -> None:
    script = wheel_site / "bin" / "envfactory"
    argv = [script] if script.exists() else ["python", "-m", "envfactory.cli.main"]
    proc = run([*argv, "run.total_steps=40"], cwd=tmp_path, pythonpath=[wheel_site])
    assert proc.returncode == 0, proc.stderr
    [path] = tmp_path.glob("outputs/*/*/summary.json")
    assert json.loads(path.read_text())["steps"] == 40


def test_main_job_options(run: Any, tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = run(
        [
            "envfactory",
            "env=pendulum",
            "num_envs=3",
            "vectorizer=gym-sync",
            "run.policy=noop",
            "run.total_steps=100",
            "seed=1",
            "autoreset_mode=same_step",
            f"hydra.run.dir={out}",
        ],
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    _check_summary(summary)
    assert summary["steps"] == 102  # ceil(100 / 3) vector steps of 3 envs
    assert (summary["policy"], summary["seed"], summary["autoreset_mode"]) == (
        "noop",
        1,
        "same_step",
    )
    assert summary["vectorizer"] == "gym-sync" and summary["env"] == "pendulum"
    assert (out / "envfactory.log").exists()  # hydra.job.name is envfactory, not "main"


BAD_INPUTS = [  # (arguments, a fragment of the one line the user sees)
    (["vectorizer=dumy"], "unknown vectorizer 'dumy' (at vectorizer=dumy). Did you mean 'dummy'?"),
    (["+num_env=8"], "unknown key num_env. Did you mean 'num_envs'?"),
    (["numenvs=4"], "unknown key numenvs. Did you mean 'num_envs'?"),
    (
        ["+run.foo=1"],
        "unknown key run.foo. Valid keys under run: fps, job, policy, progress, render_steps, "
        "total_steps",
    ),
    (["run.total_steps=0"], "run.total_steps=0: expected an integer >= 1"),
    (["env.idd=x"], "unknown key env.idd. Did you mean 'env.id'?"),
    (["num_envs=abc"], "num_envs=abc: expected an integer; got 'abc'"),
    (["num_envs=0"], "num_envs must be a positive integer, got 0"),
    (["seed=-1"], "seed=-1: expected an integer >= 0 or null"),
    (["env=atari", "env.image_size=-1"], "env.image_size=-1: expected a positive int"),
    (["env.id=CartPol-v1"], "Did you mean 'CartPole-v1'?"),
    (["env.id=ALE/Pong-v5"], "Use env=atari env.id=ALE/Pong-v5"),
    (["env.id=nomod:X-v0"], "Module 'nomod' was not found"),
    (["env=mountaincar", "env.num_stack=0"], "env.num_stack=0: expected an integer >= 1"),
    (["vectorizer=subproc", "vectorizer.timeout=nan"], "vectorizer.timeout=nan: expected"),
    (["vectorizer=subproc", "vectorizer.context=forks"], "Did you mean 'fork'?"),
    (["wrappers=[{name:time_limt}]"], "Did you mean 'time_limit'?"),
    (["num_envs=${foo:bar}"], "unknown interpolation resolver 'foo'"),
]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_config_errors_are_one_line_and_exit_status_2(tmp_path: Path) -> None:
    """Each bad input from issue 8: one line ``envfactory: error: ...``, no traceback, status
    2, nothing run. The commands run side by side (each is a real ``envfactory`` process)."""
    import subprocess

    procs = [
        subprocess.Popen(
            [str(BIN / "envfactory"), *args, f"hydra.run.dir={tmp_path / str(i)}"],
            cwd=tmp_path,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, (args, _) in enumerate(BAD_INPUTS)
    ]
    for proc, (args, text) in zip(procs, BAD_INPUTS):
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 2, (args, err)
        assert err.startswith("envfactory: error: ") and text in err, (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (args, err)
        assert "envfactory summary" not in out
    assert not list(tmp_path.glob("*/summary.json"))


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_version_and_python_m_envfactory(run: Any, tmp_path: Path) -> None:
    for argv in (["envfactory", "--version"], ["python", "-m", "envfactory", "--version"]):
        proc = run(argv)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"envfactory {envfactory.__version__} (hydra-core ")
        assert "Hydra" not in proc.stdout
    out = tmp_path / "job"
    proc = run(["python", "-m", "envfactory", "run.total_steps=40", f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["steps"] == 40
    proc = run(["python", "-m", "envfactory", "num_envs=0", f"hydra.run.dir={out}"])
    assert proc.returncode == 2
    assert (
        proc.stderr == "envfactory: error: num_envs must be a positive integer, got 0; set "
        "num_envs=1 or more\n"
    )


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize(
    ("sweep", "failed_job", "error"),
    [
        ("num_envs=2,0,4", 1, "num_envs must be a positive integer, got 0"),
        ("env.id=CartPol-v1,CartPole-v1", 0, "Did you mean 'CartPole-v1'?"),
    ],
)
def test_sweep_survives_a_bad_job(
    run: Any, tmp_path: Path, sweep: str, failed_job: int, error: str
) -> None:
    out = tmp_path / "sweep"
    proc = run(["envfactory", "-m", sweep, "run.total_steps=20", f"hydra.sweep.dir={out}"])
    assert proc.returncode == 1  # the sweep ran to the end, but a job failed
    jobs = json.loads((out / "sweep_summary.json").read_text())["jobs"]
    values = sweep.split("=", 1)[1].split(",")
    assert [j["job_num"] for j in jobs] == list(range(len(values)))  # every job ran
    for job in jobs:
        if job["job_num"] == failed_job:
            assert job["status"] == "failed" and error in job["error"]
            assert "\n" not in job["error"]
        else:
            assert job["status"] == "ok" and job["steps"] >= 20
    table = (out / "sweep_summary.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith(f"| {failed_job} |"))
    assert "| failed: " in row and error in row
    assert f"envfactory: error: job {failed_job}: " in proc.stderr
    assert f"1 of {len(values)} sweep jobs failed" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_ctrl_c_stops_with_one_line_and_a_partial_summary(tmp_path: Path) -> None:
    """A real SIGINT to the process group of a real ``envfactory`` (what Ctrl-C in a
    terminal does) during a long rollout."""
    import os
    import signal
    import subprocess
    import time

    out = tmp_path / "job"
    proc = subprocess.Popen(
        [str(BIN / "envfactory"), "run.total_steps=1000000000", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / ".hydra" / "overrides.yaml").exists():  # the job has started
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(3)
        os.killpg(proc.pid, signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["steps"] < 1000000000 and summary["overrides"] == ["run.total_steps=1000000000"]
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"envfactory: interrupted after {summary['steps']} steps; partial ")
    assert str(out / "summary.json") in stderr


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_sweep_writes_one_table_of_all_jobs(run: Any, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run(
        [
            "envfactory",
            "-m",
            "env=gym,mountaincar",
            "num_envs=2",
            "run.total_steps=60",
            "run.progress=false",
            f"hydra.sweep.dir={sweep}",
        ],
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((sweep / "sweep_summary.json").read_text())
    jobs = data["jobs"]
    assert [j["job_num"] for j in jobs] == [0, 1]
    assert [j["family"] for j in jobs] == ["gym", "mountaincar"]
    assert all(j["status"] == "ok" and j["steps"] == 60 for j in jobs)
    common = [o.lower() for o in data["common_overrides"]]  # Hydra's sweeper writes False
    assert common == ["num_envs=2", "run.total_steps=60", "run.progress=false"]
    table = (sweep / "sweep_summary.md").read_text()
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert lines[0] == (
        "| job | overrides | env | vectorizer | num_envs | steps | steps/s | episodes "
        "| mean return | restarts |"
    )
    assert lines[2].startswith("| 0 | env=gym | CartPole-v1 | dummy | 2 | 60 |")
    assert lines[3].startswith("| 1 | env=mountaincar | MountainCar-v0 | dummy | 2 | 60 |")
    assert len(lines) == 4
    assert "\n".join(lines) in proc.stdout  # printed once at the end, too
    assert proc.stdout.count("| job | overrides |") == 1


def test_sweep_table_marks_a_job_without_summary(tmp_path: Path) -> None:
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "summary.json").write_text(
        json.dumps(
            {
                "job_num": 0,
                "overrides": ["num_envs=1"],
                "env": "CartPole-v1",
                "vectorizer": "dummy",
                "num_envs": 1,
                "steps": 10,
                "steps_per_second": 1234.5,
                "episodes": 0,
                "mean_return": None,
            }
        )
    )
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "summary.json").write_text(
        json.dumps({"job_num": 1, "overrides": ["num_envs=0"], "status": "failed", "error": "a|b"})
    )
    (tmp_path / "2" / ".hydra").mkdir(parents=True)
    (tmp_path / "2" / ".hydra" / "overrides.yaml").write_text("- num_envs=8\n")
    table = markdown_table(collect_jobs(tmp_path))
    assert "| 0 | num_envs=1 | CartPole-v1 | dummy | 1 | 10 | 1,234 | 0 | - |" in table
    assert "| 1 | num_envs=0 | failed: a\\|b | - |" in table
    assert "| 2 | num_envs=8 | failed: no summary.json |" in table


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_rollout_counts_episodes_in_every_autoreset_mode(mode: str) -> None:
    cfg = envfactory.compose(["num_envs=4", f"autoreset_mode={mode}"])
    with envfactory.make_vec(cfg) as envs:
        stats = rollout(envs, 1000, policy="random", seed=0)
    assert stats.steps == 1000
    # CartPole under a random policy lasts ~22 steps: dozens of episodes in 1000 steps
    assert 20 < stats.episodes < 100
    assert stats.mean_return is not None and 8 < stats.mean_return < 60


def test_rollout_is_seeded() -> None:
    def once() -> Any:
        with envfactory.make_vec(overrides=["num_envs=2"]) as envs:
            return rollout(envs, 300, policy="random", seed=5)

    a, b = once(), once()
    assert (a.episodes, a.mean_return) == (b.episodes, b.mean_return)


def test_run_without_hydra_returns_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = envfactory.compose(
        [
            "env=mountaincar",
            "num_envs=2",
            "run.policy=noop",
            "run.total_steps=50",
            "run.progress=false",
        ]
    )
    summary = run(cfg)
    assert (summary["family"], summary["policy"], summary["steps"]) == ("mountaincar", "noop", 50)
    assert "overrides" not in summary  # no Hydra job: nothing saved
    assert capsys.readouterr().out.strip() == format_summary(summary)


@pytest.mark.parametrize(
    ("overrides", "built"),
    [
        (["vectorizer=dummy"], "DummyVecEnv"),
        (["vectorizer=subproc", "vectorizer.in_series=1"], "SubprocVecEnv, 2 workers"),
        (["vectorizer=subproc", "vectorizer.in_parent=1"], "SubprocVecEnv, 1 worker, 1 env in "
         "this process"),
    ],
)  # fmt: skip
def test_the_summary_says_what_the_vectorizer_built(
    capsys: pytest.CaptureFixture[str], overrides: list[str], built: str
) -> None:
    """A new user's re-trial: ``vectorizer=auto`` decides when it builds (and ``subproc``
    splits by the cores free then), and the summary said only ``auto``."""
    cfg = envfactory.compose([*overrides, "num_envs=2", "run.total_steps=20", "run.progress=false"])
    summary = run(cfg)
    assert summary["built"] == built
    name = overrides[0].split("=")[1]
    assert f"vectorizer   {name} ({built})" in capsys.readouterr().out


def test_noop_action() -> None:
    spaces = gym.spaces
    np.testing.assert_array_equal(noop_action(spaces.Box(-1, 1, (2, 3))), np.zeros((2, 3)))
    np.testing.assert_array_equal(noop_action(spaces.Box(0.5, 2.0, (2,))), [0.5, 0.5])
    np.testing.assert_array_equal(noop_action(spaces.MultiDiscrete([3, 3], start=[1, -1])), [1, -1])
    assert noop_action(spaces.Discrete(4, start=2)) == 2
    composite = noop_action(
        spaces.Dict({"a": spaces.MultiBinary(3), "b": spaces.Tuple([spaces.Discrete(2)])})
    )
    np.testing.assert_array_equal(composite["a"], [0, 0, 0])
    assert composite["b"] == (0,)
    with pytest.raises(TypeError, match=r"run\.policy=random"):
        noop_action(spaces.Text(5))


def test_episode_returns_reads_masks_and_final_info() -> None:
    infos = {
        "episode_stats": {"r": np.array([1.0, 2.0, 3.0]), "l": np.array([1, 2, 3])},
        "_episode_stats": np.array([True, False, True]),
    }
    assert episode_returns(infos) == [1.0, 3.0]
    final = {"final_info": infos, "_final_info": infos["_episode_stats"]}
    assert episode_returns(final) == [1.0, 3.0]
    assert episode_returns({}) == []


def test_an_experiment_file_s_mistakes_are_one_line_with_the_fix(tmp_path: Path) -> None:
    """A new user's trial (issue 28's re-trial): an experiment file's mistakes got raw
    Hydra/OmegaConf text: a typo'd key (no did-you-mean), a file without its
    ``# @package _global_`` header, ``experiment=`` without its ``+``."""
    import subprocess

    folder = tmp_path / "experiment"
    folder.mkdir()
    (folder / "typo.yaml").write_text("# @package _global_\nrun:\n  total_stepz: 10\n")
    (folder / "nopkg.yaml").write_text("defaults:\n  - override /env: mountaincar\n")
    (folder / "ok.yaml").write_text("# @package _global_\nnum_envs: 2\n")
    for choice, says in (
        ("+experiment=typo", "unknown key run.total_stepz. Did you mean 'run.total_steps'?"),
        ("+experiment=nopkg", "needs '# @package _global_' as its first line"),
        ("experiment=ok", "add your own with '+' (+experiment=NAME)"),
    ):
        out = subprocess.run(
            [str(BIN / "envfactory"), "--config-dir", str(tmp_path), choice, "run.total_steps=10"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path, env=subprocess_env(),
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], out.stderr
