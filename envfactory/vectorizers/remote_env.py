"""``RemoteVecEnv``: the base of every out-of-process backend (see
[`remote`][envfactory.vectorizers.remote], the vectorizer-author API, for what a backend implements
and what this class gives it)."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector.utils import iterate

from ..errors import (
    ClosedError,
    ConfigError,
    RemoteEnvError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    warn_restart,
)
from .base import PendingCall, VecEnvBase
from .checks import check_rebuilt_spaces, check_spaces, count_restart, per_env_answer
from .ctrl_c import held_ctrl_c
from .handle import CLOSE_TIMEOUT, STARTUP_TIMEOUT, WorkerHandle
from .protocol import (
    Call,
    Cmd,
    EnvInfo,
    Reset,
    Restarted,
    RestartReset,
    SetAttr,
)
from .shared import concatenate_checked

__all__ = ["RemoteVecEnv"]


class RemoteVecEnv(VecEnvBase):
    """A vectorized env whose envs live in workers behind
    [`WorkerHandle`][envfactory.vectorizers.remote.WorkerHandle] s.

    A backend sets [`handles`][envfactory.vectorizers.remote.RemoteVecEnv.handles] (in env order,
    each worker's slice), calls `_start` with them (it waits for each worker's list of
    [`EnvInfo`][envfactory.vectorizers.remote.EnvInfo], checks the spaces and sets up the vectorized
    spaces), and implements:

    - `_collect`: the answers of a step or reset as a batch;
    - with ``restart=true``: `_respawn` (a new worker behind a handle) and
      `_last_obs` (the observations the caller last saw of a handle's envs);
    - optionally `_send_step` (how actions reach the workers), `_release`
      (what is left to free on close), `_forget` (in a forked child) and
      `_startup_budget` (seconds a worker may take to start or be rebuilt).

    Fault options (checked here): ``timeout`` seconds for one call (None: forever),
    ``restart`` (rebuild a worker that failed during ``step``/``reset`` and report its
    episodes truncated), ``max_restarts`` per ``restart_window`` seconds, ``copy``.
    """

    def __init__(
        self,
        num_envs: int,
        autoreset_mode: Any = "next_step",
        seeding: str = "offset",
        *,
        timeout: float | None = None,
        restart: bool = False,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        copy: bool = True,
    ) -> None:
        super().__init__(num_envs, autoreset_mode, seeding)
        if timeout is not None and not timeout > 0:  # (nan too)
            raise ConfigError(f"vectorizer.timeout must be > 0 seconds or null, got {timeout!r}")
        if max_restarts < 0 or not restart_window > 0:
            raise ConfigError(
                "vectorizer.max_restarts must be >= 0 and vectorizer.restart_window > 0 "
                f"seconds, got {max_restarts!r} and {restart_window!r}"
            )
        own, base = type(self), RemoteVecEnv
        if restart and (own._respawn is base._respawn or own._last_obs is base._last_obs):
            raise ConfigError(
                f"vectorizer.restart=true: {type(self).__name__} cannot rebuild a worker (it "
                "implements no _respawn/_last_obs); set vectorizer.restart=false"
            )
        self.timeout = None if timeout == math.inf else timeout  # inf waits forever, as null
        self.restart, self.copy = restart, copy
        self.max_restarts, self.restart_window = max_restarts, restart_window
        self.handles: list[WorkerHandle] = []
        self._order: list[WorkerHandle] = []  # the handles in the order they are waited for
        self._back: list[int] | None = None  # _order's answers back in env order
        # the step/reset in flight: (cmd, handles, their ``sent`` before it, data_of), to
        # finish it after an interrupt (see _finish_sends)
        self._cut: tuple[Cmd, Sequence[WorkerHandle], list[int], Callable] | None = None
        self._resumable = False  # every handle is resumable
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()  # held only to check and set _active
        # the call in progress: (its name, its thread); None: none
        self._active: tuple[str, threading.Thread] | None = None
        self._closed_by: str | None = None

    # -- what a backend implements ------------------------------------------------------
    @abstractmethod
    def _collect(
        self, handles: Sequence[WorkerHandle], results: list[Any], mask: np.ndarray | None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """``(obs, rewards, terminations, truncations, infos)`` of every env from the
        answers ``results[k]`` of ``handles[k]`` to a step or a reset (``mask``: the
        envs a masked reset reset; the others keep their observation). Use
        `_merge_answers` for the infos and `_out` for the ``copy`` option."""

    def _respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        """Start a new worker behind ``handle`` (the old one is killed) for its envs and
        return their [`EnvInfo`][envfactory.vectorizers.remote.EnvInfo] (waiting at most ``budget``
        seconds, with `_wait`). Only with ``restart=true``."""
        raise NotImplementedError

    def _last_obs(self, handle: WorkerHandle) -> list[Any]:
        """Copies of the observations the caller last saw of ``handle``'s envs."""
        raise NotImplementedError

    def _send_step(self, actions: Any) -> None:
        """Send each worker its rows of the (checked) action batch."""
        batch = (
            actions
            if isinstance(actions, np.ndarray)
            else list(iterate(self.action_space, actions))
        )
        self._send(Cmd.STEP, self.handles, lambda h: batch[h.start : h.stop], finish=True)

    def _release(self, everything: bool) -> None:
        """Free what is left once every worker is gone (``everything`` False: another
        thread's call may still read buffers; keep those)."""

    def _forget(self) -> None:
        """In a forked child (a copy of this object, not of the workers): drop this
        process's copies of the handles' resources, touching no worker."""

    # -- helpers for a backend ----------------------------------------------------------
    def _start(self, handles: Sequence[WorkerHandle], infos: Sequence[EnvInfo] = ()) -> list:
        """Wait for each worker's list of [`EnvInfo`][envfactory.vectorizers.remote.EnvInfo] (its
        first answer, within `STARTUP_TIMEOUT`), check that every env (those and ``infos`` of envs
        built here) has the same spaces, set up the vectorized spaces and metadata, and
        return every env's EnvInfo."""
        answers = self._gather("start", handles, self._startup_budget())
        per_env: list[EnvInfo] = [
            e
            for h, answer in zip(handles, answers)
            for e in per_env_answer(answer, h.stop - h.start, self, h.label, "start")
        ] + list(infos)
        obs, act = check_spaces(
            [(e.observation_space, e.action_space) for e in per_env], self.env_id
        )
        self._init_spaces(obs, act, per_env[0].metadata)
        self.render_mode = per_env[0].render_mode
        return per_env

    def _set_handles(self, handles: Sequence[WorkerHandle]) -> None:
        """The handles, in env order (the in-process ones are waited for first)."""
        self.handles = list(handles)
        self._order = [h for h in handles if h.in_process] + [
            h for h in handles if not h.in_process
        ]
        back = [self._order.index(h) for h in self.handles]
        self._back = None if back == list(range(len(back))) else back
        self._resumable = all(h.resumable for h in handles)

    def _startup_budget(self) -> float:
        """Seconds a worker may take to start or be rebuilt (a backend hook: Ray's
        ``start_timeout``)."""
        return STARTUP_TIMEOUT if self.timeout is None else max(self.timeout, STARTUP_TIMEOUT)

    def _out(self, obs: Any) -> Any:
        """The batch the caller gets (a copy unless ``copy=False``)."""
        return self._copy_obs(obs) if self.copy else obs

    def _merge_answers(self, handles: Sequence[WorkerHandle], calls: Sequence[Any]) -> dict:
        """The infos dict from each handle's info calls (``(local index, info)``)."""
        infos: dict = {}
        for h, c in zip(handles, calls):
            if c:
                infos = self._merge_infos(c, h.start, infos)
        return infos

    def _batch_obs(self, per_env: list[Any], out: Any) -> Any:
        """Per-env observations as one batch (into ``out``), naming the env that does
        not fit the observation space."""
        return concatenate_checked(self.single_observation_space, per_env, out)

    def _send(
        self,
        cmd: Cmd,
        handles: Sequence[WorkerHandle],
        data_of: Callable[[Any], Any],
        finish: bool = False,
    ) -> None:
        """Send ``cmd`` to ``handles`` (``data_of(handle)`` each). ``finish``: the
        ``step``/``reset`` that ``*_wait()`` collects. Cut part-way by a Ctrl-C, resumable
        handles let ``*_wait()`` send it to the workers that lack it (`_finish_sends`);
        others leave the env unusable rather than silently out of step."""
        resumable = self._resumable
        if finish and resumable:
            self._cut = (cmd, handles, [h.sent for h in handles], data_of)
        sent = 0
        h: Any = None
        try:
            for h in handles:
                h.send(cmd, data_of(h))
                sent += 1
        except BaseException as exc:
            if isinstance(exc, Exception):
                self._cut = None
            elif resumable:
                raise  # step/reset: finished by *_wait(); a call: given up on (late
                # answers are dropped by their seq)
            if sent or not isinstance(exc, Exception):
                self._broken = RuntimeError(
                    f"{cmd} was interrupted ({type(exc).__name__}) while it was being sent "
                    f"to the workers ({h.label if h is not None else '?'} of "
                    f"{len(self.handles)}): some have it and some not, so they are no longer "
                    "in step"
                )
            raise

    def _wait(self, h: WorkerHandle, deadline: float | None, call: str, budget: float) -> Any:
        """``h.recv``: a worker past ``deadline`` is killed (``WorkerTimeoutError`` naming
        ``budget``); one that ended because this env was closed from another thread
        meanwhile is a ``ClosedError``."""
        try:
            return h.recv(deadline, call)
        except TimeoutError as late:
            if isinstance(late, RemoteEnvError):
                raise  # the env's own TimeoutError (the error is also of its type): no timeout
            h.kill()
            what = str(late) or "did not answer"  # (or did not read what it was sent)
            raise h.error(
                WorkerTimeoutError, f"{what} within {budget:.3g} s and was killed", call
            ) from None
        except WorkerDiedError:
            if self._closed_by is not None:
                raise ClosedError(
                    f"{call}() did not finish: the {type(self).__name__} was closed from "
                    f"thread {self._closed_by!r} meanwhile"
                ) from None
            raise

    def _gather(
        self, call: str, handles: Sequence[WorkerHandle], timeout: float | None
    ) -> list[Any]:
        """The answers of ``handles`` (in order) to ``call``, each within ``timeout``
        seconds of now, with the failure policy: ``restart=true`` rebuilds the workers
        that failed a ``step``/``reset``; an env's exception in ``call``/``set_attr``
        is raised and the env stays usable; anything else is raised and makes the env
        unusable."""
        if timeout == math.inf:
            timeout = None
        budget = timeout if timeout is not None else 0.0
        deadline = None if timeout is None else time.monotonic() + timeout
        results: list[Any] = [None] * len(handles)
        failures: list[tuple[int, WorkerError]] = []
        for k, h in enumerate(handles):
            try:
                if h.suspect and h.resumable:
                    h.kill()
                    raise h.error(
                        WorkerDiedError,
                        "was killed: an interrupt (Ctrl-C) cut a message to or from it "
                        "part-way, so its pipe cannot be read in step any more",
                        call,
                    )
                results[k] = self._wait(h, deadline, call, budget)
            except WorkerError as err:
                failures.append((k, err))
            except BaseException as exc:  # KeyboardInterrupt: maybe in the middle of a message
                if not h.resumable:  # (a resumable handle is asked again, or is suspect)
                    h.suspect = True
                    self._broken = RuntimeError(
                        f"{call} was interrupted ({type(exc).__name__}) while waiting for {h.label}"
                    )
                raise
        if failures:
            self._fail(call, handles, results, failures)
        return results

    def _gather_all(self, call: str, timeout: float | None) -> list[Any]:
        """Every handle's answer, in env order (`_gather` in the waiting order)."""
        results = self._gather(call, self._order, self.timeout if timeout is None else timeout)
        back = self._back
        return results if back is None else [results[k] for k in back]

    def _fail(self, call: str, handles: Sequence[WorkerHandle], results: list[Any],
              failures: list[tuple[int, WorkerError]]) -> None:  # fmt: skip
        failures.sort(key=lambda f: handles[f[0]].start)  # in env order
        if self.restart and call in ("step", "reset") and not self._broken:
            left = []
            for k, failure in failures:
                h = handles[k]
                if not h.restartable:
                    left.append(failure)
                    continue
                self._count_restart(h, failure)
                warn_restart(failure)
                results[k] = self._restart(h, call)
            if left:
                self._broken = left[0]
                raise left[0]
            return
        recoverable = call in ("call", "set_attr") and all(
            isinstance(err, RemoteEnvError) for _, err in failures
        )  # the worker caught it and is still in step, as dummy would be
        if not recoverable:
            self._broken = failures[0][1]
        raise failures[0][1]

    def _count_restart(self, h: WorkerHandle, failure: WorkerError) -> None:
        """Raise ``failure`` (the env is then unusable) if ``h`` already had
        ``max_restarts`` restarts in the last ``restart_window`` seconds."""
        try:
            count_restart(h.restarts, failure, h.label, self.max_restarts, self.restart_window)
        except WorkerError:
            self._broken = failure
            raise

    def _restart(self, h: WorkerHandle, call: str, done: list[bool] | None = None) -> Any:
        """Rebuild ``h``'s worker and finish ``call`` on it (``restarted``, or
        ``restart-reset`` redoing ``h.last_reset``); ``done``: its envs' finished flags
        (default: as the caller last saw them). Every wait is bounded: the start by the
        startup budget, the redone call by ``timeout``. If the rebuild fails, the env is
        unusable and that failure is raised."""
        last = self._last_obs(h)
        if done is None:
            done = self._done[h.start : h.stop].tolist()
        with held_ctrl_c():  # a rebuild cut part-way could be neither finished nor redone
            return self._rebuild(h, call, last, done)

    def _rebuild(self, h: WorkerHandle, call: str, last: list[Any], done: list[bool]) -> Any:
        h.kill()
        try:
            check_rebuilt_spaces(
                self._respawn(h, self._startup_budget()),
                h.start,
                (self.single_observation_space, self.single_action_space),
                self.env_id,
            )
            if call == "reset":
                assert h.last_reset is not None
                h.send(Cmd.RESTART_RESET, RestartReset(h.last_reset, last, done))
            else:
                h.send(Cmd.RESTARTED, Restarted(last, done))
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            return self._wait(h, deadline, "restart", self.timeout or 0.0)
        except BaseException as exc:
            self._broken = (
                exc
                if isinstance(exc, Exception)
                else RuntimeError(
                    f"the restart of {h.label} was interrupted ({type(exc).__name__})"
                )
            )
            raise

    def _can_finish(self) -> bool:
        return self._cut is not None and self._broken is None

    def _finish_sends(self) -> None:
        """After an interrupt: send the step/reset in flight to the workers that do not have
        it yet, finish a send cut part-way
        ([`WorkerHandle.resume`][envfactory.vectorizers.remote.WorkerHandle.resume]), and
        give the parent's own envs (a handle whose command a Ctrl-C cut while it ran here,
        [`WorkerHandle.cut`][envfactory.vectorizers.remote.WorkerHandle.cut]) what can stand for
        it: a reset is redone; a step's envs end their episode truncated at the last
        observation the caller saw, with ``infos["restarted"]``, and reset."""
        cut = self._cut
        if cut is None:
            return
        cmd, handles, marks, data_of = cut
        for k, h in enumerate(handles):
            mark = marks[k] if k < len(marks) else h.sent  # (a post cut before it: not sent)
            lost = h.cut()
            if h.suspect:
                continue  # killed by _gather
            if lost is not None:
                if lost[0] == Cmd.STEP:
                    done = self._done[h.start : h.stop].tolist()
                    h.send(Cmd.RESTARTED, Restarted(self._last_obs(h), done))
                else:  # a reset or a recovery: done again from the start
                    h.send(*lost)
            elif h.sent == mark:
                h.send(cmd, data_of(h))
            else:
                h.resume()

    @property
    def restarts(self) -> list[int]:
        """How many times each worker was restarted (``vectorizer.restart=true``)."""
        return [len(h.restarts) for h in self.handles if not h.in_process]

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return [h.pid for h in self.handles if not h.in_process and h.pid is not None]

    # -- one call at a time, by its owner process ---------------------------------------
    def _enter(self, what: str) -> None:
        """Mark a backend call in progress (:attr:`_active`): a second thread gets a clear
        error, a forked child is refused. The same thread may always enter: its own call
        that a Ctrl-C cut anywhere is not running any more, so no interrupt leaves the env
        refusing its owner."""
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                f"{what}() on a {type(self).__name__} made by process {self._owner_pid}; this "
                f"process ({os.getpid()}) was forked from it and does not own its workers. "
                "Make a new vectorized env in this process"
            )
        me = threading.current_thread()
        with self._lock:
            active = self._active
            if active is not None and active[1] is not me and active[1].is_alive():
                raise RuntimeError(
                    f"{what}() called from thread {me.name!r} while {active[0]}() is in "
                    f"progress in thread {active[1].name!r}: a vectorized env serves one "
                    "call at a time. Give each thread its own env, or hold a lock around "
                    "every call"
                )
            self._active = (what, me)

    def _leave(self) -> None:
        active = self._active
        if active is not None and active[1] is threading.current_thread():
            self._active = None

    # -- VecEnvBase's backend -----------------------------------------------------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self._enter("reset_async")
        try:
            if self._pending is not PendingCall.NONE or self._broken is not None:
                self._expect_idle("reset_async")  # again, now under the call lock
                self._check_usable("reset")
            for h in self.handles:  # kept to redo the reset if a worker must be restarted
                part = None if mask is None else mask[h.start : h.stop]
                h.last_reset = Reset(seeds[h.start : h.stop], options, part)
            self._send(Cmd.RESET, self.handles, lambda h: h.last_reset, finish=True)
            self._pending = PendingCall.RESET
        finally:
            self._leave()

    def _finish_reset(self, timeout: float | None) -> tuple[Any, dict]:
        batch = self._finish(timeout, "reset", self._pending_mask)
        return batch[0], batch[4]

    def _finish(self, timeout: float | None, call: str = "step", mask: Any = None) -> Any:
        """Wait for the ``call`` (step or reset) in flight, first finishing the sends an
        interrupt cut, and collect its batch (``_finish_step`` is this method)."""
        self._enter(f"{call}_wait")
        try:
            if self._interrupted:
                self._finish_sends()
            batch = self._collect(self.handles, self._gather_all(call, timeout), mask)
        except Exception:
            self._cut = None
            raise
        finally:
            self._leave()
        self._cut = None
        return batch

    def _start_step(self, actions: Any) -> None:
        self._enter("step_async")
        try:
            if self._pending is not PendingCall.NONE or self._broken is not None:
                self._expect_idle("step_async")  # again, now under the call lock
                self._check_usable("step")
            self._send_step(actions)
            self._pending = PendingCall.STEP
        finally:
            self._leave()

    _finish_step = _finish  # (one function less on every step)

    def _do_call(self, name: Any, args: Any, kwargs: Any, indices: list[int]) -> list[Any]:
        what = "get_attr" if args is None else "call"
        self._enter(what)
        try:
            if self._pending is not PendingCall.NONE or self._broken is not None:
                self._expect_idle(what)  # again, now under the call lock
                self._check_usable(what)
            return self._per_index(Cmd.CALL, indices, lambda loc, _: Call(name, args, kwargs, loc))
        finally:
            self._leave()

    def _do_set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        self._enter("set_attr")
        try:
            if self._pending is not PendingCall.NONE or self._broken is not None:
                self._expect_idle("set_attr")  # again, now under the call lock
                self._check_usable("set_attr")
            value_of = dict(zip(indices, values))
            self._per_index(
                Cmd.SET_ATTR,
                indices,
                lambda loc, h: SetAttr(name, [value_of[h.start + i] for i in loc], loc),
            )
        finally:
            self._leave()

    def _per_index(
        self, cmd: Cmd, indices: list[int], record: Callable[[list[int], Any], Any]
    ) -> list[Any]:
        """Send ``record(local indices, handle)`` to the workers of ``indices`` and return
        their answers (one per env) in the order of ``indices``."""
        groups = [(h, [i - h.start for i in indices if h.start <= i < h.stop]) for h in self._order]
        groups = [(h, loc) for h, loc in groups if loc]
        local_of = {id(h): loc for h, loc in groups}
        handles = [h for h, _ in groups]
        self._send(cmd, handles, lambda h: record(local_of[id(h)], h))
        results = self._gather(cmd, handles, self.timeout)
        by_index: dict[int, Any] = {}
        for (h, loc), answer in zip(groups, results):
            answer = per_env_answer(answer, len(loc), self, h.label, cmd)
            by_index.update((h.start + i, r) for i, r in zip(loc, answer))
        return [by_index[i] for i in indices]

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        if os.getpid() != self._owner_pid:
            self._forget()  # a forked child's copy: the workers are the parent's
            return
        active, locked = self._active, self._active is None
        if active is not None:  # a call in progress (another thread's, or a signal handler's
            # own thread): end the workers so that it ends with ClosedError; another thread's
            # leaves before the shared memory goes (else it stays until garbage collection)
            self._closed_by, terminate = threading.current_thread().name, True
            for h in self.handles:
                _quietly(h.kill)
            mine = active[1] is threading.current_thread()
            deadline = time.monotonic() + CLOSE_TIMEOUT
            while not mine and self._active is not None and time.monotonic() < deadline:
                time.sleep(0.001)
            locked = self._active is None
        try:
            if not terminate:
                self._close_workers(CLOSE_TIMEOUT if timeout is None else timeout)
        finally:  # even if interrupted, even if one kill raises: no worker outlives close()
            errors = [e for h in self.handles for e in (_quietly(h.kill), _quietly(h.close)) if e]
            self._release(everything=locked)
            if errors:
                raise errors[0]

    def _close_workers(self, budget: float) -> None:
        """Ask every live worker (also after another one failed) to close its envs and
        exit, within ``budget`` seconds in all; the answer to a pending call is dropped.
        Whatever is still running afterwards is killed by the caller."""
        asked = []
        for h in self.handles:
            if h.suspect or not h.alive:
                continue
            try:
                h.send(Cmd.CLOSE, None)
            except OSError:
                continue
            asked.append(h)
        deadline = time.monotonic() + budget
        closed = []
        for h in asked:
            with contextlib.suppress(Exception):  # died, timed out (then killed), garbage
                self._wait(h, deadline, "close", budget)
                closed.append(h)
        exit_by = time.monotonic() + min(1.0, max(deadline - time.monotonic(), 0.1))
        for h in closed:  # the envs are closed: the workers are only exiting now
            h.join(max(exit_by - time.monotonic(), 0.0))


def _quietly(call: Callable[[], None]) -> BaseException | None:
    """``call()``; what it raised, if anything (``close`` kills every other worker too)."""
    try:
        call()
    except Exception as exc:
        return exc
    return None
