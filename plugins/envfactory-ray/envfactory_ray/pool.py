"""``RayPool``: envpool's ``async_reset``/``send``/``recv`` over Ray actors
(``vectorizer.batch_size``): the core's `PoolVecEnv` over a `RayGroup`, `RaySite` Ray's own part.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Sequence
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from envfactory import OptionError, WorkerError
from envfactory.vectorizers.remote import (
    Cmd,
    PoolVecEnv,
    RemoteSite,
    WorkerHandle,
    split_infos,
    take_rows,
)

from .vecenv import RayGroup, _put

__all__ = ["RayPool", "RaySite"]


class RaySite(RemoteSite):
    """The pool scheduler's view of a `RayGroup`: a message is one actor call, kept by ticket
    until its answer is read; readiness is ``ray.wait`` over each actor's oldest call."""

    group: RayGroup

    def __init__(self, group: RayGroup) -> None:
        super().__init__(group)
        self._calls: dict[int, deque[tuple[int, Any]]] = {}  # actor index -> (ticket, ref)s
        self._answered: dict[int, tuple[int, Any]] = {}  # actor index -> its last answer

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        self.group.send(cmd, [handle], lambda _: data)
        self._tickets += 1
        self._calls.setdefault(handle.index, deque()).append((self._tickets, handle.ref))  # type: ignore[attr-defined]
        return self._tickets

    #: a read a second Ctrl-C cut is asked again (see `answer`)
    resumes_reads = True

    def answered(self, handle: WorkerHandle, ticket: int) -> bool:
        import ray

        last = self._answered.get(handle.index)
        if last is not None and last[0] == ticket:
            return True
        calls = self._calls.get(handle.index)
        if not calls or calls[0][0] != ticket:
            return False
        done, _ = ray.wait([calls[0][1]], num_returns=1, timeout=0, fetch_local=False)
        return bool(done)

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        """The answer to the call ``ticket``, kept by ticket: asked again after a Ctrl-C cut
        it, it is given again from the same ref."""
        last = self._answered.get(handle.index)
        calls = self._calls.get(handle.index)
        if last is not None and last[0] == ticket:
            if calls and calls[0][0] == ticket:  # (cut before it left the queue)
                calls.popleft()
            return last[1]
        mine = bool(calls) and calls[0][0] == ticket  # type: ignore[index]
        if mine:
            handle.ref = calls[0][1]  # type: ignore[attr-defined,index]
        answer = self.group.wait(handle, deadline, call, budget)
        self._answered[handle.index] = (ticket, answer)
        if mine:
            calls.popleft()  # type: ignore[union-attr]
        return answer

    def recover(
        self, handle: WorkerHandle, failure: WorkerError, call: str, superseded: list[int]
    ) -> Any:
        self._calls.pop(handle.index, None)  # (failed: its calls are gone)
        self._answered.pop(handle.index, None)
        return super().recover(handle, failure, call, superseded)

    def ready(self, handles: Collection[WorkerHandle], timeout: float | None) -> list[WorkerHandle]:
        import ray

        calls = self._calls
        by_ref = {calls[h.index][0][1]: h for h in handles if calls.get(h.index)}
        if not by_ref:
            return []
        refs = list(by_ref)
        done, _ = ray.wait(refs, num_returns=1, timeout=timeout, fetch_local=False)
        if done and len(refs) > 1:  # every other one ready now too
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        return [by_ref[ref] for ref in done]

    def keep(self, handle: WorkerHandle, envs: list[int], answer: Any) -> Any:
        obs, rewards, terms, truncs, calls = answer
        if isinstance(calls, dict):  # a node actor's: the infos of its rows
            calls = [(j, info) for j, info in enumerate(split_infos(calls, len(handle.indices)))]
        g, start = self.group, handle.start
        for i in envs:
            j = i - start
            g._rewards[i], g._terms[i], g._truncs[i] = rewards[j], terms[j], truncs[j]
            if isinstance(obs, list):
                g._env_obs[i] = obs[j]
            elif obs is not None:
                _put(g._obs, take_rows(obs, [j]), i, i + 1)
                g._env_obs[i] = None  # (the batch holds it)
        return calls

    def rows(self, ids: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        g, idx = self.group, ids.tolist()
        if all(g._env_obs[i] is None for i in idx):
            obs = take_rows(g._obs, ids)
        else:  # observations that came as a list (other spaces, or not fitting the space)
            space = g.env.single_observation_space
            batched = list(iterate(g.env.observation_space, g._obs)) if g._arrays else []
            items = [batched[i] if g._env_obs[i] is None else g._env_obs[i] for i in idx]
            obs = g.batch_obs(items, create_empty_array(space, n=len(idx)))
        return obs, g._rewards[ids], g._terms[ids], g._truncs[ids]


class RayPool(PoolVecEnv):
    """An async pool of envs in Ray actors (``vectorizer.batch_size``); with ``in_actor`` its
    unit is the node actor: ``batch_size`` and ``num_envs`` are multiples of ``in_series``."""

    group: RayGroup

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], batch_size: int,
                 autoreset_mode: Any = "next_step", **options: Any) -> None:  # fmt: skip
        from .config import RayConfig  # (the schema's checks, for a caller that did not compose)

        top, in_actor = SimpleNamespace(num_envs=len(env_fns)), options.get("in_actor")
        RayConfig(batch_size=batch_size).check_config(top)
        options.pop("compiled_graph", None)  # (the pool reads by Ray calls, never a graph)
        group = RayGroup(env_fns, options)
        group.channels = False  # (readiness is ray.wait on each actor's oldest call)
        super().__init__(group, batch_size, RaySite, autoreset_mode, **options)
        try:  # (with in_actor, in_series as the group resolved it: whole node actors)
            RayConfig(in_series=group.in_series, in_actor=in_actor, batch_size=batch_size
                      ).check_config(top)  # fmt: skip
        except OptionError as err:
            self.close(terminate=True)
            raise err.at("vectorizer") from None

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """`PoolVecEnv.send`; with ``in_actor``, ``env_ids`` are whole nodes (every env of a
        node actor or none)."""
        if self.group.in_actor is not None and env_ids is not None:
            ids = {int(i) for i in np.asarray(env_ids).reshape(-1)}
            h = next((h for h in self.group.handles
                      if ids & set(h.indices) and not set(h.indices) <= ids), None)  # fmt: skip
            if h is not None:
                raise ValueError(f"send(env_ids=...): envs {sorted(ids & set(h.indices))} are only "
                                 f"part of {h.label}'s envs {h.indices}: with vectorizer.in_actor "
                                 "a node actor steps its envs all together; send every env recv "
                                 "returned")  # fmt: skip
        super().send(actions, env_ids)
