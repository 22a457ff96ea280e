"""The call state of a vectorized env, one machine for every call: which call is pending
(`PendingCall`), whether a Ctrl-C interrupted it, its results in hand; every call is refused
(``_check_ready``), started (``_start_for``) and finished (``_wait_for``) through it.
[`VecEnvBase`][envfactory.VecEnvBase] mixes it in (through `EnvCalls`)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import (
    AlreadyPendingError,
    ClosedError,
    NoPendingCallError,
    VecEnvBrokenError,
)
from ..transport.ctrl_c import HOLD

__all__ = ["CallState", "PendingCall", "no_pending"]


class PendingCall(enum.Enum):
    """Which async half a vectorized env waits on (gymnasium's ``AsyncState``, by call)."""

    NONE = "none"
    RESET = "reset"
    STEP = "step"
    CALL = "call"


def no_pending(pending: PendingCall, what: str, first: str) -> NoPendingCallError:
    """The error of a ``*_wait()`` with none of its call pending (``pending``: what is)."""
    p = pending.value
    now = "nothing is pending" if p == "none" else f"a {p}_async() is pending"
    return NoPendingCallError(
        f"{what}() called but {now}; call {first} first", "" if p == "none" else p
    )


_IDLE = PendingCall.NONE  # (a module global: read without any call, see _wait_for)


class CallState:
    """The pending-call state and the three steps every call goes through."""

    closed: bool
    #: the fault that left the env unusable (VecEnvBrokenError from then on); None: usable
    #: (a worker backend's front sets it in one place: ``RemoteVecEnv.apply``)
    _broken: BaseException | None = None
    _pending: PendingCall = PendingCall.NONE
    # the pending call was interrupted (Ctrl-C): its *_wait() finishes it; every other
    # call refuses at once (see _check_ready)
    _interrupted: bool = False
    # results in hand: a step/reset finished but not yet returned (an interrupt landed
    # after the backend's wait): its *_wait() returns them (see _wait_for)
    _held: Any = None
    _pending_mask: np.ndarray | None = None  # the reset_mask of a pending reset
    _done: np.ndarray  # each env's episode ended at its last step
    _ready: bool = False  # a full reset() has been done
    #: an interrupted ``step``/``reset`` (or half) can be finished by its ``*_wait()`` while
    #: the env is usable (a worker backend's: its call is cut only in its wait, which it
    #: repeats); else it stays pending only with its results in hand (`_can_finish`)
    _resumes: bool = False

    def _check_ready(self, what: str, call: str) -> None:
        """Raise why ``what`` (a start of ``call``) cannot run now, else nothing: closed
        (`ClosedError`), unusable since a fault (`VecEnvBrokenError`, named before any
        other error of a call), or a call pending (`AlreadyPendingError`; one that an
        interrupt left pending is never finished behind the caller's back, its results
        would be dropped: the caller finishes it with its ``*_wait()``, or abandons it with
        ``close()``). The public calls run it only when a cheap test says one holds."""
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
        """``start(*args)``, the backend's start of ``kind``, which is pending after it. It
        runs held (`ctrl_c`): a Ctrl-C meanwhile is raised once it is sent, leaving it
        pending (finished by its ``*_wait()``) if the backend can finish it (`_can_finish`);
        one let through by a wait of the start (the async pool's) leaves nothing sent."""
        try:
            with HOLD:
                start(*args)
                self._pending = kind
        except Exception:
            raise
        except BaseException:  # (a Ctrl-C) pending if it was sent (raised as the hold
            # ended) and the backend can finish it; cut in a wait of its start, not sent
            finishable = self._pending is kind and self._can_finish()
            self._pending, self._interrupted = (kind, True) if finishable else (_IDLE, False)
            raise

    def _wait_for(self, kind: PendingCall, finish: Callable[[Any], Any], timeout: Any) -> Any:
        """``finish(timeout)``, the backend's wait for the pending ``kind``, then this
        class's bookkeeping of the batch (which flags are done; it may run twice). Done or
        failed, nothing is pending after it. Interrupted (Ctrl-C) before the batch was in
        hand, pending if the backend can finish it (`_can_finish`); after, the batch is
        kept (``_held``) and the next ``*_wait()`` returns it. Nothing between the end of
        ``finish`` and the return lets an interrupt in (no call: CPython checks for signals
        on entering a Python function and after a C call), so a batch is never lost between
        the two."""
        try:
            with HOLD:  # (a Ctrl-C is let through only in the backend's wait, `ctrl_c`)
                batch = self._held
                if batch is None:
                    batch = finish(timeout)
                    self._held = batch
                if kind is PendingCall.STEP:
                    np.logical_or(batch[2], batch[3], out=self._done)
                elif kind is PendingCall.CALL:
                    pass
                elif self._pending_mask is None:  # a reset: its envs are not done any more
                    self._done[:] = False
                    self._ready = True
                else:
                    self._done[self._pending_mask] = False
        except Exception:
            self._pending, self._interrupted, self._held = _IDLE, False, None
            raise
        except BaseException:
            finishable = self._held is not None or self._can_finish()  # (results in hand)
            self._pending, self._interrupted = (kind, True) if finishable else (_IDLE, False)
            raise
        self._held = None
        self._pending = _IDLE
        self._interrupted = False
        return batch

    def _can_finish(self) -> bool:
        """After an interrupt of ``step``/``reset`` (or their halves): whether the call can
        be finished by its ``*_wait()`` (else nothing stays pending)."""
        return self._resumes and self._broken is None
