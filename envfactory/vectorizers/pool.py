"""The async env pool: ``subproc`` / ``subproc-atari`` with ``batch_size`` set.

envpool's spelling, so a loop written for envpool runs unchanged:

    envs.async_reset(seed=0)                 # every env starts resetting
    while True:
        obs, rew, term, trunc, info = envs.recv()       # the next batch_size ready envs
        envs.send(policy(obs), info["env_id"])          # they step while you learn

How it relates to gymnasium: `SubprocPool` *is* a ``gymnasium.vector.VectorEnv``
(the front, ``RemoteVecEnv``, over a `SubprocGroup`, as ``SubprocVecEnv`` is):
``reset()``, ``step(actions)`` (``env_ids=None``) and the async halves step every env
together, synchronously, exactly as ``batch_size=null`` does, whenever no env is in
flight; gymnasium's vector wrappers see a ``num_envs`` batch there. ``async_reset`` /
``send`` / ``recv`` / ``step(actions, env_ids)`` are the pool calls; their batches have
``batch_size`` rows, and ``infos["env_id"]`` says which envs.

The structure: the pool is a scheduler over a worker group's readiness, by composition.
`PoolScheduler` (``envs.pool``) owns every piece of async state and talks to the workers only
through the handles' public API and the small `PoolBackend` interface, which `RemoteSite`
implements over any group's messages and failure policy and `_PipeSite` completes with the
pipes' readiness and the shared-memory rows; the synchronous ``reset``/``step`` are the
front's own, unchanged (one front, one pending call, closed flag and set of episode flags).
What is shared between the modes is
only what belongs to the envs: the workers, their rows, the episode-ended flags and the
broken state. The switch between the modes is explicit: the synchronous calls raise
``AlreadyPendingError`` unless the scheduler is drained, and ``async_reset`` (drained
too) starts from a clean scheduler.

Each env is stepped by the same per-env runner as every other vectorizer, in the order of
its own sends, so its trajectory equals ``dummy``'s for the same actions and seeds whatever
order the envs come back in (every autoreset mode). A worker steps only the envs it was
sent (one message per worker and ``send``); the batch unit is the env, not the worker:
results of a worker beyond what ``recv`` needs wait, ready, for the next ``recv``, so every
``1 <= batch_size <= num_envs`` is reachable with any ``in_series`` (throughput is best when
``batch_size`` is a multiple of the envs per worker). ``recv(env_ids=ids)`` returns exactly
the envs ``ids`` (a step of a subset, whatever ``batch_size``). Faults raise the
synchronous mode's errors; with ``restart=true`` a rebuilt worker's envs report their
episode truncated (``infos["restarted"]``): those in flight or waiting in ``recv``'s queue
at once, the others at their next ``send``. Ctrl-C during ``recv`` leaves the pool usable
(see `scheduler`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, create_empty_array, iterate

from ..errors import AlreadyPendingError, ConfigError, InvalidActionError, ResetNeededError
from .checks import action_checker
from .handle import WorkerHandle
from .pipe import PipeHandle
from .protocol import Cmd, Reset
from .remote_env import RemoteVecEnv, pop_faults
from .runner import InfoCalls
from .scheduler import (
    HOLD,
    PoolScheduler,
    RemoteSite,
    check_env_ids,
    check_recv_timeout,
    show_ids,
)
from .subproc import SubprocGroup
from .subproc_options import check_split, default_in_series
from .wakeup import Poller

__all__ = ["SPIN_WAIT", "SubprocPool", "pool_in_series", "take_rows"]

#: the pool's parent spins through its waits for a worker while they average no longer
#: than this, even while every core is busy: waking a sleeping process costs 25-300 us on
#: a VM, so the wait for a cheap env's step is cheaper spun through
SPIN_WAIT = 150e-6


def pool_in_series(num_envs: int, batch_size: Any, in_series: int | None) -> int | None:
    """``in_series`` of a pool when the config leaves it null: one worker per core, as
    ``subproc-atari`` (the parent mostly waits; a learner shares its core), but no worker
    with more envs than ``batch_size``, so a worker's answer fits one ``recv`` and at
    least ``num_envs / batch_size`` workers take turns (16 CartPoles, ``batch_size=8``: 2
    workers of 8; 8 Pongs, ``batch_size=4`` on 2 cores: 2 workers of 4)."""
    if in_series is not None or isinstance(batch_size, bool) or not isinstance(batch_size, int):
        return in_series
    return max(1, min(default_in_series(num_envs, leave_parent_a_core=False), batch_size))


class SubprocPool(RemoteVecEnv):
    """An async pool of ``num_envs`` envs in worker processes (``vectorizer.batch_size``).

    Every call of `recv` returns the first ``batch_size`` envs whose step (or reset)
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

    group: SubprocGroup

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], batch_size: int, **options: Any
    ) -> None:
        if batch_size is None:
            raise ConfigError(
                "SubprocPool needs a batch_size (an integer in [1, num_envs]); for a "
                "synchronous VecEnv use SubprocVecEnv (vectorizer.batch_size=null)"
            )
        check_split(len(env_fns), batch_size, options.get("in_parent"), "vectorizer")
        self.batch_size = int(batch_size)
        self._holds = False  # this pool uses the Ctrl-C hold (see .scheduler)
        autoreset_mode = options.pop("autoreset_mode", "next_step")
        faults = pop_faults(options)
        group = SubprocGroup(env_fns, handoff=False, **options)
        super().__init__(group, autoreset_mode, **faults)
        self._checkers: dict[int, Callable[[Any], Any]] = {}
        #: the async pool: every piece of its state (see `scheduler`)
        self.pool = PoolScheduler(group.workers, _PipeSite(group))
        # call / get_attr / set_attr / render: first let the workers concerned finish
        # their steps (their envs then wait in recv()'s queue)
        group.before_calls = lambda handles: self.pool.settle(handles, self.timeout)

    # -- envpool's API ----------------------------------------------------------------
    def async_reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env (seeds as [`reset`][envfactory.VecEnvBase.reset]); `recv`
        returns them ``batch_size`` at a time, with rewards 0 and no flags.

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
            self.pool.expect_drained("async_reset")
            self._use_hold()
            self.pool.clear()
            for w in self.group.workers:
                w.last_reset = Reset(seeds[w.start : w.stop], options, None)
            self._done[:] = False
            self._ready = True
            self.pool.start_reset(lambda w: w.last_reset)
        finally:
            self._leave()

    def send(self, actions: Any, env_ids: Any) -> None:
        """Step the envs ``env_ids`` (ints) with ``actions`` (one row each; a batch of
        ``len(env_ids)`` single actions) and return at once.

        Raises:
            ValueError: an env id out of range, repeated, or still in flight / not yet
                received by `recv`.
            InvalidActionError: not one action per env id, or an action outside the
                action space.
            ResetNeededError: before any reset, or a finished env with
                ``autoreset_mode=disabled``.
        """
        self._check_open("send")
        self._expect_idle("send")
        ids = check_env_ids(env_ids, self.num_envs, "send(actions, env_ids")
        actions = self._check_batch(actions, ids)
        self._check_reset_done_for(ids)
        self._enter("send")
        try:
            self._check_usable("send")
            self._use_hold()
            if isinstance(actions, np.ndarray):
                per_env: Any = actions
            else:
                per_env = list(iterate(batch_space(self.single_action_space, len(ids)), actions))
            self.pool.send(ids, per_env)
        finally:
            self._leave()

    def recv(
        self, timeout: float | None = None, env_ids: Any = None
    ) -> tuple[Any, Any, Any, Any, dict]:
        """The next ``batch_size`` envs whose step or reset is done, in the order they
        finished: ``(obs, rewards, terminations, truncations, infos)`` with ``batch_size``
        rows and ``infos["env_id"]`` (int32) naming the envs.

        Args:
            timeout: seconds one worker call may take, counted from its send (None: the
                vectorizer's ``timeout``); a worker past it is killed
                (``WorkerTimeoutError``, or rebuilt with ``restart=true``). 0 is a poll:
                the batch if it is ready now, else ``NotReadyError``, a ``TimeoutError``
                (as gymnasium's ``step_wait(timeout)`` raises) after which the pool is
                unchanged: nothing waited on, no worker stopped, call ``recv`` again. A
                batch always has ``batch_size`` rows (envpool's ``recv``, which takes no
                timeout), so a poll never returns part of one.
            env_ids: return exactly these envs (sent and not yet returned), in this
                order, whatever ``batch_size``: a step of a subset is ``send(actions,
                ids)`` then ``recv(env_ids=ids)``.

        Raises:
            NoPendingCallError: fewer than ``batch_size`` envs are in flight or ready, so
                the call would wait forever.
            NotReadyError: ``timeout=0`` and the batch is not ready yet.
            ValueError: a negative or NaN ``timeout``; an env of ``env_ids`` not in flight.
        """
        self._check_open("recv")
        self._expect_idle("recv")
        limit = check_recv_timeout(timeout)
        want: int | list[int] = self.batch_size
        if env_ids is not None:
            want = check_env_ids(env_ids, self.num_envs, "recv(env_ids")
        self._enter("recv")
        try:
            self._check_usable("recv")
            return self.pool.recv(want, self.timeout if timeout is None else limit)
        finally:
            self._leave()

    def step(
        self, actions: Any, env_ids: Any = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """``env_ids`` given: `send` then `recv` (envpool). ``None``: the
        synchronous ``VectorEnv.step`` of every env (no env may be in flight)."""
        if env_ids is None:
            return super().step(actions)
        self.send(actions, env_ids)
        return self.recv()

    def _use_hold(self) -> None:
        """Hold a Ctrl-C while the pool reads an answer (see `scheduler`), from
        this pool's first async call until it is closed."""
        if not self._holds and os.getpid() == self._owner_pid:
            self._holds = HOLD.use()

    # -- argument checks --------------------------------------------------------------
    def _check_batch(self, actions: Any, ids: list[int]) -> Any:
        """One action per env id, each in the action space."""
        n = len(ids)
        got = _batch_len(actions)
        if got is not None and got != n:
            what = f"{got} actions" if got >= 0 else "a single action (no batch axis)"
            raise InvalidActionError(
                f"send(actions, env_ids): {what} for {n} env_ids {show_ids(ids)}; pass one "
                "action per env id, e.g. np.stack([envs.single_action_space.sample() for _ "
                "in env_ids])"
            )
        checker = self._checkers.get(n)
        if checker is None:
            checker = self._checkers[n] = action_checker(self.single_action_space, n)
        return checker(actions)

    def _check_reset_done_for(self, ids: list[int]) -> None:
        if not self._ready:
            raise ResetNeededError(
                "send() before any reset: call envs.async_reset(seed=...) (or envs.reset()) first"
            )
        if self.autoreset_mode is AutoresetMode.DISABLED:
            done = [i for i in ids if self._done[i] and not self.pool.is_lost(i)]
            if done:
                raise ResetNeededError(
                    f"envs {done} finished an episode and autoreset_mode is 'disabled': "
                    "reset them with envs.reset(options={'reset_mask': mask}) once no env is "
                    "in flight, before sending them actions"
                )

    # -- the synchronous calls of the VectorEnv: every env, none in flight ---------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self._enter("reset_async")
        try:
            self.pool.expect_drained("reset")
        finally:
            self._leave()
        # (a lost result is superseded by the reset)
        self.pool.forget(range(self.num_envs) if mask is None else np.flatnonzero(mask).tolist())
        super()._start_reset(seeds, options, mask)

    def _start_step(self, actions: Any) -> None:
        self._enter("step_async")
        try:
            self.pool.expect_drained("step")
            lost = self.pool.lost()
            if lost:
                raise AlreadyPendingError(
                    f"step() while envs {lost} of a rebuilt worker still have a result to "
                    "return: send() and recv() them first",
                    "step",
                )
        finally:
            self._leave()
        super()._start_step(actions)

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        try:
            super()._do_close(timeout, terminate)
        finally:
            if self._holds and os.getpid() == self._owner_pid:
                self._holds = False
                HOLD.unuse()


class _PipeSite(RemoteSite):
    """The scheduler's view of a `SubprocPool` (see `PoolBackend`):
    a message's ticket is its pipe sequence number; a worker has an answer when its pipe
    is readable (one `Poller` over the pipes of the workers that owe
    answers); an answer's rows are the shared-memory rows, or its pickled observations
    kept per env."""

    def __init__(self, group: SubprocGroup) -> None:
        super().__init__(group)
        self.subproc = group
        self._by_fd: dict[int, WorkerHandle] = {}
        self._poller = Poller([], group.spin_us * 1e-6)
        self._cpus = os.cpu_count() or 1

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        self.group.send(cmd, [handle], lambda _: data)
        return _pipe(handle).seq

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        _pipe(handle).seq = ticket  # (a later post moved it on; a worker answers in order)
        return self.group.wait(handle, deadline, call, budget)

    def watch(self, handle: WorkerHandle) -> None:
        fd = _pipe(handle).fileno()
        self._by_fd[fd] = handle
        self._poller.register(fd)

    def unwatch(self, handle: WorkerHandle) -> None:
        for fd, other in list(self._by_fd.items()):
            if other is handle:
                del self._by_fd[fd]
                self._poller.unregister(fd)

    def ready(self, timeout: float | None) -> list[WorkerHandle]:
        poller, by_fd = self._poller, self._by_fd
        events = poller.ready(0) if timeout == 0 else poller.wait(timeout, self._spins())
        return [by_fd[fd] for fd, _ in events]

    def _spins(self) -> bool:
        """Whether this process spins while it waits for a worker: only while a core is
        left to it (fewer workers in flight than cores), or while its recent waits were
        shorter than a wake-up costs (`SPIN_WAIT`, on average). While every core
        steps a worker's envs, a spin only takes CPU time from them (the pipe's writer
        wakes this process anyway)."""
        return len(self._by_fd) < self._cpus or self._poller.waits_below(SPIN_WAIT)

    def keep(self, handle: WorkerHandle, envs: list[int], answer: Any) -> InfoCalls:
        calls, obs = answer  # a StepResult: observations pickled unless in shared memory
        if obs is not None:
            per_env, start = self.subproc._env_obs, handle.start
            for i in envs:
                per_env[i] = obs[i - start]
        return calls

    def rows(self, ids: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        group = self.subproc
        b = group._buffers
        assert b is not None
        if group._shm_obs:
            obs = take_rows(b.obs, ids)
        else:
            out = create_empty_array(group.env.single_observation_space, n=len(ids))
            obs = group.batch_obs([group._env_obs[i] for i in ids], out)
        return obs, b.rewards[ids], b.terminations[ids], b.truncations[ids]


def _pipe(handle: WorkerHandle) -> PipeHandle:
    assert isinstance(handle, PipeHandle)
    return handle


def _batch_len(actions: Any) -> int | None:
    """The length of an action batch's first axis (-1: a scalar; None: not an array or
    a list, left to the space check)."""
    if isinstance(actions, np.ndarray):
        return -1 if actions.ndim == 0 else actions.shape[0]
    if isinstance(actions, list):
        return len(actions)
    if isinstance(actions, int | float | np.generic) and not isinstance(actions, bool):
        return -1
    return None


def take_rows(tree: Any, idx: Any) -> Any:
    """Rows ``idx`` (an index array or list) of a batch: an array, or a dict / tuple of
    them (a batched observation of a ``Dict`` / ``Tuple`` space)."""
    if isinstance(tree, dict):
        return {k: take_rows(v, idx) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(take_rows(v, idx) for v in tree)
    return tree[idx]
