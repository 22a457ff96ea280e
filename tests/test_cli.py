"""The ``envfactory`` Hydra app: the main job, its rollout, sweeps and the sweep table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envfactory
from envfactory.cli.main import episode_returns, format_summary, noop_action, rollout, run
from envfactory.cli.sweep import collect_jobs, markdown_table

SUMMARY_KEYS = {
    "env",
    "family",
    "vectorizer",
    "num_envs",
    "autoreset_mode",
    "policy",
    "seed",
    "steps",
    "seconds",
    "steps_per_second",
    "episodes",
    "mean_return",
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


def test_config_error_exits_nonzero_with_hydras_message(run: Any) -> None:
    proc = run(["envfactory", "vectorizer=dumy", "hydra.run.dir=out"])
    assert proc.returncode == 1
    assert "vectorizer/dumy" in proc.stderr and "dummy" in proc.stderr
    for override, text in (
        ("wrappers=[{name:time_limt}]", "Did you mean 'time_limit'?"),
        ("num_envs=0", "num_envs must be a positive integer, got 0"),
    ):
        proc = run(["envfactory", override, "hydra.run.dir=out"])
        assert proc.returncode == 1
        assert proc.stderr.startswith("envfactory: error: ") and text in proc.stderr
        assert "Traceback" not in proc.stderr


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
        "| mean return |"
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
    (tmp_path / "1" / ".hydra").mkdir(parents=True)
    (tmp_path / "1" / ".hydra" / "overrides.yaml").write_text("- num_envs=8\n")
    table = markdown_table(collect_jobs(tmp_path))
    assert "| 0 | num_envs=1 | CartPole-v1 | dummy | 1 | 10 | 1,234 | 0 | - |" in table
    assert "| 1 | num_envs=8 | failed (no summary.json) |" in table


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
