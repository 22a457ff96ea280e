"""Parallel sweeps on Hydra's launcher plugins: ``envfactory -m hydra/launcher=joblib ...``
runs the jobs in joblib's loky worker processes, the subprocess vectorizers start their
workers there under every start method, and the sweep table is written once, by the
launching process, at the end. hydra-joblib-launcher hard-codes joblib's ``loky`` backend
(its ``_core.py``: the threading backend is incompatible with Hydra), whose workers are
not daemonic; joblib's ``multiprocessing`` backend, whose pool workers are daemonic, is
tested directly.

Needs the ``joblib`` extra (``pip install 'envfactory[joblib]'``, i.e.
hydra-joblib-launcher), which the README's test command installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "hydra_plugins.hydra_joblib_launcher", reason="pip install 'envfactory[joblib]'"
)

# a Hydra callback that records, in each job's output dir, which process ran the job
JOBINFO = """
import json, multiprocessing, os, time
from pathlib import Path
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback

class JobInfo(Callback):
    def on_job_end(self, config, job_return, **kwargs):
        out = Path(HydraConfig.get().runtime.output_dir)
        info = {"pid": os.getpid(), "daemon": multiprocessing.current_process().daemon}
        (out / "jobinfo.json").write_text(json.dumps(info))
"""

pytestmark = pytest.mark.slow  # real launcher sweeps: 5-10 s each


def _envfactory() -> str:
    exe = Path(sys.executable).with_name("envfactory")
    return str(exe) if exe.exists() else str(shutil.which("envfactory"))


def test_parallel_joblib_sweep_with_subproc(tmp_path: Path) -> None:
    """Two jobs in parallel, ``vectorizer=subproc`` with the forkserver and spawn start
    methods (in a loky worker the global start method is ``loky``, which a worker child
    cannot set: envfactory's workers do not inherit it)."""
    (tmp_path / "jobinfo.py").write_text(JOBINFO)
    sweep_dir = tmp_path / "sweep"
    cmd = [
        _envfactory(),
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "+hydra.callbacks.jobinfo._target_=jobinfo.JobInfo",
        "vectorizer=subproc",
        "vectorizer.context=forkserver,spawn",
        "run.total_steps=200",
        "run.progress=false",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env
    )
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    assert "backend=loky" in err + out and "is launching 2 jobs" in err + out
    jobs = json.loads((sweep_dir / "sweep_summary.json").read_text())["jobs"]
    assert [(j["vectorizer"], j["status"], j["steps"] >= 200) for j in jobs] == [
        ("subproc", "ok", True)
    ] * 2
    # each job ran in a joblib worker, not in the launching process, and not both in one
    infos = [json.loads((Path(j["output_dir"]) / "jobinfo.json").read_text()) for j in jobs]
    pids = {i["pid"] for i in infos}
    assert proc.pid not in pids and len(pids) == 2, infos
    assert not any(i["daemon"] for i in infos), infos
    # the table: once, by the launching process, at the end
    assert out.count("envfactory sweep: 2 job(s)") == 1
    assert (sweep_dir / "sweep_summary.md").exists()


def _job(context: str) -> tuple[bool, int, tuple]:
    import multiprocessing

    import envfactory

    overrides = ["vectorizer=subproc", f"vectorizer.context={context}", "num_envs=3"]
    with envfactory.make_vec(overrides=overrides) as envs:
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        pids = tuple(envs.pids)
    return multiprocessing.current_process().daemon, os.getpid(), pids


@pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
def test_subproc_inside_joblib_multiprocessing_workers(context: str) -> None:
    """joblib's ``multiprocessing`` backend runs jobs in daemonic pool workers, where
    multiprocessing refuses to start children: the subprocess vectorizer still works."""
    import joblib

    results = joblib.Parallel(n_jobs=2, backend="multiprocessing")(
        joblib.delayed(_job)(context) for _ in range(2)
    )
    assert all(daemon for daemon, _, _ in results)
    assert all(pid != os.getpid() and len(pids) >= 1 for _, pid, pids in results)
