"""Holding a Ctrl-C (SIGINT) of the main thread until a critical section ends.

A few sections of the vectorizers cannot be cut part-way and then finished or redone: the
async pool reading an answer and recording it (see `scheduler`), a worker's rebuild
(``restart=true``). ``with HOLD:`` holds the first Ctrl-C of the main thread until the
block ends, then raises it; `_CtrlC.waiting` lets one through at once while the
block waits on something that may take long. The hold works by a SIGINT handler that
forwards to the one it replaced, installed only while something uses it (`use`,
`unuse`), never on import: a program that never makes a pool or a restart sees its
own handler untouched.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["HOLD", "held_ctrl_c"]


class _CtrlC:
    """The process's SIGINT hold (see the module docstring): ``with HOLD:`` holds the
    first Ctrl-C of the main thread until the block ends; `waiting` lets it through
    at once. Installed by `use` while a pool is in async use (`unuse`)."""

    def __init__(self) -> None:
        self.depth = 0  # nested holds of the main thread
        self.all = 0  # nested holds that hold every Ctrl-C, not only the first
        self.strict = 0  # nested holds that hold every Ctrl-C also while they wait
        self.open = False  # a hold is waiting: let a Ctrl-C through at once
        self.pending: tuple[int, Any] | None = None
        self.prev: Any = None  # the handler it replaced
        self.users = 0
        self.handler = self._on_sigint  # (one bound method: compared by identity)

    def use(self) -> bool:
        """Install the hold (main thread; where a Python handler is set); True if it is."""
        if threading.current_thread() is not threading.main_thread():
            return False
        current = signal.getsignal(signal.SIGINT)
        if current is not self.handler:
            if not callable(current):  # ignored or the OS default: nothing to hold
                return False
            self.prev = current
            signal.signal(signal.SIGINT, self.handler)
        self.users += 1
        return True

    def unuse(self) -> None:
        """A pool that `use` d the hold is closed: the last one puts back the
        handler it replaced (unless someone replaced the hold meanwhile)."""
        self.users -= 1
        if self.users > 0 or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is self.handler:
            signal.signal(signal.SIGINT, self.prev)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        strict = self.strict
        holds = strict or not self.open
        if self.depth and holds and (self.pending is None or self.all or strict):
            self.pending = (signum, frame)  # raised when the hold ends
            return
        self.pending = None
        self._forward(signum, frame)

    def _forward(self, signum: int, frame: Any) -> None:
        prev = self.prev
        if callable(prev) and prev is not self.handler:
            prev(signum, frame)  # (the default raises KeyboardInterrupt)
        else:
            raise KeyboardInterrupt

    def _raise_pending(self) -> None:
        if self.pending is not None:
            signum, frame = self.pending
            self.pending = None
            self._forward(signum, frame)

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.depth += 1

    def __exit__(self, *exc: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            self.depth -= 1
            if self.depth == 0:
                self._raise_pending()

    def every(self) -> _Every:
        """``with HOLD.every():`` holds every Ctrl-C of the main thread, not only the first,
        while the block runs (bookkeeping that is short and never waits; `waiting` inside it
        still lets one through)."""
        return _EVERY

    def waiting(self, wait: Callable[[float | None], list[Any]], limit: float | None) -> list[Any]:
        """``wait(limit)`` with Ctrl-C let through (a held one is raised first), unless a
        `held_ctrl_c` block holds every one."""
        if (
            self.depth == 0
            or self.strict
            or threading.current_thread() is not threading.main_thread()
        ):
            return wait(limit)
        self._raise_pending()
        self.open = True
        try:
            return wait(limit)
        finally:
            self.open = False


class _Every:
    """The context manager of `_CtrlC.every` (one for all: the thread decides)."""

    __slots__ = ()

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            HOLD.all += 1

    def __exit__(self, *exc: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            HOLD.all -= 1


HOLD = _CtrlC()
_EVERY = _Every()


@contextlib.contextmanager
def held_ctrl_c() -> Iterator[None]:
    """Hold every Ctrl-C of the main thread until the block ends (a worker's rebuild: cut
    part-way it could be neither finished nor redone; it is bounded by the start-up
    budget), installing `HOLD` for the block where no pool has it; also while it waits
    (`_CtrlC.waiting` lets none through). One KeyboardInterrupt is raised when the block
    ends."""
    used = HOLD.use()
    main = threading.current_thread() is threading.main_thread()
    try:
        with HOLD:
            if main:
                HOLD.strict += 1
            try:
                yield
            finally:
                if main:
                    HOLD.strict -= 1
    finally:
        if used:
            HOLD.unuse()
