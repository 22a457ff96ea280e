"""What the ``envfactory`` command tells about a run beyond its numbers: how the vectorizer
placed the envs and why (``auto``'s fallback, ``subproc``'s split), and the workers'
restarts, read from the env's `run_record`;
and every envfactory warning on one line, ``envfactory: warning: ...``.

Decisions:
    * The summary always has ``split`` (the split in words, or null when the vectorizer
      decided nothing at build time, as ``dummy``), ``restarts`` (every worker's together)
      and ``restarts_by_worker`` (``[{worker, count, first_cause}]``, empty with none), so a
      ``summary.json`` reader finds the same keys in every job.
    * A run that restarted a worker ends with one warning line on stderr (after the summary):
      ``status`` stays ``ok``, because ``restart=true`` asked for the run to survive them.
    * A warning that envfactory's own code raises (the caller of ``warnings.warn`` is an
      ``envfactory`` module, whatever line it names for the user) prints as one line;
      other libraries' warnings keep Python's format.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["one_line_warnings", "record_fields", "record_rows", "restart_warning"]


def record_fields(envs: Any) -> dict[str, Any]:
    """The summary's ``split``, ``restarts`` and ``restarts_by_worker`` of ``envs`` (any
    vectorized env: one without a record has no split and no restarts)."""
    from envfactory.vectorizers.record import run_record_of

    record = run_record_of(envs)
    data = record.as_dict()
    return {
        "split": None if record.split is None else record.split.describe(),
        "restarts": data["restarts"],
        "restarts_by_worker": data.get("restarts_by_worker", []),
    }


def _restart_text(summary: Mapping[str, Any]) -> str:
    per = summary.get("restarts_by_worker") or []
    total = int(summary.get("restarts") or 0)
    if not total:
        return ""
    workers = ", ".join(f"worker {r['worker']}: {r['count']}" for r in per)
    first = per[0]["first_cause"] if per else ""  # (in the order of their first restart)
    return f"{total} ({workers}); first cause: {first}"


def record_rows(summary: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The printed summary's ``split`` and ``restarts`` rows (none when there is nothing to
    say: no split decided, no restart)."""
    rows: list[tuple[str, Any]] = []
    if summary.get("split"):
        rows.append(("split", summary["split"]))
    if summary.get("restarts"):
        rows.append(("restarts", _restart_text(summary)))
    return rows


def restart_warning(summary: Mapping[str, Any], saved: str = "") -> str:
    """The one warning line of a run whose workers restarted (``""``: none did)."""
    text = _restart_text(summary)
    if not text:
        return ""
    where = f"; see {saved}" if saved else ""
    total = int(summary.get("restarts") or 0)
    text = text.split(" ", 1)[1]
    return (
        f"envfactory: warning: workers were restarted {total} time{'s' if total != 1 else ''} "
        f"in this run {text}{where}"
    )


def _from_envfactory() -> bool:
    """Whether the ``warnings.warn`` being shown was called by envfactory's own code (the
    first frame above the warnings machinery and this module)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in ("warnings", __name__):
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and str(frame.f_globals.get("__name__", "")).startswith("envfactory")


def one_line(message: Any) -> str:
    """A warning's message on one line, without a leading ``envfactory:``."""
    text = " ".join(str(message).split())
    return text.removeprefix("envfactory: ")


@contextmanager
def one_line_warnings() -> Iterator[None]:
    """While it is entered, a warning envfactory raises prints as ``envfactory: warning:
    <message>`` on one line of stderr, not as Python's two lines (the file and line that
    ``stacklevel`` named, often Hydra's, then that line's source); the warning filters apply
    as before. Other warnings are shown as they were."""
    shown = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:  # fmt: skip
        if _from_envfactory():
            print(f"envfactory: warning: {one_line(message)}", file=file or sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        if warnings.showwarning is show:
            warnings.showwarning = shown
