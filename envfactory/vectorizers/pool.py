"""The async env pool: ``subproc`` / ``subproc-atari`` with ``batch_size`` set.

envpool's spelling, so a loop written for envpool runs unchanged::

    envs.async_reset(seed=0)                 # every env starts resetting
    while True:
        obs, rew, term, trunc, info = envs.recv()       # the next batch_size ready envs
        envs.send(policy(obs), info["env_id"])          # they step while you learn

How it relates to gymnasium: :class:`SubprocPool` *is* a ``gymnasium.vector.VectorEnv``
(the subprocess backend, :class:`~.subproc.SubprocBackend`, as ``SubprocVecEnv`` is; the
pool schedules envs over the same worker handles, :class:`~.pipe.PipeHandle`):
``reset()``, ``step(actions)`` (``env_ids=None``) and the async halves step every env
together, synchronously, exactly as ``batch_size=null`` does, whenever no env is in
flight; gymnasium's vector wrappers see a ``num_envs`` batch there. ``async_reset`` /
``send`` / ``recv`` / ``step(actions, env_ids)`` are the pool calls; their batches have
``batch_size`` rows, and ``infos["env_id"]`` says which envs.

Each env is stepped by the same per-env runner as every other vectorizer, in the order of
its own sends, so its trajectory equals ``dummy``'s for the same actions and seeds whatever
order the envs come back in (every autoreset mode). A worker steps only the envs it was
sent (one message per worker and ``send``); the batch unit is the env, not the worker:
results of a worker beyond what ``recv`` needs wait, ready, for the next ``recv``, so every
``1 <= batch_size <= num_envs`` is reachable with any ``in_series`` (throughput is best when
``batch_size`` is a multiple of the envs per worker). Faults raise the synchronous mode's
errors; with ``restart=true`` a rebuilt worker's envs report their episode truncated
(``infos["restarted"]``): those in flight or waiting in ``recv``'s queue at once, the others
at their next ``send``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, create_empty_array, iterate

from .. import _compat
from ..errors import (
    AlreadyPendingError,
    ConfigError,
    NoPendingCallError,
    ResetNeededError,
    WorkerError,
)
from .checks import action_checker
from .pipe import PipeHandle
from .protocol import Cmd, Reset
from .subproc import SubprocBackend
from .subproc_options import default_in_series
from .wakeup import Poller

__all__ = ["SubprocPool", "pool_in_series"]

IDLE, IN_FLIGHT, READY, LOST = 0, 1, 2, 3  # an env's state in the pool


def pool_in_series(num_envs: int, batch_size: Any, in_series: int | None) -> int | None:
    """``in_series`` of a pool when the config leaves it null: one worker per core, as
    ``subproc-atari`` (the parent mostly waits; a learner shares its core), but no worker
    with more envs than ``batch_size``, so a worker's answer fits one ``recv`` and at
    least ``num_envs / batch_size`` workers take turns (16 CartPoles, ``batch_size=8``: 2
    workers of 8; 8 Pongs, ``batch_size=4`` on 2 cores: 2 workers of 4)."""
    if in_series is not None or isinstance(batch_size, bool) or not isinstance(batch_size, int):
        return in_series
    return max(1, min(default_in_series(num_envs, leave_parent_a_core=False), batch_size))


@dataclass(frozen=True)
class _Message:
    """A message in flight to a worker: its ``seq``, the envs it carries, its kind."""

    seq: int
    envs: list[int]
    kind: str  # "step" | "reset"


class SubprocPool(SubprocBackend):
    """An async pool of ``num_envs`` envs in worker processes (``vectorizer.batch_size``).

    Every call of :meth:`recv` returns the first ``batch_size`` envs whose step (or reset)
    is done, while the others keep stepping. A ``gymnasium.vector.VectorEnv`` too:
    ``reset()`` / ``step(actions)`` step every env synchronously when none is in flight.

    Example:
        >>> import envfactory
        >>> envs = envfactory.make_vec(overrides=[
        ...     "vectorizer=subproc", "num_envs=4", "vectorizer.batch_size=2"])
        >>> envs.async_reset(seed=0)
        >>> obs, rew, term, trunc, info = envs.recv()
        >>> obs.shape, info["env_id"].shape
        ((2, 4), (2,))
        >>> envs.send(envs.single_action_space.sample()[None].repeat(2, 0), info["env_id"])
        >>> obs, rew, term, trunc, info = envs.recv()
        >>> envs.close()
    """

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], batch_size: int, **options: Any
    ) -> None:
        n = len(env_fns)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
            raise ConfigError(
                f"vectorizer.batch_size must be an integer or null, got {batch_size!r}"
            )
        if not 1 <= batch_size <= n:
            raise ConfigError(
                f"vectorizer.batch_size={batch_size} must be in [1, num_envs={n}] (or null for "
                "a synchronous VecEnv); lower it or raise num_envs"
            )
        self.batch_size = int(batch_size)
        super().__init__(env_fns, **options)
        self._state = np.zeros(n, dtype=np.int8)
        self._queue: deque[int] = deque()  # READY envs, in the order they came back
        self._env_infos: dict[int, list[dict]] = {}  # infos of READY / LOST envs
        self._owner = [w for w in self.workers for _ in range(w.start, w.stop)]
        # worker -> its messages in flight, oldest first (a worker answers in order; the
        # next message waits in its pipe while it steps one: no idle round trip)
        self._flight: dict[int, deque[_Message]] = {}
        self._since: dict[int, float] = {}  # when the oldest message became the worker's
        self._by_fd: dict[int, PipeHandle] = {}
        self._poller = Poller([], self.spin_us * 1e-6)  # the workers with answers owed
        self._checkers: dict[int, Callable[[Any], Any]] = {}

    # -- envpool's API ----------------------------------------------------------------
    def async_reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env (seeds as :meth:`reset`); :meth:`recv` returns them
        ``batch_size`` at a time, with rewards 0 and no flags.

        Raises:
            AlreadyPendingError: envs are still in flight or not yet received.
        """
        self._check_open("async_reset")
        self._expect_idle("async_reset")
        seeds = self.seeds_for(seed)
        if options and "reset_mask" in options:
            raise ValueError(
                "async_reset() resets every env; for a reset_mask use reset(options=...) "
                "when no env is in flight"
            )
        self._enter("async_reset")
        try:
            self._check_usable("async_reset")
            self._expect_drained("async_reset")
            for w in self.workers:
                w.last_reset = Reset(seeds[w.start : w.stop], options, None)
            for w in self.workers:
                self._send(Cmd.RESET, [w], lambda w: w.last_reset)
                self._in_flight(w, list(range(w.start, w.stop)), "reset")
            self._state[self._state == LOST] = IDLE
            self._env_infos.clear()
            self._done[:] = False
            self._ready = True
        finally:
            self._leave()

    def send(self, actions: Any, env_ids: Any) -> None:
        """Step the envs ``env_ids`` (ints) with ``actions`` (one row each; a batch of
        ``len(env_ids)`` single actions) and return at once.

        Raises:
            ValueError: an env id out of range, repeated, or still in flight / not yet
                received by :meth:`recv`.
            InvalidActionError: an action outside the action space.
            ResetNeededError: before any reset, or a finished env with
                ``autoreset_mode=disabled``.
        """
        self._check_open("send")
        self._expect_idle("send")
        ids = self._env_ids(env_ids)
        checker = self._checkers.get(len(ids))
        if checker is None:
            checker = self._checkers[len(ids)] = action_checker(self.single_action_space, len(ids))
        actions = checker(actions)
        self._check_reset_done_for(ids)
        self._enter("send")
        try:
            self._check_usable("send")
            busy = [i for i in ids if self._state[i] in (IN_FLIGHT, READY)]
            if busy:
                raise ValueError(
                    f"send() for envs {busy} whose last step is not received yet: call "
                    "recv() until infos['env_id'] returns them, then send() their actions"
                )
            if isinstance(actions, np.ndarray):
                per_env: Any = actions
            else:
                per_env = list(iterate(batch_space(self.single_action_space, len(ids)), actions))
            groups: dict[int, dict[int, Any]] = {}
            for k, i in enumerate(ids):
                if self._state[i] == LOST:  # its worker was rebuilt: this step is the loss
                    self._state[i] = READY
                    self._queue.append(i)
                    continue
                groups.setdefault(self._owner[i].index, {})[i] = per_env[k]
            for wi, acts in groups.items():
                self._dispatch(self.workers[wi], acts)
        finally:
            self._leave()

    def recv(self, timeout: float | None = None) -> tuple[Any, Any, Any, Any, dict]:
        """The next ``batch_size`` envs whose step or reset is done, in the order they
        finished: ``(obs, rewards, terminations, truncations, infos)`` with ``batch_size``
        rows and ``infos["env_id"]`` (int32) naming the envs.

        Args:
            timeout: seconds one worker call may take, counted from its send (None: the
                vectorizer's ``timeout``); a worker past it is killed
                (``WorkerTimeoutError``, or rebuilt with ``restart=true``).

        Raises:
            NoPendingCallError: fewer than ``batch_size`` envs are in flight or ready, so
                the call would wait forever.
        """
        self._check_open("recv")
        self._expect_idle("recv")
        self._enter("recv")
        try:
            self._check_usable("recv")
            need = self.batch_size
            if int(np.count_nonzero(self._state == IN_FLIGHT)) + len(self._queue) < need:
                raise NoPendingCallError(
                    f"recv() needs {need} envs (batch_size) in flight, but "
                    f"{len(self._queue)} are ready and "
                    f"{int(np.count_nonzero(self._state == IN_FLIGHT))} in flight; send() "
                    "actions for more envs first (or async_reset())",
                    "",
                )
            limit = self.timeout if timeout is None else timeout
            if limit == math.inf:
                limit = None
            # answers already there, dead workers and workers past their timeout first, even
            # when the queue holds enough: a hung or dead worker is reported at once
            for w in self._wait_ready(limit, block=False):
                self._complete(w, limit)
            while len(self._queue) < need:
                for w in self._wait_ready(limit):
                    self._complete(w, limit)
            ids = [self._queue.popleft() for _ in range(need)]
            return self._deliver(ids)
        finally:
            self._leave()

    def step(
        self, actions: Any, env_ids: Any = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """``env_ids`` given: :meth:`send` then :meth:`recv` (envpool). ``None``: the
        synchronous ``VectorEnv.step`` of every env (no env may be in flight)."""
        if env_ids is None:
            return super().step(actions)
        self.send(actions, env_ids)
        return self.recv()

    # -- helpers ----------------------------------------------------------------------
    def _env_ids(self, env_ids: Any) -> list[int]:
        arr = np.asarray(env_ids)
        if arr.ndim == 0:
            arr = arr[None]
        if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(
                f"send(actions, env_ids): env_ids must be a 1-D array of ints (as "
                f"infos['env_id']), got {env_ids!r}"
            )
        ids = [int(i) for i in arr]
        bad = [i for i in ids if not 0 <= i < self.num_envs]
        if bad or not ids or len(set(ids)) != len(ids):
            why = f"ids {bad} out of range" if bad else "no id" if not ids else "a repeated id"
            raise ValueError(
                f"send(actions, env_ids={ids}): {why}; pass each env id in "
                f"[0, {self.num_envs}) at most once"
            )
        return ids

    def _check_reset_done_for(self, ids: list[int]) -> None:
        if not self._ready:
            raise ResetNeededError(
                "send() before any reset: call envs.async_reset(seed=...) (or envs.reset()) first"
            )
        if self.autoreset_mode is AutoresetMode.DISABLED:
            done = [i for i in ids if self._done[i] and self._state[i] != LOST]
            if done:
                raise ResetNeededError(
                    f"envs {done} finished an episode and autoreset_mode is 'disabled': "
                    "reset them with envs.reset(options={'reset_mask': mask}) once no env is "
                    "in flight, before sending them actions"
                )

    def _expect_drained(self, what: str) -> None:
        flight = np.flatnonzero(self._state == IN_FLIGHT).tolist()
        ready = list(self._queue)
        if flight or ready:
            raise AlreadyPendingError(
                f"{what}() while the pool has envs in flight {flight} and received-but-not-"
                f"returned {ready}: call recv() until they are returned first",
                "step",
            )

    def _in_flight(self, w: PipeHandle, envs: list[int], kind: str) -> None:
        flight = self._flight.get(w.index)
        now = time.monotonic()
        if flight is None:
            flight = self._flight[w.index] = deque()
            self._since[w.index] = now
            fd = w.fileno()
            self._by_fd[fd] = w
            self._poller.register(fd)
        flight.append(_Message(w.seq, envs, kind))
        self._state[envs] = IN_FLIGHT

    def _dispatch(self, w: PipeHandle, acts: dict[int, Any]) -> None:
        """Send ``acts`` to ``w`` as one message now, also while it is busy: its pipe
        holds the message, and the worker starts it as soon as it has answered the one
        before (no round trip through this process in between). Splitting a worker's
        envs into two messages (double buffering) was measured: 10% more CPU per Pong
        step and no gain on 2 busy cores, so a send is one message per worker."""
        envs = sorted(acts)
        local = [i - w.start for i in envs]
        rows = [acts[i] for i in envs]
        plain = all(isinstance(a, np.ndarray | np.generic) for a in rows)
        payload = (local, np.stack(rows) if plain else rows)
        self._send(Cmd.STEP_ENVS, [w], lambda _: payload)
        self._in_flight(w, envs, "step")

    def _unregister(self, w: PipeHandle) -> None:
        for fd, other in list(self._by_fd.items()):
            if other is w:
                del self._by_fd[fd]
                self._poller.unregister(fd)

    def _wait_ready(self, limit: float | None, block: bool = True) -> list[PipeHandle]:
        """Workers whose answer (or EOF) is ready, and those past their timeout (their
        receive then times out). Blocking: waits by the one policy (:class:`~.wakeup.Poller`:
        nap and spin while that pays) until one is ready or the earliest worker deadline
        passes."""
        poller = self._poller
        ready = poller.ready(0)
        while not ready:
            if limit is None:
                if not block:
                    return []
                ready = poller.wait(None)
                continue
            first = min(self._flight, key=self._since.__getitem__, default=None)
            if first is None:
                return []
            left = self._since[first] + limit - time.monotonic()
            if left <= 0:
                return [self.workers[first]]
            if not block:
                return []
            ready = poller.wait(left)
        return [self._by_fd[fd] for fd, _ in ready]

    def _complete(self, w: PipeHandle, limit: float | None) -> None:
        """Read ``w``'s answer to its oldest message: those envs become READY (infos and
        pickled observations kept)."""
        msg = self._flight[w.index][0]
        w.seq = msg.seq  # (a later send moved it on; answers come in order)
        since = self._since[w.index]
        deadline = None if limit is None else since + limit
        try:
            try:
                result = self._wait(w, deadline, msg.kind, limit or 0.0)
            except WorkerError as failure:
                self._unregister(w)
                if not (self.restart and not self._broken):
                    self._broken = failure
                    raise
                self._restart_in_pool(w, failure, msg.kind)
                return
        except BaseException as exc:
            if not isinstance(exc, WorkerError):  # Ctrl-C in the middle of a message
                w.suspect = True
                self._broken = RuntimeError(
                    f"{msg.kind} was interrupted ({type(exc).__name__}) while reading worker "
                    f"{w.index}"
                )
            raise
        flight = self._flight[w.index]
        flight.popleft()
        if flight:
            self._since[w.index] = time.monotonic()
        else:
            self._unregister(w)
            del self._flight[w.index]
        self._accept(w, msg.envs, result)

    def _accept(self, w: PipeHandle, envs: list[int], result: Any) -> None:
        calls, obs = result
        for i in envs:
            self._state[i] = READY
            self._queue.append(i)
            self._env_infos.pop(i, None)
        for local, info in calls:
            self._env_infos.setdefault(w.start + local, []).append(info)
        if obs is not None:
            for i in envs:
                self._env_obs[i] = obs[i - w.start]

    def _restart_in_pool(self, w: PipeHandle, failure: WorkerError, kind: str) -> None:
        """Rebuild ``w`` (see :meth:`~.remote.RemoteVecEnv._restart`): its envs in flight,
        queued or ready-but-not-returned get the truncated (or redone reset) result now;
        the others keep theirs until their next :meth:`send`."""
        self._count_restart(w, failure)
        warnings.warn(f"restarting after: {failure}", RuntimeWarning, stacklevel=4)
        mine = list(range(w.start, w.stop))
        now = [i for i in mine if self._state[i] in (IN_FLIGHT, READY)]
        # an env whose result was not returned yet: its episode ends truncated there
        done = [bool(self._done[i]) and self._state[i] != READY for i in mine]
        result = self._restart(w, kind, done)
        self._flight.pop(w.index, None)
        calls, obs = result
        for i in mine:
            self._env_infos.pop(i, None)
        for local, info in calls:
            self._env_infos.setdefault(w.start + local, []).append(info)
        if obs is not None:
            for i in mine:
                self._env_obs[i] = obs[i - w.start]
        for i in mine:
            if i in now:
                if self._state[i] != READY:
                    self._queue.append(i)
                self._state[i] = READY
            else:
                self._state[i] = LOST

    def _deliver(self, ids: list[int]) -> tuple[Any, Any, Any, Any, dict]:
        b = self._buffers
        assert b is not None
        idx = np.asarray(ids, dtype=np.intp)
        if self._shm_obs:
            obs = _take(b.obs, idx)
        else:
            out = create_empty_array(self.single_observation_space, n=len(ids))
            obs = self._batch_obs([self._env_obs[i] for i in ids], out)
        rewards, terms, truncs = b.rewards[idx], b.terminations[idx], b.truncations[idx]
        infos: dict = {}
        for k, i in enumerate(ids):
            for info in self._env_infos.pop(i, ()):
                infos = _compat.add_info(infos, info, k, len(ids))
        infos["env_id"] = idx.astype(np.int32)
        self._state[idx] = IDLE
        self._done[idx] = terms | truncs
        return obs, rewards, terms, truncs, infos

    def _settle(self, workers: Sequence[PipeHandle]) -> None:
        """Wait for every answer ``workers`` owe (their envs become READY), so that a
        call can use their pipes."""
        for w in workers:
            while w.index in self._flight:
                self._complete(w, self.timeout)

    # -- the synchronous calls of the VectorEnv: every env, none in flight ---------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self._enter("reset_async")
        try:
            self._expect_drained("reset")
        finally:
            self._leave()
        for i in range(self.num_envs) if mask is None else np.flatnonzero(mask).tolist():
            self._state[i] = IDLE  # (a LOST result is superseded by the reset)
            self._env_infos.pop(i, None)
        super()._start_reset(seeds, options, mask)

    def _start_step(self, actions: Any) -> None:
        self._enter("step_async")
        try:
            self._expect_drained("step")
            lost = np.flatnonzero(self._state == LOST).tolist()
            if lost:
                raise AlreadyPendingError(
                    f"step() while envs {lost} of a rebuilt worker still have a result to "
                    "return: send() and recv() them first",
                    "step",
                )
        finally:
            self._leave()
        super()._start_step(actions)

    def _per_index(
        self, cmd: str, indices: list[int], record: Callable[[list[int], Any], Any]
    ) -> list[Any]:
        # call / get_attr / set_attr / render: first let the workers concerned finish
        # their steps (their envs then wait in recv()'s queue)
        self._settle([w for w in self.workers if any(w.start <= i < w.stop for i in indices)])
        return super()._per_index(cmd, indices, record)


def _take(tree: Any, idx: np.ndarray) -> Any:
    if isinstance(tree, dict):
        return {k: _take(v, idx) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_take(v, idx) for v in tree)
    return tree[idx]
