"""How the ``envfactory`` command reports a job: the one-line error, the files it saves in
the job's run dir (``summary.json``; ``error.txt`` with the full tracebacks of a worker
failure) and a failed job's summary, for the job itself (`envfactory.cli.main`) and
for a sweep job whose config does not compose (`envfactory.cli.sweeper`).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envfactory.errors import CAUSE_CHARS

__all__ = [
    "CAUSE_CHARS",
    "ERROR_FILE",
    "SUMMARY_FILE",
    "error_line",
    "remote_cause",
    "remove_run_dir",
    "save_error",
    "save_summary",
]

SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.txt"


def remote_cause(exc: BaseException) -> str:
    """The message of the exception an env raised in a worker (a
    [`RemoteEnvError`][envfactory.RemoteEnvError]), on one line, cut to `CAUSE_CHARS`
    ([`envfactory.errors.remote_message`][envfactory.errors.remote_message]). Empty for other
    errors, and for an exception without a message."""
    from envfactory.errors import RemoteEnvError, remote_message

    if not isinstance(exc, RemoteEnvError):
        return ""
    return remote_message(exc.exc_type, exc.__cause__, exc.remote_traceback)


def error_line(exc: BaseException) -> str:
    """One line for an error: a config error's message, else ``Type: first line``; an
    env's exception in a worker adds its message (``...during start: Box2D is not
    installed, ...``). A config error raised in a worker (a wrapper refusing the env) is a
    worker's error: its first line, without the remote traceback that follows."""
    from envfactory.errors import ConfigError, WorkerError

    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, ConfigError) and not isinstance(exc, WorkerError):
        return " ".join(text.split()) or type(exc).__name__
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    cause = remote_cause(exc)  # on the first line already, unless built without it
    return f"{line}: {cause}" if cause and cause not in first else line


def save_error(exc: BaseException, out_dir: str | Path) -> Path | None:
    """Save ``error.txt`` in ``out_dir`` for a failure that is not a config error (a
    worker's, or an env's own exception under ``dummy`` or in the parent): the one line,
    the worker's traceback (a worker failure) and this process's. Returns its path (None
    for a config error, or when it cannot be written)."""
    from envfactory.errors import ConfigError, WorkerError

    if isinstance(exc, ConfigError):
        return None
    path = Path(out_dir) / ERROR_FILE
    here = "".join(traceback.format_exception(exc))
    if isinstance(exc, WorkerError):
        remote = exc.remote_traceback.rstrip() or "(none: the worker process ended without one)"
        text = (
            f"{error_line(exc)}\n\n--- traceback in the worker ---\n{remote}\n\n"
            f"--- traceback in envfactory ---\n{here}"
        )
    else:
        text = f"{error_line(exc)}\n\n--- traceback ---\n{here}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as err:
        print(f"envfactory: warning: {path} not written: {err}", file=sys.stderr)
        return None
    return path


def save_summary(summary: dict[str, Any], job: Mapping[str, Any]) -> None:
    """Add the job's ``overrides``, ``job_num`` and ``output_dir`` to ``summary`` and save
    it as ``summary.json`` in the output dir (nothing outside a Hydra job)."""
    if not job:
        return
    summary.update({k: job[k] for k in ("overrides", "job_num", "output_dir")})
    out = Path(job["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")


HYDRA_FILES = (".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml")


def remove_run_dir(out_dir: str | Path) -> None:
    """Remove the run dir of a job that never started (a config error, exit 2): Hydra's
    files of the job (``.hydra/`` and its ``.log``), then the folders left empty, up to the
    working directory (``outputs/<date>/`` of the default layout). A run dir holding anything
    else (one reused with ``hydra.run.dir``) is left as it is; a file that cannot be removed
    leaves the rest."""
    run_dir = Path(out_dir)
    try:
        found = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if not p.is_dir()}
        logs = {f for f in found if "/" not in f and f.endswith(".log")}
        dirs = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_dir()}
        if not found <= {*HYDRA_FILES, *logs} or len(logs) > 1 or not dirs <= {".hydra"}:
            return
        for f in found:
            (run_dir / f).unlink()
        if dirs:
            (run_dir / ".hydra").rmdir()
        run_dir.rmdir()
        here, up = Path.cwd().resolve(), run_dir.resolve().parent
        while up != here and here in up.parents:
            up.rmdir()  # an OSError once a folder is not empty: stop there
            up = up.parent
    except OSError:
        pass
