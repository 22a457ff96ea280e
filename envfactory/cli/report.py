"""How the ``envfactory`` command reports a job: the one-line error, the files it saves in
the job's run dir (``summary.json``; ``error.txt`` with the full tracebacks of a worker
failure) and a failed job's summary, for the job itself (:mod:`envfactory.cli.main`) and
for a sweep job whose config does not compose (:mod:`envfactory.cli.sweeper`).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CAUSE_CHARS",
    "ERROR_FILE",
    "SUMMARY_FILE",
    "error_line",
    "remote_cause",
    "save_error",
    "save_summary",
]

SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.txt"
CAUSE_CHARS = 300  # the remote exception's message is cut to this length on the line


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def remote_cause(exc: BaseException) -> str:
    """The message of the exception an env raised in a worker (a :class:`RemoteEnvError`),
    on one line, cut to :data:`CAUSE_CHARS`: from the original exception when it came back
    unpickled, else the last line of the remote traceback (``module.Type: message``).
    Empty for other errors, and for an exception without a message."""
    from envfactory.errors import RemoteEnvError

    if not isinstance(exc, RemoteEnvError):
        return ""
    original = exc.__cause__
    if original is not None:
        text = str(original)
    else:
        lines = [line for line in exc.remote_traceback.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        prefix = f"{exc.exc_type}:"
        text = last[len(prefix) :] if exc.exc_type and last.startswith(prefix) else ""
    return _one_line(text, CAUSE_CHARS)


def error_line(exc: BaseException) -> str:
    """One line for an error: a config error's message, else ``Type: first line``; an
    env's exception in a worker adds its message (``...during start: Box2D is not
    installed, ...``)."""
    from envfactory.errors import ConfigError

    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, ConfigError):
        return " ".join(text.split()) or type(exc).__name__
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    cause = remote_cause(exc)
    return f"{line}: {cause}" if cause else line


def save_error(exc: BaseException, out_dir: str | Path) -> Path | None:
    """Save ``error.txt`` in ``out_dir`` for a worker failure: the one line, the worker's
    traceback and this process's. Returns its path (None for other errors, or when it
    cannot be written)."""
    from envfactory.errors import WorkerError

    if not isinstance(exc, WorkerError):
        return None
    path = Path(out_dir) / ERROR_FILE
    remote = exc.remote_traceback.rstrip() or "(none: the worker process ended without one)"
    text = (
        f"{error_line(exc)}\n\n--- traceback in the worker ---\n{remote}\n\n"
        f"--- traceback in envfactory ---\n{''.join(traceback.format_exception(exc))}"
    )
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
