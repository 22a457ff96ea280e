"""The worker process: hosts a slice of envs and answers small batched messages (the
messages are in :mod:`.protocol`)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import pickle
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from .protocol import ERROR, OK, Attach, Cmd, EnvInfo, Failure, Sender, WorkerSpec, dumps
from .runner import COMMANDS, EnvHost
from .shared import ResultWriter, SharedBuffers
from .wakeup import (
    CMD,
    DONE,
    MSG,
    PARENT_SLEEPING,
    SLEEP_SLICE_MS,
    WORKER_SLEEPING,
    Poller,
    Waiter,
    fence,
    flagged_sleep,
    signal_eventfd,
)

__all__ = ["worker_main"]

PR_SET_PDEATHSIG = 1
_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (prctl PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # pragma: no cover - non-Linux: the ppid watchdog below still works
        pass


def _failure(exc: BaseException) -> Failure:
    tb = traceback.format_exc()
    try:
        pickle.loads(dumps(exc))  # some pickle but cannot be rebuilt (__init__ args)
        picklable: BaseException | None = exc
    except Exception:
        picklable = None
    return Failure(f"{type(exc).__module__}.{type(exc).__qualname__}", picklable, tb)


def worker_main(conn: Any, spec: WorkerSpec) -> None:
    """Entry point of a worker process: build the envs, report them, serve commands."""
    _die_with_parent()
    with contextlib.suppress(OSError):  # a process group of its own: the parent ends the
        os.setpgid(0, 0)  # env's helper processes with the worker (timeout, terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for c in spec.close_fds or ():  # fork: drop inherited parent ends of other workers' pipes
        try:
            c.close()
        except OSError:
            pass
    if os.getppid() != spec.main_pid and not _alive(spec.main_pid):
        return
    try:
        env_fns = spec.env_fns
        if isinstance(env_fns, bytes):
            import cloudpickle

            env_fns = cloudpickle.loads(env_fns)
        envs = [fn() for fn in env_fns]
        info = [
            EnvInfo(
                e.observation_space,
                e.action_space,
                dict(e.metadata),
                e.render_mode,
                getattr(e.spec, "id", None),
            )
            for e in envs
        ]
    except BaseException as exc:
        conn.send_bytes(dumps((0, ERROR, _failure(exc))))
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
        return True
    return True


class _Worker:
    """The commands a worker process answers: its :class:`~.runner.EnvHost`'s env
    commands plus ``attach`` (map the shared region) and ``close``, one handler each."""

    def __init__(self, sender: Sender, envs: list, spec: WorkerSpec) -> None:
        self.sender, self.conn, self.spec = sender, sender.conn, spec
        self.out = ResultWriter(spec.start)
        self.host = EnvHost(envs, spec.autoreset_mode, self.out)
        self.out.runner = self.host.runner
        self.wake: _Wake | None = None  # after ATTACH: steps through the shared control slot
        self.table: dict[str, Callable[[Any], Any]] = {
            cmd: functools.partial(run, self.host) for cmd, run in COMMANDS.items()
        }
        self.table[Cmd.ATTACH] = self.attach

    def attach(self, att: Attach) -> None:
        from multiprocessing.reduction import recv_handle

        buffers = SharedBuffers(att.layout, recv_handle(self.conn))
        self.out.attach(buffers, self.spec.shared_memory)
        go, done = recv_handle(self.conn), recv_handle(self.conn)
        self.wake = _Wake(buffers, att.worker, self.spec, go, done, len(self.host.envs))

    def close(self, seq: int) -> None:
        if self.wake is not None:
            self.wake.close()
        if self.out.buffers is not None:
            self.out.buffers.close()
        self.host.close()  # before answering, so the parent's close budget covers it
        self.sender.send((seq, OK, None))

    def step_in_shared_memory(self, seq: int) -> None:
        """Answer the step ``seq`` asked through the control slot (its answer follows by
        pipe only with infos, pickled observations or an error)."""
        wake = self.wake
        assert wake is not None
        try:
            result = self.host.step(wake.actions())
            answer = None
            if result[0] or result[1] is not None:  # infos or pickled observations
                answer = self.sender.dumps((seq, OK, result))
        except Exception as exc:
            answer = self.sender.dumps((seq, ERROR, _failure(exc)))
        wake.finish(seq, answer is not None)
        if answer is not None:
            self.conn.send_bytes(answer)

    def serve(self) -> None:
        conn, main_pid, table = self.conn, self.spec.main_pid, self.table
        poller = Poller([conn.fileno()], self.spec.spin_seconds)
        while True:
            if self.wake is not None:
                seq = self.wake.wait(poller, main_pid)
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
            try:
                try:
                    run = table[cmd]
                except KeyError:
                    raise ValueError(f"unknown command {cmd!r}") from None
                answer = self.sender.dumps((seq, OK, run(data)))  # an unpicklable result
            except Exception as exc:  # (get_attr of a lock, say) is an error, not a dead worker
                self.sender.send((seq, ERROR, _failure(exc)))
                continue
            conn.send_bytes(answer)


class _Wake:
    """The worker's side of :mod:`.wakeup`: waits for a step (or a pipe message) and
    reports a finished one."""

    def __init__(self, buffers: Any, worker: int, spec: WorkerSpec, go: int, done: int, n: int):
        self.slot = buffers.control[worker]
        self.go, self.done = go, done
        self.waiter = Waiter(spec.spin_seconds)
        self.last = int(self.slot[CMD])  # steps asked for before this worker existed
        self.buffers, self.start, self.stop = buffers, spec.start, spec.start + n
        self.sleep_poll: Any = None

    def actions(self) -> Any:
        return self.buffers.actions[self.start : self.stop].copy()

    def wait(self, poller: Poller, main_pid: int) -> int:
        """The seq of the next shared-memory step (> 0), 0 if a pipe message is ready, or
        -1 if the main process is gone. A step asked for before a pipe message goes first
        (the parent sends a message only once the steps it asked for are answered, except
        ``close`` with a step pending)."""
        slot, last, pipe = self.slot, self.last, poller.ready
        t0 = time.perf_counter()

        def ready() -> bool:
            return bool(slot[CMD] != last or pipe(0))

        if not ready() and not self.waiter.wait(ready, t0):
            if self.sleep_poll is None:
                self.sleep_poll = select.poll()
                self.sleep_poll.register(self.go, select.POLLIN)
                self.sleep_poll.register(poller.fds[0], _POLL_IN)
            while True:
                events = flagged_sleep(
                    slot, WORKER_SLEEPING, ready, self.sleep_poll, self.go, SLEEP_SLICE_MS
                )
                if events is None or ready():
                    break
                if not events and not _alive(main_pid):
                    return -1
        self.waiter.record(time.perf_counter() - t0)
        seq = int(slot[CMD])
        if seq != last:
            fence()  # the actions were written before the seq
            self.last = seq
            return seq
        return 0

    def finish(self, seq: int, message: bool) -> None:
        """Report step ``seq`` done (``message``: its answer follows by pipe)."""
        slot = self.slot
        slot[MSG] = 1 if message else 0
        fence()
        slot[DONE] = seq
        fence()
        if slot[PARENT_SLEEPING]:
            signal_eventfd(self.done)

    def close(self) -> None:
        for fd in (self.go, self.done):
            with contextlib.suppress(OSError):
                os.close(fd)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("envfactory.vectorizers.worker is started by the subproc vectorizer")
