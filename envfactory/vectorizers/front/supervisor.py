"""``Supervisor``: what a worker's failure means, decided in one place as an `Outcome` that the
front applies to its own state (`RemoteVecEnv.apply`); it talks to no worker."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError, EnvfactoryError, RemoteEnvError, WorkerError, restart_message
from ..plan.options import positive_seconds
from ..transport.handle import WorkerHandle

__all__ = ["Outcome", "Supervisor", "count_restart", "cut", "rebuild_failed", "send_cut"]


@dataclass(frozen=True)
class Outcome:
    """What a failure means: ``error`` to raise (None: the call goes on), ``broken`` the env
    from now on (None: usable), ``restart`` the failed workers to rebuild, in env order."""

    error: BaseException | None = None
    broken: BaseException | None = None
    restart: tuple[tuple[WorkerHandle, WorkerError], ...] = ()


class Supervisor:
    """The failure policy of one front: ``restart`` within its budget, else the broken state;
    an env's exception in ``call``/``set_attr`` keeps the env usable. ``timeout``: None or
    ``inf`` (forever) kept as None."""

    def __init__(
        self, timeout: float | None = None, restart: bool = False, max_restarts: int = 5,
        restart_window: float = 60.0,
    ) -> None:  # fmt: skip
        if timeout is not None and not positive_seconds(timeout):
            raise ConfigError(f"vectorizer.timeout must be > 0 seconds or null, got {timeout!r}")
        if max_restarts < 0 or not positive_seconds(restart_window):
            raise ConfigError(
                "vectorizer.max_restarts must be >= 0 and vectorizer.restart_window > 0 "
                f"seconds, got {max_restarts!r} and {restart_window!r}"
            )
        self.timeout = None if timeout == float("inf") else timeout
        self.restart, self.max_restarts, self.restart_window = restart, max_restarts, restart_window

    def failed(
        self, call: str, failures: Sequence[tuple[WorkerHandle, WorkerError]], broken: bool
    ) -> Outcome:
        """``failures`` in ``call`` (``broken``: the env already is): rebuild the restartable
        workers of a ``step``/``reset`` within their budget, else the first failure in env
        order, breaking the env unless it is an env's own exception in ``call``/``set_attr``."""
        failures = sorted(failures, key=lambda f: f[0].start)
        first = failures[0][1]
        if self.restart and call in ("step", "reset") and not broken:
            rebuild = tuple((h, err) for h, err in failures if h.restartable)
            for h, err in rebuild:
                try:
                    count_restart(h.restarts, err, h.label, self.max_restarts, self.restart_window)
                except WorkerError:  # its budget is spent: the env is broken with ``err``
                    return Outcome(err, err)
                if not h.restart_cause:
                    h.restart_cause = restart_message(err).removeprefix("restarting after: ")
            left = [err for h, err in failures if not h.restartable]
            return Outcome(left[0], left[0], rebuild) if left else Outcome(restart=rebuild)
        if call in ("call", "set_attr") and all(isinstance(e, RemoteEnvError) for _, e in failures):
            return Outcome(first)
        return Outcome(first, first)


def cut(call: str, h: WorkerHandle, exc: BaseException) -> Outcome:
    """``h``'s wait in ``call`` raised ``exc``, not a worker's failure: a handle's bug breaks
    the env (named); a Ctrl-C leaves the call pending if the wait can be asked again."""
    if isinstance(exc, Exception) and not isinstance(exc, EnvfactoryError):
        bug = h.error(
            WorkerError,
            f"{type(h).__name__}.recv raised {type(exc).__name__}: {exc} (a bug in the "
            "backend, not an env's fault: a handle's recv raises TimeoutError or a "
            "WorkerError)",
            call,
        )
        bug.__cause__ = exc
        return Outcome(bug, bug)
    if h.resumable or h.own_wait:  # asked again by *_wait()
        return Outcome(exc)
    what = f"{call} was interrupted ({type(exc).__name__}) while waiting for {h.label}"
    return Outcome(exc, RuntimeError(what))


def send_cut(cmd: Any, exc: BaseException, sent: int, label: str, of: int) -> Outcome:
    """A send of ``cmd`` raised ``exc`` after ``sent`` workers had it: out of step."""
    if not sent:
        return Outcome(exc)
    return Outcome(exc, RuntimeError(
        f"{cmd} failed ({type(exc).__name__}) while it was being sent to the workers "
        f"({label} of {of}): some have it and some not, so they are no longer in step"
    ))  # fmt: skip


def rebuild_failed(h: WorkerHandle, exc: BaseException) -> Outcome:
    """The rebuild of ``h`` raised ``exc``: the env is broken."""
    why = f"the restart of {h.label} was interrupted ({type(exc).__name__})"
    return Outcome(exc, exc if isinstance(exc, Exception) else RuntimeError(why))


def count_restart(
    times: list[float], failure: Exception, who: str, max_restarts: int, window: float
) -> None:
    """Record a restart of ``who`` now in ``times``, or raise ``failure`` (why, the fix) if it
    had ``max_restarts`` in the last ``window`` seconds."""
    now = time.monotonic()
    recent = [t for t in times if now - t < window]
    if len(recent) >= max_restarts:
        first, sep, rest = str(failure.args[0]).partition("\n")
        failure.args = (
            f"{first}; not restarted: {who} was already restarted {len(recent)} times in "
            f"the last {window:g} s (vectorizer.max_restarts={max_restarts}, "
            f"vectorizer.restart_window={window:g}): its restart budget is spent; raise "
            f"vectorizer.max_restarts to restart it more{sep}{rest}",
        )
        raise failure
    times.append(now)
