"""``subproc``'s worker handle: a pipe, a control slot in the shared region and two
eventfds to one worker process (see :mod:`.wakeup` and :mod:`.protocol`)."""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import time
from typing import Any

import numpy as np

from ..errors import RemoteEnvError, WorkerDiedError
from .handle import WorkerHandle
from .protocol import ERROR, Attach, Cmd, Failure, Sender
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
    make_eventfd,
    signal_eventfd,
)

__all__ = ["PipeHandle"]


class PipeHandle(WorkerHandle):
    """The parent's end of one ``subproc`` worker process.

    A step whose actions fit the shared action buffer goes through the worker's control
    slot (no message, no system call while both sides run); its answer follows by pipe
    only with infos, pickled observations or an error. Everything else is one pickled
    message on the pipe, answered in order; :attr:`seq` is the answer :meth:`recv` waits
    for (a late answer to a call given up on is dropped).
    """

    def __init__(
        self, index: int, start: int, stop: int, env_id: str, payload: Any, spin_us: int
    ) -> None:
        super().__init__(index, start, stop, env_id)
        self.payload = payload  # its env constructors, as sent to the process
        self.spin_us = spin_us
        self.process: Any = None
        self._pid: int | None = None
        self.conn: Any = None
        self.sender: Any = None
        self.poller: Poller | None = None
        self.killed_group: int | None = None
        self.seq = 0
        self.slot: Any = None  # its control slot in the shared region (see .wakeup)
        self.actions: np.ndarray | None = None  # its rows of the shared action buffer
        self.go = self.done = -1  # eventfds: wakes the worker / wakes the parent
        self.waiter: Waiter | None = None
        self.done_poll: Any = None  # select.poll over ``done`` and the connection
        self.via_slot = False  # the pending step went through the control slot

    # -- process ----------------------------------------------------------------------
    def connect(self, process: Any, conn: Any, by_value: bool) -> None:
        """A started worker process and the parent's end of its pipe."""
        self.process, self._pid, self.conn, self.seq = process, process.pid, conn, 0
        self.poller = Poller([conn.fileno()], self.spin_us * 1e-6)
        self.sender = Sender(conn, by_value=by_value)
        self.via_slot = False

    def attach(self, buffers: Any, send_handle: Any) -> None:
        """Hand the worker the shared region and its eventfds (``send_handle``:
        multiprocessing's SCM_RIGHTS helper); steps go through its control slot then."""
        if self.go < 0:  # kept over restarts; closed with the env
            self.go, self.done = make_eventfd(), make_eventfd()
            self.slot = buffers.control[self.index]
            self.waiter = Waiter(self.spin_us * 1e-6)
        if buffers.actions is not None and isinstance(buffers.actions, np.ndarray):
            self.actions = buffers.actions[self.start : self.stop]
        self.done_poll = select.poll()
        self.done_poll.register(self.done, select.POLLIN)
        self.done_poll.register(self.conn.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        self.send(Cmd.ATTACH, Attach(buffers.layout, self.index))
        for fd in (buffers.fd, self.go, self.done):
            send_handle(self.conn, fd, self.process.pid)

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def exitcode(self) -> int | None:
        return self.process.exitcode if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.conn is not None and self.process is not None and self.process.is_alive()

    def fileno(self) -> int:
        """The pipe's file descriptor (readable when an answer, or EOF, is there)."""
        return int(self.conn.fileno())

    def kill(self) -> None:
        """Kill the worker and its process group (the env's own helper processes: each
        worker leads a group of its own)."""
        if self._pid is not None and self._pid != self.killed_group:
            self.killed_group = self._pid
            with contextlib.suppress(OSError):  # no such group: it was never made, or is gone
                os.killpg(self._pid, signal.SIGKILL)
        p = self.process
        if p is not None and p.pid is not None and p.is_alive():
            p.kill()
        if p is not None and p.pid is not None:
            p.join(5.0)

    def join(self, timeout: float) -> None:
        if self.process is not None:
            self.process.join(timeout)

    def close(self) -> None:
        if self.process is not None:
            try:  # release its sentinel fds now, not when this object is collected
                self.process.close()
                self.process = None
            except ValueError:  # pragma: no cover - unkillable (D state)
                pass
        self.forget()

    def forget(self) -> None:
        """Drop this process's copies of the pipe and eventfds (also in a forked child,
        where the worker is the parent's)."""
        self.process = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        for fd in (self.go, self.done):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.go = self.done = -1

    # -- messages -----------------------------------------------------------------------
    def send(self, cmd: str, data: Any) -> None:
        actions = self.actions
        if (
            cmd == Cmd.STEP
            and actions is not None
            and type(data) is np.ndarray
            and data.dtype == actions.dtype  # else by pipe: the envs get the caller's dtype
            and data.shape == actions.shape
        ):
            self._post(data, actions)
            return
        self.seq += 1
        plain = type(data) is np.ndarray or (  # the hot paths: no cloudpickle
            cmd == Cmd.STEP_ENVS and type(data[1]) is np.ndarray
        )
        message = self.sender.dumps((cmd, self.seq, data), plain)  # nothing sent yet
        with contextlib.suppress(OSError):  # the worker is gone: recv says how it ended
            self.conn.send_bytes(message)

    def _post(self, data: np.ndarray, actions: np.ndarray) -> None:
        """Ask for a step through the control slot (see :mod:`.wakeup`)."""
        actions[:] = data
        self.seq += 1
        self.via_slot = True
        slot = self.slot
        slot[CMD] = self.seq
        fence()  # the seq is visible before the sleeping word is read
        if slot[WORKER_SLEEPING]:
            signal_eventfd(self.go)

    def recv(self, deadline: float | None, call: str) -> Any:
        if self.via_slot:
            self.via_slot = False
            return self._await_step(deadline, call)
        return self._recv(deadline, call)

    def _recv(self, deadline: float | None, call: str) -> Any:
        poller = self.poller
        assert poller is not None
        while True:
            if deadline is None or deadline == math.inf:
                poller.wait(None)
            elif not poller.wait(deadline - time.monotonic()):
                raise TimeoutError
            try:
                seq, status, payload = self.conn.recv()
            except (EOFError, OSError):
                if self.process is not None:
                    self.process.join(2.0)
                raise self.error(WorkerDiedError, "died", call) from None
            except Exception as bad:  # a whole answer arrived but cannot be unpickled here
                raise self.error(
                    RemoteEnvError,
                    f"sent an answer this process cannot unpickle ({type(bad).__name__}: {bad})",
                    call,
                ) from bad
            if seq != self.seq:
                continue  # a late answer to a call that was given up on: drop it
            if status == ERROR:
                failure: Failure = payload
                raise self.remote_error(call, failure)
            return payload

    def _await_step(self, deadline: float | None, call: str) -> Any:
        """Wait for the step ``seq`` asked through the control slot: nap and spin while
        that pays, then sleep on the eventfd and the pipe (a worker that dies wakes this
        at once; see :mod:`.wakeup`)."""
        slot, seq, waiter = self.slot, self.seq, self.waiter
        assert waiter is not None

        def ready() -> bool:
            return bool(slot[DONE] == seq)

        t0 = time.perf_counter()
        if not ready() and not waiter.wait(ready, t0):
            while True:
                if deadline is None:
                    wait_ms = SLEEP_SLICE_MS
                else:
                    wait_ms = math.ceil(max(0.0, deadline - time.monotonic()) * 1000)
                events = flagged_sleep(
                    slot,
                    PARENT_SLEEPING,
                    ready,
                    self.done_poll,
                    self.done,
                    min(wait_ms, SLEEP_SLICE_MS),
                )
                if events is None or ready():
                    break
                for fd, ev in events:
                    if fd != self.done:  # nothing of this step comes by pipe before ``done``
                        self._pipe_before_done(ev, call)
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError
        waiter.record(time.perf_counter() - t0)
        fence()  # its results were written before ``done``
        if slot[MSG]:
            return self._recv(deadline, call)
        return [], None  # a StepResult: no infos, observations in shared memory

    def _pipe_before_done(self, events: int, call: str) -> None:
        """The pipe woke a wait for a step's ``done``: a hang-up (the worker died: _recv
        raises), else a late answer to a call given up on, dropped."""
        if events & ~select.POLLIN:
            self._recv(time.monotonic(), call)
        try:
            seq, status, payload = self.conn.recv()
        except (EOFError, OSError):
            self._recv(time.monotonic(), call)
            raise  # (not reached: _recv raised)
        if seq == self.seq and status == ERROR:
            raise self.remote_error(call, payload)
