"""``subproc`` and ``subproc-atari``: envs in worker processes.

Each worker hosts ``in_series`` envs and gets one small message per call (not one per
env); observations, rewards and flags go through one shared anonymous memory region
(see :mod:`.shared`), so the per-step messages carry only actions and non-empty infos.
Faults become one :class:`~envfactory.errors.WorkerError` naming the worker, pid, env
indices, env id, exit code or signal and the remote traceback.
"""

from __future__ import annotations

import contextlib
import copy as _copy
import math
import multiprocessing as mp
import os
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.reduction import send_handle
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from .. import _compat
from ..errors import (
    ClosedError,
    ConfigError,
    RemoteEnvError,
    SpaceMismatchError,
    UnpicklableEnvError,
    VecEnvBrokenError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    remote_env_error,
)
from .base import PendingCall, VecEnvBase, check_spaces, count_restart
from .protocol import (
    ERROR,
    Attach,
    Call,
    Cmd,
    EnvInfo,
    Failure,
    Reset,
    Restarted,
    RestartReset,
    Sender,
    SetAttr,
    WorkerSpec,
)
from .runner import EnvRunner
from .shared import SharedBuffers, concatenate_checked, layout_for, supports_shared_memory
from .subproc_options import (
    CLOSE_TIMEOUT,
    START_METHODS,
    STARTUP_TIMEOUT,
    SubprocAtariConfig,
    SubprocConfig,
    default_in_series,
    install_fork_hook,
    parent_share,
    split_envs,
    start_process,
)
from .wakeup import (
    CMD,
    DONE,
    MSG,
    PARENT_SLEEPING,
    SLEEP_SLICE_MS,
    WORKER_SLEEPING,
    Waiter,
    drain_eventfd,
    fence,
    make_eventfd,
    signal_eventfd,
)
from .worker import Poller, _Results, worker_main

__all__ = [
    "SubprocAtariConfig",
    "SubprocConfig",
    "SubprocVecEnv",
    "build_subproc",
    "build_subproc_atari",
    "split_envs",
]

#: the least a worker spins when the parent steps a share of the envs (see _worker_spin_us):
#: measured at 16 CartPoles, in_parent=8, 2 cores: 1.24x dummy with 1000 us, 0.92-1.34x with
#: 200 us (whether the worker fell asleep each step depended on the host's speed)
PARENT_SHARE_SPIN_US = 1000


class _Worker:
    def __init__(self, index: int, start: int, stop: int, fns: list, payload: Any) -> None:
        self.index, self.start, self.stop = index, start, stop
        self.fns, self.payload = fns, payload
        self.process: Any = None
        self.pid: int | None = None
        self.conn: Any = None
        self.sender: Any = None
        self.killed_group: int | None = None
        self.poller: Any = None
        self.seq = 0
        self.last_reset: Any = None
        self.restarts: list[float] = []  # monotonic times of this worker's restarts
        self.slot: Any = None  # its control slot in the shared region (see .wakeup)
        self.go = self.done = -1  # eventfds: wakes the worker / wakes the parent
        self.waiter: Waiter | None = None
        self.done_poll: Any = None  # select.poll over ``done`` and the connection
        self.via_slot = False  # the pending step went through the control slot
        # an interrupt (Ctrl-C) stopped a receive from this worker part-way: its stream may
        # be out of step, so it is killed on close, never read again
        self.suspect = False

    @property
    def indices(self) -> list[int]:
        return list(range(self.start, self.stop))


def _label(fn: Any) -> str:
    return str(getattr(fn, "label", "") or getattr(fn, "__name__", "") or type(fn).__name__)


class SubprocVecEnv(VecEnvBase):
    """Envs in worker processes (``in_series`` per worker), same trajectories as ``dummy``."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: Any = "next_step",
        in_series: int | None = None,
        context: str = "forkserver",
        shared_memory: bool = True,
        timeout: float | None = None,
        restart: bool = False,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        copy: bool = True,
        seeding: str = "offset",
        uint8_images: bool = False,
        spin_us: int = 200,
        in_parent: int | None = None,
    ) -> None:
        super().__init__(len(env_fns), autoreset_mode, seeding)
        self._workers: list[_Worker] = []
        self._buffers: SharedBuffers | None = None
        self._broken: BaseException | None = None
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()
        self._active: tuple[str, threading.Thread] = ("", threading.current_thread())
        self._closed_by: str | None = None
        if context not in START_METHODS:
            raise ConfigError(
                f"vectorizer.context must be one of {', '.join(START_METHODS)}, got {context!r}"
            )
        if timeout is not None and not timeout > 0:  # (nan too)
            raise ConfigError(f"vectorizer.timeout must be > 0 seconds or null, got {timeout!r}")
        if timeout == math.inf:
            timeout = None  # waits forever, as null
        if max_restarts < 0 or not restart_window > 0:
            raise ConfigError(
                "vectorizer.max_restarts must be >= 0 and vectorizer.restart_window > 0 "
                f"seconds, got {max_restarts!r} and {restart_window!r}"
            )
        self.context, self.timeout, self.restart, self.copy = context, timeout, restart, copy
        self.max_restarts, self.restart_window = max_restarts, restart_window
        self._timeout_used = 0.0
        if spin_us < 0:
            raise ConfigError(f"vectorizer.spin_us must be >= 0, got {spin_us!r}")
        self.spin_us = spin_us
        self.env_id = _label(env_fns[0])
        self._ctx: Any = mp.get_context(context)
        if context == "forkserver":
            # extend the user's preload list, never replace it; the at-fork hook only matters
            # once a forkserver exists
            _compat.forkserver_preload(self._ctx, ["envfactory.vectorizers.worker", "gymnasium"])
            install_fork_hook()
        self._seq = 0
        local = parent_share(self.num_envs, in_parent, in_series, timeout, restart, uint8_images)
        self.in_parent = local
        self._local_start = self.num_envs - local
        self._local: _Results | None = None  # the parent's own envs (in_parent)
        self._local_actions: Any = None
        for k, (a, b) in enumerate(split_envs(self._local_start, in_series)):
            fns = list(env_fns[a:b])
            self._workers.append(_Worker(k, a, b, fns, self._payload(fns, a)))
        self.shared_memory = shared_memory
        try:
            for w in self._workers:
                self._spawn(w)
            local_envs = [fn() for fn in env_fns[self._local_start :]]  # while workers build
            if local_envs:
                runner = EnvRunner(local_envs, self.autoreset_mode)
                self._local = _Results(runner, self._local_start)
            infos = self._gather(
                "start",
                self._workers,
                STARTUP_TIMEOUT if timeout is None else max(timeout, STARTUP_TIMEOUT),
            )
            per_env: list[Any] = [x for w in self._workers for x in infos[w.index]]
            per_env += [
                EnvInfo(e.observation_space, e.action_space, dict(e.metadata), e.render_mode, None)
                for e in local_envs
            ]
            obs_space, act_space = check_spaces(
                [(e.observation_space, e.action_space) for e in per_env], self.env_id
            )
            self._init_spaces(obs_space, act_space, per_env[0].metadata)
            self.render_mode = per_env[0].render_mode
            if uint8_images and not (
                isinstance(obs_space, gym.spaces.Box) and obs_space.dtype == np.uint8
            ):
                raise ConfigError(
                    f"vectorizer=subproc-atari needs uint8 Box (image) observations; "
                    f"{self.env_id!r} has {obs_space}. Use vectorizer=subproc instead"
                )
            use_shm = shared_memory and supports_shared_memory(obs_space)
            self._shm_obs = use_shm
            self._buffers = SharedBuffers(
                layout_for(
                    obs_space if use_shm else None,
                    self.num_envs,
                    act_space,
                    workers=len(self._workers),
                )
            )
            if self._local is not None:
                self._local.buffers = self._buffers
                if use_shm:
                    self._local.write = self._buffers.writer()
            for w in self._workers:
                self._attach(w)
            self._gather("attach", self._workers, STARTUP_TIMEOUT)
            if not use_shm:
                self._env_obs: list[Any] = [None] * self.num_envs
                self._obs = create_empty_array(obs_space, n=self.num_envs)
        except BaseException:
            self.close(terminate=True)
            raise

    # -- process management ---------------------------------------------------------
    def _payload(self, fns: list, start: int) -> Any:
        if self.context == "fork":
            return fns
        import cloudpickle

        try:
            return cloudpickle.dumps(fns)
        except Exception as exc:
            for i, fn in enumerate(fns):
                try:
                    cloudpickle.dumps(fn)
                except Exception as inner:
                    raise UnpicklableEnvError(
                        f"env {start + i} ({_label(fn)!r}) cannot be sent to a worker process "
                        f"with context={self.context!r}: {type(inner).__name__}: {inner}. Make "
                        "the env constructor picklable (a module-level function or class, no "
                        "open files/locks/lambdas over unpicklable objects), or use "
                        "vectorizer.context=fork"
                    ) from inner
            raise UnpicklableEnvError(f"env constructors cannot be pickled: {exc}") from exc

    def _spawn(self, w: _Worker) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        close_fds = None
        if self.context == "fork":
            close_fds = [x.conn for x in self._workers if x.conn is not None and x is not w]
            close_fds.append(parent_conn)
        proc = self._ctx.Process(
            target=worker_main,
            args=(
                child_conn,
                WorkerSpec(
                    env_fns=w.payload,
                    start=w.start,
                    autoreset_mode=self.autoreset_mode,
                    shared_memory=self.shared_memory,
                    main_pid=os.getpid(),
                    close_fds=close_fds,
                    spin_seconds=self._worker_spin_us() * 1e-6,
                ),
            ),
            name=f"envfactory-worker-{w.index}",
            daemon=True,
        )
        w.process, w.pid, w.conn, w.seq = proc, None, parent_conn, 0  # (closed if interrupted)
        try:
            start_process(proc)
        finally:
            child_conn.close()
        w.pid = proc.pid
        w.poller = Poller(parent_conn, self.spin_us * 1e-6)
        w.sender = Sender(parent_conn, by_value=self.context != "fork")

    def _worker_spin_us(self) -> int:
        """A worker whose parent steps a share (``in_parent``) waits each step while the
        parent steps its own envs, longer than ``spin_us`` on a slow core; sleeping then
        costs a wake-up per step (~150 us here), so it spins at least
        :data:`PARENT_SHARE_SPIN_US` (still only while its recent waits were shorter)."""
        if self.in_parent and self.spin_us > 0:
            return max(self.spin_us, PARENT_SHARE_SPIN_US)
        return self.spin_us

    def _attach(self, w: _Worker) -> None:
        b = self._buffers
        assert b is not None and b.fd is not None and b.control is not None
        if w.go < 0:  # kept over restarts; closed with the env
            w.go, w.done = make_eventfd(), make_eventfd()
            w.slot = b.control[w.index]
            w.waiter = Waiter(self.spin_us * 1e-6)
        w.done_poll = select.poll()
        w.done_poll.register(w.done, select.POLLIN)
        w.done_poll.register(w.conn.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        w.seq = self._next_seq()
        w.sender.send((Cmd.ATTACH, w.seq, Attach(b.layout, w.index)))
        send_handle(w.conn, b.fd, w.process.pid)
        send_handle(w.conn, w.go, w.process.pid)
        send_handle(w.conn, w.done, w.process.pid)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _kill(self, w: _Worker) -> None:
        """Kill the worker and its process group (the env's own helper processes: each
        worker leads a group of its own)."""
        if w.pid is not None and w.pid != w.killed_group:
            w.killed_group = w.pid
            with contextlib.suppress(OSError):  # no such group: it was never made, or is gone
                os.killpg(w.pid, signal.SIGKILL)
        if w.process is not None and w.process.pid is not None and w.process.is_alive():
            w.process.kill()
        if w.process is not None and w.process.pid is not None:
            w.process.join(5.0)

    def _error(
        self, cls: type[WorkerError], what: str, w: _Worker, call: str, tb: str = ""
    ) -> WorkerError:
        exitcode = w.process.exitcode if w.process is not None else None
        return cls(
            what,
            worker=w.index,
            pid=getattr(w.process, "pid", None),
            env_indices=w.indices,
            env_id=self.env_id,
            exitcode=exitcode,
            remote_traceback=tb,
            call=call,
        )

    def _remote_error(
        self, w: _Worker, call: str, exc_type: str, exc: Any, tb: str
    ) -> RemoteEnvError:
        """An env's exception: a RemoteEnvError that is also the original's type."""
        return remote_env_error(
            f"raised {exc_type}",
            exc_type=exc_type,
            original=exc,
            worker=w.index,
            pid=getattr(w.process, "pid", None),
            env_indices=w.indices,
            env_id=self.env_id,
            exitcode=w.process.exitcode if w.process is not None else None,
            remote_traceback=tb,
            call=call,
        )

    def _recv(self, w: _Worker, deadline: float | None, call: str) -> Any:
        while True:
            if w.poller.spin():
                pass
            elif deadline is not None and deadline != math.inf:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not w.conn.poll(remaining):
                    self._kill(w)
                    raise self._error(
                        WorkerTimeoutError,
                        f"did not answer within {self._timeout_used:.3g} s and was killed",
                        w,
                        call,
                    )
            try:
                seq, status, payload = w.conn.recv()
            except (EOFError, OSError):
                if self._closed_by is not None:
                    raise ClosedError(
                        f"{call}() did not finish: the {type(self).__name__} was closed from "
                        f"thread {self._closed_by!r} meanwhile"
                    ) from None
                w.process.join(2.0)
                raise self._error(WorkerDiedError, "died", w, call) from None
            except Exception as bad:  # a whole answer arrived but cannot be unpickled here
                raise self._error(
                    RemoteEnvError,
                    f"sent an answer this process cannot unpickle ({type(bad).__name__}: {bad})",
                    w,
                    call,
                ) from bad
            if seq != w.seq:
                continue  # a late answer to a call that was given up on: drop it
            if status == ERROR:
                failure: Failure = payload
                raise self._remote_error(w, call, failure.exc_type, failure.exc, failure.traceback)
            return payload

    def _await_step(self, w: _Worker, deadline: float | None, call: str) -> Any:
        """Wait for the step ``w.seq`` asked of ``w`` through its control slot: spin while
        spinning pays, then sleep on its eventfd and its pipe (a worker that dies wakes
        this at once; see :mod:`.wakeup`). Its answer follows by pipe only when it has
        infos, pickled observations or an error."""
        slot, seq, waiter = w.slot, w.seq, w.waiter
        assert waiter is not None
        t0 = time.perf_counter()
        if slot[DONE] != seq and not waiter.wait(lambda: slot[DONE] == seq, t0):
            while True:
                slot[PARENT_SLEEPING] = 1
                fence()
                if slot[DONE] == seq:
                    slot[PARENT_SLEEPING] = 0
                    break
                if deadline is None:
                    wait_ms = SLEEP_SLICE_MS
                else:
                    wait_ms = math.ceil(max(0.0, deadline - time.monotonic()) * 1000)
                events = w.done_poll.poll(min(wait_ms, SLEEP_SLICE_MS))
                slot[PARENT_SLEEPING] = 0
                drain_eventfd(w.done)
                if slot[DONE] == seq:
                    break
                for fd, ev in events:
                    if fd != w.done:  # nothing of this step comes by pipe before ``done``
                        self._pipe_before_done(w, ev, call)
                if deadline is not None and time.monotonic() >= deadline:
                    self._kill(w)
                    raise self._error(
                        WorkerTimeoutError,
                        f"did not answer within {self._timeout_used:.3g} s and was killed",
                        w,
                        call,
                    )
        waiter.record(time.perf_counter() - t0)
        fence()  # its results were written before ``done``
        if slot[MSG]:
            return self._recv(w, deadline, call)
        return [], None  # a StepResult: no infos, observations in shared memory

    def _pipe_before_done(self, w: _Worker, events: int, call: str) -> None:
        """The pipe of ``w`` woke a wait for a step's ``done``: a hang-up (the worker died,
        or the env was closed from another thread: _recv raises which), else a late
        answer to a call given up on, dropped."""
        if events & ~select.POLLIN:
            self._recv(w, time.monotonic(), call)
        try:
            seq, status, payload = w.conn.recv()
        except (EOFError, OSError):
            self._recv(w, time.monotonic(), call)
            raise  # (not reached: _recv raised)
        if seq == w.seq and status == ERROR:
            raise self._remote_error(w, call, payload.exc_type, payload.exc, payload.traceback)

    def _gather(
        self, call: str, workers: Sequence[_Worker], timeout: float | None
    ) -> dict[int, Any]:
        if timeout == math.inf:
            timeout = None
        self._timeout_used = timeout if timeout is not None else 0.0
        deadline = None if timeout is None else time.monotonic() + timeout
        results: dict[int, Any] = {}
        failures: list[tuple[_Worker, WorkerError]] = []
        for w in workers:
            try:
                if w.via_slot:
                    w.via_slot = False
                    results[w.index] = self._await_step(w, deadline, call)
                else:
                    results[w.index] = self._recv(w, deadline, call)
            except WorkerError as err:
                failures.append((w, err))
            except BaseException as exc:  # KeyboardInterrupt: maybe in the middle of a message
                w.suspect = True
                self._broken = RuntimeError(
                    f"{call} was interrupted ({type(exc).__name__}) while waiting for worker "
                    f"{w.index}"
                )
                raise
        if failures:
            if self.restart and call in ("step", "reset") and not self._broken:
                for w, failure in failures:
                    self._count_restart(w, failure)
                    warnings.warn(f"restarting after: {failure}", RuntimeWarning, stacklevel=4)
                    results[w.index] = self._restart(w, call)
                self._timeout_used = timeout if timeout is not None else 0.0
            else:
                recoverable = call in ("call", "set_attr") and all(
                    isinstance(err, RemoteEnvError) for _, err in failures
                )  # the worker caught it and is still in step, as dummy would be
                if not recoverable:
                    self._broken = failures[0][1]
                raise failures[0][1]
        return results

    def _count_restart(self, w: _Worker, failure: WorkerError) -> None:
        """Raise ``failure`` (the env is then unusable) if ``w`` already had
        ``max_restarts`` restarts in the last ``restart_window`` seconds."""
        try:
            count_restart(
                w.restarts, failure, f"worker {w.index}", self.max_restarts, self.restart_window
            )
        except WorkerError:
            self._broken = failure
            raise

    @property
    def restarts(self) -> list[int]:
        """How many times each worker was restarted (``vectorizer.restart=true``)."""
        return [len(w.restarts) for w in self._workers]

    def _last_obs(self, w: _Worker) -> list[Any]:
        """The observation the caller last saw from each env of ``w`` (copies)."""
        if not self._shm_obs:
            return list(self._env_obs[w.start : w.stop])
        assert self._buffers is not None
        per_env = list(iterate(self.observation_space, self._buffers.obs))
        return [_copy.deepcopy(per_env[i]) for i in range(w.start, w.stop)]

    def _restart(self, w: _Worker, call: str) -> Any:
        """Rebuild ``w``'s envs in a new process and finish ``call`` on them (see the
        worker's ``restarted`` / ``restart-reset``). Every wait is bounded: the start by
        the startup budget, the redone call by ``timeout``. If the rebuild fails, the env
        is unusable and that failure is raised."""
        last = self._last_obs(w)
        done = self._done[w.start : w.stop].tolist()
        self._kill(w)
        w.conn.close()
        try:
            self._spawn(w)
            start_budget = (
                STARTUP_TIMEOUT if self.timeout is None else max(self.timeout, STARTUP_TIMEOUT)
            )
            self._timeout_used = start_budget
            info = self._recv(w, time.monotonic() + start_budget, "restart")
            self._check_rebuilt_spaces(w, info)
            self._attach(w)
            self._recv(w, time.monotonic() + start_budget, "restart")
            w.seq = self._next_seq()
            if call == "reset":
                redo = RestartReset(w.last_reset, last, done)
                w.sender.send((Cmd.RESTART_RESET, w.seq, redo))
            else:
                w.sender.send((Cmd.RESTARTED, w.seq, Restarted(last, done)))
            self._timeout_used = self.timeout or 0.0
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            return self._recv(w, deadline, "restart")
        except BaseException as exc:
            self._broken = exc
            raise

    def _check_rebuilt_spaces(self, w: _Worker, info: list[EnvInfo]) -> None:
        for i, env in enumerate(info):
            for kind, new, old in (
                ("observation", env.observation_space, self.single_observation_space),
                ("action", env.action_space, self.single_action_space),
            ):
                if new != old:
                    raise SpaceMismatchError(
                        f"env {w.start + i} ({self.env_id}) was rebuilt after a worker fault "
                        f"with {kind} space {new}, but the vectorized env has {old}; an env "
                        "constructor must build the same spaces every time"
                    )

    def _check_usable(self, what: str) -> None:
        if self._broken is not None:
            raise VecEnvBrokenError(
                f"{what}() on a {type(self).__name__} that is unusable since: {self._broken}\n"
                "Close it and make a new one, or set vectorizer.restart=true to rebuild failed "
                "workers automatically"
            )

    def _send_all(
        self, cmd: str, per_worker: Callable[[_Worker], Any], plain: bool = False
    ) -> None:
        self._send(cmd, self._workers, per_worker, plain)

    def _send(
        self,
        cmd: str,
        workers: Sequence[_Worker],
        data_of: Callable[[_Worker], Any],
        plain: bool = False,
    ) -> None:
        """Send one call to ``workers``. Interrupted part-way (Ctrl-C between two sends),
        some workers have the call and others not: they are out of step, and the env is
        marked unusable rather than losing that transition silently on the next call."""
        seq = self._next_seq()
        reached = False
        try:
            for w in workers:
                w.seq = seq
                data = w.sender.dumps((cmd, seq, data_of(w)), plain)  # nothing sent yet
                reached = True
                try:
                    w.conn.send_bytes(data)
                except OSError:  # the worker is gone: _recv reads EOF and says how it died
                    pass
        except BaseException as exc:
            if reached:
                self._broken = RuntimeError(
                    f"{cmd} was interrupted ({type(exc).__name__}) while it was being sent "
                    f"to the workers (worker {w.index} of {len(self._workers)}): some have it "
                    "and some not, so they are no longer in step"
                )
            raise

    # -- one call at a time, by its owner process ---------------------------------------
    def _enter(self, what: str) -> None:
        """Every backend call holds ``self._lock`` (taken without waiting): a second thread
        gets a clear error instead of interleaving its messages with the first's; a forked
        child (which copied this object, not the workers) is refused."""
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                f"{what}() on a {type(self).__name__} made by process {self._owner_pid}; this "
                f"process ({os.getpid()}) was forked from it and does not own its workers. "
                "Make a new vectorized env in this process"
            )
        if not self._lock.acquire(blocking=False):
            other, thread = self._active
            raise RuntimeError(
                f"{what}() called from thread {threading.current_thread().name!r} while "
                f"{other}() is in progress in thread {thread.name!r}: a vectorized env serves "
                "one call at a time. Give each thread its own env, or hold a lock around "
                "every call"
            )
        self._active = (what, threading.current_thread())

    def _leave(self) -> None:
        self._lock.release()

    def _check_idle(self, what: str) -> None:
        # the base class checked this before the lock was taken: check again under it
        self._expect_idle(what)  # AlreadyPendingError

    # -- backend ----------------------------------------------------------------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self._enter("reset_async")
        try:
            self._check_idle("reset_async")
            self._start_reset_locked(seeds, options, mask)
            self._pending = PendingCall.RESET
        finally:
            self._leave()

    def _start_reset_locked(
        self, seeds: list, options: dict | None, mask: np.ndarray | None
    ) -> None:
        self._check_usable("reset")
        self._reset_mask_now = mask
        k = self._local_start
        self._local_reset = Reset(seeds[k:], options, None if mask is None else mask[k:])
        for w in self._workers:  # kept to redo the reset if a worker must be restarted
            w.last_reset = Reset(
                seeds[w.start : w.stop], options, None if mask is None else mask[w.start : w.stop]
            )
        self._send_all(Cmd.RESET, lambda w: w.last_reset)

    def _finish_reset(self, timeout: float | None) -> tuple[Any, dict]:
        self._enter("reset_wait")
        try:
            r = self._local_reset
            mine = self._in_parent(
                "reset", lambda run: run.reset(r.seeds, r.options, r.mask), r.mask
            )
            results = self._gather(
                "reset", self._workers, self.timeout if timeout is None else timeout
            )
            self._raise_local(mine, results)
            return self._collect(results, self._reset_mask_now)[0], self._collect_infos(results)
        finally:
            self._leave()

    def _start_step(self, actions: Any) -> None:
        self._enter("step_async")
        try:
            self._check_idle("step_async")
            self._start_step_locked(actions)
            self._pending = PendingCall.STEP
        finally:
            self._leave()

    def _start_step_locked(self, actions: Any) -> None:
        self._check_usable("step")
        batch: Any
        if isinstance(actions, np.ndarray):
            batch = actions
        else:
            batch = list(iterate(self.action_space, actions))
        self._local_actions = batch[self._local_start :]
        shared = self._buffers.actions if self._buffers is not None else None
        if (
            shared is not None
            and isinstance(batch, np.ndarray)
            and batch.dtype == shared.dtype  # else by pipe: the envs get the caller's dtype
            and batch.shape == shared.shape
        ):
            self._post_step(batch, shared)
            return
        plain = isinstance(batch, np.ndarray)  # the hot path: no cloudpickle
        self._send_all(Cmd.STEP, lambda w: batch[w.start : w.stop], plain)

    def _post_step(self, batch: np.ndarray, shared: np.ndarray) -> None:
        """Ask every worker for a step through its control slot (see :mod:`.wakeup`)."""
        k = self._local_start
        shared[:k] = batch[:k]
        seq = self._next_seq()
        reached = 0
        try:
            for w in self._workers:
                w.seq, w.via_slot = seq, True
                w.slot[CMD] = seq
                reached += 1
            fence()  # the seqs are visible before the sleeping words are read
            for w in self._workers:
                if w.slot[WORKER_SLEEPING]:
                    signal_eventfd(w.go)
        except BaseException as exc:  # Ctrl-C part-way: some workers have the step
            if 0 < reached < len(self._workers):
                self._broken = RuntimeError(
                    f"step was interrupted ({type(exc).__name__}) while it was being sent "
                    f"to the workers: some have it and some not, so they are no longer in step"
                )
            raise

    def _in_parent(self, call: str, run: Callable[[Any], Any], mask: Any = None) -> Any:
        """Run ``call`` on the parent's own envs (``in_parent``): their StepResult, or the
        error they raised (raised once the workers have answered, so that they stay in
        step); an interrupt leaves the env unusable (the workers have the call)."""
        local = self._local
        if local is None:
            return None
        try:
            return local.collect(run(local.runner), mask)
        except Exception as exc:
            return self._local_error(exc, call, local.runner.envs)
        except BaseException as exc:
            self._broken = RuntimeError(
                f"{call} was interrupted ({type(exc).__name__}) while the parent stepped its "
                "own envs (vectorizer.in_parent)"
            )
            raise

    def _local_error(self, exc: BaseException, call: str, envs: Any) -> RemoteEnvError:
        """An exception of one of the parent's own envs, as the workers' (a RemoteEnvError
        that is also the original's type; worker -1 names the parent process)."""
        import traceback

        return remote_env_error(
            f"raised {type(exc).__name__}",
            exc_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
            original=exc,
            worker=-1,
            pid=os.getpid(),
            env_indices=list(range(self._local_start, self.num_envs)),
            env_id=self.env_id,
            remote_traceback=traceback.format_exc(),
            call=call,
        )

    def _raise_local(self, mine: Any, results: dict[int, Any], broken: bool = True) -> None:
        if isinstance(mine, RemoteEnvError):
            if broken:
                self._broken = mine
            raise mine
        if mine is not None:
            results[-1] = mine

    def _finish_step(self, timeout: float | None) -> tuple[Any, Any, Any, Any, dict]:
        self._enter("step_wait")
        try:
            acts = self._local_actions
            mine = self._in_parent("step", lambda run: run.step(acts))
            results = self._gather(
                "step", self._workers, self.timeout if timeout is None else timeout
            )
            self._raise_local(mine, results)
            obs, b = self._collect(results, None)
            infos = self._collect_infos(results)
            return obs, b.rewards.copy(), b.terminations.copy(), b.truncations.copy(), infos
        finally:
            self._leave()

    def _collect(self, results: dict[int, Any], mask: Any) -> tuple[Any, SharedBuffers]:
        b = self._buffers
        assert b is not None
        if self._shm_obs:
            return (self._copy_obs(b.obs) if self.copy else b.obs), b
        for start, (_, obs) in self._shares(results):  # StepResults
            for i, o in enumerate(obs):
                if o is not None or (mask is None or mask[start + i]):
                    self._env_obs[start + i] = o
        self._obs = concatenate_checked(self.single_observation_space, self._env_obs, self._obs)
        return (self._copy_obs(self._obs) if self.copy else self._obs), b

    def _collect_infos(self, results: dict[int, Any]) -> dict:
        infos: dict = {}
        for start, (calls, _) in self._shares(results):  # StepResults
            if calls:
                infos = self._merge_infos(calls, start, infos)
        return infos

    def _shares(self, results: dict[int, Any]) -> list[tuple[int, Any]]:
        """``(first env index, result)`` of each worker, then of the parent's own envs."""
        out = [(w.start, results[w.index]) for w in self._workers]
        if -1 in results:
            out.append((self._local_start, results[-1]))
        return out

    def _by_worker(self, indices: list[int]) -> list[tuple[_Worker, list[int]]]:
        out = []
        for w in self._workers:
            local = [i - w.start for i in indices if w.start <= i < w.stop]
            if local:
                out.append((w, local))
        return out

    def _do_call(self, name: str, args: Any, kwargs: Any, indices: list[int]) -> list[Any]:
        what = "get_attr" if args is None else "call"
        self._enter(what)
        try:
            self._check_idle(what)
            self._check_usable(what)

            def here(env: Any, _: int) -> Any:
                if callable(name):  # call(fn): fn(env, *args, **kwargs)
                    return name(env, *args, **kwargs)
                attr = env.get_wrapper_attr(name)
                return attr(*args, **kwargs) if args is not None and callable(attr) else attr

            return self._per_index(
                Cmd.CALL, indices, lambda loc, _: Call(name, args, kwargs, loc), here
            )
        finally:
            self._leave()

    def _do_set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        self._enter("set_attr")
        try:
            self._check_idle("set_attr")
            self._check_usable("set_attr")
            value_of = dict(zip(indices, values))
            self._per_index(
                Cmd.SET_ATTR,
                indices,
                lambda loc, w: SetAttr(name, [value_of[w.start + i] for i in loc], loc),
                lambda env, i: env.set_wrapper_attr(name, value_of[i]),
            )
        finally:
            self._leave()

    def _per_index(
        self,
        cmd: str,
        indices: list[int],
        data: Callable[[list[int], _Worker], Any],
        here: Callable[[Any, int], Any],
    ) -> list[Any]:
        groups = self._by_worker(indices)
        local_of = {w.index: local for w, local in groups}
        self._send(cmd, [w for w, _ in groups], lambda w: data(local_of[w.index], w))
        by_index: dict[int, Any] = {}
        failed: RemoteEnvError | None = None
        if self._local is not None:  # the parent's own envs, in-process (as dummy)
            envs = self._local.runner.envs
            for i in indices:
                if i >= self._local_start and failed is None:
                    try:
                        by_index[i] = here(envs[i - self._local_start], i)
                    except Exception as exc:
                        failed = self._local_error(exc, cmd, envs)
        results = self._gather(cmd, [w for w, _ in groups], self.timeout)
        if failed is not None:
            raise failed  # the envs stay in step, as after a worker's RemoteEnvError
        for w, local in groups:
            for i, r in zip(local, results[w.index] or [None] * len(local)):
                by_index[w.start + i] = r
        return [by_index[i] for i in indices]

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        if os.getpid() != self._owner_pid:
            self._forget()  # a forked child's copy: the workers are the parent's
            return
        locked = self._lock.acquire(blocking=False)
        if not locked:
            # another thread's call is in progress (or this thread's, from a signal
            # handler): end the workers, so that call ends with ClosedError, and let it
            # leave before the connections and shared memory go
            self._closed_by = threading.current_thread().name
            terminate = True
            for w in self._workers:
                self._kill(w)
            if self._active[1] is not threading.current_thread():
                locked = self._lock.acquire(timeout=CLOSE_TIMEOUT)
        try:
            self._close_all(timeout, terminate, release_buffers=locked)
        finally:
            if locked:
                self._lock.release()

    def _forget(self) -> None:
        """Drop this process's copies of the connections and shared memory, touching no
        worker (used in a forked child)."""
        for w in self._workers:
            if w.conn is not None:
                w.conn.close()
                w.conn = None
            for fd in (w.go, w.done):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            w.go = w.done = -1
            w.process = None
        self._local = None  # the parent's own envs: this child's copies are not its to close
        if self._buffers is not None:
            self._buffers.close()
            self._buffers = None

    def _close_all(self, timeout: float | None, terminate: bool, release_buffers: bool) -> None:
        try:
            if not terminate:
                self._close_workers(CLOSE_TIMEOUT if timeout is None else timeout)
        finally:  # even if interrupted: no worker outlives close()
            for w in self._workers:
                if w.process is not None:
                    self._kill(w)
                    try:  # release its sentinel fds now, not when this object is collected
                        w.process.close()
                        w.process = None
                    except ValueError:  # pragma: no cover - unkillable (D state)
                        pass
                if w.conn is not None:
                    w.conn.close()
                    w.conn = None
                for fd in (w.go, w.done):
                    if fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                w.go = w.done = -1
            if self._local is not None:
                local, self._local = self._local, None
                for env in local.runner.envs:
                    with contextlib.suppress(Exception):
                        env.close()
            if self._buffers is not None and release_buffers:
                self._buffers.close()
                self._buffers = None

    def _close_workers(self, budget: float) -> None:
        """Ask every live worker (also after another one failed) to close its envs and
        exit, within ``budget`` seconds in all; the answer to a pending call is dropped by
        its ``seq``. Whatever is still running afterwards is killed by the caller."""
        seq = self._next_seq()
        asked = []
        for w in self._workers:
            if w.conn is None or w.process is None or w.suspect or not w.process.is_alive():
                continue
            w.seq = seq
            try:
                w.sender.send((Cmd.CLOSE, seq, None))
            except OSError:
                continue
            asked.append(w)
        deadline = time.monotonic() + budget
        self._timeout_used = budget
        closed = []
        for w in asked:
            try:
                self._recv(w, deadline, "close")
                closed.append(w)
            except Exception:  # died, timed out (then killed), or sent garbage
                pass
        exit_by = time.monotonic() + min(1.0, max(deadline - time.monotonic(), 0.1))
        for w in closed:  # the envs are closed: the workers are only exiting now
            w.process.join(max(exit_by - time.monotonic(), 0.0))

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return [w.pid for w in self._workers if w.pid is not None]


def build_subproc(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> SubprocVecEnv:
    """The ``subproc`` vectorizer's build function (``batch_size`` set: the async pool,
    :class:`~.pool.SubprocPool`)."""
    batch_size = options.pop("batch_size", None)
    if batch_size is not None:
        from .pool import SubprocPool, pool_in_series

        if options.get("in_parent"):
            raise ConfigError(
                f"vectorizer.in_parent={options['in_parent']} cannot be combined with "
                f"vectorizer.batch_size={batch_size}: the async pool steps every env in a "
                "worker. Set vectorizer.in_parent=0 (or null), or batch_size=null"
            )
        options["in_parent"] = 0
        options["in_series"] = pool_in_series(len(env_fns), batch_size, options.get("in_series"))
        return SubprocPool(env_fns, batch_size, **options)
    return SubprocVecEnv(env_fns, **options)


def build_subproc_atari(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> SubprocVecEnv:
    """The ``subproc-atari`` vectorizer's build function (uint8 images, shared memory)."""
    options["shared_memory"] = True
    if options.get("in_series") is None and options.get("batch_size") is None:
        options["in_series"] = default_in_series(len(env_fns), leave_parent_a_core=False)
    return build_subproc(env_fns, uint8_images=True, **options)
