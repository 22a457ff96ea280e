"""A new run directory for every job (a new user's trial): ``envfactory --rerun runs/first;
envfactory --rerun runs/first seed=4 num_envs=8`` both wrote ``outputs/<date>/<time>`` (they
started in the same second), and the first job's summary was lost. `UniqueRunDir`
(``envfactory.cli.run_dir``) claims a time-named run dir (sweep dir) before Hydra makes it
and takes ``<time>-2``, ``-3``, ... when it exists."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import setup_globals
from omegaconf import DictConfig, OmegaConf

from envfactory.cli.run_dir import claim_dir, hydra_quote, make_unique

BIN = Path(sys.executable).parent
EARLIER = '{"status": "ok", "note": "an earlier job of that second"}\n'


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [str(BIN / "envfactory"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _earlier_jobs(root: Path, *, sweep: bool = False) -> dict[Path, str]:
    """Every ``root/<date>/<time>`` of the next two minutes, as an earlier job of that second
    left it (its ``summary.json``; a sweep's ``multirun.yaml`` and job 0): the folder Hydra
    picks for the job about to start is one of them. ``{folder: its files}``."""
    names = ["0/summary.json", "multirun.yaml"] if sweep else ["summary.json"]
    folders: dict[Path, str] = {}
    now = datetime.now()
    for s in range(-5, 120):
        folder = root / (now + timedelta(seconds=s)).strftime("%Y-%m-%d/%H-%M-%S")
        for name in names:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(EARLIER)
        folders[folder] = _files(folder)
    return folders


def _files(folder: Path) -> str:
    return "\n".join(
        f"{p.relative_to(folder)}: {hashlib.sha1(p.read_bytes()).hexdigest()[:12]}"
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    )


def _unchanged(earlier: dict[Path, str]) -> None:
    for folder, files in earlier.items():
        assert _files(folder) == files, folder  # nothing written into an earlier job's folder


@pytest.mark.slow  # a whole CLI job
def test_a_job_started_in_the_second_of_an_earlier_one_gets_its_own_run_dir(
    tmp_path: Path,
) -> None:
    earlier = _earlier_jobs(tmp_path / "outputs")
    proc = _cli(["seed=4", "num_envs=8", "run.total_steps=40", "run.progress=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    _unchanged(earlier)
    [path] = [p for p in tmp_path.glob("outputs/*/*/summary.json") if p.parent not in earlier]
    run_dir = path.parent
    assert run_dir.name.endswith("-2") and (run_dir.parent / run_dir.name[:-2]).is_dir()
    summary = json.loads(path.read_text())
    assert (summary["num_envs"], summary["seed"], summary["output_dir"]) == (8, 4, str(run_dir))
    assert f"saved to     {path}" in proc.stdout
    saved = yaml.safe_load((run_dir / ".hydra" / "hydra.yaml").read_text())
    assert (tmp_path / saved["hydra"]["run"]["dir"]).resolve() == run_dir  # the folder it used


@pytest.mark.slow  # a whole CLI sweep
def test_a_sweep_started_in_the_second_of_an_earlier_one_gets_its_own_sweep_dir(
    tmp_path: Path,
) -> None:
    earlier = _earlier_jobs(tmp_path / "multirun", sweep=True)
    proc = _cli(["-m", "seed=0,1", "run.total_steps=20", "run.progress=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    _unchanged(earlier)
    [table] = tmp_path.glob("multirun/*/*/sweep_summary.json")
    sweep_dir = table.parent
    assert sweep_dir.name.endswith("-2") and (sweep_dir.parent / sweep_dir.name[:-2]).is_dir()
    assert f"envfactory sweep: 2 job(s) in {sweep_dir}" in proc.stdout
    jobs = json.loads(table.read_text())["jobs"]
    assert [(j["job_num"], j["seed"], j["status"]) for j in jobs] == [(0, 0, "ok"), (1, 1, "ok")]
    for job in jobs:  # every job of the sweep is in the new folder
        assert Path(job["output_dir"]).parent == sweep_dir


def test_claim_dir_makes_the_folder_or_the_next_free_name(tmp_path: Path) -> None:
    base = tmp_path / "out" / "05-34-01"
    assert claim_dir(base) == base and base.is_dir()
    assert claim_dir(base) == tmp_path / "out" / "05-34-01-2"
    assert claim_dir(base) == tmp_path / "out" / "05-34-01-3"
    (tmp_path / "notes").write_text("mine\n")  # a file in the way: left to Hydra's error
    assert claim_dir(tmp_path / "notes") is None
    assert claim_dir(tmp_path / "notes" / "run") is None
    assert (tmp_path / "notes").read_text() == "mine\n"


@pytest.mark.parametrize(
    "folder", ["multirun/2026-11-27/05-34-01-2", "a b/it's", "ends\\", "a\\'b", "x/${y}", "é"]
)
def test_hydra_quote_reads_back_as_the_same_folder(folder: str) -> None:
    override = OverridesParser.create().parse_override(f"hydra.sweep.dir={hydra_quote(folder)}")
    cfg = OmegaConf.create({"dir": override.value()})
    assert cfg.dir == folder


def _config(pattern: str, given: list[str] | None = None) -> DictConfig:
    """A composed config as Hydra hands it to the callback (its ``hydra`` node read-only)."""
    setup_globals()  # the now resolver
    cfg = OmegaConf.create(
        {
            "hydra": {
                "run": {"dir": pattern},
                "sweep": {"dir": pattern, "subdir": "${hydra.job.num}"},
                "overrides": {"hydra": given or [], "task": ["seed=1"]},
            }
        }
    )
    OmegaConf.set_readonly(cfg.hydra, True)
    return cfg


@pytest.mark.parametrize("kind", ["run", "sweep"])
def test_make_unique_follows_the_rule(tmp_path: Path, kind: str) -> None:
    pattern = f"{tmp_path}/out/${{now:%Y}}"  # one folder for the whole year: taken at once
    taken = tmp_path / "out" / time.strftime("%Y")
    taken.mkdir(parents=True)
    cfg = _config(pattern)
    assert make_unique(cfg, kind) == tmp_path / "out" / f"{taken.name}-2"
    assert cfg.hydra[kind].dir == str(tmp_path / "out" / f"{taken.name}-2")
    added = list(cfg.hydra.overrides.hydra)
    if kind == "sweep":  # the jobs of the sweep are composed again from these overrides
        [override] = added
        parsed = OverridesParser.create().parse_override(override)
        assert parsed.key_or_group == "hydra.sweep.dir" and parsed.value() == cfg.hydra.sweep.dir
    else:
        assert added == []
    # given on the command line, or a fixed folder: used as it is (reused on purpose)
    for cfg in (
        _config(pattern, [f"hydra.{kind}.dir={pattern}"]),
        _config(pattern, [f"+hydra.{kind}={{dir: {tmp_path}}}"]),
        _config(str(tmp_path)),
        _config("."),
    ):
        before = OmegaConf.to_container(cfg.hydra, resolve=False)
        assert make_unique(cfg, kind) is None
        assert OmegaConf.to_container(cfg.hydra, resolve=False) == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        taken.name,
        f"{taken.name}-2",
    ]
