"""What a run tells about itself, run as a user meets it (the ``envfactory`` executable):
workers' restarts in the printed summary, ``summary.json`` and the sweep table, with one
warning line; a spent restart budget on the first line of the error; ``auto``'s fallback and
``subproc``'s split with their reasons, in the summary and one log line; every envfactory
warning on one line (issue 39, items 1-3 and 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import envfactory
from envfactory.cli.measure import busy
from envfactory.cli.run_record import one_line_warnings

BIN = Path(sys.executable).parent
TESTS = Path(__file__).resolve().parents[1]  # faulty_envs.py, for the workers too

# an env that raises on every 20th step of each env: restarted with restart=true
FLAKY = [
    "env.id=faulty_envs:Faulty-v0",
    "env.kwargs.fault=raise",
    "env.kwargs.at_step=-1",
    "env.kwargs.every=20",
    "vectorizer=subproc",
    "vectorizer.in_parent=0",
    "vectorizer.restart=true",
    "num_envs=2",
    "run.total_steps=100",
    "run.progress=false",
]


def envfactory_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    env.pop("HYDRA_FULL_ERROR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(":")
    return subprocess.run(
        [str(BIN / "envfactory"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _warning_lines_are_one_line_each(stderr: str) -> None:
    """Every line on stderr is envfactory's own (no Hydra file and line, no source line)."""
    assert "hydra/core/utils.py" not in stderr and "ret.return_value" not in stderr, stderr
    assert "RuntimeWarning" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("envfactory: warning: ") for ln in lines), stderr


@pytest.mark.slow
def test_restarts_are_on_the_record_and_warned_in_one_line(tmp_path: Path) -> None:
    """A run whose workers restarted ends ``status: ok`` and says so: the summary's
    ``restarts`` row (count, per worker, the first cause), ``summary.json``'s ``restarts``
    and ``restarts_by_worker``, one warning line at the end; each restart's own warning is
    one line too (it was Hydra's ``utils.py:189: RuntimeWarning`` and its source line)."""
    run_dir = tmp_path / "run"
    proc = envfactory_cli([*FLAKY, "vectorizer.max_restarts=100", f"hydra.run.dir={run_dir}",
                           "vectorizer.in_series=1"],  # two workers, whatever else runs here
                          tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    _warning_lines_are_one_line_each(proc.stderr)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert summary["restarts"] >= 2  # 100 steps of 2 envs, each failing every 20th step
    per = summary["restarts_by_worker"]
    assert sorted(r["worker"] for r in per) == [0, 1]
    assert sum(r["count"] for r in per) == summary["restarts"]
    for r in per:
        assert f"worker {r['worker']} (pid " in r["first_cause"]
        assert (
            "raised builtins.ValueError during step: FaultyEnv fails on purpose at step 20"
            in (r["first_cause"])
        )
    row = next(ln for ln in proc.stdout.splitlines() if ln.strip().startswith("restarts"))
    assert f"restarts     {summary['restarts']} (worker " in row
    assert "first cause: worker " in row
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"envfactory: warning: workers were restarted {summary['restarts']} times in this run "
        "(worker "
    ), last
    assert f"see {run_dir / 'summary.json'}" in last
    assert (
        proc.stderr.count("envfactory: warning: restarting after: worker ") == summary["restarts"]
    )


@pytest.mark.slow
def test_spent_restart_budget_is_on_the_first_line(tmp_path: Path) -> None:
    """``max_restarts=1`` and an env that keeps raising: the one error line (and the first
    line of ``error.txt``) says the budget was spent and how to raise it; it was on line 65
    of ``error.txt``."""
    run_dir = tmp_path / "run"
    proc = envfactory_cli([*FLAKY, "vectorizer.max_restarts=1", "run.total_steps=200",
                           f"hydra.run.dir={run_dir}"], tmp_path)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("envfactory: error: ")]
    assert len(errors) == 1, proc.stderr
    for line in (errors[0], (run_dir / "error.txt").read_text().splitlines()[0]):
        assert "FaultyEnv fails on purpose at step 20" in line
        assert "not restarted: worker " in line and "already restarted 1 times" in line
        assert "(vectorizer.max_restarts=1, vectorizer.restart_window=60)" in line
        assert "its restart budget is spent; raise vectorizer.max_restarts" in line
    assert errors[0].count("FaultyEnv fails on purpose") == 1


@pytest.mark.slow
def test_sweep_table_counts_restarts_and_says_why(tmp_path: Path) -> None:
    """The sweep table has a ``restarts`` column, and a line per job under it says which
    workers restarted, the first cause, and how the envs were split and why."""
    sweep = tmp_path / "sweep"
    proc = envfactory_cli(
        ["-m", *FLAKY, "vectorizer.max_restarts=100", "vectorizer.in_series=1,2",
         f"hydra.sweep.dir={sweep}"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = (sweep / "sweep_summary.md").read_text()
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    assert lines[0].endswith("| mean return | restarts |")
    jobs = json.loads((sweep / "sweep_summary.json").read_text())["jobs"]
    for k, job in enumerate(jobs):
        assert job["restarts"] >= 1
        assert lines[2 + k].endswith(f" | {job['restarts']} |")
        assert f"job {k} restarts: {job['restarts']} (worker " in table
        assert f"job {k} split: " in table
    assert "job 0 split: 2 workers x 1 env, 0 in this process: in_series=1 as configured" in table
    assert "job 1 split: 1 worker x 2 envs, 0 in this process: in_series=2 as configured" in table
    assert table.split("\n\n", 1)[1] in proc.stdout


@pytest.mark.slow
def test_auto_fallback_says_why_in_the_summary_and_one_log_line(tmp_path: Path) -> None:
    """``vectorizer=auto`` on a busy machine (a CPU-bound process per core beside it)
    builds every env in this process; the summary said only ``auto (DummyVecEnv)``, now its
    ``split`` row and ``summary.json`` say why with the load seen, and so does one log
    line."""
    run_dir = tmp_path / "run"
    with busy(os.cpu_count() or 1):
        args = ["vectorizer=auto", "num_envs=2", "run.total_steps=40", "run.progress=false"]
        proc = envfactory_cli([*args, f"hydra.run.dir={run_dir}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["built"] == "DummyVecEnv"
    why = (
        "every env (2) in this process: auto fell back to every env in this process: no core "
        "free for a worker at build time (load "
    )
    assert summary["split"].startswith(why), summary["split"]
    assert "running threads of other programs on " in summary["split"]
    assert (summary["restarts"], summary["restarts_by_worker"]) == (0, [])
    assert f"  split        {summary['split']}" in proc.stdout
    logged = [ln for ln in proc.stdout.splitlines() if "[envfactory][INFO]" in ln]
    assert len(logged) == 1 and logged[0].endswith(f"built DummyVecEnv: {summary['split']}")
    assert logged[0] in (run_dir / "envfactory.log").read_text()


def test_subproc_split_and_restarts_are_one_typed_record() -> None:
    """``run_record`` on the env (the surface the command reads): ``subproc``'s split with
    its reason, no restarts; ``dummy`` decides nothing."""
    from envfactory.vectorizers.record import RunRecord, Split

    over = ["vectorizer=subproc", "vectorizer.in_series=1", "num_envs=2"]
    with envfactory.make_vec(overrides=over) as envs:
        record = envs.run_record
    assert isinstance(record, RunRecord) and isinstance(record.split, Split)
    assert (record.built, record.split.workers, record.split.in_parent) == (
        "SubprocVecEnv",
        (1, 1),
        0,
    )
    assert record.split.reason == (
        "in_series=1 as configured; in_parent=0 (every env isolated in a worker)"
    )
    assert (record.restarts, record.restart_count) == ((), 0)
    over = ["vectorizer=subproc", "vectorizer.in_parent=null", "vectorizer.in_series=1"]
    with envfactory.make_vec(overrides=[*over, "num_envs=2"]) as envs:
        reason = envs.run_record.split.reason
    assert "in_parent null: none in this process: in_series set" in reason
    with envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"]) as envs:
        assert envs.run_record == RunRecord("DummyVecEnv")


def test_only_envfactorys_warnings_become_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Inside ``one_line_warnings`` a warning raised by envfactory's code is one line,
    whatever line its ``stacklevel`` names; another library's keeps Python's format."""
    from envfactory.errors import warn_restart

    with warnings.catch_warnings(record=True) as shown_as_before:
        warnings.simplefilter("always")
        with one_line_warnings():
            warn_restart(ValueError("worker 0 (pid 1, envs [0], env 'X') raised\nmore"))
            warnings.warn("not ours", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err.startswith(
        "envfactory: warning: restarting after: worker 0 (pid 1, envs [0], env 'X') raised more\n"
    ), err
    assert err.count("\n") == 1, err
    assert [str(w.message) for w in shown_as_before] == ["not ours"]  # Python's path, as before
