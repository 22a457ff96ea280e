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
            "vector_wrappers[0] there ('wrappers=[{name: time_limit, max_episode_steps: 50}]' "
            "on the command line).",
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


def test_a_config_dir_after_an_equals_sign_is_expanded(tmp_path: Path) -> None:
    """``--config-dir=~/exps`` (the shell expands no ``~`` after ``=``) was looked for as
    ``./~/exps``: "no such folder"."""
    home = tmp_path / "home"
    (home / "exps" / "experiment").mkdir(parents=True)
    (home / "exps" / "experiment" / "two.yaml").write_text("# @package _global_\nnum_envs: 2\n")
    proc = _cli(
        [
            "--config-dir=~/exps",
            "+experiment=two",
            "run.total_steps=8",
            "run.progress=false",
            "hydra.run.dir=run",
        ],
        tmp_path,
        env={"HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["num_envs"] == 2


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


def _run_with_fd_limit(
    tmp_path: Path, args: list[str], limit: Callable[[], None]
) -> tuple[subprocess.Popen, str]:
    """``envfactory *args`` under a descriptor limit (``limit`` runs in the child before it
    starts), in a session of its own (so its workers can be looked for after): the process
    and its stderr."""
    proc = subprocess.Popen(
        [str(BIN / "envfactory"), *args, f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
        start_new_session=True,
    )
    _, err = proc.communicate(timeout=240)
    return proc, err


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_too_many_open_files_and_the_fix_are_the_first_line(tmp_path: Path) -> None:
    """``ulimit -n 96`` and 40 workers under fork: the line said only ``OSError: [Errno 24]
    Too many open files`` (and, where a worker hit the limit, the first 400 characters of
    the message were its traceback)."""
    args = ["vectorizer=subproc", "num_envs=40", "vectorizer.in_series=1"]
    args += ["vectorizer.in_parent=0", "vectorizer.context=fork", "run.total_steps=80"]
    proc, err = _run_with_fd_limit(tmp_path, args, _low_fd_limit)
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


# -- a new user's trial (issue 39's acceptance): messages that pointed the wrong way ---------
def test_vector_wrappers_over_the_async_pool_are_refused_at_compose_time(tmp_path: Path) -> None:
    """#79: it composed, started the workers, and ``envs.async_reset()`` was ``AttributeError:
    'NormalizeReward' object has no attribute 'async_reset'``; the command's rollout said it
    only after the workers had started. Now one line before any worker, the same in Python."""
    import envfactory
    from envfactory.errors import ConfigError

    args = ["vectorizer=subproc", "vectorizer.batch_size=2", "vector_wrappers=[normalize_reward]"]
    says = (
        "vector_wrappers (normalize_reward) with vectorizer.batch_size=2 (the async pool): a "
        "vector wrapper wraps reset/step and would hide the pool's async_reset/recv/send (and "
        "it never sees what recv returns); drop the vector wrappers (vector_wrappers=[]) or the "
        "pool (vectorizer.batch_size=null)"
    )
    with pytest.raises(ConfigError) as info:
        envfactory.compose(["num_envs=4", *args])
    assert str(info.value) == says
    proc = _cli([*args, "num_envs=4", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == says


def test_make_env_warns_that_vector_wrappers_are_not_applied() -> None:
    """#81: ``make_env`` dropped ``vector_wrappers`` without a word. A warning (one config
    shared by make_vec and make_env is common), naming the per-env twin as the fix; none
    without vector wrappers."""
    import warnings

    import envfactory

    with pytest.warns(UserWarning) as caught:
        env = envfactory.make_env(overrides=["vector_wrappers=[{name: normalize_reward}]"])
    env.close()
    assert [str(w.message) for w in caught] == [
        "envfactory: make_env builds one env, so vector_wrappers (normalize_reward) are not "
        "applied (they wrap make_vec's VectorEnv); for one env use the per-env "
        "wrappers=[normalize_reward]"
    ]
    assert caught[0].filename == __file__  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envfactory.make_env(overrides=["wrappers=[normalize_reward]"]).close()


def _hard_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_LIMIT, LOW_LIMIT))


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_too_many_open_files_at_the_hard_limit_does_not_say_raise_it(tmp_path: Path) -> None:
    """#66/#85: soft = hard = 96, the line said "hard limit 96" and "ulimit -n 4096", which
    a user cannot set. Now the fix that works comes first: fewer workers."""
    args = ["vectorizer=subproc", "num_envs=64", "vectorizer.in_series=1"]
    args += ["vectorizer.context=fork", "run.total_steps=80"]
    proc, err = _run_with_fd_limit(tmp_path, args, _hard_fd_limit)
    assert proc.returncode == 1, err
    line = _one_line(err)
    assert line.startswith(
        "OSError: [Errno 24] Too many open files while starting 64 workers: this process may "
        f"hold {LOW_LIMIT} open files (ulimit -n; hard limit {LOW_LIMIT}) and each worker holds "
        "several. The soft limit is already the hard limit, which only an administrator can "
        "raise: start fewer workers (vectorizer.in_series=<envs per worker>), or close "
    ), line
    assert "ulimit -n 4096" not in line and "raise the limit" not in line
    assert _group_gone(proc.pid), "a worker outlived the failed start"


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_too_many_open_files_under_forkserver_prints_no_fork_server_traceback(
    tmp_path: Path,
) -> None:
    """#66: under the default forkserver, a start that ran out of descriptors part-way
    killed the fork server mid-message, and its own ``EOFError`` traceback came before
    envfactory's line. The start is refused before any worker or fork server is asked."""
    args = ["vectorizer=subproc", "num_envs=64", "vectorizer.in_series=1", "run.total_steps=80"]
    proc, err = _run_with_fd_limit(tmp_path, args, _low_fd_limit)
    assert proc.returncode == 1, err
    assert err.startswith("envfactory: error: OSError: [Errno 24] Too many open files"), err
    assert "Traceback" not in err and "EOFError" not in err, err
    assert _group_gone(proc.pid), "a worker outlived the failed start"


@pytest.mark.parametrize(
    ("group", "text", "says"),
    [
        (
            "vectorizer",
            "name: dumy\n",
            "name: dumy: no vectorizer has that name. Did you mean 'dummy'? Valid vectorizer "
            "names: ",
        ),
        (
            "env",
            "family: mountaincr\n",
            "family: mountaincr: no env family has that name. Did you mean 'mountaincar'? Valid "
            "env family names: ",
        ),
    ],
)
def test_a_typo_in_a_preset_is_reported_at_the_preset_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: str, text: str, says: str
) -> None:
    """#38: ``vectorizer=bad`` with ``name: dumy`` in the preset said ``unknown vectorizer
    'dumy' (at vectorizer=dumy)`` and "envfactory tune ... --name dumy writes one": neither
    the file nor what the user typed. Now the file and its line; in Python too."""
    import envfactory
    from envfactory.errors import UnknownNameError

    preset = tmp_path / "config" / group / "bad.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text(text)
    proc = _cli([f"{group}=bad", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc.stderr)
    assert line.startswith(f"preset {preset}: {says}"), line
    assert "tune" not in line and f"={text.split()[1]}" not in line
    monkeypatch.setenv("ENVFACTORY_CONFIG_DIR", str(tmp_path / "config"))
    with pytest.raises(UnknownNameError) as info:
        envfactory.compose([f"{group}=bad"])
    assert str(info.value).startswith(f"preset {preset}: {says}")


def test_a_typo_in_an_experiment_file_names_the_file(tmp_path: Path) -> None:
    """A new-user trial: ``frame_skp: 4`` in ``--config-dir my_exps +experiment=typo`` said
    the key, not which of the user's files has it, and told them about '+'."""
    exp = tmp_path / "my_exps" / "experiment" / "typo.yaml"
    exp.parent.mkdir(parents=True)
    exp.write_text(
        "# @package _global_\ndefaults:\n  - override /env: atari\nenv:\n  frame_skp: 4\n"
    )
    for flags in (["--config-dir", "my_exps"], ["--config-dir=my_exps"], ["-cd", "my_exps"]):
        proc = _cli([*flags, "+experiment=typo", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
        assert proc.returncode == 2, proc.stderr
        line = _one_line(proc.stderr)
        where = (
            f"in the config file experiment/typo ({Path('my_exps', 'experiment', 'typo.yaml')}): "
        )
        assert line.startswith(
            where + "unknown key env.frame_skp. Did you mean 'env.frame_skip'?"
        ), line
        assert line.endswith("Fix the config file") and "'+'" not in line


def test_a_per_env_wrapper_in_vector_wrappers_keeps_its_options_in_the_fix(
    tmp_path: Path,
) -> None:
    """#10: the fix ``wrappers=[time_limit]`` failed on its own (time_limit needs
    max_episode_steps); the suggested entry carries the entry's options, and runs as told."""
    proc = _cli(["vector_wrappers=[{name: time_limit, max_episode_steps: 10}]"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    fix = "'wrappers=[{name: time_limit, max_episode_steps: 10}]'"
    assert f"({fix} on the command line)" in _one_line(proc.stderr)
    ran = _cli([fix.strip("'"), "run.total_steps=8", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "+num_envs=2",
            "num_envs already exists ('+' adds a key the config does not have); drop the '+': "
            "num_envs=2",
        ),
        (
            "+vectorizer.name=subproc",
            "vectorizer.name already exists ('+' adds a key the config does not have); drop "
            "the '+': vectorizer.name=subproc",
        ),
    ],
)
def test_a_plus_on_a_key_that_exists_says_drop_the_plus(
    tmp_path: Path, override: str, says: str
) -> None:
    """#42: Hydra's "Could not append to config. An item is already at 'num_envs'"."""
    import envfactory
    from envfactory.errors import ConfigError

    proc = _cli([override, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == says
    with pytest.raises(ConfigError) as info:
        envfactory.compose([override])
    assert str(info.value) == says


def test_hydra_full_error_other_than_1_keeps_the_one_line(tmp_path: Path) -> None:
    """Hydra gives tracebacks for ``HYDRA_FULL_ERROR=1`` only; ``0`` (a user turning it off)
    got a traceback from envfactory."""
    args = ["env.frame_skp=4", "env=atari", f"hydra.run.dir={tmp_path / 'run'}"]
    off = _cli(args, tmp_path, env={"HYDRA_FULL_ERROR": "0"})
    assert off.returncode == 2
    assert _one_line(off.stderr).startswith(
        "unknown key env.frame_skp. Did you mean 'env.frame_skip'?"
    )
    on = _cli(args, tmp_path, env={"HYDRA_FULL_ERROR": "1"})
    assert "Traceback" in on.stderr


@pytest.mark.parametrize("name", ["async_reset", "recv", "send"])
@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_pool_calls_on_a_vector_env_that_is_no_pool_say_where_they_are(
    vectorizer: str, name: str
) -> None:
    """#78: a bare ``AttributeError: 'DummyVecEnv' object has no attribute 'recv'``. Still an
    AttributeError (``hasattr`` stays False for code that probes), now saying where."""
    import envfactory

    with envfactory.make_vec(overrides=[f"vectorizer={vectorizer}", "num_envs=2"]) as envs:
        with pytest.raises(AttributeError) as info:
            getattr(envs, name)
        assert str(info.value) == (
            f"{type(envs).__name__} has no {name}(): async_reset/recv/send belong to the async "
            "pool, which vectorizer=subproc (or subproc-atari) builds with "
            "vectorizer.batch_size=N (recv returns the first N envs ready); this VectorEnv "
            "steps every env at once with reset()/step()"
        )
        assert not hasattr(envs, name) and not hasattr(type(envs), name)
        with pytest.raises(AttributeError, match="'no_such_attribute'"):
            envs.no_such_attribute  # noqa: B018
    with envfactory.make_vec(
        overrides=["vectorizer=subproc", "num_envs=2", "vectorizer.batch_size=1"]
    ) as pool:
        assert all(callable(getattr(pool, n)) for n in ("async_reset", "recv", "send"))


def test_a_mistake_every_sweep_job_shares_is_said_once(tmp_path: Path) -> None:
    """``-m num_envz=1,2`` failed every job with the same line and ended with only "2 of 2
    sweep jobs failed": the mistake is now on the last line."""
    proc = _cli(["-m", "num_envz=1,2", "run.total_steps=8", "hydra.sweep.dir=sw"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "envfactory: error: all 2 sweep jobs failed: unknown key num_envz. Did you mean 'num_envs'?"
    ), last
    assert last.endswith(f"(see {tmp_path / 'sw' / 'sweep_summary.md'})")
