"""`Flights`: each worker's messages in flight, and `Flights.due`, which worker to read next."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from ..transport.handle import WorkerHandle
from .pool_backend import PoolBackend

__all__ = ["Flights", "Message"]


@dataclass(slots=True)
class Message:  # a message in flight to a worker
    ticket: int
    envs: list[int]
    kind: str  # "step" | "reset"


class Flights:
    """The messages in flight to the workers of ``by_index``, over a `PoolBackend`."""

    def __init__(self, by_index: dict[int, WorkerHandle], backend: PoolBackend) -> None:
        self._by_index = by_index
        self.backend = backend
        # worker index -> its messages in flight, oldest first
        self._flight: dict[int, deque[Message]] = {}
        self._since: dict[int, float] = {}  # when its oldest message became the oldest
        # index -> a handle being read, whose read a second Ctrl-C may have cut
        self._resume: dict[int, WorkerHandle] = {}

    def __contains__(self, h: WorkerHandle) -> bool:  # whether ``h`` owes an answer
        return h.index in self._flight

    def clear_cut(self) -> None:  # (a clean start: nothing is in flight)
        self._resume.clear()

    def sent(self, h: WorkerHandle, ticket: int, envs: list[int], kind: str) -> None:
        flight = self._flight.get(h.index)
        if flight is None:
            flight = self._flight[h.index] = deque()
            self._since[h.index] = time.monotonic()
            self.backend.watch(h)
        flight.append(Message(ticket, envs, kind))

    def reading(
        self, h: WorkerHandle, limit: float | None, resumes: bool
    ) -> tuple[Message, float | None]:
        """``h``'s oldest message and the deadline of its answer (None: none), about to be
        read; ``resumes``: resumably, so `due` names ``h`` first until `answered`."""
        if resumes:
            self._resume[h.index] = h
        deadline = None if limit is None else self._since[h.index] + limit
        return self._flight[h.index][0], deadline

    def answered(self, h: WorkerHandle) -> None:
        flight = self._flight[h.index]
        flight.popleft()
        if flight:
            self._since[h.index] = time.monotonic()
        else:
            self.backend.unwatch(h)
            del self._flight[h.index]
        self._resume.pop(h.index, None)

    def failed(self, h: WorkerHandle) -> None:  # read no more (until `drop`: rebuilt)
        self._resume.pop(h.index, None)
        self.backend.unwatch(h)

    def drop(self, h: WorkerHandle) -> None:
        self._flight.pop(h.index, None)

    def due(
        self, limit: float | None, block: bool = True, until: float | None = None
    ) -> list[WorkerHandle]:
        """Workers with an answer (a cut read first) or past their timeout; blocks until
        ``until``."""
        if self._resume:
            cut = [h for i, h in self._resume.items() if i in self._flight]
            if not block:  # (a poll waits for nothing)
                flight, answered = self._flight, self.backend.answered
                cut = [h for h in cut if answered(h, flight[h.index][0].ticket)]
            if cut:
                return cut
            if not any(i in self._flight for i in self._resume):
                self._resume.clear()  # (their workers failed or were rebuilt meanwhile)
        ready: list[WorkerHandle] = self.backend.ready(0)
        while not ready:
            now = time.monotonic()
            if until is not None and now >= until:
                return []
            left = None if until is None else until - now
            if limit is not None:
                first = min(self._flight, key=self._since.__getitem__, default=None)
                if first is None:
                    return []
                late = self._since[first] + limit - now
                if late <= 0:
                    return [self._by_index[first]]
                left = late if left is None else min(left, late)
            if not block:
                return []
            ready = self.backend.ready(left)
        return ready
