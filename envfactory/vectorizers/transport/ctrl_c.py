"""The interrupt rule of every vectorizer, in one place: a Ctrl-C lands only at a wait.

A call runs ``with HOLD:``: a Ctrl-C (SIGINT) of the main thread meanwhile is held, let
through only inside the call's blocking wait (`_CtrlC.waiting`), which is safe to repeat (a
call cut there is pending, and its ``*_wait()`` waits again), else raised when the hold
ends. So no bookkeeping, pipe message or shared-memory post is cut part-way. A worker's
rebuild holds every Ctrl-C, also in its waits (`held_ctrl_c`). The hold is one SIGINT
handler, installed by each front when it is built (`use`), put back by the last to close
(`unuse`); a handler the program sets after that is lent the hold for each call.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from _signal import getsignal as _getsignal
from _thread import get_ident
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["HOLD", "held_ctrl_c"]

_SIGINT = int(signal.SIGINT)


class _CtrlC:
    def __init__(self) -> None:
        self.depth = 0  # nested holds of the main thread
        self.shut = 0  # nested holds whose waits let no Ctrl-C through (`held_ctrl_c`)
        self.open = False  # the main thread is in a wait: a Ctrl-C goes through at once
        self.second = False  # decoding an answer: a second Ctrl-C goes through (`decoding`)
        self.pending: tuple[int, Any] | None = None
        self.prev: Any = None  # the handler it replaced
        self.lent: Any = None  # a handler set after it, which it stands in front of for a call
        self.users = 0
        self.handler = self._on_sigint  # (one bound method: compared by identity)
        self.main = threading.main_thread().ident  # (a C compare per call, not a lookup)
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self.main = threading.main_thread().ident  # (the forking thread is the child's main)
        self.depth = self.shut = 0
        self.open = self.second = False
        self.pending = self.lent = None

    def use(self) -> bool:
        """Install the hold (main thread, a Python handler set); True if it is."""
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
        """The last front to close puts back the handler the hold replaced."""
        self.users -= 1
        if self.users > 0 or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is self.handler:
            signal.signal(signal.SIGINT, self.prev)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.depth and not self.open and not (self.second and self.pending is not None):
            self.pending = (signum, frame)  # raised at the next wait, or when the hold ends
            return
        self.pending = None
        self._forward(signum, frame)

    def _forward(self, signum: int, frame: Any) -> None:
        prev = self.prev if self.lent is None else self.lent
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
        if get_ident() == self.main:
            if self.depth == 0 and self.users:
                current = _getsignal(_SIGINT)  # (C: signal.getsignal maps to an enum, ~7 us)
                if current is not self.handler and callable(current):  # set since `use`
                    self.lent = current
                    signal.signal(signal.SIGINT, self.handler)
            self.depth += 1

    def __exit__(self, *exc: Any) -> None:
        if get_ident() == self.main:
            self.depth -= 1
            if self.depth == 0 and (self.lent is not None or self.pending is not None):
                lent = self.lent
                if lent is not None:
                    signal.signal(signal.SIGINT, lent)
                try:
                    self._raise_pending()
                finally:
                    self.lent = None

    def waiting(self, wait: Callable[[Any], Any], limit: Any) -> Any:
        """``wait(limit)``, where a held call lets a Ctrl-C through (one held is raised
        first); inside `held_ctrl_c`, none."""
        if self.depth == 0 or self.shut or get_ident() != self.main:
            return wait(limit)
        self._raise_pending()
        was, self.open = self.open, True
        try:
            return wait(limit)
        finally:
            self.open = was

    def decoding(self, decode: Callable[[Any], Any], raw: Any) -> Any:
        """``decode(raw)``, an answer's unpickling (may be long; safe to repeat): the first
        Ctrl-C is held, a second goes through at once (the next wait decodes it again)."""
        was, self.second = self.second, True
        try:
            return decode(raw)
        finally:
            self.second = was


HOLD = _CtrlC()


@contextlib.contextmanager
def held_ctrl_c() -> Iterator[None]:
    """Hold every Ctrl-C of the main thread until the block ends, also in its waits (a
    worker's rebuild, bounded by the start-up budget); one is raised when the hold ends."""
    main = threading.current_thread() is threading.main_thread()
    with HOLD:
        if main:
            HOLD.shut += 1
        try:
            yield
        finally:
            if main:
                HOLD.shut -= 1
