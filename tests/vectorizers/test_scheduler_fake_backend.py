"""The async pool's scheduler alone, over a fake `PoolBackend` (issue 37): no process, no
pipe, no shared memory. Each worker answers a message with its envs' step counts; which
workers are ready is scripted, so the scheduler's rules (first ready first, exactly the envs
asked, a failed worker's lost episodes, nothing lost between recv and send) are tested
without the transport."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from typing import Any

import numpy as np
import pytest

from envfactory.errors import NoPendingCallError, WorkerDiedError, WorkerError
from envfactory.vectorizers.asyncpool.scheduler import PoolBackend, PoolScheduler
from envfactory.vectorizers.remote import Cmd, WorkerHandle


class Idle(WorkerHandle):
    """A handle the fake backend answers for (the scheduler never calls send/recv)."""

    pid = None

    def send(self, cmd: Cmd, data: Any) -> None:
        raise AssertionError("the scheduler posts through its backend")

    recv = kill = send  # type: ignore[assignment]


class FakeBackend(PoolBackend):
    """Worker ``k``'s answer to a message is each of its envs' message count; ``stalled``
    workers are never ready; ``die`` workers fail their next answer."""

    def __init__(self, handles: list[WorkerHandle], num_envs: int) -> None:
        self.done = np.zeros(num_envs, np.bool_)
        self.owed: dict[int, deque[tuple[int, Any]]] = {h.index: deque() for h in handles}
        self.stalled: set[int] = set()
        self.die: set[int] = set()
        self.count = np.zeros(num_envs, np.int64)
        self.obs = np.zeros(num_envs, np.int64)
        self.recovered: list[tuple[int, list[int]]] = []
        self.returns: list[list[int]] = []
        self.tickets = 0

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        self.tickets += 1
        self.owed[handle.index].append((self.tickets, data))
        return self.tickets

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: Any, call: str, budget: float
    ) -> Any:
        got, data = self.owed[handle.index].popleft()
        assert got == ticket  # answers in the order of the tickets
        if handle.index in self.die:
            self.die.discard(handle.index)
            raise handle.error(WorkerDiedError, "died", call)
        return data

    def ready(self, handles: Collection[WorkerHandle], timeout: float | None) -> list[WorkerHandle]:
        ready = [h for h in handles if h.index not in self.stalled]
        assert ready or timeout == 0, "the test would wait forever"
        return ready

    def keep(self, handle: WorkerHandle, envs: list[int], answer: Any) -> list:
        for i in envs:
            self.count[i] += 1
            self.obs[i] = self.count[i]
        return [(i - handle.start, {"k": handle.index}) for i in envs]

    def rows(self, ids: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        n = len(ids)
        return self.obs[ids].copy(), np.ones(n), np.zeros(n, np.bool_), np.zeros(n, np.bool_)

    def returned(self, ids: list[int], ended: np.ndarray) -> None:
        self.returns.append(list(ids))
        self.done[ids] = ended

    def recover(
        self, handle: WorkerHandle, failure: WorkerError, call: str, superseded: list[int]
    ) -> Any:
        self.recovered.append((handle.index, superseded))
        return None

    def interrupted(self, reason: BaseException) -> None:
        raise AssertionError(f"no interrupt in these tests: {reason}")


def _pool(workers: int = 3, per: int = 2) -> tuple[PoolScheduler, FakeBackend]:
    handles: list[WorkerHandle] = [
        Idle(k, k * per, (k + 1) * per, "Fake-v0") for k in range(workers)
    ]
    backend = FakeBackend(handles, workers * per)
    pool = PoolScheduler(handles, backend)
    pool.start_reset(lambda h: None)
    return pool, backend


def test_a_batch_is_the_first_workers_ready_and_a_stalled_one_keeps_its_envs_in_flight() -> None:
    pool, backend = _pool()
    backend.stalled = {1}
    obs, *_, infos = pool.recv(4, None)
    assert sorted(infos["env_id"].tolist()) == [0, 1, 4, 5]
    assert obs.tolist() == [1, 1, 1, 1] and infos["k"].tolist() == [0, 0, 2, 2]
    assert pool.in_flight() == [2, 3]
    with pytest.raises(NoPendingCallError, match="needs 4 envs"):
        pool.recv(4, None)  # only worker 1's two envs are in flight
    pool.send([0, 1, 4, 5], [0, 0, 0, 0])
    backend.stalled = set()
    ids = pool.recv([2, 3], None)[4]["env_id"].tolist()
    assert ids == [2, 3]  # exactly the envs asked, in that order
    assert backend.returns[-1] == [2, 3]
    with pytest.raises(Exception, match="in flight"):
        pool.expect_drained("reset")  # envs 0, 1, 4, 5 are still in flight


def test_a_failed_worker_is_recovered_by_the_backend_and_its_envs_come_back() -> None:
    pool, backend = _pool(workers=2)
    pool.recv(4, None)
    pool.send([0, 1, 2, 3], [0, 0, 0, 0])
    backend.die = {1}
    assert 2 in pool.in_flight()
    pool.recv(2, None)  # worker 0's, or worker 1's lost episodes (its recovery answers)
    assert backend.recovered == [(1, [])]
    assert not backend.owed[1]  # nothing left owed by the rebuilt worker
    rest = pool.recv(2, None)[4]["env_id"].tolist()
    assert len(set(rest)) == 2 and pool.in_flight() == []


def test_a_batch_of_whole_workers_is_the_first_workers_ready_else_the_rest_opens_the_next() -> None:
    """``batch_size`` a multiple of the envs per worker (2 here): a batch is the first workers
    ready, each worker's envs one run in env order. Otherwise the envs of the last worker that
    do not fit stay ready and open the next batch (docs/concepts/async-pool.md)."""
    pool, backend = _pool()  # 3 workers of 2
    backend.stalled = {1}
    assert pool.recv(4, None)[4]["env_id"].tolist() == [0, 1, 4, 5]  # workers 0 and 2
    pool.send([0, 1, 4, 5], [0, 0, 0, 0])
    backend.stalled = set()
    assert pool.recv(3, None)[4]["env_id"].tolist() == [2, 3, 0]  # worker 1, then 0's first
    assert pool.in_flight() == []  # (every answer is read: env 1 and worker 2's are queued)
    assert pool.recv(3, None)[4]["env_id"].tolist() == [1, 4, 5]
