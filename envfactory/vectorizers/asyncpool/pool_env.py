"""``PoolVecEnv``: the async pool's front, envpool's calls over any `WorkerGroup`."""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, iterate

from ...errors import InvalidActionError, ResetNeededError
from ..front.base import action_checker
from ..front.checks import check_env_ids, check_recv_timeout, seeds_for, show_ids
from ..front.group import WorkerGroup
from ..front.remote_env import RemoteVecEnv
from ..worker.protocol import Reset
from .scheduler import HOLD, PoolBackend, PoolScheduler

__all__ = ["PoolVecEnv", "take_rows"]


class PoolVecEnv(RemoteVecEnv):
    """An async pool over a worker group and its `PoolBackend`: `recv` returns the first
    ``batch_size`` envs done; ``reset()``/``step()`` step every env when none is in flight (a
    loop: docs/concepts/async-pool.md)."""

    def __init__(
        self,
        group: WorkerGroup,
        batch_size: int,
        site: Callable[[Any], PoolBackend],
        autoreset_mode: Any = "next_step",
        **faults: Any,
    ) -> None:
        """``group`` (not started), ``batch_size``, ``site(group)`` its `PoolBackend`."""
        self.batch_size = int(batch_size)
        super().__init__(group, autoreset_mode, **faults)
        self._checkers: dict[int, Callable[[Any], Any]] = {}
        backend = site(group)
        backend.done = self._done  # (lent: the pool keeps it current as it hands envs over)
        self.pool = PoolScheduler(self.workers, backend)  #: every piece of the pool's state
        front = weakref.proxy(self)  # a call first lets its workers finish their steps
        group.before_calls = lambda handles: front.pool.settle(handles, front.timeout)

    # -- envpool's API ----------------------------------------------------------------
    def async_reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env (seeds as `reset`); `recv` returns them ``batch_size``
        at a time. Raises ``AlreadyPendingError`` while envs are in flight or not received."""
        self._check_ready("async_reset", "async_reset")
        seeds = seeds_for(seed, self.num_envs, self.seeding, "async_reset")
        if options and "reset_mask" in options:
            raise ValueError(
                "async_reset() resets every env; for a reset_mask use reset(options=...) "
                "when no env is in flight"
            )
        self._guarded("async_reset", "async_reset", self._async_reset, seeds, options)

    def _async_reset(self, seeds: list, options: dict[str, Any] | None) -> None:
        self.pool.expect_drained("async_reset")
        self.pool.clear()
        for w in self.workers:
            w.last_reset = Reset(seeds[w.start : w.stop], options, None)
        self._done[:] = False
        self._ready = True
        self.pool.start_reset(lambda w: w.last_reset)

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Step the envs ``env_ids`` (None: every env) with ``actions``, one row each, and return
        at once. Raises ``ValueError`` (an id out of range, repeated or not received),
        ``InvalidActionError``, ``ResetNeededError`` (no reset yet; an ended env, ``disabled``)."""
        self._check_ready("send", "send")
        n, every = _batch_len(actions), env_ids is None
        ids = check_env_ids(
            np.arange(self.num_envs) if every else env_ids, self.num_envs, "send(actions, env_ids"
        )
        if n is not None and n != len(ids):
            got = f"{n} actions" if n >= 0 else "a single action (no batch axis)"
            raise InvalidActionError(
                f"send(actions) without env_ids steps every env (envpool's meaning): {got} for "
                f"{self.num_envs} envs; to step the envs recv returned, pass their ids: "
                "envs.send(actions, infos['env_id'])"
                if every
                else f"send(actions, env_ids): {got} for {len(ids)} env_ids {show_ids(ids)}; "
                "pass one action per env id, e.g. np.stack([envs.single_action_space.sample() "
                "for _ in env_ids])"
            )
        checker = self._checkers.get(len(ids))
        if checker is None:
            checker = self._checkers[len(ids)] = action_checker(self.single_action_space, len(ids))
        try:
            actions = checker(actions)
        except InvalidActionError as err:  # (a row named by its env id, not its position)
            raise InvalidActionError(_by_ids(str(err), ids)) from None
        if not self._ready:
            raise ResetNeededError(
                "send() before any reset: call envs.async_reset(seed=...) (or envs.reset()) first"
            )
        if self.autoreset_mode is AutoresetMode.DISABLED:
            done = [i for i in ids if self._done[i] and i not in self.pool.lost()]
            if done:
                raise ResetNeededError(
                    f"envs {done} finished an episode and autoreset_mode is 'disabled': "
                    "reset them with envs.reset(options={'reset_mask': mask}) once no env is "
                    "in flight, before sending them actions"
                )
        if not isinstance(actions, np.ndarray):
            actions = list(iterate(batch_space(self.single_action_space, len(ids)), actions))
        self._guarded("send", "send", self.pool.send, ids, actions)

    def recv(
        self, timeout: float | None = None, env_ids: Any = None
    ) -> tuple[Any, Any, Any, Any, dict]:
        """The next ``batch_size`` envs done, in the order they finished, with ``infos["env_id"]``;
        ``env_ids``: exactly those (sent, not returned); ``timeout``: seconds a worker call may
        take from its send (None: the vectorizer's; 0: a poll, else ``NotReadyError``). Raises
        ``NoPendingCallError`` (too few in flight) or ``ValueError``."""
        self._check_ready("recv", "recv")
        limit = self.timeout if timeout is None else check_recv_timeout(timeout)
        want: int | list[int] = self.batch_size
        if env_ids is not None:
            want = check_env_ids(env_ids, self.num_envs, "recv(env_ids")
        return self._guarded("recv", "recv", self.pool.recv, want, limit)

    def unsent(self) -> tuple[Any, Any, Any, Any, dict] | None:
        """The envs `recv` returned that no `send` took since, as `recv` returned them (None:
        none): what a loop asks after a Ctrl-C, ``envs.unsent() or envs.recv()``. It changes
        nothing, except that a rebuilt worker's env gives its lost episode's result."""
        self._check_ready("unsent", "recv")
        return self._guarded("unsent", "recv", self.pool.unsent)

    def recv_ready(
        self, at_least: int = 1, wait: float | None = None, timeout: float | None = None
    ) -> tuple[Any, Any, Any, Any, dict]:
        """Every env done, once ``at_least`` are or, ``wait`` seconds from now, one is
        (Tianshou's ``wait_num``/``timeout``). Raises ``NoPendingCallError`` or ``ValueError``."""
        self._check_ready("recv_ready", "recv")
        limit = self.timeout if timeout is None else check_recv_timeout(timeout)
        if not isinstance(at_least, int | np.integer) or not 1 <= at_least <= self.num_envs:
            raise ValueError(
                f"recv_ready(at_least={at_least!r}): at_least must be an int in [1, "
                f"{self.num_envs}] (num_envs)"
            )
        if wait is not None and not (isinstance(wait, int | float) and wait > 0):
            raise ValueError(f"recv_ready(wait={wait!r}): wait must be None or seconds > 0")
        ready = self.pool.recv_ready
        return self._guarded("recv_ready", "recv", ready, int(at_least), wait, limit)

    def step(
        self, actions: Any, env_ids: Any = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """``env_ids`` given: `send` then `recv` (envpool); else the synchronous step."""
        if env_ids is None:
            n = _batch_len(actions)
            if n is not None and n >= 0 and n != self.num_envs:  # (a pool loop's batch)
                raise InvalidActionError(
                    f"step(actions) without env_ids is the synchronous step of every env: {n} "
                    f"actions for {self.num_envs} envs; to step the envs recv returned, pass "
                    "their ids: envs.step(actions, infos['env_id'])"
                )
            return super().step(actions)
        self.send(actions, env_ids)
        return self.recv()

    def _guarded(self, name: str, kind: str, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` under the call guard, the front checked again under it, with the
        Ctrl-C hold in use (from the pool's first async call until it closes)."""
        self._guard.enter(name)
        try:
            if self._broken is not None:
                self._check_ready(name, kind)
            if not self._holds and os.getpid() == self._guard.owner_pid:
                self._holds = HOLD.use()
            return call(*args)
        finally:
            self._guard.leave()

    # -- the synchronous calls of the VectorEnv: every env, none in flight ---------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        # (drained: a lost result is superseded by the reset)
        self._guarded("reset_async", "reset", self.pool.expect_drained, "reset")
        self.pool.forget(range(self.num_envs) if mask is None else np.flatnonzero(mask).tolist())
        super()._start_reset(seeds, options, mask)

    def _start_step(self, actions: Any) -> None:
        self._guarded("step_async", "step", self.pool.expect_drained, "step")
        super()._start_step(actions)
        self.pool.forget(range(self.num_envs))  # (every env's pool result is superseded)


def _by_ids(message: str, ids: list[int]) -> str:
    """The batch check's ``message`` for ``send``'s rows: row ``k`` is env ``ids[k]``."""
    message = re.sub(
        r"\[(\d+)\] = (.*?) \(env \d+\)",
        lambda m: f"[{m[1]}] = {m[2]} (env {ids[int(m[1])]})",
        message,
        count=1,
    )
    return message.replace(
        f"(num_envs={len(ids)}, ", f"({len(ids)} env_ids {show_ids(ids)}, "
    ).replace(
        "pass one action per env, e.g. envs.action_space.sample()",
        "pass one action per env id, e.g. np.stack([envs.single_action_space.sample() for _ in "
        "env_ids])",
    )


def _batch_len(actions: Any) -> int | None:
    """An action batch's length (-1: a scalar; None: left to the space check)."""
    if isinstance(actions, np.ndarray):
        return -1 if actions.ndim == 0 else actions.shape[0]
    if isinstance(actions, list):
        return len(actions)
    if isinstance(actions, int | float | np.generic) and not isinstance(actions, bool):
        return -1
    return None


def take_rows(tree: Any, idx: Any) -> Any:
    """Rows ``idx`` of a batch (an array, or a dict / tuple of them)."""
    if isinstance(tree, dict):
        return {k: take_rows(v, idx) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(take_rows(v, idx) for v in tree)
    return tree[idx]
