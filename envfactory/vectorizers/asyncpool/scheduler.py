"""`PoolScheduler`: every piece of the async pool's state over a `PoolBackend`, each worker's
messages in flight and which worker to read next included (its Ctrl-C rules:
docs/concepts/async-pool.md)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from itertools import islice
from typing import Any

import numpy as np

from ...errors import AlreadyPendingError, NoPendingCallError, NotReadyError, WorkerError
from ..front.checks import show_ids
from ..front.infos import merge_infos
from ..transport.ctrl_c import HOLD
from ..transport.handle import WorkerHandle
from ..worker.protocol import Cmd
from .pool_backend import Batch, PoolBackend, RemoteSite

__all__ = ["IDLE", "IN_FLIGHT", "LOST", "READY", "PoolBackend", "PoolScheduler", "RemoteSite"]

IDLE, IN_FLIGHT, READY, LOST = 0, 1, 2, 3  # an env's state in the pool


class PoolScheduler:
    """The async pool over ``handles`` and a `PoolBackend`."""

    def __init__(self, handles: Sequence[WorkerHandle], backend: PoolBackend) -> None:
        self.handles = list(handles)
        self.backend = backend
        self.num_envs = max(h.stop for h in self.handles)
        self._owner = [h for h in self.handles for _ in range(h.start, h.stop)]
        self._state = [IDLE] * self.num_envs  # (a list: cheaper per env than an array)
        self._queue: deque[int] = deque()  # READY envs, in the order they came back
        self._infos: dict[int, list[dict]] = {}  # infos of READY / LOST envs
        self._span = {h: h.indices for h in self.handles}  # a worker's envs, in order
        # worker -> its messages in flight, oldest first: (ticket, envs, "step" | "reset");
        # when the oldest became so
        self._flight: dict[WorkerHandle, deque[tuple[int, list[int], str]]] = {}
        self._since: dict[WorkerHandle, float] = {}
        self._resume: set[WorkerHandle] = set()  # being read: a Ctrl-C may have cut the read
        # a batch built by a recv that a Ctrl-C then interrupted: the next recv returns it
        self._stash: tuple[list[int], np.ndarray, Batch] | None = None
        # env -> its infos as handed over, for `unsent` (None: LOST, its result in _infos)
        self._unsent: dict[int, list[dict] | None] = {}

    def in_flight(self) -> list[int]:  # (LOST: a rebuilt worker's envs, their loss unsent)
        return [i for i, s in enumerate(self._state) if s == IN_FLIGHT]

    def lost(self) -> list[int]:
        return [i for i, s in enumerate(self._state) if s == LOST]

    def expect_drained(self, what: str) -> None:
        """Raise unless no env is in flight or unreturned (for a ``step``, nor LOST)."""
        flight, ready = self.in_flight(), list(self._queue)
        if flight or ready:
            raise AlreadyPendingError(
                f"{what}() while the pool has envs in flight {flight} and received-but-not-"
                f"returned {ready}: call recv() until they are returned first",
                "step",
            )
        if what == "step" and self.lost():
            raise AlreadyPendingError(
                f"step() while envs {self.lost()} of a rebuilt worker still have a result to "
                "return: send() and recv() them first",
                "step",
            )

    def clear(self) -> None:  # (for `start_reset`, drained)
        self._state[:] = [IDLE] * self.num_envs
        self._infos.clear()
        self._stash = None
        self._resume.clear()
        self._unsent.clear()

    def forget(self, ids: Sequence[int]) -> None:
        """A synchronous reset or step of ``ids`` supersedes their pool results."""
        for i in ids:
            self._state[i] = IDLE
            self._infos.pop(i, None)
            self._unsent.pop(i, None)

    def start_reset(self, data_of: Callable[[WorkerHandle], Any]) -> None:
        with HOLD:
            for h in self.handles:
                ticket = self.backend.post(h, Cmd.RESET, data_of(h))
                self._sent(h, ticket, h.indices, "reset")

    def send(self, ids: list[int], actions: Sequence[Any]) -> None:
        state, whole = self._state, self._whole(ids)
        busy = [] if whole else [i for i in ids if state[i] == IN_FLIGHT or state[i] == READY]
        if busy:
            raise ValueError(
                f"send() for envs {show_ids(busy)} whose last step is not received yet: call "
                "recv() until infos['env_id'] returns them, then send() their actions"
            )
        groups: dict[WorkerHandle, list[int]] = {}  # worker -> positions k in ids
        with HOLD:  # (no Ctrl-C cuts it: `ctrl_c`)
            for k, i in enumerate([] if whole else ids):
                if state[i] == LOST:  # its worker was rebuilt: this step is the loss
                    state[i] = READY
                    self._queue.append(i)
                    self._unsent.pop(i, None)
                    continue
                groups.setdefault(self._owner[i], []).append(k)
            for h, ks in groups.items():
                ks.sort(key=ids.__getitem__)  # (a worker's envs in env order)
                whole.append((h, [ids[k] for k in ks], ks))
            for h, envs, ks in whole:
                self._dispatch(h, envs, ks, actions)

    def recv(self, want: int | list[int], limit: float | None) -> Batch:
        """The next ``want`` envs ready, or (a list) exactly those; ``limit``: `PoolVecEnv.recv`."""
        if self._stash is not None:
            ids, idx, batch = self._stash
            if not isinstance(want, list) or want == ids:
                return self._hand_over(ids, idx, batch, False)
            self._stash = None  # (its envs are still READY in the queue)
        state = self._state
        if isinstance(want, list):
            idle = [i for i in want if state[i] != IN_FLIGHT and state[i] != READY]
            if idle:
                raise ValueError(
                    f"recv(env_ids={show_ids(want)}): envs {show_ids(idle)} are not in flight; "
                    "send() them first (recv(env_ids=...) returns exactly envs sent)"
                )
            need = len(want)
        else:
            need = want
            flight = state.count(IN_FLIGHT)
            if flight + len(self._queue) < need:
                why, fix = "", "send() actions for more envs first (or async_reset())"
                if self._unsent:  # (a Ctrl-C between the caller's recv and send)
                    why = f"; envs {show_ids(list(self._unsent))} were returned but not sent"
                    fix = "envs.unsent() returns them again: send() their actions"
                raise NoPendingCallError(
                    f"recv() needs {need} envs (batch_size) in flight, but {len(self._queue)} "
                    f"are ready and {flight} in flight{why}; {fix}",
                    "",
                )
        poll = limit == 0  # read what is there; a worker is never past a 0 s limit
        with HOLD:
            self._drain(None if poll else limit)  # (dead and timed-out workers too)
            if poll and not self._enough(want):
                self._not_ready(want)
            while not self._enough(want):
                for h in HOLD.waiting(self._due, limit):
                    self._complete(h, limit)
            head = not isinstance(want, list)
            ids = list(islice(self._queue, need)) if head else want  # type: ignore[assignment]
            self._stash = (ids, *self._build(ids))
        return self._hand_over(*self._stash, head)

    def unsent(self) -> Batch | None:
        if not self._unsent:
            return None
        with HOLD:
            state, unsent = self._state, self._unsent
            kept = {i: self._infos.pop(i, []) if v is None else v for i, v in unsent.items()}
            ids = list(kept)
            idx, batch = self._build(ids, kept)
            for i in ids:
                state[i] = IDLE  # (LOST: its result is handed over now)
                unsent[i] = kept[i]
            self.backend.returned(idx, batch[2] | batch[3])
        return batch

    def recv_ready(self, at_least: int, wait: float | None, limit: float | None) -> Batch:
        self._stash = None  # (a batch a Ctrl-C cut: its envs are still READY in the queue)
        have = self._state.count(IN_FLIGHT) + len(self._queue)
        if have == 0:
            raise NoPendingCallError("recv_ready(): no env is in flight; send() first", "")
        at_least, until = min(at_least, have), None if wait is None else time.monotonic() + wait
        with HOLD:
            self._drain(limit)
            while len(self._queue) < at_least:
                if self._queue and until is not None and time.monotonic() >= until:
                    break
                cap = until if self._queue else None  # (none ready yet: wait for the first)
                for h in HOLD.waiting(partial(self._due, until=cap), limit):
                    self._complete(h, limit)
            self._drain(None, limit)  # and what else is there already
            ids = list(self._queue)
            self._stash = (ids, *self._build(ids))
        return self._hand_over(*self._stash, True)

    def settle(self, handles: Sequence[WorkerHandle], limit: float | None) -> None:
        """Wait for every answer ``handles`` owe (a call uses their channels next)."""
        with HOLD:
            for h in handles:
                while h in self._flight:
                    self._complete(h, limit)

    def _drain(self, due: float | None, limit: Any = "due") -> None:
        """Read every answer there (and every worker past ``due``) with ``limit``."""
        for h in self._due(due, block=False):
            self._complete(h, due if limit == "due" else limit)

    def _due(
        self, limit: float | None, block: bool = True, until: float | None = None
    ) -> list[WorkerHandle]:
        """Workers with an answer (a cut read first) or past their timeout; blocks until
        ``until``."""
        flight = self._flight
        if self._resume:
            cut = list(self._resume)  # (each in flight: a read that ends leaves _resume)
            if not block:  # (a poll waits for nothing)
                answered = self.backend.answered
                cut = [h for h in cut if answered(h, flight[h][0][0])]
            if cut:
                return cut
        ready: list[WorkerHandle] = self.backend.ready(flight, 0)
        while not ready:
            now = time.monotonic()
            if until is not None and now >= until:
                return []
            left = None if until is None else until - now
            if limit is not None:
                first = min(flight, key=self._since.__getitem__, default=None)
                if first is None:
                    return []
                late = self._since[first] + limit - now
                if late <= 0:
                    return [first]
                left = late if left is None else min(left, late)
            if not block:
                return []
            ready = self.backend.ready(flight, left)
        return ready

    def _whole(self, ids: list[int]) -> list[tuple[WorkerHandle, list[int], Any]]:
        """``ids`` as whole idle workers in order, each (worker, its envs, their slice of ids)."""
        whole, k, owner, state, span = [], 0, self._owner, self._state, self._span
        while k < len(ids):
            h = owner[ids[k]]
            envs, stop = span[h], k + h.stop - h.start
            if ids[k:stop] != envs or any(state[h.start : h.stop]):  # (IDLE is 0)
                return []
            whole.append((h, envs, slice(k, stop)))
            k = stop
        return whole

    def _not_ready(self, want: int | list[int]) -> None:
        if isinstance(want, list):
            late = [i for i in want if self._state[i] != READY]
            what = f"recv(env_ids={show_ids(want)}, timeout=0): envs {show_ids(late)} are"
        else:
            what = (
                f"recv(timeout=0): only {len(self._queue)} of the {want} envs a batch needs "
                "(batch_size) are ready; the batch is"
            )
        raise NotReadyError(
            f"{what} not ready yet; nothing was waited on and no worker was stopped: call "
            "recv(timeout=0) again later, or recv() to wait"
        )

    def _enough(self, want: int | list[int]) -> bool:
        if isinstance(want, list):
            state = self._state
            return all(state[i] == READY for i in want)
        return len(self._queue) >= want

    def _sent(self, h: WorkerHandle, ticket: int, envs: list[int], kind: str) -> None:
        flight = self._flight.get(h)
        if flight is None:
            flight = self._flight[h] = deque()
            self._since[h] = time.monotonic()
        flight.append((ticket, envs, kind))
        for i in envs:
            self._state[i] = IN_FLIGHT
        if self._unsent:
            for i in envs:
                self._unsent.pop(i, None)

    def _dispatch(self, h: WorkerHandle, envs: list[int], ks: Any, actions: Any) -> None:
        """Send ``h`` the step of ``envs`` in env order (``actions[ks[j]]``; a slice: all)."""
        whole = isinstance(ks, slice)
        local = list(range(h.stop - h.start)) if whole else [i - h.start for i in envs]
        if isinstance(actions, np.ndarray) and actions.dtype != object:  # one copy
            batch: Any = actions[ks].copy() if whole else actions[ks]
        else:
            rows = list(actions[ks]) if whole else [actions[k] for k in ks]
            plain = all(isinstance(a, np.ndarray | np.generic) for a in rows)
            batch = np.stack(rows) if plain else rows
        try:
            ticket = self.backend.post(h, Cmd.STEP_ENVS, (local, batch))
        except BaseException as exc:
            # a Ctrl-C while a write waited: a message the handle took is in flight
            taken = None if isinstance(exc, Exception) else self.backend.taken(h)
            if taken is not None:
                self._sent(h, taken, envs, "step")
            raise
        self._sent(h, ticket, envs, "step")

    def _complete(self, h: WorkerHandle, limit: float | None) -> None:
        """Read ``h``'s oldest answer (its envs become READY), under the hold. A second Ctrl-C
        cuts it: resumed by the next read where the backend `resumes_reads` (`_due` names
        ``h`` first until it is read), else fatal."""
        resumes = h.resumable and self.backend.resumes_reads
        if resumes:
            self._resume.add(h)
        flight = self._flight[h]
        ticket, envs, kind = flight[0]
        deadline = None if limit is None else self._since[h] + limit
        try:
            answer = self.backend.answer(h, ticket, deadline, kind, limit or 0.0)
        except WorkerError as failure:
            try:
                self._resume.discard(h)
                self._recover(h, failure, kind)
            except BaseException as exc:
                self._cut(h, kind, exc)
                raise
            return
        except BaseException as exc:
            if not resumes:
                self._cut(h, kind, exc)
            raise
        flight.popleft()
        if flight:
            self._since[h] = time.monotonic()
        else:
            del self._flight[h]
        self._resume.discard(h)
        self._keep(h, envs, answer)
        self._queue.extend(envs)
        state = self._state
        for i in envs:
            state[i] = READY

    def _keep(self, h: WorkerHandle, envs: list[int], answer: Any) -> None:
        """``envs``' rows of ``h``'s ``answer`` kept, their infos replaced by its own."""
        infos = self._infos
        for i in envs:
            infos.pop(i, None)
        for local, info in self.backend.keep(h, envs, answer):
            infos.setdefault(h.start + local, []).append(info)

    def _cut(self, h: WorkerHandle, kind: str, exc: BaseException) -> None:
        why = f"{kind} was interrupted ({type(exc).__name__}) while reading {h.label}"
        if not isinstance(exc, WorkerError):
            self.backend.interrupted(RuntimeError(why))

    def _recover(self, h: WorkerHandle, failure: WorkerError, kind: str) -> None:
        """``h`` failed: its unreturned envs get the lost-episode result, the others LOST."""
        mine, state = h.indices, self._state
        superseded = [i for i in mine if state[i] == READY]
        self._flight.pop(h, None)  # (read no more: it is rebuilt or the env broken)
        answer = self.backend.recover(h, failure, kind, superseded)
        if self._stash is not None and set(self._stash[0]) & set(mine):
            self._stash = None  # superseded: its envs are READY again, with this result
        self._keep(h, mine, answer)
        for i in mine:  # (the backend's recovery changed no state here)
            if state[i] == IN_FLIGHT:
                self._queue.append(i)
                state[i] = READY
            elif state[i] != READY:  # its result comes at its next send, or from `unsent`
                state[i] = LOST
                self._unsent.pop(i, None)
                self._unsent[i] = None

    def _build(self, ids: list[int], kept: dict | None = None) -> tuple[np.ndarray, Batch]:
        """``ids`` as an index array and their batch with the infos ``kept`` (default: the
        ready envs'); changes nothing."""
        idx = np.asarray(ids, dtype=np.intp)
        obs, rewards, terms, truncs = self.backend.rows(idx)
        kept = self._infos if kept is None else kept
        rows = [(k, info) for k, i in enumerate(ids) if i in kept for info in kept[i]]
        infos = merge_infos(rows, len(ids)) if rows else {}
        infos["env_id"] = idx.astype(np.int32)
        return idx, (obs, rewards, terms, truncs, infos)

    def _hand_over(self, ids: list[int], idx: np.ndarray, batch: Batch, head: bool) -> Batch:
        """``batch`` goes to the caller: its envs leave the queue and become IDLE, unsent."""
        with HOLD:
            queue, infos, unsent, state = self._queue, self._infos, self._unsent, self._state
            if head:
                for _ in ids:
                    queue.popleft()
            else:
                taken = set(ids)
                self._queue = deque(i for i in queue if i not in taken)
            for i in ids:
                unsent[i] = infos.pop(i, [])
                state[i] = IDLE
            self.backend.returned(idx, batch[2] | batch[3])
            self._stash = None
        return batch
