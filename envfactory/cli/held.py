"""A Ctrl-C while Hydra composes a job's config is held until the job starts.

A ``KeyboardInterrupt`` raised inside OmegaConf while it updates a node (a flag's context
manager) leaves the node half-updated, and Hydra then fails with an ``AttributeError`` from
OmegaConf's internals and a traceback of ~60 lines instead of the command's
``envfactory: interrupted``. So the ``envfactory`` command takes SIGINT itself while Hydra
composes: the first one is noted and raised as the job starts (it saves a summary of 0 steps
and exits 130), a second one is raised at once. Only the command does this, for a single job
(``main``; a sweep's launcher may run its jobs elsewhere, so it keeps SIGINT as it is); a
program that calls envfactory's functions keeps its own SIGINT handling.

Before that, from its first line, the command counts each Ctrl-C as it raises it (`watch`):
a library's import code can swallow the ``KeyboardInterrupt`` (Cython's memoryview set-up,
which numpy.random runs as it is imported, registers its types in a bare ``try/except:
pass``; a weakref callback prints it as "Exception ignored" and drops it) or turn it into
another error (Cython's module set-up: ``ImportError: Failed to import 'zlib.decompress'``),
and the command then ran on as if no Ctrl-C had come, or ended with a traceback. One that
was counted and swallowed is raised again after the imports (`check`), before the fork
server starts, or as the job starts; an error raised after one is the interrupt
(`counted`); and "Exception ignored" is not printed for one.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

__all__ = ["check", "counted", "hold", "release", "resume_holding", "take", "watch"]

_state: dict[str, Any] = {"active": False, "pending": 0, "previous": None}


def _count(signum: int, frame: Any) -> None:
    _state["pending"] += 1
    raise KeyboardInterrupt


def watch() -> None:
    """The command's first line: a Ctrl-C raises ``KeyboardInterrupt`` and is counted."""
    signal.signal(signal.SIGINT, _count)
    hook = sys.unraisablehook

    def unprinted(unraisable: Any) -> None:
        if not (unraisable.exc_type is KeyboardInterrupt and counted()):  # (raised again)
            hook(unraisable)

    sys.unraisablehook = unprinted


def counted() -> bool:
    """A Ctrl-C came since `watch` (or `hold`) and the command has not ended on it yet."""
    return bool(_state["pending"])


def check() -> None:
    """Raise ``KeyboardInterrupt`` again if a counted Ctrl-C was swallowed."""
    if counted():
        raise KeyboardInterrupt


def _note(signum: int, frame: Any) -> None:
    _state["pending"] += 1
    if _state["pending"] > 1:  # a second Ctrl-C: the user means it
        raise KeyboardInterrupt


def hold() -> None:
    """From now on a SIGINT is noted, not raised (the command's main thread, before Hydra)."""
    _state["previous"] = signal.signal(signal.SIGINT, _note)
    _state["active"] = True  # (one counted since `watch` was swallowed: `take` tells)


def take() -> bool:
    """A job starts: SIGINT raises ``KeyboardInterrupt`` again; True if one came meanwhile."""
    if not _state["active"]:
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(_state["pending"])


def resume_holding() -> None:
    """A job ended: hold again while a sweep composes the next one."""
    if _state["active"]:
        _state["pending"] = 0  # (first: one that comes as the handler is set is noted)
        signal.signal(signal.SIGINT, _note)


def release() -> None:
    """The command is done with Hydra: the SIGINT handling it found is back."""
    if _state["active"]:
        signal.signal(signal.SIGINT, _state["previous"] or signal.default_int_handler)
        _state["active"], _state["pending"] = False, 0
