"""``envfactory tune``: options, the candidate grid, a real run on CartPole with a tiny
budget (table, preset, plot), the preset composing and building from the user config dir
(Python API and the command), Ctrl-C keeping what was measured, and the busy processes
always cleaned up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import envfactory
from envfactory.cli import tune, tune_paths
from envfactory.cli.measure import busy
from envfactory.cli.presets import CONFIG_DIR_ENV_VAR, user_config_dir, write_preset

BIN = Path(sys.executable).parent
BUSY_MARK = "parent = os.getppid()"  # a line of the busy processes' code


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user config dir of every test here: a fresh folder, never the real one."""
    folder = tmp_path / "config"
    monkeypatch.setenv(CONFIG_DIR_ENV_VAR, str(folder))
    return folder


def busy_pids() -> set[int]:
    import psutil

    out = set()
    for p in psutil.process_iter(["cmdline"]):
        if BUSY_MARK in " ".join(p.info["cmdline"] or []):
            out.add(p.pid)
    return out


def _env(config_dir: Path) -> dict[str, str]:
    return {**os.environ, CONFIG_DIR_ENV_VAR: str(config_dir), "PYTHONUNBUFFERED": "1"}


# -- options ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--seconds", "-1"], "--seconds '-1': expected a value >= 0.05"),
        (["--busy-cores", "two"], "--busy-cores 'two': expected an integer"),
        (["--seconds", "inf"], "--seconds 'inf': expected a finite number"),
        (
            ["--busy-cores", str((os.cpu_count() or 1) + 1)],
            f"expected a value <= {os.cpu_count() or 1} (one busy process per core of this "
            "machine at most)",
        ),
        (["--rounds", "0"], "--rounds '0': expected a value >= 1"),
        (["--vectorizers", "dumy"], "vectorizer 'dumy' is not registered. Did you mean 'dummy'?"),
        (["--name", "subproc"], "--name 'subproc' is a registered vectorizer"),
        (["--name", "a b"], "--name 'a b': expected letters, digits"),
        (["--frobnicate"], "unknown option --frobnicate. Options: --help, --seconds, --budget"),
        (["num_envs=0"], "num_envs must be a positive integer, got 0"),
        (["vectorizer=subproc", "--vectorizers", "dummy"], "give vectorizer=X or --vectorizers"),
        (
            ["vectorizer.in_seres=2"],
            "none of the vectorizers tried (dummy, subproc, auto) has option",
        ),
        (["vectorizer.in_series=0"], "vectorizer.in_series=0: expected an integer >= 1"),
    ],
)
def test_bad_options_one_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str], config_dir: Path
) -> None:
    assert tune.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("envfactory tune: error: ") and expected in err, err
    assert err.count("\n") == 1, err
    assert not config_dir.exists()  # nothing written


def test_grid_follows_schema_and_fixed_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """dummy as the baseline; subproc's defaults, in_series 1 and one worker per core,
    in_parent 0 and a worker's share; pools only with --async; an option the user fixes
    (vectorizer.in_series=2) is no axis and is passed to every candidate that has it."""
    monkeypatch.setattr(tune.os, "cpu_count", lambda: 2)  # (as the 2-core CI machine)
    args = tune.parse_args(["num_envs=8"])
    labels = [c.label for c in tune.candidates(tune.make_plan(args), False)[0]]
    parent = [0, 4]
    assert labels == [
        "dummy",
        "subproc",
        "subproc(in_series=1)",
        "subproc(in_series=4)",
        *[f"subproc(in_parent={k})" for k in parent],
        "auto",  # its defaults only (issue 39: the docs recommend it, tune never measured it)
    ]
    plan = tune.make_plan(tune.parse_args(["num_envs=8", "vectorizer.in_series=2"]))
    cands, _ = tune.candidates(plan, True)
    assert [c.label for c in cands if c.vectorizer == "subproc"] == [
        "subproc",
        *[f"subproc(in_parent={k})" for k in parent],
        "subproc(batch_size=4)",
    ]
    assert [c.pool for c in cands if c.vectorizer != "auto"] == [False] * (len(cands) - 2) + [True]
    auto = [c for c in cands if c.vectorizer == "auto"]  # the user's fixed option reaches it
    assert [(c.label, c.fixed) for c in auto] == [("auto", ("vectorizer.in_series=2",))]
    assert cands[0].label == "dummy" and cands[0].fixed == ()
    over = cands[1].overrides(plan.base)
    assert over == ["num_envs=8", "vectorizer=subproc", "vectorizer.in_series=2"]
    assert envfactory.compose(over).vectorizer.in_series == 2
    atari = tune.make_plan(tune.parse_args(["env=pong", "num_envs=2"]))
    assert atari.names[:3] == ["dummy", "subproc", "subproc-atari"]
    assert atari.names[-1] == "auto"
    assert atari.env == "ALE/Pong-v5 (family atari)"


@pytest.mark.parametrize(
    ("num_envs", "cpus", "ladder"),
    [
        (8, 2, [1, 4]),  # one env per worker; one worker per core (two workers)
        (16, 16, [1, 2, 4, 8]),  # 16, 8, 4, 2 workers
        (64, 16, [1, 4, 8, 16, 32]),
        (16, 12, [1, 2, 3, 6, 8]),  # 12, 6, 3 workers, and two even where halving skips it
        (16, 1, [1, 8]),
        (3, 16, [1, 2]),
        (1, 16, []),  # nothing to split
    ],
)
def test_series_ladder_halves_the_workers_down_to_two(
    num_envs: int, cpus: int, ladder: list[int]
) -> None:
    assert tune.series_ladder(num_envs, cpus) == ladder


def test_grid_tries_fewer_workers_on_many_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 16 cores the in_series axis halves the workers down to two (16 CartPoles: 4
    workers stepped 1.7x faster than the default 15 on the 16-core device machine), and
    subproc-atari gets the same axis for an Atari env."""
    monkeypatch.setattr(tune.os, "cpu_count", lambda: 16)
    cands, _ = tune.candidates(tune.make_plan(tune.parse_args(["num_envs=16"])), False)
    assert [c.label for c in cands if "in_series" in c.label] == [
        f"subproc(in_series={k})" for k in (1, 2, 4, 8)
    ]
    plan = tune.make_plan(tune.parse_args(["env=atari", "num_envs=64"]))
    series = [c.label for c in tune.candidates(plan, False)[0] if "in_series" in c.label]
    assert series == [f"{v}(in_series={k})" for v in ("subproc", "subproc-atari")
                      for k in (1, 4, 8, 16, 32)]  # fmt: skip


# -- the preset composes from the user config dir ------------------------------------------
@pytest.mark.slow
def test_preset_composes_and_builds_from_user_config_dir(config_dir: Path) -> None:
    """A preset written after the plugins were loaded composes at once (the folder is on
    the search path even before it exists) and builds; register_configs sees it too."""
    assert envfactory.compose(["num_envs=2"]).vectorizer.name == "dummy"  # registry loaded
    assert user_config_dir() == config_dir and not config_dir.exists()
    write_preset(config_dir / "vectorizer" / "tuned.yaml", "subproc", {"in_series": 1},
                 ["measured: nothing"])  # fmt: skip
    cfg = envfactory.compose(["vectorizer=tuned", "num_envs=2"])
    assert (cfg.vectorizer.name, cfg.vectorizer.in_series) == ("subproc", 1)
    with envfactory.make_vec(cfg) as envs:
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        assert envs.num_envs == 2
    envfactory.reset_plugins()
    envfactory.register_configs()
    from hydra.core.config_store import ConfigStore

    assert ConfigStore.instance().load("envfactory/vectorizer/tuned.yaml").node.in_series == 1


def test_a_missing_preset_says_where_it_was_looked_for(config_dir: Path) -> None:
    """``vectorizer=tuned`` before any ``envfactory tune`` (or with the preset elsewhere):
    the unknown-name error names the preset file it looked for and how to get one there;
    a name no preset can have gets no such sentence."""
    with pytest.raises(envfactory.ConfigError) as err:
        envfactory.compose(["vectorizer=tuned", "num_envs=2"])
    msg = str(err.value)
    assert "unknown vectorizer 'tuned'" in msg and "\n" not in msg
    assert f"No preset {config_dir / 'vectorizer' / 'tuned.yaml'} either" in msg
    assert "`envfactory tune ... --name tuned` writes one there" in msg
    assert "--config-dir DIR or set ENVFACTORY_CONFIG_DIR" in msg
    with pytest.raises(envfactory.ConfigError) as odd:
        envfactory.get_registry().vectorizer("a b", key="vectorizer=a b")
    assert "No preset" not in str(odd.value)


def test_auto_when_it_wins_is_the_preset(config_dir: Path) -> None:
    """``auto`` is measured, and when it has the highest median the preset written is
    ``vectorizer: auto`` (with the user's fixed options), which composes and builds."""
    args = tune.parse_args(["num_envs=4", "vectorizer.spin_us=0", "--no-plot"])
    plan = tune.make_plan(args)
    cands, _ = tune.candidates(plan, False)
    assert "auto" in [c.label for c in cands]
    res = tune.TuneResult(cands, rounds=1, seconds=0.1)
    res.samples = {c.label: [1000.0] for c in cands}
    res.samples["auto"] = [5000.0]  # (the numbers a run measured: auto fastest)
    best = tune.pick(res, False)
    assert best is not None and best.label == "auto"
    path = tune.write_outputs(plan, args, res, best, tune.render_table(res, best))
    text = path.read_text()
    assert "defaults:\n  - auto\n  - _self_\nspin_us: 0\n" in text and "# picked: auto" in text
    cfg = envfactory.compose(["vectorizer=tuned", "num_envs=4"])
    assert (cfg.vectorizer.name, cfg.vectorizer.spin_us, cfg.vectorizer.in_parent) == (
        "auto",
        0,
        None,
    )
    with envfactory.make_vec(cfg) as envs:
        envs.reset(seed=0)
        assert envs.run_record.split is not None  # auto decided, and says why


# -- real runs -----------------------------------------------------------------------------
@pytest.mark.slow
def test_tune_cartpole_table_preset_plot(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real run, tiny budget: the table (every candidate, ratio to dummy, the pick), the
    preset with the table in its comment, composing and building; JSON and PNG."""
    argv = ["env=gym", "num_envs=4", "--seconds", "0.1", "--rounds", "2"]
    assert tune.main(argv) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("envfactory tune: CartPole-v1 (family gym), num_envs=4")
    assert "2 round(s) x 0.10 s" in lines[0]
    rows = {ln.split()[0]: ln for ln in lines if ln.startswith("  ") and "steps/s" not in ln}
    assert {"dummy", "subproc", "subproc(in_series=1)", "subproc(in_parent=0)", "auto"} <= set(rows)
    assert " 1.00x " in rows["dummy"]
    picked = [label for label, ln in rows.items() if ln.endswith("<- picked")]
    assert len(picked) == 1
    preset = config_dir / "vectorizer" / "tuned.yaml"
    assert f"preset: {preset} ({picked[0]})" in out
    text = preset.read_text()
    assert f"# picked: {picked[0]}" in text
    assert all(f"# {ln.strip()}" in text for ln in lines[1:8] if ln.startswith("  "))
    assert "pools (batch_size) not measured" in err
    cfg = envfactory.compose(["vectorizer=tuned", "num_envs=4"])
    assert cfg.vectorizer.name == picked[0].split("(")[0]
    with envfactory.make_vec(overrides=["vectorizer=tuned", "num_envs=4"]) as envs:
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
    import json

    data = json.loads((config_dir / "tune" / "tuned.json").read_text())
    assert data["picked"] == picked[0] and data["rounds"] == 2
    assert all(len(c["samples"]) == 2 for c in data["candidates"])
    assert (config_dir / "tune" / "tuned.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_command_tune_then_run_with_preset(config_dir: Path) -> None:
    """``envfactory tune`` (the console script) with a busy core and --async, then
    ``envfactory vectorizer=tuned2`` runs with the preset; no busy process is left."""
    before = busy_pids()
    cmd = [str(BIN / "envfactory"), "tune", "num_envs=4", "--vectorizers", "dummy,subproc",
           "--busy-cores", "1", "--async", "--seconds", "0.1", "--rounds", "1",
           "--name", "tuned2", "--no-plot"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(config_dir))
    assert proc.returncode == 0, proc.stderr
    assert "busy cores 1" in proc.stdout and "(recv/send loop)" in proc.stdout
    assert "envfactory tune: round 1/1 dummy: " in proc.stderr  # no terminal: one line each
    assert (config_dir / "vectorizer" / "tuned2.yaml").is_file()
    assert not (config_dir / "tune" / "tuned2.png").exists()
    assert busy_pids() <= before
    run = subprocess.run(
        [str(BIN / "envfactory"), "vectorizer=tuned2", "num_envs=4", "run.total_steps=100",
         "hydra.run.dir=" + str(config_dir.parent / "run")],
        capture_output=True, text=True, timeout=300, env=_env(config_dir),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "envfactory summary" in run.stdout


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_measured(config_dir: Path) -> None:
    """Ctrl-C mid-run: the partial table, a preset from it, exit 130, busy processes gone."""
    before = busy_pids()
    cmd = [str(BIN / "envfactory"), "tune", "num_envs=2", "--seconds", "0.3", "--rounds", "50",
           "--busy-cores", "1", "--no-plot"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(config_dir))  # fmt: skip
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # wait for the first measurement
        seen.append(line)
        if "steps/s" in line:
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + err
    assert "INTERRUPTED (Ctrl-C): partial" in out
    assert "<- picked" in out
    text = (config_dir / "vectorizer" / "tuned.yaml").read_text()
    assert "INTERRUPTED" in text
    assert envfactory.compose(["vectorizer=tuned"]).vectorizer.name in ("dummy", "subproc")
    deadline = time.monotonic() + 5
    while busy_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not busy_pids() - before


def test_busy_processes_end_with_the_block_and_with_their_parent(tmp_path: Path) -> None:
    """Killed when the block ends; and if the parent is SIGKILLed (no cleanup at all),
    they notice and end by themselves."""
    with busy(2) as procs:
        assert all(p.poll() is None for p in procs)
    assert all(p.returncode is not None for p in procs)
    code = textwrap.dedent(
        """
        import time
        from envfactory.cli.measure import busy
        with busy(1) as procs:
            print(procs[0].pid, flush=True)
            time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(child, 0)  # running
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the busy process outlived its SIGKILLed parent")


def test_budget_stops_at_a_round_boundary(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--budget 1 with 50 rounds: whole rounds only (every candidate as many samples), a
    line that says the budget ran out; the preset is written from what was measured."""
    import json

    t0 = time.monotonic()
    argv = ["num_envs=2", "--vectorizers", "dummy", "--budget", "1", "--rounds", "50",
            "--no-plot"]  # fmt: skip
    assert tune.main(argv) == 0
    assert time.monotonic() - t0 < 30
    out, err = capsys.readouterr()
    data = json.loads((config_dir / "tune" / "tuned.json").read_text())
    assert 1 <= data["rounds"] < 50
    assert data["seconds"] == tune.MIN_SECONDS
    assert [len(c["samples"]) for c in data["candidates"]] == [data["rounds"]]
    assert f"the budget ran out after {data['rounds']} round(s) of 50" in err
    assert f"{data['rounds']} round(s) x 0.20 s per candidate" in out


def test_destination_is_made_and_written_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's trial: ``--config-dir /proc/x`` passed the check (``/proc`` looked
    writable to root), measured for the whole budget and then failed writing the preset
    (exit 1). The check now makes the folders and writes a file in them."""
    measured: list[object] = []

    def measuring(*args: object) -> None:
        measured.append(args)
        raise AssertionError("measuring before the destination was checked")

    monkeypatch.setattr(tune, "run_rounds", measuring)
    argv = ["--budget", "3", "--rounds", "1", "--seconds", "0.05"]
    assert tune.main(["--config-dir", "/proc/envfactory-no-such", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and measured == []
    assert err == (
        "envfactory tune: error: --config-dir /proc/envfactory-no-such: cannot write the "
        "preset there: cannot make the folder /proc/envfactory-no-such: [Errno 2] No such "
        "file or directory; name a folder you can write (it is made if missing), e.g. "
        "--config-dir presets\n"
    )

    # a folder that is made but takes no file: the folders made are removed again
    def no_file(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(kwargs.get("dir")))

    mkstemp = tune_paths.tempfile.mkstemp
    monkeypatch.setattr(tune_paths.tempfile, "mkstemp", no_file)
    new = tmp_path / "new" / "presets"
    assert tune.main(["--config-dir", str(new), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and measured == [] and err.count("\n") == 1
    assert err.startswith(f"envfactory tune: error: --config-dir {new}: cannot write the preset")
    assert f"cannot write a file in {new / 'vectorizer'}: [Errno 13] Permission denied" in err
    assert not (tmp_path / "new").exists()
    monkeypatch.setattr(tune_paths.tempfile, "mkstemp", mkstemp)

    # a folder that does not exist yet is made, with vectorizer/ and tune/, and nothing else
    ns = tune.parse_args(["--config-dir", str(new)])
    assert tune_paths.check_destination(ns) is None
    assert sorted(p.relative_to(new).as_posix() for p in new.rglob("*")) == ["tune", "vectorizer"]
