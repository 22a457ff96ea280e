"""The ``envfactory`` command's rollout (issue 18): envpool's ``recv``/``send`` loop when
``vectorizer.batch_size`` is set, and episodes counted from the flags when
``episode_stats_key`` is null; the CLI's modules import each other without a cycle
(issue 17)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import envfactory
from envfactory.cli.rollout import rollout

QUIET = ["run.progress=false"]
CLI = Path(envfactory.__file__).parent / "cli"


def test_cli_modules_import_each_other_without_a_cycle() -> None:
    """Issue 17: ``cli/main.py`` and ``cli/render.py`` imported each other."""
    graph: dict[str, set[str]] = {}
    for path in CLI.glob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        graph[path.stem] = {
            n.split(".")[2] for n in names if n.startswith("envfactory.cli.") and n.count(".") >= 2
        }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert graph["render"] == {"rollout"} and "rollout" in graph["main"]
    assert [m for m in graph if reaches(m, m, {m})] == []


POOL = ["vectorizer=subproc", "num_envs=4", "vectorizer.batch_size=2"]
FIVE_STEP = ["env.id=faulty_envs:Faulty-v0", "env.kwargs.episode_len=5"]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize(("mode", "cycle"), [("next_step", 6), ("same_step", 5)])
def test_pool_rollout_counts_steps_and_episodes(mode: str, cycle: int) -> None:
    """Episodes of 5 steps: under ``next_step`` an env takes 6 steps per episode (the
    autoreset step), under ``same_step`` 5; each env's first answer, its reset, is no step."""
    cfg = envfactory.compose([*POOL, *FIVE_STEP, f"autoreset_mode={mode}"])
    with envfactory.make_vec(cfg) as envs:
        stats = rollout(envs, 600, policy="random", seed=0, pool=True)
    assert 600 <= stats.steps <= 601 and stats.seconds > 0
    assert abs(stats.episodes - stats.steps / cycle) <= 4  # num_envs episodes under way
    assert stats.mean_return is not None and 0 < stats.mean_return < 5  # 5 actions of 0 or 1


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_batch_size_on_the_command_line_runs_the_recv_send_loop(run: Any, tmp_path: Path) -> None:
    """Issue 18: ``vectorizer.batch_size=N`` ran the synchronous rollout (``step`` of all 4
    envs: 2 vector steps, 8 env steps for ``run.total_steps=6``). The pool's loop takes
    batches of 2: 6 env steps (7 when a batch holds one env's reset and another's step)."""
    out = tmp_path / "job"
    proc = run(["envfactory", *POOL, "run.total_steps=6", "seed=0", *QUIET, f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["steps"] in (6, 7), summary
    assert summary["vectorizer"] == "subproc" and summary["steps_per_second"] > 0


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_pool_rollout_refuses_disabled_autoreset_in_one_line(run: Any, tmp_path: Path) -> None:
    proc = run(["envfactory", *POOL, "autoreset_mode=disabled", f"hydra.run.dir={tmp_path}/r"])
    assert proc.returncode == 2
    assert proc.stderr == (
        "envfactory: error: autoreset_mode=disabled with vectorizer.batch_size set: the "
        "rollout's recv/send loop needs the envs to reset themselves; use "
        "autoreset_mode=next_step or same_step, or vectorizer.batch_size=null\n"
    )


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_null_episode_stats_key_counts_episodes_and_says_why_no_return(
    run: Any, tmp_path: Path
) -> None:
    """Issue 18: ``episode_stats_key=null`` printed "mean return n/a (no episode finished)"
    after dozens of episodes. The episodes are counted from the flags (the same number the
    statistics give for the same seed) and the line says why there is no mean return."""
    runs = {}
    for name, extra in (("stats", []), ("null", ["episode_stats_key=null"])):
        out = tmp_path / name
        proc = run(["envfactory", *extra, "seed=0", *QUIET, f"hydra.run.dir={out}"])
        assert proc.returncode == 0, proc.stderr
        runs[name] = (proc.stdout, json.loads((out / "summary.json").read_text()))
    stdout, summary = runs["null"]
    assert summary["episodes"] == runs["stats"][1]["episodes"] > 20
    assert summary["mean_return"] is None
    assert (
        "  mean return  n/a (episode returns not recorded: episode_stats_key is null)\n" in stdout
    )
    assert "no episode finished" not in stdout


def test_null_episode_stats_key_reads_gymnasium_statistics_when_recorded() -> None:
    """With gymnasium's own ``RecordEpisodeStatistics`` on top, null reads
    ``infos["episode"]`` as before: returns are recorded."""
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    with envfactory.make_vec(overrides=["num_envs=2", "episode_stats_key=null"]) as envs:
        stats = rollout(RecordEpisodeStatistics(envs), 400, seed=0, stats_key=None)
    assert stats.returns_recorded and stats.episodes > 5 and stats.mean_return is not None
