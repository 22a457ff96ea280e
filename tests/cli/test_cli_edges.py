"""The command line at its edges (issue 28): the run summary under ``legacy_final_info``, a
damaged run dir given to ``--rerun``, Ctrl-C in a sweep, an env failing under ``dummy``, a
run dir that cannot be written, ``--rerun`` spelled wrong, ``tune``'s destination, the
help texts, and (a new user's trial) Ctrl-C while the workers start. Every command is a real
``envfactory`` process, as a user runs it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envfactory.cli import tune
from envfactory.cli.presets import CONFIG_DIR_ENV_VAR
from envfactory.cli.report import ERROR_FILE, error_line
from envfactory.errors import RemoteEnvError, remote_env_error

BIN = Path(sys.executable).parent
TESTS = Path(__file__).resolve().parents[1]  # faulty_envs.py, for the workers too
LEGACY = ["autoreset_mode=same_step", "vector_wrappers=[{name: legacy_final_info}]"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    env.pop("HYDRA_FULL_ERROR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _start(args: list[str], cwd: Path, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "envfactory"), *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = _start(args, cwd)
    out, err = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _assert_group_gone(pgid: int, seconds: float = 5.0) -> None:
    """No process of the command's process group (its fork server, its workers) outlives
    it by more than ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"a process of the command's group outlived it by {seconds:g} s")


def _one_line(err: str) -> None:
    assert err.startswith("envfactory: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err


# -- item 3: the summary under legacy_final_info ------------------------------------------
def test_summary_counts_episodes_under_legacy_final_info(tmp_path: Path) -> None:
    """``episodes 0`` and ``mean return n/a`` for 2,000 CartPole steps before: the episode
    statistics were in 0.29's ``final_info`` object array, which the summary did not read."""
    out = tmp_path / "job"
    proc = _cli([*LEGACY, "run.progress=false", f"hydra.run.dir={out}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2000 and 40 < summary["episodes"] < 200  # ~22 steps each
    assert isinstance(summary["mean_return"], float) and 8 < summary["mean_return"] < 60


def test_pool_under_a_vector_wrapper_names_the_wrapper_not_subproc(tmp_path: Path) -> None:
    """It said to "use vectorizer=subproc or subproc-atari" while it was subproc."""
    proc = _cli(
        [*LEGACY, "vectorizer=subproc", "vectorizer.batch_size=2", f"hydra.run.dir={tmp_path}"],
        tmp_path,
    )
    assert proc.returncode == 2
    _one_line(proc.stderr)
    assert "use vectorizer=subproc" not in proc.stderr
    assert "legacy_final_info" in proc.stderr and "vector_wrappers=[]" in proc.stderr
    assert "vectorizer.batch_size=null" in proc.stderr


# -- item 5: a damaged run dir ------------------------------------------------------------
DAMAGES = {  # what is done to the saved job, a fragment of the line
    "emptied overrides.yaml": ("overrides.yaml", b"", "overrides.yaml is empty"),
    "binary overrides.yaml": ("overrides.yaml", b"\x00\xff\xfe\x00\x89PNG", "overrides.yaml"),
    "hydra.yaml without hydra": ("hydra.yaml", b"foo: 1\n", "hydra.yaml has no 'hydra' key"),
    "truncated hydra.yaml": ("hydra.yaml", None, "hydra.yaml"),
}


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_rerun_of_a_damaged_run_dir_is_one_line_exit_2(tmp_path: Path) -> None:
    """An emptied ``overrides.yaml`` silently ran the default CartPole job; the other damages
    gave a traceback and exit 1."""
    first = tmp_path / "first"
    proc = _cli(["env=mountaincar", "run.total_steps=20", f"hydra.run.dir={first}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    runs = {}
    for i, (name, (file, data, _)) in enumerate(DAMAGES.items()):
        damaged = tmp_path / f"damaged{i}"
        shutil.copytree(first, damaged)
        path = damaged / ".hydra" / file
        path.write_bytes(data if data is not None else path.read_bytes()[:300])
        runs[name] = (damaged, _start(["--rerun", str(damaged)], tmp_path))
    for name, (damaged, running) in runs.items():
        out, err = running.communicate(timeout=240)
        assert running.returncode == 2, (name, err)
        _one_line(err)
        assert f"--rerun {damaged}: " in err and DAMAGES[name][2] in err, (name, err)
        assert "envfactory summary" not in out, name
    assert not (tmp_path / "outputs").exists()  # no job ran


# -- item 6: Ctrl-C in a sweep -----------------------------------------------------------
@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_ctrl_c_in_a_sweep_keeps_the_table_of_the_finished_jobs(tmp_path: Path) -> None:
    """A real SIGINT to the process group of a real sweep (Ctrl-C in a terminal) during its
    second job: exit 130 and no ``sweep_summary.*`` before."""
    sweep = tmp_path / "sweep"
    proc = _start(
        [
            "-m",
            "run.total_steps=40,1000000000,40",
            "run.progress=false",
            f"hydra.sweep.dir={sweep}",
        ],
        tmp_path,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (sweep / "1" / ".hydra" / "overrides.yaml").exists():  # job 1 has started
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    jobs = json.loads((sweep / "sweep_summary.json").read_text())["jobs"]
    assert [(j["job_num"], j["status"]) for j in jobs] == [(0, "ok"), (1, "interrupted")]
    assert jobs[0]["steps"] == 40 and 0 < jobs[1]["steps"] < 1000000000
    table = (sweep / "sweep_summary.md").read_text()
    assert "interrupted" in table.splitlines()[0]
    assert any(line.startswith("| 1 |") and "interrupted" in line for line in table.splitlines())
    assert (sweep / "sweep_summary.png").is_file()
    assert "| 0 |" in out  # the table was printed
    assert err.rstrip().splitlines()[-1].startswith("envfactory: sweep interrupted: ")


# -- item 9: an env failing under dummy ----------------------------------------------------
# (a bad gym kwarg, once the first case here, is a config error at compose now: test_config)
DUMMY_FAILURES = [  # (arguments, the exception's type, its message on the line)
    (
        ["env.id=faulty_envs:Faulty-v0", "env.kwargs.fault=nope"],
        "ValueError",
        "fault must be one of",
    ),
    (
        ["env.id=faulty_envs:Faulty-v0", "env.kwargs.fault=raise", "env.kwargs.at_step=0"],
        "ValueError",
        "FaultyEnv fails on purpose",
    ),
]
if importlib.util.find_spec("Box2D") is None:  # gymnasium's message says to install it
    DUMMY_FAILURES.append((["env.id=LunarLander-v3"], "DependencyNotInstalled", "Box2D is not"))


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_env_failure_under_dummy_is_one_line_and_error_txt(tmp_path: Path) -> None:
    """64 to 89 lines of traceback before, and no ``error.txt``; ``subproc`` gave one line."""
    procs = [
        _start([*args, "vectorizer=dummy", f"hydra.run.dir={tmp_path / str(i)}"], tmp_path)
        for i, (args, _, _) in enumerate(DUMMY_FAILURES)
    ]
    for i, (proc, (args, kind, message)) in enumerate(zip(procs, DUMMY_FAILURES)):
        out, err = proc.communicate(timeout=240)
        saved = tmp_path / str(i) / ERROR_FILE
        assert proc.returncode == 1, (args, err)
        _one_line(err)
        assert err.startswith(f"envfactory: error: {kind}: "), (args, err)
        assert message in err and err.endswith(f" (full traceback: {saved})\n"), (args, err)
        text = saved.read_text()
        assert text.startswith(err.removeprefix("envfactory: error: ").split(" (full")[0])
        assert "Traceback (most recent call last)" in text and message in text
        assert "envfactory summary" not in out


# -- item 10: a RemoteEnvError's first line ------------------------------------------------
FIELDS = {"worker": 0, "pid": 1, "env_indices": [0], "env_id": "X-v0", "call": "start"}


def test_remote_env_error_first_line_carries_the_env_message() -> None:
    """It read ``worker 0 (pid ...) raised builtins.RuntimeError during start``."""
    err = remote_env_error(
        "raised builtins.RuntimeError",
        exc_type="builtins.RuntimeError",
        original=RuntimeError("the simulator's licence\nexpired"),
        remote_traceback="Traceback ...\nRuntimeError: the simulator's licence\nexpired\n",
        **FIELDS,
    )
    first, rest = str(err).split("\n", 1)
    assert first == (
        "worker 0 (pid 1, envs [0], env 'X-v0') raised builtins.RuntimeError during start: "
        "the simulator's licence expired"
    )
    assert "--- remote traceback ---" in rest and err.remote_traceback.startswith("Traceback")
    assert (err.worker, err.pid, err.env_indices, err.call) == (0, 1, [0], "start")
    assert isinstance(err, RuntimeError) and isinstance(err, RemoteEnvError)
    assert error_line(err) == f"RemoteEnvError(RuntimeError): {first}"  # the message once
    lost = remote_env_error(  # the exception did not come back: from the traceback
        "raised m.Gone",
        exc_type="m.Gone",
        original=None,
        remote_traceback="Traceback ...\nm.Gone: no attribute 'np_randm'\n",
        **FIELDS,
    )
    assert (
        str(lost).split("\n", 1)[0].endswith("raised m.Gone during start: no attribute 'np_randm'")
    )


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_get_attr_of_a_missing_attribute_names_it_on_the_first_line() -> None:
    import envfactory

    overrides = ["vectorizer=subproc", "num_envs=2", "vectorizer.in_parent=0"]
    with envfactory.make_vec(overrides=overrides) as envs:
        envs.reset(seed=0)
        with pytest.raises(AttributeError) as info:
            envs.get_attr("np_randm")
    first = str(info.value).split("\n", 1)[0]
    assert first.startswith("worker 0 (pid ") and "during call: " in first
    assert "'np_randm'" in first


# -- item 11: a run dir that cannot be written ---------------------------------------------
def test_run_dir_that_cannot_be_written_is_one_line_exit_2(tmp_path: Path) -> None:
    """28 and 37 lines of traceback before."""
    (tmp_path / "notes.txt").write_text("my notes\n")
    cases = {
        "notes.txt/run1": "notes.txt/run1",
        "/proc/envfactory-no-such/run1": "/proc/envfactory-no-such",
    }
    procs = {d: _start(["run.total_steps=20", f"hydra.run.dir={d}"], tmp_path) for d in cases}
    for run_dir, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 2, (run_dir, err)
        _one_line(err)
        assert "cannot write the run dir" in err and cases[run_dir] in err, err
        assert "hydra.run.dir" in err, err
        assert "envfactory summary" not in out
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"


def test_an_existing_run_dir_that_cannot_be_written_is_one_line_exit_2(tmp_path: Path) -> None:
    """An existing run dir without write permission: Hydra's logging set-up failed on its
    log file and the user got 58 lines ending ``Unable to configure handler 'file'``."""
    import shutil

    run_dir = tmp_path / "locked"
    run_dir.mkdir()
    run_dir.chmod(0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root writes anywhere: drop the capabilities that let it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv to drop root's capabilities")
        prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-all"]
    try:
        proc = subprocess.run(
            [*prefix, str(BIN / "envfactory"), "run.total_steps=20", f"hydra.run.dir={run_dir}"],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    finally:
        run_dir.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    _one_line(proc.stderr)
    assert f"cannot write the run dir: {run_dir}" in proc.stderr, proc.stderr
    assert "Permission denied" in proc.stderr and "hydra.run.dir=" in proc.stderr


# -- item 13: tune's destination -----------------------------------------------------------
def test_tune_checks_its_destination_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--config-dir <a file>`` measured every candidate, then failed writing."""
    monkeypatch.setenv(CONFIG_DIR_ENV_VAR, str(tmp_path / "config"))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x\n")
    measured: list[object] = []
    monkeypatch.setattr(tune, "run_rounds", lambda *a: measured.append(a))
    for argv, expected in (
        (["--config-dir", str(a_file)], f"--config-dir {a_file}: cannot write the preset"),
        (["--plot", str(a_file / "p.png")], f"--plot {a_file / 'p.png'}: cannot write the plot"),
    ):
        assert tune.main([*argv, "--seconds", "0.05"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert err.startswith("envfactory tune: error: ") and expected in err, err
    assert measured == []


@pytest.mark.slow
def test_tune_plot_failure_keeps_the_preset_and_says_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "cannot write the preset" although the preset was written."""
    config = tmp_path / "config"
    monkeypatch.setenv(CONFIG_DIR_ENV_VAR, str(config))

    def no_plot(*args: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / "p.png"))

    monkeypatch.setattr(tune, "plot_bars", no_plot)
    argv = ["--vectorizers", "dummy", "--seconds", "0.05", "--rounds", "1"]
    assert tune.main(argv) == 1
    out, err = capsys.readouterr()
    preset = config / "vectorizer" / "tuned.yaml"
    assert preset.is_file() and f"preset: {preset}" in out
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("envfactory tune: error: the plot was not written: ")
    assert "Permission denied" in last and f"the preset was written: {preset}" in last
    assert "cannot write the preset" not in err


# -- item 14: --rerun spelled wrong --------------------------------------------------------
@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_rerun_without_a_dir_and_rerun_in_a_sweep(tmp_path: Path) -> None:
    """Both printed Hydra's usage banner and ``hydra/sweeper=envfactory``, never typed."""
    proc = _cli(["--rerun"], tmp_path)
    assert proc.returncode == 2
    _one_line(proc.stderr)
    assert "--rerun needs the run dir of a saved job" in proc.stderr
    assert "envfactory --rerun RUN_DIR [overrides]" in proc.stderr
    assert "usage:" not in proc.stderr and "hydra/sweeper" not in proc.stderr
    first = tmp_path / "first"
    proc = _cli(["env=mountaincar", "run.total_steps=20", f"hydra.run.dir={first}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweep = tmp_path / "sweep"
    proc = _cli(["--rerun", str(first), "-m", "seed=1,2", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" not in proc.stderr and "hydra/sweeper" not in proc.stderr
    jobs = json.loads((sweep / "sweep_summary.json").read_text())["jobs"]
    assert [(j["family"], j["steps"], j["seed"]) for j in jobs] == [
        ("mountaincar", 20, 1),
        ("mountaincar", 20, 2),
    ]


# -- item 20: the help texts ---------------------------------------------------------------
def test_help_texts_are_plain_and_name_the_commands(tmp_path: Path) -> None:
    procs = {
        name: _start(args, tmp_path)
        for name, args in (("app", ["--help"]), ("tune", ["tune", "--help"]))
    }
    out = {}
    for name, proc in procs.items():
        out[name], err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    assert ":mod:" not in out["tune"] and "``" not in out["tune"]
    assert "~/.config/envfactory/vectorizer/<name>.yaml" in out["tune"]  # where, in words
    assert "ENVFACTORY_CONFIG_DIR" in out["tune"]
    app = out["app"]
    assert "envfactory tune" in app and "--rerun RUN_DIR" in app
    assert "hydra.callbacks" in app and "trust" in app  # a run dir is code to trust


# -- the re-trial's second pass: no run dir for a job that never started; unknown options ---
def test_a_config_error_leaves_no_run_dir(tmp_path: Path) -> None:
    """``envfactory num_envs=0`` left ``outputs/<date>/<time>/`` behind with only Hydra's
    ``.hydra/`` and an empty log: a run that never started. A run dir that holds anything
    else (one reused with ``hydra.run.dir``) is kept as it was."""
    proc = _cli(["num_envs=0"], tmp_path)
    assert proc.returncode == 2
    _one_line(proc.stderr)
    assert not (tmp_path / "outputs").exists(), list(tmp_path.rglob("*"))
    # the default layout's date folder holds another run: it stays, with that run
    other = tmp_path / "outputs" / "2024-05-01" / "12-00-00"
    other.mkdir(parents=True)
    proc = _cli(["num_envs=0", "hydra.run.dir=outputs/2024-05-01/12-00-01"], tmp_path)
    assert proc.returncode == 2
    assert [p.name for p in (tmp_path / "outputs" / "2024-05-01").iterdir()] == ["12-00-00"]
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    proc = _cli(["num_envs=0", f"hydra.run.dir={kept}"], tmp_path)
    assert proc.returncode == 2
    assert (kept / "notes.txt").read_text() == "mine" and (kept / ".hydra").is_dir()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--verison"],
            "unknown option --verison. Did you mean '--version'? Options: --help, --hydra-help, "
            "--version, ",
        ),
        (["--multirn", "seed=1,2"], "unknown option --multirn. Did you mean '--multirun'?"),
        (
            ["--multi", "--cfg", "job", "seed=1,2"],
            "--cfg/-c and --multirun/-m cannot be given together: give only one of --run/-r, ",
        ),
        (  # a new user's re-trial: Hydra's usage banner and "unrecognized arguments"
            ["num_envs=2", "--cfg", "job", "seed=3"],
            "options go before the overrides (Hydra reads the overrides as one list): "
            "envfactory --cfg job num_envs=2 seed=3",
        ),
    ],
)
def test_an_unknown_option_is_one_line_naming_the_close_match(
    tmp_path: Path, args: list[str], says: str
) -> None:
    """``envfactory --verison`` printed Hydra's usage banner and ``__main__.py: error:
    unrecognized arguments``; ``--multi --cfg job`` a ValueError traceback."""
    proc = _cli(args, tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    _one_line(proc.stderr)
    assert proc.stderr.startswith(f"envfactory: error: {says}"), proc.stderr
    assert "usage:" not in proc.stderr
    ok = _cli(["--cfg", "job", "--reso"], tmp_path)  # a prefix of an option is that option
    assert ok.returncode == 0 and "num_envs: 4" in ok.stdout, ok.stderr


def test_a_config_dir_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    """A new user's re-trial: "invalid envfactory config: Additional config directory ... not
    found"."""
    proc = _cli(["--config-dir", "no_such_folder", "seed=3"], tmp_path)
    assert proc.returncode == 2
    _one_line(proc.stderr)
    assert proc.stderr == (
        f"envfactory: error: --config-dir {tmp_path / 'no_such_folder'}: no such folder; give "
        "the folder that holds your config groups (DIR with DIR/experiment/NAME.yaml for "
        "+experiment=NAME)\n"
    )


def test_an_error_raised_while_a_ctrl_c_unwinds_is_the_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C in ``import hydra`` can surface as OmegaConf's ``AttributeError`` (its cleanup
    fails on the config the interrupt left half-built; seen in CI at delay 0.5 below): the
    command still says one line and exits 130. An error with no Ctrl-C behind it is raised."""
    from envfactory.cli import main as cli

    class Cleanup:
        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    def cut() -> None:
        with Cleanup():
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", cut)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 130
    assert capsys.readouterr().err == "envfactory: interrupted\n"

    def broken() -> None:
        with Cleanup():
            raise ValueError("no Ctrl-C here")

    monkeypatch.setattr(cli, "_main", broken)
    with pytest.raises(AttributeError):
        cli.main()


# A sitecustomize that sends the command a Ctrl-C where a library's import code loses it:
# in the bare ``except: pass`` around Cython's memoryview registration (numpy.random's import
# runs it; CI hung 60 s on a Ctrl-C that landed there), or, as a module MODULE is imported,
# in a bare except ("swallow"), in a finalizer ("finalizer": printed as "Exception ignored",
# then dropped), or turned into another error ("import_error", as Cython's module set-up
# does: seen 1 in 400 starts, with a traceback).
SWALLOWING_IMPORT = """
import abc, os, signal, sys

def ctrl_c():
    open(os.environ["SENT_MARK"], "w").close()
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(3))

class Finalized:
    def __del__(self):
        ctrl_c()

how, module = os.environ["SWALLOW"].split(":")
if how == "cython":
    register = abc.ABCMeta.register

    def register_once(cls, subclass):
        if subclass.__name__ == "_memoryviewslice" and not os.path.exists(os.environ["SENT_MARK"]):
            ctrl_c()
        return register(cls, subclass)

    abc.ABCMeta.register = register_once
else:
    class Probe:
        def find_spec(self, name, path, target=None):
            if name == module:
                sys.meta_path.remove(self)
                if how == "finalizer":
                    Finalized()
                failed = False
                try:
                    if how != "finalizer":
                        ctrl_c()
                except:  # what the library does
                    failed = how == "import_error"
                if failed:  # (a new error, with no KeyboardInterrupt in its context)
                    raise ImportError("cannot initialise module strings")
            return None

    sys.meta_path.insert(0, Probe())
"""


@pytest.mark.parametrize(
    "swallow",
    [
        "cython:numpy.random",
        "swallow:hydra",
        "finalizer:hydra",
        "import_error:numpy.random",
        "import_error:hydra",
    ],
)
def test_a_ctrl_c_that_an_import_loses_still_interrupts(tmp_path: Path, swallow: str) -> None:
    """The command counts each Ctrl-C from its first line: one that a library's import lost
    is raised again, and an error raised after one is the interrupt (one line, exit 130),
    where the command ran on or ended with a traceback."""
    (tmp_path / "sitecustomize.py").write_text(SWALLOWING_IMPORT)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "SWALLOW": swallow,
        "SENT_MARK": str(tmp_path / "sent"),
    }
    proc = subprocess.run(
        [str(BIN / "envfactory"), "vectorizer=subproc", "run.total_steps=2000"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert (tmp_path / "sent").exists(), "the Ctrl-C was not sent: nothing imported the spot"
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "envfactory: interrupted\n"


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.15, 0.3, 0.4, 0.5, 0.8, 1.5])
def test_ctrl_c_at_the_terminal_while_starting_is_one_line(tmp_path: Path, delay: float) -> None:
    """A Ctrl-C goes to the whole process group (the command, its fork server, its workers).
    Whenever it lands while the command starts (importing, loading the plugins, the fork
    server importing its modules, the workers starting), the command says one line and
    exits 130; nothing prints a traceback, and no process of the group is left."""
    proc = subprocess.Popen(
        [str(BIN / "envfactory"), "vectorizer=subproc", "run.total_steps=100000000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a command
    )
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert "envfactory: interrupted" in err, err
    _assert_group_gone(proc.pid)


# -- a new user's trial (err-lines): one line with the fix at the command line ---------------
OVERRIDE_MISTAKES = [  # (arguments, the line after "envfactory: error: ")
    (
        ["wrappers=time_limit"],
        "wrappers='time_limit': wrappers takes a list of wrappers, not a string; write "
        "wrappers=[time_limit], or 'wrappers=[{name: time_limit, max_episode_steps: 100}]' to "
        "give a wrapper options",
    ),
    (
        ["wrappers=[{name: time_limit, max_episode_steps: 100}"],
        "cannot read the override 'wrappers=[{name: time_limit, max_episode_steps: 100}': its "
        "[ is not closed; write 'wrappers=[{name: time_limit, max_episode_steps: 100}]'",
    ),
    (
        ["num_envs=1,2"],
        "num_envs=1,2 is a sweep over 2 values: add -m (--multirun) to run a job per value "
        "(in Python, compose once per value)",
    ),
    (
        ["env=gym,mountaincar"],
        "env=gym,mountaincar is a sweep over 2 values: add -m (--multirun) to run a job per "
        "value (in Python, compose once per value)",
    ),
    (
        ["+env.kwargs.sutton_barto_reward=maybe"],
        "env.kwargs.sutton_barto_reward='maybe': expected true or false (CartPoleEnv's "
        "sutton_barto_reward is annotated bool). Fix the value under env.kwargs",
    ),
    (
        ["wrappers=[{name: clip_reward, min_reward: 1, max_reward: -1}]"],
        "wrappers[0].max_reward=-1: expected a number >= 1 (its min_reward). gymnasium's "
        "ClipReward needs min_reward <= max_reward: swap them, or change one",
    ),
    (
        ["wrappers=[{name: resize_observation, shape: [84,84]}]"],
        "wrappers[0] (resize_observation) cannot wrap env 'CartPole-v1': ValueError: "
        "ResizeObservation requires a 2D or 3D image, got shape (4,); remove it or change its "
        "options",
    ),
]


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_the_new_users_mistakes_are_one_line_with_the_fix(tmp_path: Path) -> None:
    """What a new user's trial typed, and what it said before: ``wrappers: Invalid value
    assigned: str is not a ListConfig, list or tuple. (in wrappers=time_limit)``; advice to
    quote an override whose ``[`` is not closed; ``invalid envfactory config: Ambiguous value
    for argument 'num_envs=1,2'``; nothing at all for ``sutton_barto_reward=maybe`` (the
    string reached the env); ``InvalidBound: Min reward (1) must be smaller than max reward
    (-1)`` and ``ValueError: ResizeObservation requires ...`` with a traceback file, after
    building the envs."""
    procs = [
        _start([*args, "run.total_steps=8", f"hydra.run.dir={tmp_path / str(i)}"], tmp_path)
        for i, (args, _) in enumerate(OVERRIDE_MISTAKES)
    ]
    for proc, (args, line) in zip(procs, OVERRIDE_MISTAKES):
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 2, (args, err)
        assert err == f"envfactory: error: {line}\n", (args, err)
        assert "envfactory summary" not in out


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_a_wrapper_refusing_the_env_in_a_worker_says_the_same_on_its_line(tmp_path: Path) -> None:
    """Under ``subproc`` the wrapper fails in a worker: its line carried
    ``raised builtins.ValueError during start: ResizeObservation requires ...``."""
    args = ["wrappers=[{name: resize_observation, shape: [84,84]}]", "vectorizer=subproc"]
    proc = _cli([*args, "vectorizer.in_parent=0", f"hydra.run.dir={tmp_path}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    _one_line(proc.stderr)
    assert proc.stderr.startswith("envfactory: error: RemoteEnvError(ConfigError): worker 0 ")
    assert proc.stderr.endswith(
        " raised envfactory.errors.ConfigError during start: wrappers[0] (resize_observation) "
        "cannot wrap env 'CartPole-v1': ValueError: ResizeObservation requires a 2D or 3D "
        "image, got shape (4,); remove it or change its options\n"
    ), proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["reset", "init"])
def test_ctrl_c_while_the_workers_start_saves_a_summary_of_0_steps(
    tmp_path: Path, phase: str
) -> None:
    """A new user's trial: Ctrl-C while 8 Pongs started (their workers load the ROM in the
    first reset) said ``envfactory: interrupted`` and wrote no summary.json, which the docs
    promise. Here the env's first reset (``reset``) or its constructor (``init``) sleeps
    for a minute in the workers, and a real SIGINT goes to the command's process group
    once the env has begun it."""
    mark, run_dir = tmp_path / "mark", tmp_path / "run"
    proc = _start(
        [
            "env.id=faulty_envs:Faulty-v0",
            "vectorizer=subproc",
            "num_envs=2",
            "run.progress=false",
            f"env.kwargs.{phase}_sleep=60",
            f"env.kwargs.mark_file={mark}",
            f"hydra.run.dir={run_dir}",
        ],
        tmp_path,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (mark.is_file() and phase in mark.read_text().split()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)  # not the minute the env sleeps
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "envfactory summary" not in out, err
    saved = run_dir / "summary.json"
    assert err == f"envfactory: interrupted after 0 steps; partial summary saved to {saved}\n"
    summary = json.loads(saved.read_text())
    assert (summary["status"], summary["steps"], summary["num_envs"]) == ("interrupted", 0, 2)
    assert summary["env"] == "faulty_envs:Faulty-v0" and summary["output_dir"] == str(run_dir)
    _assert_group_gone(proc.pid)


def test_a_ctrl_c_while_hydra_composes_is_held_until_the_job_starts() -> None:
    """A KeyboardInterrupt raised inside OmegaConf left a node half-updated: Hydra then
    failed with an AttributeError and ~60 lines (a fresh-clone run hit it at 0.4 s, once the
    start had become faster). The command notes the first SIGINT while Hydra composes and
    raises it as the job starts; a second one is raised at once."""
    import signal as sig

    from envfactory.cli import held

    before = sig.getsignal(sig.SIGINT)
    held.hold()
    try:
        os.kill(os.getpid(), sig.SIGINT)  # noted, not raised
        time.sleep(0.05)
        assert held.take()  # the job starts: it was there
        with pytest.raises(KeyboardInterrupt):  # and SIGINT raises again
            os.kill(os.getpid(), sig.SIGINT)
            time.sleep(1)
        held.resume_holding()
        os.kill(os.getpid(), sig.SIGINT)
        with pytest.raises(KeyboardInterrupt):  # a second one while held: at once
            os.kill(os.getpid(), sig.SIGINT)
            time.sleep(1)
    finally:
        held.release()
    assert sig.getsignal(sig.SIGINT) is before
