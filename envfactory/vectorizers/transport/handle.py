"""The parent's end of one worker (`WorkerHandle`), how envs are split over workers, and
their start/close budgets (exported by [`remote`][envfactory.vectorizers.remote])."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

from ...errors import ConfigError, RemoteEnvError, WorkerError, remote_env_error
from ..record import Split
from ..worker.protocol import Cmd, Failure, Reset

__all__ = ["CLOSE_TIMEOUT", "STARTUP_TIMEOUT", "WorkerHandle", "env_label", "split_envs"]


class WorkerHandle(ABC):
    """The parent's end of one worker, which hosts envs ``start:stop``: a backend implements
    ``send``, ``recv``, ``kill`` and ``pid``, and where it has them ``exitcode``, ``alive``,
    ``join`` and ``close``. Ctrl-C is held for a call (`ctrl_c`) but in ``recv``, the wait.

    Attributes:
        index: the worker's number (``WorkerError.worker``).
        start, stop: its envs' indices in the vectorized env.
        env_id: what errors name as the env.
    """

    #: whether ``restart=true`` may rebuild it (not the parent's own envs)
    restartable: bool = True
    #: its commands run in this process when it is waited for (first, while the others work)
    in_process: bool = False
    #: ``recv`` cut by a Ctrl-C answers again alike, so the call stays pending (its
    #: ``*_wait()`` finishes it); else an interrupted call leaves the env unusable
    resumable: bool = False
    #: ``recv`` lets a Ctrl-C through only in its own waits (``HOLD.waiting``); else the
    #: whole ``recv`` is the wait
    own_wait: bool = False
    #: the first failure that restarted it, on one line (``""``: never restarted)
    restart_cause: str = ""

    def __init__(self, index: int, start: int, stop: int, env_id: str) -> None:
        self.index, self.start, self.stop, self.env_id = index, start, stop, env_id
        self.restarts: list[float] = []  # monotonic times of this worker's restarts
        self.last_reset: Reset | None = None

    @property
    def indices(self) -> list[int]:
        return list(range(self.start, self.stop))

    @property
    def label(self) -> str:  # how messages name it
        return f"worker {self.index}"

    @property
    def where(self) -> str:  # where it runs, beyond a local pid (a Ray node): errors say [where]
        return ""

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """Its process id (None before it started)."""

    @property
    def exitcode(self) -> int | None:  # once it exited (negative: the signal)
        return None

    @property
    def alive(self) -> bool:  # whether it can still be asked something (close asks those)
        return True

    @abstractmethod
    def send(self, cmd: Cmd, data: Any) -> None:
        """Ask the worker to run ``cmd`` with ``data``, without waiting (a worker that is
        gone is no error here: ``recv`` says how it ended)."""

    @abstractmethod
    def recv(self, deadline: float | None, call: str) -> Any:
        """The answer to the last ``send`` (what the worker's `EnvHost` returned), waiting
        until ``deadline`` (``time.monotonic()``; None: forever).

        Raises:
            TimeoutError: the deadline passed (the caller kills it).
            WorkerError: the worker died, or an env raised (built by ``error`` or
                ``remote_error``).
        """

    @abstractmethod
    def kill(self) -> None:
        """End the worker now (and whatever it started); safe to call twice."""

    def join(self, timeout: float) -> None:  # noqa: B027 - optional
        """Wait up to ``timeout`` seconds for a worker that was asked to close to exit."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release what the handle holds (after ``kill``)."""

    def error(self, cls: type[WorkerError], what: str, call: str, tb: str = "") -> WorkerError:
        """A ``cls`` naming this worker: ``worker 1 (pid 42, envs [2, 3], env 'x') died
        during step``."""
        return cls(self._placed(what), exitcode=self.exitcode, **self._names(tb, call))

    def remote_error(self, call: str, failure: Failure) -> RemoteEnvError:
        """An env's exception (a `Failure`) as a RemoteEnvError of the original's type too."""
        exitcode = self.exitcode  # (0: a worker that failed to start and ended)
        return remote_env_error(
            self._placed(f"raised {failure.exc_type}"),
            exc_type=failure.exc_type,
            original=failure.exc,
            exitcode=None if exitcode == 0 else exitcode,
            **self._names(failure.traceback, call),
        )

    def _names(self, tb: str, call: str) -> dict[str, Any]:
        return dict(
            worker=self.index, pid=self.pid, env_indices=self.indices, env_id=self.env_id,
            remote_traceback=tb, call=call,
        )  # fmt: skip

    def _placed(self, what: str) -> str:
        return f"[{self.where}] {what}" if self.where else what


#: the least time a worker gets to build its envs and answer (``timeout`` when larger)
STARTUP_TIMEOUT = 120.0
#: the time ``close()`` gives the workers to close their envs, when it is given none
CLOSE_TIMEOUT = 10.0


def split_envs(num_envs: int, in_series: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` per worker: ceil(num_envs / in_series) even shares.

    Example:
        >>> split_envs(4, 3)
        [(0, 2), (2, 4)]
    """
    if not isinstance(in_series, int) or in_series < 1:
        raise ConfigError(
            f"vectorizer.in_series must be an integer >= 1 or null, got {in_series!r}"
        )
    workers = math.ceil(num_envs / in_series)
    base, extra = divmod(num_envs, workers)
    return Split(tuple(base + (k < extra) for k in range(workers)), 0, "").slices()


def env_label(fn: Any) -> str:
    """The env id errors name: an env constructor's ``label`` or name."""
    return str(getattr(fn, "label", "") or getattr(fn, "__name__", "") or type(fn).__name__)
