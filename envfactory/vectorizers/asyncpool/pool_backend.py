"""`PoolBackend`, what a backend gives the `PoolScheduler`; `RemoteSite`, its shared half."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any

import numpy as np

from ...errors import WorkerError
from ..front.group import WorkerGroup
from ..front.supervisor import Outcome
from ..transport.handle import WorkerHandle
from ..worker.protocol import Cmd
from ..worker.runner import InfoCalls

__all__ = ["Batch", "PoolBackend", "RemoteSite"]

Batch = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]


class PoolBackend(ABC):
    """What a backend gives a `PoolScheduler` (`RemoteSite` and a backend's completion of it)."""

    #: the front's episode-ended flags (lent by `PoolVecEnv`; see `RemoteSite`)
    done: np.ndarray

    @abstractmethod
    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        """Send one message to ``handle`` now; its ticket (answers come in ticket order)."""

    #: `answer` asked again for a ticket whose read an interrupt cut resumes that read
    resumes_reads: bool = False

    def taken(self, handle: WorkerHandle) -> int | None:  # (None: unknown)
        """The ticket of a message ``handle`` took in a `post` a Ctrl-C cut."""
        return None

    def answered(self, handle: WorkerHandle, ticket: int) -> bool:
        return False  # whether `answer` for ``ticket`` (a cut read) would not wait

    @abstractmethod
    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        """The answer to ``ticket`` by ``deadline``, or a ``WorkerError``."""

    @abstractmethod
    def ready(self, handles: Collection[WorkerHandle], timeout: float | None) -> list[WorkerHandle]:
        """Those of ``handles`` (the workers owing answers) with an answer (or end), within
        ``timeout`` (0: look only)."""

    @abstractmethod
    def keep(self, handle: WorkerHandle, envs: list[int], answer: Any) -> InfoCalls:
        """Keep ``envs``' rows of ``answer`` for `rows`; return its info calls."""

    @abstractmethod
    def rows(self, ids: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """``(obs, rewards, terminations, truncations)`` of the envs ``ids``, in order."""

    @abstractmethod
    def returned(self, ids: np.ndarray, ended: np.ndarray) -> None:
        """The caller has the results of ``ids`` (an index array); ``ended``: episodes ended."""

    @abstractmethod
    def recover(
        self, handle: WorkerHandle, failure: WorkerError, call: str, superseded: list[int]
    ) -> Any:
        """Apply the failure policy (``handle`` owes no answer now): the rebuilt worker's lost
        episodes' answer, or raise."""

    @abstractmethod
    def interrupted(self, reason: BaseException) -> None:
        """An interrupt cut a message part-way: mark the env unusable with ``reason``."""


class RemoteSite(PoolBackend):
    """The `PoolBackend` half every `WorkerGroup` shares (messages, flags, failure policy)."""

    def __init__(self, group: WorkerGroup) -> None:
        self.group = group
        self._tickets = 0
        self.done: np.ndarray = np.zeros(group.num_envs, np.bool_)  # (lent by `PoolVecEnv`)

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        self.group.send(cmd, [handle], lambda _: data)
        self._tickets += 1
        return self._tickets

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        return self.group.wait(handle, deadline, call, budget)

    def returned(self, ids: np.ndarray, ended: np.ndarray) -> None:
        self.done[ids] = ended

    def recover(
        self, handle: WorkerHandle, failure: WorkerError, call: str, superseded: list[int]
    ) -> Any:
        # an env whose result was not returned yet: its episode ends there
        done = [bool(self.done[i]) and i not in superseded for i in handle.indices]
        return self.group.recover(call, [(handle, failure)], done)[0][1]

    def interrupted(self, reason: BaseException) -> None:
        self.group.env.apply(Outcome(broken=reason))
