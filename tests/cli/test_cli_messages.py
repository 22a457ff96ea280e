"""Messages that pointed the wrong way (issue 39, items 7 and 9 to 12), each met as a user
meets it: the ``envfactory`` executable (``envfactory tune`` too), in a real process. Item
8 (a plugin without ``@envfactory.hookimpl``) is in ``tests/plugin/test_plugins.py``; the
table of every wrapper on every family in ``tests/wrappers/test_wrapper_family_table.py``."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _cli(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    start_new_session: bool = False,
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    environ.pop("HYDRA_FULL_ERROR", None)
    environ["ENVFACTORY_CONFIG_DIR"] = str(cwd / "config")  # never the developer's own
    return subprocess.run(
        [str(BIN / "envfactory"), *args],
        cwd=cwd,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=preexec_fn,
        start_new_session=start_new_session,
    )


def _one_line(err: str, prefix: str = "envfactory: error: ") -> str:
    assert err.startswith(prefix), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err[len(prefix) : -1]


# -- item 7: a wrapper in the other list ---------------------------------------------------
@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "wrappers=[legacy_final_info]",
            "wrapper 'legacy_final_info' (at wrappers[0].name) is in the wrong list: it is a "
            "vector wrapper (it wraps the VectorEnv), so it goes in vector_wrappers, not "
            "wrappers; move wrappers[0] there (vector_wrappers=[legacy_final_info] on the "
            "command line).",
        ),
        (
            "vector_wrappers=[{name: time_limit, max_episode_steps: 50}]",
            "wrapper 'time_limit' (at vector_wrappers[0].name) is in the wrong list: it is a "
            "per-env wrapper, so it goes in wrappers, not vector_wrappers; move "
            "vector_wrappers[0] there (wrappers=[time_limit] on the command line).",
        ),
    ],
)
def test_a_wrapper_in_the_other_list_says_which_list_takes_it(
    tmp_path: Path, override: str, says: str
) -> None:
    """It said "unknown wrapper ... Install the plugin that provides it", of a wrapper
    envfactory itself registers."""
    proc = _cli([override, "run.total_steps=8", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == says
    assert "Install" not in proc.stderr


# -- item 9: atari_preprocessing on env=atari ------------------------------------------------
@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_atari_preprocessing_on_env_atari_is_a_config_error_at_compose_time(
    tmp_path: Path, vectorizer: str
) -> None:
    """It composed, built, and died at the first reset with ``RuntimeError: Invalid shape
    (84, 84), expecting shape (210, 160)``, exit 1 and a traceback file. Now refused before
    any env or worker is made: the same line under every vectorizer, no ALE banner."""
    args = ["env=atari", "wrappers=[atari_preprocessing]", f"vectorizer={vectorizer}"]
    proc = _cli([*args, "num_envs=2", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == (
        "wrappers[0] (atari_preprocessing): env=atari already preprocesses the frames with "
        "gymnasium's AtariPreprocessing (DeepMind's steps), and a second one would read its "
        "84x84 frames as the raw screen; remove atari_preprocessing from wrappers and set the "
        "family's options instead (env.frame_skip, env.noop_max, env.image_size, env.obs_type, "
        "env.num_stack, ...), or use gymnasium's on the raw game: env=gym "
        "env.id=ale_py:ALE/Pong-v5 env.kwargs.frameskip=1 wrappers=[atari_preprocessing]"
    )
    assert "Invalid shape" not in proc.stderr and not (tmp_path / "run" / "error.txt").exists()


# -- item 10: ~ in hydra.run.dir -------------------------------------------------------------
@pytest.mark.parametrize(
    "value", ["~/runs/a", "'~/runs/a'", '"~/runs/a"'], ids=["bare", "single", "double"]
)
def test_a_run_dir_under_home_is_expanded(tmp_path: Path, value: str) -> None:
    """``hydra.run.dir=~/runs/a`` was refused with "quote it"; quoted, as told, it made a
    folder named ``~`` in the working directory."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    proc = _cli(
        [f"hydra.run.dir={value}", "run.total_steps=8", "run.progress=false"],
        work,
        env={"HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((home / "runs" / "a" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["output_dir"] == str(home / "runs" / "a")
    assert not (work / "~").exists()


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_sweep_dir_under_home_and_a_config_files_run_dir_are_expanded(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "exps" / "experiment").mkdir(parents=True)
    (work / "exps" / "experiment" / "mine.yaml").write_text(
        "# @package _global_\nhydra:\n  run:\n    dir: ~/exp/${now:%Y}\nnum_envs: 2\n"
    )
    common = ["run.total_steps=8", "run.progress=false"]
    env = {"HOME": str(home)}
    sweep = _cli(["-m", "hydra.sweep.dir=~/sw", "num_envs=1,2", *common], work, env=env)
    assert sweep.returncode == 0, sweep.stderr
    assert (home / "sw" / "sweep_summary.json").is_file() and (home / "sw" / "1").is_dir()
    own = _cli(["--config-dir", "exps", "+experiment=mine", *common], work, env=env)
    assert own.returncode == 0, own.stderr
    assert len(list((home / "exp").glob("*/summary.json"))) == 1
    assert not (work / "~").exists()


def test_a_home_of_no_such_user_is_one_line(tmp_path: Path) -> None:
    proc = _cli(["hydra.run.dir=~no_such_user_39/runs", "run.total_steps=8"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == (
        "hydra.run.dir=~no_such_user_39/runs: ~no_such_user_39 cannot be expanded: no user "
        "'no_such_user_39'; give the folder's full path"
    )


# -- item 11: envfactory tune's did-you-mean -------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["vectorizer.in_seires=2"],
            "vectorizer.in_seires=2: none of the vectorizers tried (dummy, subproc, auto) has "
            "option 'in_seires'. Did you mean 'in_series'? Fix the spelling, or pick the "
            "vectorizer that has it with vectorizer=X",
        ),
        (
            ["--budegt", "5"],
            "unknown option --budegt. Did you mean '--budget'? Options: --help, --seconds, "
            "--budget, --rounds, --busy-cores, --vectorizers, --async, --name, --config-dir, "
            "--plot, --no-plot; overrides take no dashes (key=value); envfactory tune --help "
            "shows them all",
        ),
        (["--budegt=5"], "unknown option --budegt. Did you mean '--budget'? Options: "),
        (["num_envs=2", "-budget", "5"], "unknown option -budget. Did you mean '--budget'? "),
    ],
)
def test_tune_says_did_you_mean(tmp_path: Path, args: list[str], says: str) -> None:
    """``tune vectorizer.in_seires=2`` had no "did you mean" (plain ``envfactory`` has),
    ``tune --budegt 5`` said only "unrecognized arguments: --budegt"."""
    proc = _cli(["tune", *args], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr, "envfactory tune: error: ").startswith(says), proc.stderr
    assert proc.stdout == "" and not (tmp_path / "config").exists()  # nothing measured


# -- item 12: the descriptor limit -----------------------------------------------------------
LOW_LIMIT = 96


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_LIMIT, resource.getrlimit(7)[1]))


def _group_gone(pgid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_too_many_open_files_and_the_fix_are_the_first_line(tmp_path: Path) -> None:
    """``ulimit -n 96`` and 40 workers under fork: the line said only ``OSError: [Errno 24]
    Too many open files`` (and, where a worker hit the limit, the first 400 characters of
    the message were its traceback)."""
    args = ["vectorizer=subproc", "num_envs=40", "vectorizer.in_series=1"]
    args += ["vectorizer.in_parent=0", "vectorizer.context=fork", "run.total_steps=80"]
    proc = subprocess.Popen(
        [str(BIN / "envfactory"), *args, f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_low_fd_limit,
        start_new_session=True,
    )
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard_text = "" if hard == resource.RLIM_INFINITY else f"; hard limit {hard}"
    line = _one_line(err)
    assert line.startswith(
        "OSError: [Errno 24] Too many open files while starting 40 workers: this process may "
        f"hold {LOW_LIMIT} open files (ulimit -n{hard_text}) and each worker holds several. "
        "Close the vectorized envs you no longer use (envs.close(), or a with block), raise the "
        "limit (ulimit -n "
    ), line
    assert "or start fewer workers (vectorizer.in_series=<envs per worker>)" in line
    assert _group_gone(proc.pid), "a worker outlived the failed start"


GREEDY_ENV = textwrap.dedent(
    """
    import resource

    import gymnasium as gym


    class Greedy(gym.Env):
        '''An env whose constructor runs out of descriptors in its own (worker) process.'''

        def __init__(self):
            resource.setrlimit(resource.RLIMIT_NOFILE, (32, resource.getrlimit(7)[1]))
            self.files = [open(__file__) for _ in range(64)]


    gym.register("Greedy-v0", entry_point=Greedy)
    """
)


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_worker_out_of_descriptors_says_so_first_and_keeps_who_failed(tmp_path: Path) -> None:
    """The limit reached in a worker (its env's constructor): the advice leads the line, the
    worker's own error (which, envs, the remote traceback) follows."""
    (tmp_path / "greedy_env.py").write_text(GREEDY_ENV)
    args = ["env.id=greedy_env:Greedy-v0", "vectorizer=subproc", "num_envs=1"]
    proc = _cli(
        [*args, "vectorizer.in_parent=0", f"hydra.run.dir={tmp_path / 'run'}"],
        tmp_path,
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 1, proc.stderr
    line = _one_line(proc.stderr)
    assert line.startswith(
        "RemoteEnvError(OSError): Too many open files while starting 1 worker: this process "
    ), line
    assert "raised builtins.OSError during start: [Errno 24] Too many open files" in line
