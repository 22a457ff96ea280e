"""The worker process: hosts a slice of envs and answers the messages of `protocol`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import threading
from collections.abc import Callable
from multiprocessing.reduction import recv_handle
from typing import Any

from ... import _compat
from ..transport.board import (
    CMD,
    DONE,
    MSG,
    PARENT_SLEEPING,
    SCHEMAS,
    WORKER_SLEEPING,
    Poller,
    Waiter,
    drain_eventfd,
    fence,
    signal_eventfd,
    sleep_until,
)
from ..transport.infocols import IN_COLUMNS, InfoColumns, Schema, fits, relearn
from ..transport.shared import ResultWriter, SharedBuffers
from .protocol import ERROR, OK, Cmd, EnvInfo, Sender, WorkerSpec, dumps, failure_of
from .runner import EnvHost

__all__ = ["worker_main"]


class WorkerWake:
    """The worker's side of its control slot: waits for a step or a message, reports one done."""

    def __init__(self, control: Any, worker: int, spin_seconds: float, go: int, done: int):
        self.slot = control[worker]
        self.go, self.done = go, done
        self.waiter = Waiter(spin_seconds)
        self.last = int(self.slot[CMD])  # steps asked for before this worker existed
        self.sleep_poll: Any = None

    def wait(self, poller: Poller, parent_alive: Callable[[], bool]) -> int:
        """The next slot step's seq (> 0), 0: a pipe message, -1: the main process is gone."""
        slot, last, pipe, go = self.slot, self.last, poller.ready, self.go

        def ready() -> bool:
            return bool(slot[CMD] != last or pipe(0))

        def woke(events: list) -> bool:
            drain_eventfd(go)
            return bool(events) or ready() or parent_alive()

        def sleep() -> bool:
            if self.sleep_poll is None:  # (its eventfd and its pipe, as the parent's)
                self.sleep_poll = select.poll()
                self.sleep_poll.register(go, select.POLLIN)
                self.sleep_poll.register(poller.fds[0], select.POLLIN | select.POLLHUP)
            return sleep_until((slot, WORKER_SLEEPING), ready, self.sleep_poll, None, woke)

        if not self.waiter.until(ready, sleep):
            return -1  # the main process is gone
        seq = int(slot[CMD])
        if seq != last:
            fence()  # the actions were written before the seq
            self.last = seq
            return seq
        return 0

    def finish(self, seq: int, msg: int) -> None:
        """Report step ``seq`` done (``msg``: the slot's MSG word)."""
        slot = self.slot
        slot[MSG] = msg
        fence()
        slot[DONE] = seq
        fence()
        if slot[PARENT_SLEEPING]:
            signal_eventfd(self.done)

    def close(self) -> None:
        for fd in (self.go, self.done):
            with contextlib.suppress(OSError):
                os.close(fd)


def _watch_main(main_pid: int) -> None:
    """A thread that kills this worker and its process group the moment the main process ends."""
    try:
        pidfd = os.pidfd_open(main_pid)
    except ProcessLookupError:
        _kill_self()
        return
    except (AttributeError, OSError):  # pragma: no cover - no pidfd (old kernel, not Linux)
        return

    def watch() -> None:
        poll = select.poll()
        poll.register(pidfd, select.POLLIN)
        poll.poll()  # (no timeout: returns once the main process has ended)
        _kill_self()

    threading.Thread(target=watch, name="envfactory-main-watch", daemon=True).start()


def _kill_self() -> None:
    with contextlib.suppress(OSError):
        if os.getpgid(0) == os.getpid():  # it leads its group: the env's helpers too
            os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def worker_main(conn: Any, spec: WorkerSpec) -> None:
    """Entry point of a worker process: build the envs, report them, serve commands."""
    with contextlib.suppress(Exception):  # SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG,
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # Linux; or the watch)
    # forkserver: drop the inherited end of its "alive" pipe, so it exits with the main process
    _compat.release_forkserver_alive_fd()
    with contextlib.suppress(OSError):  # a process group of its own: the parent ends the
        os.setpgid(0, 0)  # env's helper processes with the worker (timeout, terminate)
    _watch_main(spec.main_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for c in spec.close_fds or ():  # fork: drop inherited parent ends of other workers' pipes
        with contextlib.suppress(OSError):
            c.close()
    if os.getppid() != spec.main_pid and not _alive(spec.main_pid):
        return
    try:
        env_fns = spec.env_fns
        if isinstance(env_fns, bytes):  # (cloudpickle's loads is pickle's)
            env_fns = pickle.loads(env_fns)
        envs = [fn() for fn in env_fns]
        info = [EnvInfo.of(e) for e in envs]
    except BaseException as exc:
        conn.send_bytes(dumps((0, ERROR, failure_of(exc, dumps))))
        return
    sender = Sender(conn)
    worker = _Worker(sender, envs, spec)
    try:
        sender.send((0, OK, info))
        worker.serve()
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass
    finally:
        worker.host.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class _Worker:
    """The commands a worker process answers: its `EnvHost`'s plus ``attach`` and ``close``."""

    def __init__(self, sender: Sender, envs: list, spec: WorkerSpec) -> None:
        self.sender, self.conn, self.spec = sender, sender.conn, spec
        self.out = ResultWriter(spec.start)
        self.host = EnvHost(envs, spec.autoreset_mode, self.out)
        self.out.runner = self.host.runner
        self.wake: WorkerWake | None = None  # after ATTACH: steps through the shared control slot
        self.actions: Any = None  # its rows of the shared action buffer
        self.columns: InfoColumns | None = None  # the info columns (after ATTACH)
        self.schema: Schema | None = None  # the last info schema sent by pipe
        self.schemas = 0  # how many there were (the control slot's SCHEMAS word)

    def attach(self, layout: Any, worker: int) -> Any:
        buffers = SharedBuffers(layout, recv_handle(self.conn))
        self.out.attach(buffers, self.spec.shared_memory)
        go, done = recv_handle(self.conn), recv_handle(self.conn)
        start, acts = self.spec.start, buffers.actions
        if acts is not None:  # else steps come by pipe
            self.actions = acts[start : start + len(self.host.envs)]
        self.wake = WorkerWake(buffers.control, worker, self.spec.spin_seconds, go, done)
        self.columns = buffers.infos

    def close(self, seq: int) -> None:
        if self.wake is not None:
            self.wake.close()
        if self.out.buffers is not None:
            self.out.buffers.close()
        self.host.close()  # before answering, so the parent's close budget covers it
        self.sender.send((seq, OK, None))

    def step_in_shared_memory(self, seq: int) -> None:
        """Answer step ``seq`` of the control slot (by pipe only what the slot cannot carry)."""
        wake = self.wake
        assert wake is not None
        msg, n = 0, len(self.host.envs)
        try:
            calls, obs = result = self.host.step(self.actions.copy())
            answer = None
            schema = self.schema
            if calls and obs is None and schema is not None and fits(schema, calls, n):
                assert self.columns is not None
                if self.columns.write(schema, calls, self.spec.start, n):
                    msg = IN_COLUMNS
            if msg == 0 and (calls or obs is not None):
                answer = self.sender.dumps((seq, OK, result))
                if calls and obs is None and relearn(self, calls, n):  # the parent too
                    wake.slot[SCHEMAS] = self.schemas
        except Exception as exc:
            answer = self.sender.dumps((seq, ERROR, failure_of(exc, dumps)))
        wake.finish(seq, 1 if answer is not None else msg)
        if answer is not None:
            self.conn.send_bytes(answer)

    def serve(self) -> None:
        conn, main_pid, handle = self.conn, self.spec.main_pid, self.host.handle
        poller = Poller([conn.fileno()], self.spec.spin_seconds)
        while True:
            if self.wake is not None:
                seq = self.wake.wait(poller, lambda: _alive(main_pid))
                if seq < 0:
                    return  # the main process is gone
                if seq > 0:
                    self.step_in_shared_memory(seq)
                    continue
            else:
                while not poller.wait(1.0):  # watchdog: exit if the main process is gone
                    if not _alive(main_pid):
                        return
            cmd, seq, data = conn.recv()
            if cmd == Cmd.CLOSE:
                self.close(seq)
                return
            try:  # (an unpicklable result, a get_attr of a lock, say, is an error)
                result = self.attach(*data) if cmd == Cmd.ATTACH else handle(cmd, data)
                answer = self.sender.dumps((seq, OK, result))
            except Exception as exc:  # (not a dead worker)
                answer = self.sender.dumps((seq, ERROR, failure_of(exc, dumps)))
            conn.send_bytes(answer)
