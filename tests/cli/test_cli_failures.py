"""How the ``envfactory`` command reports what went wrong (issue 18): the root cause of a
worker failure on the one line, with the full tracebacks saved in the run dir; a sweep
value that does not compose as a failed row of the sweep table; the render job without
pygame. Every command is a real ``envfactory`` process."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envfactory.cli.report import CAUSE_CHARS, ERROR_FILE, error_line, remote_cause
from envfactory.errors import remote_env_error

BIN = Path(sys.executable).parent
TESTS = Path(__file__).resolve().parents[1]  # faulty_envs.py, for the workers too


def _env(extra_path: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    env.pop("HYDRA_FULL_ERROR", None)
    paths = [str(p) for p in (extra_path, TESTS) if p is not None]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _popen(args: list[str], cwd: Path, extra_path: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "envfactory"), *args, "run.progress=false"],
        cwd=cwd,
        env=_env(extra_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# in_parent=0: every env in a worker, the failure a worker's (with in_parent null the parent
# may step a share of the envs, or all of them at run time, and then its own envs fail)
FAULTY = [
    "env.id=faulty_envs:Faulty-v0",
    "vectorizer=subproc",
    "num_envs=2",
    "vectorizer.in_parent=0",
]
WORKER_FAILURES = [  # (arguments, the remote exception's type, its message on the line)
    (  # (a bad gym kwarg is a config error at compose now: test_config)
        [*FAULTY, "env.kwargs.fault=nope"],
        "RemoteEnvError(ValueError)",
        "fault must be one of",
    ),
    (
        [*FAULTY, "env.kwargs.fault=raise", "env.kwargs.at_step=2"],
        "RemoteEnvError(ValueError)",
        "FaultyEnv fails on purpose at step 2",
    ),
    (  # the exception cannot come back: its message is read from the remote traceback
        [*FAULTY, "env.kwargs.fault=raise-unpicklable", "env.kwargs.at_step=1"],
        "RemoteEnvError(UnpicklableError)",
        "carries a lock",
    ),
]
if importlib.util.find_spec("Box2D") is None:  # gymnasium's message says to install it
    WORKER_FAILURES.append(
        (
            ["env.id=LunarLander-v3", "vectorizer=subproc"],
            "RemoteEnvError(DependencyNotInstalled)",
            "Box2D is not installed, you can install it by run `pip install swig` followed by "
            '`pip install "gymnasium[box2d]"`',
        )
    )


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_worker_failure_line_carries_the_remote_message_and_saves_the_traceback(
    tmp_path: Path,
) -> None:
    """Issue 18: ``envfactory env.id=LunarLander-v3 vectorizer=subproc`` printed only
    ``RemoteEnvError(DependencyNotInstalled): worker 0 ... raised
    gymnasium.error.DependencyNotInstalled during start``, without gymnasium's message."""
    procs = [
        _popen([*args, f"hydra.run.dir={tmp_path / str(i)}"], tmp_path)
        for i, (args, _, _) in enumerate(WORKER_FAILURES)
    ]
    for i, (proc, (args, kind, message)) in enumerate(zip(procs, WORKER_FAILURES)):
        out, err = proc.communicate(timeout=240)
        saved = tmp_path / str(i) / ERROR_FILE
        assert proc.returncode == 1, (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (args, err)
        assert err.startswith(f"envfactory: error: {kind}: worker "), (args, err)
        assert " raised " in err and f": {message}" in err, (args, err)
        assert err.endswith(f" (full traceback: {saved})\n"), (args, err)
        text = saved.read_text()
        assert text.startswith(err.removeprefix("envfactory: error: ").split(" (full")[0])
        worker_part = text.split("--- traceback in the worker ---")[1]
        assert "Traceback (most recent call last)" in worker_part and message in worker_part
        assert "--- traceback in envfactory ---" in text
        assert "envfactory summary" not in out


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_sweep_row_of_a_worker_failure_carries_the_remote_message(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    proc = _popen(
        [
            "-m",
            *FAULTY,
            "env.kwargs.fault=none,raise",
            "run.total_steps=20",
            f"hydra.sweep.dir={out}",
        ],
        tmp_path,
    )
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    jobs = json.loads((out / "sweep_summary.json").read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["ok", "failed"]
    assert jobs[1]["error"].endswith(": FaultyEnv fails on purpose at step 3")
    assert (out / "1" / ERROR_FILE).is_file()
    assert f"(full traceback: {out / '1' / ERROR_FILE})" in err


def test_remote_cause_is_one_line_cut_to_a_sane_length() -> None:
    fields = {"worker": 0, "pid": 1, "env_indices": [0], "env_id": "X-v0", "call": "step"}
    long = ValueError("first line\n  second   line " + "x" * 1000)
    err = remote_env_error(
        "raised ValueError", exc_type="builtins.ValueError", original=long, **fields
    )
    cause = remote_cause(err)
    assert cause.startswith("first line second line xxx") and cause.endswith("...")
    assert len(cause) == CAUSE_CHARS and "\n" not in cause
    assert error_line(err).endswith(f"during step: {cause}")
    # no original (it could not be pickled): the remote traceback's last line
    lost = remote_env_error(
        "raised m.Err",
        exc_type="m.Err",
        original=None,
        remote_traceback='Traceback (most recent call last):\n  File "x"\nm.Err: it broke\n',
        **fields,
    )
    assert remote_cause(lost) == "it broke"
    assert remote_cause(ValueError("not from a worker")) == ""


BAD_SWEEPS = [  # (sweep values, the bad job, a fragment of its row's error)
    (
        ["vectorizer=dummy,dumy"],
        1,
        "unknown vectorizer 'dumy' (at vectorizer=dumy). Did you mean 'dummy'?",
    ),
    (
        ["num_envs=2,abc,3"],
        1,
        "num_envs=abc: expected an integer; got 'abc'",
    ),
    (["num_envs=abc,2", "seed=0,-1"], 0, "num_envs=abc: expected an integer"),
]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_sweep_value_that_does_not_compose_is_a_failed_row(tmp_path: Path) -> None:
    """Issue 18: ``-m vectorizer=dummy,dumy`` and ``-m num_envs=2,abc`` exited 2 with no
    table and the good job never ran. Now: every job has a row, the good ones ran, exit 1."""
    procs = [
        _popen(
            ["-m", *sweep, "run.total_steps=20", f"hydra.sweep.dir={tmp_path / str(i)}"], tmp_path
        )
        for i, (sweep, _, _) in enumerate(BAD_SWEEPS)
    ]
    for i, (proc, (sweep, bad, fragment)) in enumerate(zip(procs, BAD_SWEEPS)):
        stdout, stderr = proc.communicate(timeout=240)
        out = tmp_path / str(i)
        assert proc.returncode == 1, (sweep, stderr)
        jobs = json.loads((out / "sweep_summary.json").read_text())["jobs"]
        count = 1
        for s in sweep:
            count *= len(s.split("=", 1)[1].split(","))
        assert [j["job_num"] for j in jobs] == list(range(count)), sweep
        assert jobs[bad]["status"] == "failed" and fragment in jobs[bad]["error"]
        assert "\n" not in jobs[bad]["error"]
        assert Path(jobs[bad]["output_dir"]) == out / str(bad)
        ok = [j for j in jobs if j["status"] == "ok"]
        assert ok and all(j["steps"] >= 20 for j in ok)  # the good jobs ran
        row = next(line for line in stdout.splitlines() if line.startswith(f"| {bad} |"))
        assert "| failed: " in row and fragment in row
        assert f"envfactory: error: job {bad}: " in stderr and fragment in stderr
        failed = sum(j["status"] == "failed" for j in jobs)
        assert f"{failed} of {count} sweep jobs failed" in stderr
        assert "Traceback" not in stderr
    # the third sweep: num_envs=abc fails to compose (jobs 0, 1), seed=-1 envfactory's check
    jobs = json.loads((tmp_path / "2" / "sweep_summary.json").read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["failed", "failed", "ok", "failed"]
    assert "seed=-1: expected an integer >= 0 or null" in jobs[3]["error"]


NO_PYGAME = "import sys\nsys.modules['pygame'] = None  # as if pygame were not installed\n"


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_render_without_pygame_says_what_to_install_in_one_line(tmp_path: Path) -> None:
    """Issue 18: an 84-line traceback. pygame is blocked in every process of the run (the
    CLI and its workers) by a ``sitecustomize`` on PYTHONPATH."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_PYGAME)
    cases = ["dummy", "subproc"]
    procs = [
        _popen(
            [
                "job=render",
                f"vectorizer={v}",
                "run.render_steps=2",
                f"hydra.run.dir={tmp_path / v}",
            ],
            tmp_path,
            extra_path=shim,
        )
        for v in cases
    ]
    for v, proc in zip(cases, procs):
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 2, (v, err)
        assert err == (
            "envfactory: error: run.job=render: CartPole-v1 draws its frames with pygame, which "
            "is not installed; install it with pip install 'envfactory[render]' (Atari envs, "
            "env=pong, render without it)\n"
        ), v
        assert not (tmp_path / v / "render.png").exists()


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_failed_rows_from_a_non_editable_install(
    run: Any, wheel_site: Path, tmp_path: Path
) -> None:
    """The sweeper's plugin folder ships inside the package (nothing in ``hydra_plugins``
    of site-packages: tests/config/test_hydra_app.py) and works from an installed wheel."""
    script = wheel_site / "bin" / "envfactory"
    argv = [script] if script.exists() else ["python", "-m", "envfactory.cli.main"]
    out = tmp_path / "sweep"
    proc = run(
        [*argv, "-m", "num_envs=abc,2", "run.total_steps=8", f"hydra.sweep.dir={out}"],
        cwd=tmp_path,
        pythonpath=[wheel_site],
    )
    assert proc.returncode == 1, proc.stderr
    jobs = json.loads((out / "sweep_summary.json").read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["failed", "ok"]
    assert "envfactory: error: job 0: num_envs=abc: expected an integer" in proc.stderr
