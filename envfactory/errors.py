"""Exceptions raised by envfactory: one class per decision a caller makes."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = [
    "AsyncCallError",
    "ClosedError",
    "ConfigError",
    "EnvfactoryError",
    "PluginConflictError",
    "PluginLoadWarning",
    "RemoteEnvError",
    "SpaceMismatchError",
    "UnknownNameError",
    "UnpicklableEnvError",
    "VecEnvBrokenError",
    "WorkerDiedError",
    "WorkerError",
    "WorkerTimeoutError",
    "did_you_mean",
]


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """Return `` Did you mean 'x'?`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


class EnvfactoryError(Exception):
    """Base class of every error envfactory raises on purpose."""


class ConfigError(EnvfactoryError, ValueError):
    """A config value is invalid (wrong type, unknown key, out of range)."""


class UnknownNameError(ConfigError, KeyError):
    """A config names a family, vectorizer or wrapper that no plugin registered."""

    def __init__(self, kind: str, value: str, choices: Sequence[str], *, key: str = "") -> None:
        self.kind, self.value, self.choices, self.key = kind, value, sorted(choices), key
        where = f" (at {key})" if key else ""
        msg = (
            f"unknown {kind} {value!r}{where}.{did_you_mean(value, choices)} "
            f"Valid {kind} names: {', '.join(self.choices) or '(none registered)'}. "
            f"Install the plugin that provides it, or run 'envfactory-plugins' to see what "
            f"is registered."
        )
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PluginConflictError(EnvfactoryError):
    """Two plugins registered the same name for the same kind of record."""


class PluginLoadWarning(UserWarning):
    """A plugin failed to import or raised in a hook; it was skipped."""


class AsyncCallError(EnvfactoryError, RuntimeError):
    """An async half was called out of order (e.g. ``step_wait`` with no ``step_async``)."""


class ClosedError(EnvfactoryError, RuntimeError):
    """The vectorized environment was used after ``close()``."""


class SpaceMismatchError(EnvfactoryError, ValueError):
    """Sub-environments of one vectorized env have different spaces."""


class UnpicklableEnvError(EnvfactoryError, TypeError):
    """An env constructor cannot be sent to a worker process under spawn/forkserver."""


class VecEnvBrokenError(EnvfactoryError, RuntimeError):
    """A previous worker failure left the vectorized env unusable (no stale data is served)."""


class WorkerError(EnvfactoryError, RuntimeError):
    """A worker process failed. Carries which worker, pid, env indices, env id and the
    remote traceback text.

    Attributes:
        worker: index of the worker process.
        pid: its process id.
        env_indices: the env indices it hosts.
        env_id: the env id (or family) of those envs.
        exitcode: the exit code (negative: killed by signal), or None if alive.
        signal: the signal name that killed it, if any.
        remote_traceback: traceback text from the worker, if any.
    """

    def __init__(
        self,
        what: str,
        *,
        worker: int,
        pid: int | None,
        env_indices: Sequence[int],
        env_id: str,
        exitcode: int | None = None,
        remote_traceback: str = "",
        call: str = "",
    ) -> None:
        import signal as _signal

        self.worker, self.pid, self.env_indices = worker, pid, list(env_indices)
        self.env_id, self.exitcode, self.remote_traceback, self.call = (
            env_id,
            exitcode,
            remote_traceback,
            call,
        )
        self.signal: str | None = None
        if exitcode is not None and exitcode < 0:
            try:
                self.signal = _signal.Signals(-exitcode).name
            except ValueError:
                self.signal = f"signal {-exitcode}"
        parts = [
            f"worker {worker} (pid {pid}, envs {self.env_indices}, env {env_id!r}) {what}"
            + (f" during {call}" if call else "")
        ]
        if exitcode is not None:
            parts.append(f"exit code {exitcode}" + (f" ({self.signal})" if self.signal else ""))
        msg = "; ".join(parts)
        if remote_traceback:
            msg += "\n--- remote traceback ---\n" + remote_traceback.rstrip()
        super().__init__(msg)


class RemoteEnvError(WorkerError):
    """An env raised inside a worker. The original exception is ``__cause__`` (when it could
    be pickled) and its type name is ``exc_type``."""

    exc_type: str = ""


class WorkerDiedError(WorkerError):
    """A worker process exited or was killed (e.g. SIGKILL) while the parent waited on it."""


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker did not answer within ``timeout`` seconds; it was killed."""
