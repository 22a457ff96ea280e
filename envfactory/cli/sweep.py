"""The sweep table: a Hydra callback that, when a ``-m`` sweep ends, collects every job's
``summary.json`` from the sweep dir and prints one markdown table of all jobs, saved as
``sweep_summary.md`` and ``sweep_summary.json`` in the sweep dir, with a plot of steps/s
against num_envs (one line per vectorizer, and per env id when the sweep has several),
``sweep_summary.png`` (`envfactory.cli.plot`).

It reads the jobs' files rather than their return values so it works with any launcher
(jobs of a remote or process-pool launcher do not return to this process). It is
registered in ``conf/config.yaml``:

    hydra:
      callbacks:
        sweep_summary:
          _target_: envfactory.cli.sweep.SweepSummary

Overrides that every job shares (``run.progress=false`` ...) are listed once above the
table; the ``overrides`` column shows what varies, ``restarts`` how many times the job's
workers were restarted; under the table one line per job says how its vectorizer placed the
envs and why, and which workers restarted and the first cause (`job_notes`).
``sweep_summary.json`` keeps each job's full summary, overrides included.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from envfactory.errors import echo

__all__ = ["SweepSummary", "collect_jobs", "job_notes", "markdown_table"]

SUMMARY_FILE = "summary.json"  # written by envfactory.cli.main
_COLUMNS = (  # (title, summary key, format of a number)
    ("env", "env", ""),
    ("vectorizer", "vectorizer", ""),
    ("num_envs", "num_envs", ""),
    ("steps", "steps", ""),
    ("steps/s", "steps_per_second", ",.0f"),
    ("episodes", "episodes", ""),
    ("mean return", "mean_return", ".2f"),
    ("restarts", "restarts", ""),  # every worker's together (notes: which, the first cause)
)
ROW_ERROR_CHARS = 200  # a failed row's error is cut to this (sweep_summary.json keeps it all)

_STEPS_CELL = 2 + [key for _, key, _ in _COLUMNS].index("steps")  # after job, overrides


def collect_jobs(sweep_dir: Path, *, interrupted: bool = False) -> list[dict[str, Any]]:
    """Every job summary under ``sweep_dir``, by job number. A job folder (one with
    Hydra's ``.hydra/overrides.yaml``) that has no summary appears with ``status: failed``
    (``interrupted`` when the sweep was: Ctrl-C stopped that job before it saved one)."""
    jobs: dict[Path, dict[str, Any]] = {}
    for path in sweep_dir.rglob(SUMMARY_FILE):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            data = {"error": f"unreadable {SUMMARY_FILE}: {exc}"}
        data.setdefault("status", "ok" if "error" not in data else "failed")
        jobs[path.parent] = data
    for path in sweep_dir.rglob("overrides.yaml"):
        job_dir = path.parent.parent
        if path.parent.name == ".hydra" and job_dir not in jobs and job_dir != sweep_dir:
            status = "interrupted" if interrupted else "failed"
            jobs[job_dir] = {"status": status, "overrides": _read_overrides(path)}
    for job_dir, data in jobs.items():
        data.setdefault("output_dir", str(job_dir))
        if data.get("overrides"):  # as typed: Hydra's sweeper hands the jobs True/False
            data["overrides"] = [
                re.sub(r"=(True|False)$", lambda m: m[0].lower(), str(o)) for o in data["overrides"]
            ]

    def order(item: tuple[Path, dict[str, Any]]) -> tuple[int, str]:
        num = item[1].get("job_num")
        return (num if isinstance(num, int) else 1 << 30, str(item[0]))

    return [data for _, data in sorted(jobs.items(), key=order)]


def _read_overrides(path: Path) -> list[str]:
    from omegaconf import OmegaConf

    try:
        return [str(o) for o in OmegaConf.to_container(OmegaConf.load(path))]  # type: ignore[union-attr]
    except Exception:
        return []


def _cell(value: Any, fmt: str = "") -> str:
    if value is None:
        return "-"
    if fmt and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, fmt)
    return str(value).replace("|", "\\|")


def common_overrides(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Overrides shared by every job (only when there is more than one job)."""
    lists = [list(j.get("overrides") or []) for j in jobs]
    if len(lists) < 2:
        return []
    shared = set(lists[0]).intersection(*lists[1:])
    return [o for o in lists[0] if o in shared]


def markdown_table(jobs: Sequence[Mapping[str, Any]]) -> str:
    """One markdown table: job number, varying overrides, then the results."""
    common = set(common_overrides(jobs))
    header = ["job", "overrides", *(title for title, _, _ in _COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for i, job in enumerate(jobs):
        overrides = [o for o in job.get("overrides") or [] if o not in common]
        cells = [_cell(job.get("job_num", i)), _cell(" ".join(overrides) or "(none)")]
        status = job.get("status", "ok")
        if status == "failed":
            first = str(job.get("error") or "no summary.json").strip().partition("\n")[0]
            error = echo(" ".join(first.split()), ROW_ERROR_CHARS, quote=False)
            cells += [_cell(f"failed: {error}"), *["-"] * (len(_COLUMNS) - 1)]
        else:
            cells += [_cell(job.get(key), fmt) for _, key, fmt in _COLUMNS]
            if status == "interrupted":  # the steps it took before Ctrl-C
                cells[_STEPS_CELL] = f"{cells[_STEPS_CELL]} (interrupted)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def job_notes(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines under the table: per job, what its vectorizer built and why (``split``,
    e.g. ``auto``'s fallback to every env in this process) and its restarts (per worker,
    the first cause)."""
    from envfactory.cli.run_record import record_rows

    out = []
    for i, job in enumerate(jobs):
        for key, text in record_rows(job):
            out.append(f"job {job.get('job_num', i)} {key}: {text}")
    return out


class SweepSummary(Callback):
    """Hydra callback: the sweep table at the end of a multirun.

    Args:
        filename: base name of the files written in the sweep dir (``.md`` and ``.json``).
        echo: print the table.
    """

    last: SweepResult | None = None  # the latest sweep in this process (the CLI's exit status)

    def __init__(self, filename: str = "sweep_summary", echo: bool = True) -> None:
        self.filename = filename
        self.echo = echo

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write and print the table. ``interrupted=True`` (envfactory's sweeper, after
        Ctrl-C): the jobs run so far, the interrupted one a row, and one line on stderr."""
        interrupted = bool(kwargs.get("interrupted"))
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        jobs = collect_jobs(sweep_dir, interrupted=interrupted)
        common = common_overrides(jobs)
        table = markdown_table(jobs)
        notes = job_notes(jobs)
        if notes:
            table += "\n\n" + "\n".join(notes)
        failed = sum(1 for j in jobs if j.get("status", "ok") == "failed")
        head = f"envfactory sweep: {len(jobs)} job(s) in {sweep_dir}"
        if failed:
            head += f" ({failed} failed)"
        if interrupted:
            head += " (interrupted by Ctrl-C: the jobs run so far)"
        if common:
            head += f"\ncommon overrides: {' '.join(common)}"
        md_path = sweep_dir / f"{self.filename}.md"
        json_path = sweep_dir / f"{self.filename}.json"
        sweep_dir.mkdir(parents=True, exist_ok=True)
        md_path.write_text(f"{head}\n\n{table}\n")
        json_path.write_text(
            json.dumps(
                {
                    "sweep_dir": str(sweep_dir),
                    "common_overrides": common,
                    "interrupted": interrupted,
                    "jobs": jobs,
                },
                indent=2,
            )
            + "\n"
        )
        plot = self._plot(jobs, sweep_dir / f"{self.filename}.png")
        errors = {str(j.get("error", "")) for j in jobs}
        same = errors.pop() if failed == len(jobs) > 1 and len(errors) == 1 else None
        SweepSummary.last = SweepResult(len(jobs), failed, md_path, same or None)
        if self.echo:
            saved = f"{json_path.name}" + (f" and {plot.name}" if plot else "")
            print(f"\n{head}\n\n{table}\n\nsaved to {md_path}, {saved}", flush=True)
        if interrupted:
            print(
                f"envfactory: sweep interrupted: the table of its {len(jobs)} job(s) so far is "
                f"saved to {md_path}",
                file=sys.stderr,
                flush=True,
            )

    @staticmethod
    def _plot(jobs: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
        """``sweep_summary.png``: steps/s against num_envs per vectorizer (and env id);
        none when no job has numbers. A plot that cannot be drawn is one warning line (the
        table is saved already)."""
        from envfactory.cli.plot import throughput_plot

        try:
            return throughput_plot(jobs, path, title=f"envfactory sweep: {path.parent.name}")
        except Exception as exc:  # the table matters more than the picture
            print(f"envfactory: warning: sweep plot not written: {exc}", file=sys.stderr)
            return None


@dataclass(frozen=True)
class SweepResult:
    """How a sweep went: jobs, failed jobs, where the table is, and the one error every
    job failed with (a mistake in what all jobs share, such as a misspelt key), if so."""

    total: int
    failed: int
    table_path: Path
    same_error: str | None = None
