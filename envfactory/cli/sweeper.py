"""envfactory's sweeper: Hydra's basic sweeper (``-m``: every combination of the
comma-separated values, in batches), except that a job whose config does not compose is a
failed row of the sweep table instead of the end of the sweep.

Hydra composes every job of a batch before launching any (``validate_batch_is_legal``) and
stops the sweep at the first that fails: ``-m vectorizer=dummy,dumy`` or
``-m num_envs=2,abc`` ran nothing and printed no table, while ``-m seed=0,-1`` (which
composes, and fails envfactory's own checks inside the job) gave a failed row. Here each
job is composed first; one that does not compose gets a ``summary.json`` with ``status:
failed`` and the one-line error the same value gives outside a sweep (``unknown vectorizer
'dumy' ... Did you mean 'dummy'?``), and the jobs that compose are launched, by any
launcher, in runs of consecutive job numbers, so each keeps its number and output dir.
The CLI exits with status 1 when a job failed, as for any failed job.

The plugin class Hydra finds is ``hydra_plugins.envfactory_sweeper.EnvfactorySweeper``
(Hydra loads sweepers only from its ``hydra_plugins`` namespace); envfactory's
``conf/config.yaml`` selects it with ``override hydra/sweeper: envfactory``, and a user can
choose another sweeper as usual (``hydra/sweeper=...``).
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict

from envfactory.cli.report import error_line, save_summary

__all__ = ["composition_error", "launch_composable"]

log = logging.getLogger(__name__)


def composition_error(exc: BaseException) -> str:
    """The one line a job's composition error gives (as the CLI prints it outside a
    sweep)."""
    from envfactory.config.compose import hydra_error
    from envfactory.errors import ConfigError

    return error_line(exc if isinstance(exc, ConfigError) else hydra_error(exc))


def _job_dir(master: DictConfig, overrides: Sequence[str], num: int) -> Path:
    """Where job ``num`` would have run: ``hydra.sweep.dir`` / ``hydra.sweep.subdir``
    resolved for that job (``<sweep dir>/<num>`` when the subdir needs the job's config)."""
    sweep_dir = Path(str(master.hydra.sweep.dir))
    cfg = copy.deepcopy(master)
    with open_dict(cfg):
        cfg.hydra.job.num = num
        cfg.hydra.job.id = num
        cfg.hydra.job.override_dirname = ",".join(overrides)
    try:
        subdir = str(OmegaConf.select(cfg, "hydra.sweep.subdir", throw_on_missing=True))
    except Exception:
        subdir = str(num)
    return sweep_dir / subdir


def _failed_job(
    master: DictConfig, overrides: Sequence[str], num: int, exc: Exception
) -> JobReturn:
    """Save the failed summary of a job that does not compose; its :class:`JobReturn`."""
    line = composition_error(exc)
    out = _job_dir(master, overrides, num)
    log.info(f"\t#{num} : {' '.join(overrides)}")
    print(f"envfactory: error: job {num}: {line}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {"status": "failed", "error": line}
    job = {"overrides": list(overrides), "job_num": num, "output_dir": str(out)}
    save_summary(summary, job)
    return JobReturn(
        overrides=list(overrides),
        working_dir=str(out),
        status=JobStatus.COMPLETED,  # the sweep goes on; the table shows the failure
        _return_value=summary,
    )


def launch_composable(
    launcher: Launcher,
    hydra_context: HydraContext,
    master: DictConfig,
    batch: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> list[JobReturn]:
    """Compose each job of ``batch``; launch those that compose with ``launcher`` (runs of
    consecutive jobs, so each keeps its job number); a failed summary for the others.
    Returns one :class:`JobReturn` per job, in order."""
    errors: dict[int, Exception] = {}
    for i, overrides in enumerate(batch):
        try:
            hydra_context.config_loader.load_sweep_config(
                master_config=master, sweep_overrides=list(overrides)
            )
        except Exception as exc:  # Hydra's and OmegaConf's errors, envfactory's checks
            errors[i] = exc
    if not errors:
        return list(launcher.launch(batch, initial_job_idx=initial_job_idx))
    results: list[JobReturn] = []
    start = 0
    for i in [*sorted(errors), len(batch)]:
        if start < i:  # the good jobs before this failed one
            results += launcher.launch(batch[start:i], initial_job_idx=initial_job_idx + start)
        if i < len(batch):
            results.append(_failed_job(master, batch[i], initial_job_idx + i, errors[i]))
        start = i + 1
    return results
