"""The interrupt rule and the call state it keeps, in one place (docs/concepts/faults.md): one
call at a time (`CallGuard`), a Ctrl-C held over a call's bookkeeping (``with HOLD:``, one
SIGINT handler installed by each front, `use`/`unuse`) and let through only in its blocking
wait (`_CtrlC.waiting`), which is safe to repeat: a call cut there is pending (`CallState`)
and its ``*_wait()`` waits again. A worker's rebuild holds every Ctrl-C (`held_ctrl_c`)."""

from __future__ import annotations

import contextlib
import enum
import math
import numbers
import os
import signal
import sys
import threading
from _signal import getsignal as _getsignal
from _thread import get_ident
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import numpy as np

from ...errors import AlreadyPendingError, ClosedError, NoPendingCallError, VecEnvBrokenError

__all__ = ["HOLD", "CallGuard", "CallState", "PendingCall", "held_ctrl_c", "not_seconds"]

_SIGINT = int(signal.SIGINT)


class _CtrlC:
    def __init__(self) -> None:
        self.prev: Any = None  # the handler it replaced
        self.users = 0
        self.handler = self._on_sigint  # (one bound method: compared by identity)
        self._forked()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self.main = threading.main_thread().ident  # (the forking thread is the child's main)
        self.depth = 0  # nested holds of the main thread
        self.shut = 0  # nested holds whose waits let no Ctrl-C through (`held_ctrl_c`)
        self.open = False  # the main thread is in a wait: a Ctrl-C goes through at once
        self.second = False  # decoding an answer: a second Ctrl-C goes through (`decoding`)
        self.pending: tuple[int, Any] | None = None
        self.lent: Any = None  # a handler set after it, which it stands in front of for a call

    def use(self) -> bool:  # install the hold (main thread, a Python handler set): True if so
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

    def unuse(self) -> None:  # the last front to close puts back the handler it replaced
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
        """``wait(limit)``, letting a Ctrl-C through (a held one first; none in `held_ctrl_c`)."""
        if self.depth == 0 or self.shut or get_ident() != self.main:
            return wait(limit)
        self._raise_pending()
        was, self.open = self.open, True
        try:
            return wait(limit)
        finally:
            self.open = was

    def decoding(self, decode: Callable[[Any], Any], raw: Any) -> Any:
        """``decode(raw)`` (safe to repeat): a second Ctrl-C goes through at once."""
        was, self.second = self.second, True
        try:
            return decode(raw)
        finally:
            self.second = was


HOLD = _CtrlC()


@contextlib.contextmanager
def held_ctrl_c() -> Iterator[None]:
    """Hold every Ctrl-C until the block ends, its waits too (a worker's rebuild)."""
    main = threading.current_thread() is threading.main_thread()  # (counts only there)
    with HOLD:
        HOLD.shut += main
        try:
            yield
        finally:
            HOLD.shut -= main


class PendingCall(enum.Enum):
    """Which async half a vectorized env waits on (gymnasium's ``AsyncState``, by call)."""

    NONE = "none"
    RESET = "reset"
    STEP = "step"
    CALL = "call"


_IDLE = PendingCall.NONE  # (a module global: read without any call, see _wait_for)
_FIRST = {
    PendingCall.RESET: "reset_async(seed=..., options=...)",
    PendingCall.STEP: "step_async(actions)",
    PendingCall.CALL: "call_async(name, ...)",
}


class CallState:
    """The pending-call state: `_check_ready`, `_start_for`, `_wait_for`."""

    closed: bool
    #: the fault that left the env unusable (None: usable; set by ``RemoteVecEnv.apply``)
    _broken: BaseException | None = None
    _pending: PendingCall = PendingCall.NONE
    _interrupted: bool = False  # a Ctrl-C cut the pending call: only its *_wait() runs
    _held: Any = None  # a batch in hand not yet returned (its *_wait() returns it)
    _pending_mask: np.ndarray | None = None  # the reset_mask of a pending reset
    _done: np.ndarray  # each env's episode ended at its last step
    _ready: bool = False  # a full reset() has been done
    #: an interrupted ``step``/``reset`` can be finished by its ``*_wait()`` while usable (a
    #: worker backend's: cut only in its wait, which it repeats; ``dummy``'s: a reset that ran)
    _resumes: bool = False

    def _check_ready(self, what: str, call: str) -> None:
        """Raise why ``what`` (a start of ``call``) cannot run: closed, broken or a call
        pending (called once a cheap test says one holds)."""
        if self.closed:
            raise ClosedError(
                f"{what}() on a closed {type(self).__name__}; make a new one with "
                "envfactory.make_vec(...)"
            )
        if self._broken is not None:
            advice = (
                "Close it and make a new one (vectorizer.restart=true rebuilds a failed worker "
                "process, up to vectorizer.max_restarts per vectorizer.restart_window, but "
                "not past this fault)"
                if getattr(self, "restart", False)
                else "Close it and make a new one, or set vectorizer.restart=true to rebuild "
                "failed workers automatically"
            )
            raise VecEnvBrokenError(
                f"{call}() on a {type(self).__name__} that is unusable since: {self._broken}\n"
                + advice
            )
        if self._pending is not _IDLE:
            p = self._pending.value
            if self._interrupted:
                raise AlreadyPendingError(
                    f"{what}() called while a {p}() interrupted by Ctrl-C is pending; call "
                    f"{p}_wait() to get its results (nothing of it is lost), or close() to "
                    "abandon it",
                    p,
                )
            raise AlreadyPendingError(
                f"{what}() called while a {p}_async() is pending; call {p}_wait() first (or, "
                f"re-entered from a signal handler or a callback while a {p}() is in "
                f"progress, make the call once it returned)",
                p,
            )

    def _start_for(self, kind: PendingCall, start: Callable[..., None], *args: Any) -> None:
        """``start(*args)``, held: a Ctrl-C meanwhile is raised once it is sent, leaving it
        pending if the backend can finish it (``_resumes``)."""
        try:
            with HOLD:
                start(*args)
                self._pending = kind
        except Exception:
            raise
        except BaseException:  # (a Ctrl-C) pending if it was sent and can be finished
            finishable = self._pending is kind and self._resumes and self._broken is None
            self._pending, self._interrupted = (kind, True) if finishable else (_IDLE, False)
            raise

    def _wait_for(
        self, kind: PendingCall, finish: Callable[[Any], Any], timeout: Any, what: str = ""
    ) -> Any:
        """``finish(timeout)``, the backend's wait for ``kind`` (``what``: a public
        ``*_wait()``, checked first), then which envs are done. A Ctrl-C before the batch is
        in hand leaves it pending if the backend can finish it; after, it is kept (``_held``)."""
        if what:
            if self.closed:
                self._check_ready(what, kind.value)
            if timeout is not None:  # seconds >= 0 (``inf``: no limit), checked before any wait
                if not_seconds(timeout):
                    raise ValueError(
                        f"{what}(timeout={timeout!r}): timeout must be a number of seconds >= 0, "
                        "or None for the vectorizer's own timeout (vectorizer.timeout); nothing "
                        "was waited on, the env is still usable"
                    )
                timeout = float(timeout)
            if self._pending is not kind:
                p = self._pending.value
                now = "nothing is pending" if p == "none" else f"a {p}_async() is pending"
                raise NoPendingCallError(
                    f"{what}() called but {now}; call {_FIRST[kind]} first",
                    "" if p == "none" else p,
                )
        try:
            with HOLD:  # (a Ctrl-C is let through only in the backend's wait, `ctrl_c`)
                batch = self._held
                if batch is None:
                    batch = finish(timeout)
                    self._held = batch
                if kind is PendingCall.STEP:
                    np.logical_or(batch[2], batch[3], out=self._done)
                elif kind is PendingCall.RESET:  # its envs are not done any more
                    mask = self._pending_mask
                    self._done[slice(None) if mask is None else mask] = False
                    self._ready = self._ready or mask is None
        except Exception:
            self._pending, self._interrupted, self._held = _IDLE, False, None
            raise
        except BaseException:
            finishable = self._held is not None or (self._resumes and self._broken is None)
            self._pending, self._interrupted = (kind, True) if finishable else (_IDLE, False)
            raise
        self._pending, self._interrupted, self._held = _IDLE, False, None
        return batch


def not_seconds(timeout: Any) -> bool:
    bad_type = isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
    return bad_type or math.isnan(timeout) or timeout < 0


#: this process's id, kept current in a forked child (``os.getpid`` is a system call)
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _on_stack(frame: FrameType) -> bool:  # (below the caller's caller, in this thread)
    f = sys._getframe(2)
    while f is not None:
        if f is frame:
            return True
        f = f.f_back  # type: ignore[assignment]
    return False


class CallGuard:
    """One call at a time, by the process that made the env (``active``: name, thread,
    frame); another thread, a forked child and a re-entered call are refused."""

    __slots__ = ("active", "label", "lock", "owner_pid")

    def __init__(self, label: str) -> None:
        self.label = label  # (the env's class, for the messages)
        self.owner_pid = os.getpid()
        self.lock = threading.Lock()  # held only to check and set ``active``
        self.active: tuple[str, threading.Thread, FrameType] | None = None

    def enter(self, what: str) -> None:
        if _PID[0] != self.owner_pid:
            raise RuntimeError(
                f"{what}() on a {self.label} made by process {self.owner_pid}; this "
                f"process ({os.getpid()}) was forked from it and does not own its workers. "
                "Make a new vectorized env in this process"
            )
        me = threading.current_thread()
        with self.lock:
            active = self.active
            if active is not None and active[1] is not me and active[1].is_alive():
                raise RuntimeError(
                    f"{what}() called from thread {me.name!r} while {active[0]}() is in "
                    f"progress in thread {active[1].name!r}: a vectorized env serves one "
                    "call at a time. Give each thread its own env, or hold a lock around "
                    "every call"
                )
            if active is not None and active[1] is me and _on_stack(active[2]):
                raise AlreadyPendingError(
                    f"{what}() re-entered while {active[0]}() is in progress in the same "
                    "thread (from a signal handler or a callback): a vectorized env serves "
                    "one call at a time; make the call after the first one returns",
                    active[0],
                )
            self.active = (what, me, sys._getframe(1))

    def leave(self) -> None:  # (drops the frame: the call's locals are not kept)
        active = self.active
        if active is not None and active[1] is threading.current_thread():
            self.active = None
