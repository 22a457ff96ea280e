"""``WorkerGroup``: the workers of one vectorized env (``Backend``: what a backend implements).

A backend is a component, not a subclass of the vectorized env: it subclasses
[`WorkerGroup`][envfactory.vectorizers.remote.WorkerGroup] with its transport (how its workers
start, how their answers become a batch, how one is rebuilt) and hands it to the front,
[`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv], which keeps the call state (pending,
interrupted, broken, the call lock) and its `Supervisor` (what a failure means). What this class
adds is written once for every backend: one command to many workers, their answers gathered
within one deadline (the failures reported to the supervisor, the workers it names rebuilt:
`recover`), and ``close`` that kills every worker even if one kill raises.

What a backend implements (abstract, so a group that lacks one cannot be instantiated):
`start` and `collect`; with ``restart=true`` also `respawn` and `last_obs`. Optional hooks:
`post_step` / `gather_all` (a hand-off of its own for the whole group), `release`, `forget` and
`startup_budget`.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from gymnasium.vector.utils import iterate

from ...errors import (
    ClosedError,
    RemoteEnvError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    warn_restart,
)
from ..transport.ctrl_c import HOLD, held_ctrl_c
from ..transport.handle import CLOSE_TIMEOUT, STARTUP_TIMEOUT, WorkerHandle
from ..transport.shared import concatenate_checked
from ..worker.protocol import Cmd, EnvInfo, Restarted, RestartReset
from .answers import check_rebuilt_spaces, check_spaces, per_env_answer
from .infos import merge_infos
from .supervisor import Supervisor

if TYPE_CHECKING:
    from .remote_env import RemoteVecEnv

__all__ = ["Backend", "Batch", "WorkerGroup"]

#: ``(obs, rewards, terminations, truncations, infos)`` of every env
Batch = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]


@runtime_checkable
class Backend(Protocol):
    """What the front asks of a backend, typed: start the workers, post a step to all of
    them, wait for all their answers, collect a batch, rebuild one worker, release what is
    left. `WorkerGroup` implements it (a backend subclasses it and adds `start`, `collect`
    and, with ``restart``, `respawn`); what a failure means is the front's
    [`Supervisor`][envfactory.vectorizers.remote.Supervisor]'s, never a backend's."""

    num_envs: int
    env_id: str

    def start(self) -> None: ...
    def post_step(self, actions: Any) -> None: ...
    def gather_all(
        self, call: str, timeout: float | None, deadline: float | None = None
    ) -> list[Any]: ...
    def collect(
        self, handles: Sequence[WorkerHandle], results: list[Any], mask: np.ndarray | None
    ) -> Batch: ...
    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]: ...
    def release(self, everything: bool) -> None: ...


class WorkerGroup(ABC):
    """The workers of one vectorized env (a process each, an actor each, a thread each...),
    behind one [`WorkerHandle`][envfactory.vectorizers.remote.WorkerHandle] per worker.

    A subclass sets ``num_envs`` and ``env_id`` in its ``__init__`` (which starts nothing)
    and implements:

    - `start`: start the workers, hand their handles (in env order) to `set_handles`, and
      wait for them with `wait_started`; the front calls it once it is bound (``self.env``);
    - `collect`: the batch of a step or reset from the workers' answers (helpers:
      `batch_obs`, `merge_answers`, `out`);
    - with ``restart=true``: `respawn` (a new worker behind a handle) and `last_obs`.

    ``self.env`` is the front ([`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv]): its
    spaces, ``autoreset_mode``, fault options (``timeout``, ``restart``, ``copy``, ...) and
    broken state.
    """

    num_envs: int = 0
    env_id: str = ""

    def __init__(self) -> None:
        self._env: Callable[[], RemoteVecEnv | None] = lambda: None
        self.handles: list[WorkerHandle] = []
        #: the handles in the order they are waited for (this process's own envs first:
        #: they run while the workers run theirs)
        self.order: list[WorkerHandle] = []
        self._back: list[int] | None = None  # ``order``'s answers back in env order
        #: run by the front before a per-index call with the handles it asks (the pool lets
        #: their steps finish first)
        self.before_calls: Callable[[list[WorkerHandle]], None] | None = None

    @property
    def env(self) -> RemoteVecEnv:
        """The front this group serves (held weakly: a vectorized env dropped without
        ``close()`` is collected at once, its ``__del__`` ending the workers)."""
        env = self._env()
        if env is None:
            raise RuntimeError(f"{type(self).__name__} has no vectorized env (closed or dropped)")
        return env

    @env.setter
    def env(self, front: RemoteVecEnv) -> None:
        self._env = weakref.ref(front)

    # -- what a backend implements ------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Start the workers: hand their handles to `set_handles` before starting them
        (``close`` ends only the handles it was given, also when ``start`` raises part-way),
        then wait for them with `wait_started` (which sets the front's spaces)."""

    @abstractmethod
    def collect(
        self, handles: Sequence[WorkerHandle], results: list[Any], mask: np.ndarray | None
    ) -> Batch:
        """``(obs, rewards, terminations, truncations, infos)`` of every env from the
        answers ``results[k]`` of ``handles[k]`` to a step or a reset (``mask``: the envs a
        masked reset reset; the others keep their observation)."""

    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        """Start a new worker behind ``handle`` (the old one is killed) for its envs and
        return their [`EnvInfo`][envfactory.vectorizers.remote.EnvInfo] (waiting at most
        ``budget`` seconds, with `wait`). Only with ``restart=true``."""
        raise NotImplementedError

    def last_obs(self, handle: WorkerHandle) -> list[Any]:
        """Copies of the observations the caller last saw of ``handle``'s envs."""
        raise NotImplementedError

    def post_step(self, actions: Any) -> None:
        """Send each worker its rows of the (checked) action batch."""
        batch = (
            actions
            if isinstance(actions, np.ndarray)
            else list(iterate(self.env.action_space, actions))
        )
        self.send(Cmd.STEP, self.handles, lambda h: batch[h.start : h.stop])

    def gather_all(
        self, call: str, timeout: float | None, deadline: float | None = None
    ) -> list[Any]:
        """Every handle's answer to ``call``, in env order (waited for in `set_handles`'s
        order, the parent's own envs first), by ``deadline`` (``time.monotonic()``; None:
        ``timeout`` seconds from now)."""
        timeout = self.env.timeout if timeout is None else timeout
        results = self.gather(call, self.order, timeout, deadline)
        back = self._back
        return results if back is None else [results[k] for k in back]

    def release(self, everything: bool) -> None:  # noqa: B027 - optional
        """Free what is left once every worker is gone (``everything`` False: another
        thread's call may still read buffers; keep those)."""

    def forget(self) -> None:  # noqa: B027 - optional
        """In a forked child (a copy of this object, not of the workers): drop this
        process's copies of the handles' resources, touching no worker."""

    def startup_budget(self) -> float:
        """Seconds a worker may take to start or be rebuilt (Ray's ``start_timeout``)."""
        timeout = self.env.timeout
        return STARTUP_TIMEOUT if timeout is None else max(timeout, STARTUP_TIMEOUT)

    # -- helpers for a backend ----------------------------------------------------------
    def set_handles(self, handles: Sequence[WorkerHandle]) -> None:
        """The handles, in env order (the in-process ones are waited for first). Once
        `start` returns, their slices must cover the envs ``0..num_envs`` one after another
        (the front checks it: `check_started`); before, a backend may hand over those it
        starts first (``close`` ends them if the rest fails)."""
        self.handles = list(handles)
        self.order = [h for h in handles if h.in_process] + [h for h in handles if not h.in_process]
        back = [self.order.index(h) for h in self.handles]
        self._back = None if back == list(range(len(back))) else back

    def wait_started(
        self, handles: Sequence[WorkerHandle], infos: Sequence[EnvInfo] = ()
    ) -> list[EnvInfo]:
        """Wait for each worker's list of [`EnvInfo`][envfactory.vectorizers.remote.EnvInfo] (its
        first answer, within `startup_budget`), check that every env (those and ``infos`` of
        envs built here) has the same spaces, set up the front's spaces and metadata, and
        return every env's EnvInfo."""
        answers = self.gather("start", handles, self.startup_budget())
        per_env: list[EnvInfo] = [
            e
            for h, answer in zip(handles, answers)
            for e in per_env_answer(answer, h.stop - h.start, self, h.label, "start")
        ] + list(infos)
        obs, act = check_spaces(
            [(e.observation_space, e.action_space) for e in per_env], self.env_id
        )
        env = self.env
        env._init_spaces(obs, act, per_env[0].metadata)
        env.render_mode = per_env[0].render_mode
        return per_env

    def out(self, obs: Any) -> Any:
        """The batch the caller gets (a copy unless ``copy=False``)."""
        return self.env._copy_obs(obs) if self.env.copy else obs

    def merge_answers(self, handles: Sequence[WorkerHandle], calls: Sequence[Any]) -> dict:
        """The infos dict from each handle's info calls (``(local index, info)``)."""
        rows = [(h.start + i, info) for h, c in zip(handles, calls) if c for i, info in c]
        return merge_infos(rows, self.num_envs) if rows else {}

    def batch_obs(self, per_env: list[Any], out: Any) -> Any:
        """Per-env observations as one batch (into ``out``), naming the env that does
        not fit the observation space."""
        return concatenate_checked(self.env.single_observation_space, per_env, out)

    def wait(self, h: WorkerHandle, deadline: float | None, call: str, budget: float) -> Any:
        """``h.recv``: a worker past ``deadline`` is killed (``WorkerTimeoutError`` naming
        ``budget``); one that ended because the env was closed from another thread
        meanwhile is a ``ClosedError``."""
        try:
            if h.own_wait:
                return h.recv(deadline, call)
            return HOLD.waiting(lambda _: h.recv(deadline, call), None)  # (its recv is a wait)
        except TimeoutError as late:
            if isinstance(late, RemoteEnvError):
                raise  # the env's own TimeoutError (the error is also of its type): no timeout
            h.kill()
            what = str(late) or "did not answer"  # (or did not read what it was sent)
            raise h.error(
                WorkerTimeoutError, f"{what} within {budget:.3g} s and was killed", call
            ) from None
        except WorkerDiedError:
            closed_by = self.env._closed_by
            if closed_by is not None:
                raise ClosedError(
                    f"{call}() did not finish: the {type(self.env).__name__} was closed from "
                    f"thread {closed_by!r} meanwhile"
                ) from None
            raise

    # -- talking to the workers (what a failure means: the front's Supervisor) ----------
    def send(
        self, cmd: Cmd, handles: Sequence[WorkerHandle], data_of: Callable[[Any], Any]
    ) -> None:
        """Send ``cmd`` to ``handles`` (``data_of(handle)`` each), with every Ctrl-C held
        (`held_ctrl_c`): no Ctrl-C cuts it. A send that fails part-way leaves the env
        unusable rather than silently out of step."""
        sent = 0
        h: Any = None
        try:
            with held_ctrl_c():  # (a worker that does not read: see `PipeHandle._flush`)
                for h in handles:
                    h.send(cmd, data_of(h))
                    sent += 1
        except BaseException as exc:
            label = h.label if h is not None else "?"
            self.env.apply(Supervisor.send_cut(cmd, exc, sent, label, len(self.handles)))
            raise

    def gather(
        self,
        call: str,
        handles: Sequence[WorkerHandle],
        timeout: float | None,
        deadline: float | None = None,
    ) -> list[Any]:
        """The answers of ``handles`` (in order) to ``call``, all within ``timeout``
        seconds of now (or by ``deadline``, a ``time.monotonic()`` that a wait already
        under way set: a call never waits longer than ``timeout`` in all). Failures go to
        `recover` (the front's `Supervisor` decides: a rebuild with ``restart=true``, an env's
        exception in ``call``/``set_attr`` raised with the env usable, else raised and the
        env unusable); a wait cut otherwise, to `Supervisor.cut`."""
        if timeout == math.inf:
            timeout = None
        budget = timeout if timeout is not None else 0.0
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        results: list[Any] = [None] * len(handles)
        failures: list[tuple[WorkerHandle, WorkerError]] = []
        for k, h in enumerate(handles):
            try:
                results[k] = self.wait(h, deadline, call, budget)
            except WorkerError as err:
                failures.append((h, err))
            except BaseException as exc:  # KeyboardInterrupt: in a wait, asked again
                error = self.env.apply(self.env.supervisor.cut(call, h, exc))
                if error is None or error is exc:
                    raise
                raise error from exc
        for h, answer in self.recover(call, failures) if failures else ():
            results[handles.index(h)] = answer
        return results

    def recover(
        self,
        call: str,
        failures: Sequence[tuple[WorkerHandle, WorkerError]],
        done: list[bool] | None = None,
    ) -> list[tuple[WorkerHandle, Any]]:
        """``failures`` (each worker with its error) in ``call``: the front's `Supervisor`
        decides, the front applies the outcome, and each worker it names is rebuilt and
        finishes ``call`` (``restarted``, or ``restart-reset`` redoing ``h.last_reset``;
        ``done``: its envs' finished flags, default as the caller last saw them). Returns each
        rebuilt worker with its answer; raises the outcome's error after the rebuilds. Every
        wait is bounded (the start by the startup budget, the redone call by ``timeout``) and
        no Ctrl-C cuts a rebuild (cut part-way, it could be neither finished nor redone); a
        rebuild that fails leaves the env unusable and is raised."""
        env = self.env
        outcome = env.supervisor.failed(call, failures, env._broken is not None)
        error = env.apply(outcome)
        answers = []
        for h, failure in outcome.restart:
            warn_restart(failure)
            last = self.last_obs(h)
            flags = env._done[h.start : h.stop].tolist() if done is None else done
            with held_ctrl_c():
                h.kill()
                try:
                    spaces = (env.single_observation_space, env.single_action_space)
                    infos = self.respawn(h, self.startup_budget())
                    check_rebuilt_spaces(infos, h.start, spaces, self.env_id)
                    if call == "reset":
                        assert h.last_reset is not None
                        h.send(Cmd.RESTART_RESET, RestartReset(h.last_reset, last, flags))
                    else:
                        h.send(Cmd.RESTARTED, Restarted(last, flags))
                    deadline = None if env.timeout is None else time.monotonic() + env.timeout
                    answers.append((h, self.wait(h, deadline, "restart", env.timeout or 0.0)))
                except BaseException as exc:
                    env.apply(Supervisor.rebuild_failed(h, exc))
                    raise
        if error is not None:
            raise error
        return answers

    def close(self, timeout: float | None, terminate: bool, locked: bool) -> None:
        """Ask every live worker (also after another one failed) to close its envs and
        exit within ``timeout`` in all (unless ``terminate``; the answer to a pending call
        is dropped), then kill every one, even if one kill raises, and release the rest
        (``locked``: no other thread's call reads the buffers any more)."""
        budget = CLOSE_TIMEOUT if timeout is None else timeout
        try:
            asked = []
            for h in [] if terminate else self.handles:
                if not h.alive:
                    continue
                try:
                    h.send(Cmd.CLOSE, None)
                except Exception:  # gone, or its transport shut down (killed after a timeout):
                    continue  # it is killed below either way
                asked.append(h)
            deadline = time.monotonic() + budget
            closed = []
            for h in asked:
                with contextlib.suppress(Exception):  # died, timed out (then killed), garbage
                    self.wait(h, deadline, "close", budget)
                    closed.append(h)
            exit_by = time.monotonic() + min(1.0, max(deadline - time.monotonic(), 0.1))
            for h in closed:  # the envs are closed: the workers are only exiting now
                h.join(max(exit_by - time.monotonic(), 0.0))
        finally:  # even if interrupted, even if one kill raises: no worker outlives close()
            errors = [e for h in self.handles for e in (_quietly(h.kill), _quietly(h.close)) if e]
            self.release(everything=locked)
            if errors:
                raise errors[0]


def _quietly(call: Callable[[], None]) -> BaseException | None:
    """``call()``; what it raised, if anything (``close`` kills every other worker too)."""
    try:
        call()
    except Exception as exc:
        return exc
    return None
