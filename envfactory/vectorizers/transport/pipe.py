"""``subproc``'s worker handle: a non-blocking pipe, a control slot and two eventfds (`board`).
A Ctrl-C goes through only in the wait for an answer to begin, which `recv` repeats (an
answer read whole stays here; ``unsent``: what is left of a message to write)."""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import signal
import time
from typing import Any

import numpy as np

from ...errors import RemoteEnvError, WorkerDiedError
from ..worker.protocol import ERROR, HEADER, LONG, Cmd, Sender
from .board import (
    DONE,
    MSG,
    NO_INFOS,
    SCHEMAS,
    SLEEP_SLICE_MS,
    Poller,
    fence,
    make_eventfd,
)
from .ctrl_c import HOLD
from .handle import WorkerHandle
from .infocols import IN_COLUMNS, InfoColumns, Schema, relearn

__all__ = ["PipeHandle"]

_POLL_OUT = select.POLLOUT | select.POLLHUP | select.POLLERR
_SLICE = SLEEP_SLICE_MS / 1000


class PipeHandle(WorkerHandle):
    """A step its `Board` posts goes through the control slot, anything else is one pickled
    message; each gets a new ``seq`` (`sent`), a late answer is dropped."""

    resumable = True
    own_wait = True
    pid: int | None = None  # (`WorkerHandle.pid`: its process's, set by `connect`)

    def __init__(
        self, index: int, start: int, stop: int, env_id: str, payload: Any, spin_us: int
    ) -> None:
        super().__init__(index, start, stop, env_id)
        self.payload = payload  # its env constructors, as sent to the process
        self.spin_us = spin_us
        self.process: Any = None
        self.conn: Any = None
        self.sender: Any = None
        self.poller: Poller | None = None
        self.killed_group: int | None = None
        self.seq = self.sent = 0  # the answer recv waits for; the last message's number
        #: seconds a message may take to be written (the vectorizer's ``timeout``)
        self.write_timeout: float | None = None
        self.slot: Any = None  # its control slot in the shared region (see .board)
        self.board: Any = None  # the board that posts its steps (and waits for them)
        self.go = self.done = -1  # eventfds: wakes the worker / wakes the parent
        self.columns: InfoColumns | None = None  # the region's info columns (see .infocols)
        self._learn_at = -1  # the seq of a slot step whose infos come by pipe
        self._fd = -1
        self._reset_stream()

    def _reset_stream(self) -> None:  # (a new process: no message, no schema yet)
        self.via_slot = False  # the pending step went through the control slot
        self.schema: Schema | None = None  # the worker's info schema, as learnt here
        self.schemas = 0  # how many it had (the worker counts them too: a check)
        self.unsent = memoryview(b"")  # what is left of a message taken: written first
        self._write_failed = ""  # why the last message could not be written
        self._rmsg: bytearray | None = None  # a whole message, not yet decoded
        self._deadline: float | None = None  # the wait's, for the rest of a message
        self.answer: tuple[int, Any] | None = None  # (seq, answer) kept for recv

    # -- process ----------------------------------------------------------------------
    def connect(self, process: Any, conn: Any, by_value: bool) -> None:
        """A started worker process and its pipe (its first answer, seq 0: the EnvInfos)."""
        self.process, self.pid, self.conn, self.seq = process, process.pid, conn, 0
        self._fd = conn.fileno()
        os.set_blocking(self._fd, False)
        self.poller = Poller([self._fd], self.spin_us * 1e-6)
        self.sender = Sender(conn, by_value=by_value)
        self._reset_stream()

    def attach(self, buffers: Any, send_handle: Any) -> None:
        """Hand the worker the shared region and its eventfds (``send_handle``: by SCM_RIGHTS)."""
        if self.go < 0:  # kept over restarts; closed with the env
            self.go, self.done = make_eventfd(), make_eventfd()
            self.slot = buffers.control[self.index]
        self.columns = buffers.infos
        self.send(Cmd.ATTACH, (buffers.layout, self.index))
        for fd in (buffers.fd, self.go, self.done):
            send_handle(self.conn, fd, self.process.pid)

    @property
    def exitcode(self) -> int | None:
        return self.process.exitcode if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.conn is not None and self.process is not None and self.process.is_alive()

    def fileno(self) -> int:
        return int(self.conn.fileno())

    def kill(self) -> None:
        """Kill the worker and its process group (the env's helper processes)."""
        if self.pid is not None and self.pid != self.killed_group:
            self.killed_group = self.pid
            with contextlib.suppress(OSError):  # no such group: it was never made, or is gone
                os.killpg(self.pid, signal.SIGKILL)
        p = self.process
        if p is not None and p.pid is not None:
            if p.is_alive():
                p.kill()
            p.join(5.0)

    def join(self, timeout: float) -> None:
        if self.process is not None:
            self.process.join(timeout)

    def close(self) -> None:
        if self.process is not None:  # its sentinel fds now, not when this object is collected
            with contextlib.suppress(ValueError):  # (unkillable: D state)
                self.process.close()
        self.forget()

    def forget(self) -> None:
        """Drop this process's copies of the pipe and eventfds (also in a forked child)."""
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
    def send(self, cmd: Cmd, data: Any) -> None:
        if self.unsent:  # (the rest of a message a Ctrl-C cut: it goes first)
            if cmd == Cmd.CLOSE:
                raise OSError("a message is still being written")  # close kills it instead
            self.flush()
        seq = self.sent + 1
        wire = cmd.value if isinstance(cmd, Cmd) else cmd  # a plain string on the pipe
        # (the hot paths: no cloudpickle)
        plain = type(data) is np.ndarray or (cmd == Cmd.STEP_ENVS and type(data[1]) is np.ndarray)
        # (an answer kept for an older seq stays: the async pool may ask for it again)
        self.unsent = self.sender.frame((wire, seq, data), plain)  # (taken: see `unsent`)
        self.sent, self.seq, self.via_slot = seq, seq, False
        self.flush()

    def flush(self) -> None:
        """Write ``unsent``; a worker that does not read it within ``write_timeout`` (or, with
        none, by a held Ctrl-C) is killed (`recv` says so)."""
        fd, poll, t = self._fd, None, self.write_timeout
        deadline = None if t is None else time.monotonic() + t
        while self.unsent:
            try:
                self.unsent = self.unsent[os.write(fd, self.unsent) :]
                continue
            except BlockingIOError:
                pass
            except OSError:  # the worker is gone: recv says how it ended
                self.unsent = memoryview(b"")
                return
            if poll is None:
                poll = select.poll()
                poll.register(fd, _POLL_OUT)
            left = math.inf if deadline is None else deadline - time.monotonic()
            ms = max(0, math.ceil(min(left, _SLICE) * 1000))
            if not HOLD.waiting(poll.poll, ms) and (HOLD.pending is not None or left <= _SLICE):
                size, self.unsent = len(self.unsent), memoryview(b"")
                self._write_failed = f"did not read a {size}-byte message it was sent"
                self.kill()
                return

    def has_answer(self, seq: int) -> bool:
        """Whether `recv` of step ``seq`` (the last one asked) would not wait."""
        answer = self.answer
        if answer is not None and answer[0] == seq:
            return True
        slot = self.slot
        return bool(self.via_slot and seq == self.sent and slot is not None and
                    slot[DONE] == seq and not slot[MSG])  # fmt: skip

    def recv(self, deadline: float | None, call: str) -> Any:
        self._deadline = deadline  # (an answer kept: asked again after an interrupt, `_recv`)
        if self.unsent:
            self.flush()
        if self._write_failed:
            raise TimeoutError(self._write_failed)
        if self.via_slot:
            self.answer = (self.seq, self._await_step(deadline, call))
            self.via_slot = False
        return self._recv(deadline, call)

    def _recv(self, deadline: float | None, call: str) -> Any:
        """The answer ``seq`` (kept, or by pipe); TimeoutError past ``deadline``."""
        while True:
            answer = self.answer
            if answer is not None and answer[0] == self.seq:
                return answer[1]
            while self._rmsg is None:  # (one read whole, not yet decoded, is kept)
                left = None if deadline in (None, math.inf) else deadline - time.monotonic()
                if not HOLD.waiting(self.poller.wait, left):  # type: ignore[union-attr]
                    raise TimeoutError  # (the wait above: the one place a Ctrl-C goes through)
                self._read_some(call)
            self._take(call)

    def _read_some(self, call: str) -> bool:
        """Read one whole message into ``_rmsg`` (True: none has begun); a begun one is read
        to its end with Ctrl-C held (TimeoutError past the deadline; a held Ctrl-C and 0.2 s
        with nothing read: the worker stopped mid-answer, killed)."""
        head = self._read(4, call, first=True)
        if head is None:
            return True
        size = HEADER.unpack(head)[0]  # (-1: a long header, 8 more bytes)
        self._rmsg = self._read(LONG.unpack(self._read(8, call))[0] if size == -1 else size, call)
        return False

    def _read(self, n: int, call: str, first: bool = False) -> Any:
        buf = bytearray(n)  # (``first``: None if nothing is there)
        view, got = memoryview(buf), 0
        while got < n:
            try:
                k = os.readv(self._fd, [view[got:]])
            except BlockingIOError:
                if first and not got:
                    return None
                t = math.inf if self._deadline is None else self._deadline - time.monotonic()
                if self.poller.wait(min(t, _SLICE), False):  # type: ignore[union-attr]
                    continue
                if t <= _SLICE:
                    raise TimeoutError from None
                if HOLD.pending is not None:  # a held Ctrl-C and nothing read: as `flush`
                    self.kill()
                    raise self.error(WorkerDiedError, "stopped mid-answer (killed)", call) from None
                continue
            except OSError:  # (gone: as end of file)
                k = 0
            if k == 0:
                self.join(2.0)
                raise self.error(WorkerDiedError, "died", call) from None
            got += k
        return buf

    def _take(self, call: str) -> None:
        """Decode the message read: this seq's answer is kept (an env's error raised)."""
        try:
            seq, status, payload = HOLD.decoding(pickle.loads, self._rmsg)  # (kept until decoded)
        except Exception as bad:  # a whole answer arrived but cannot be unpickled here
            err = self.error(
                RemoteEnvError,
                f"sent an answer this process cannot unpickle ({type(bad).__name__}: {bad})",
                call,
            )
            self._rmsg = None
            raise err from bad
        if seq == self.seq:
            if status == ERROR:
                err = self.remote_error(call, payload)
                self._rmsg = None
                raise err
            if seq == self._learn_at and payload[1] is None and payload[0]:  # the worker's rule
                relearn(self, payload[0], self.stop - self.start)
                self._learn_at = -1
            self.answer = (seq, payload)
        self._rmsg = None

    def _await_step(self, deadline: float | None, call: str) -> Any:
        """Wait on the board for the step ``seq`` posted there."""
        slot, seq = self.slot, self.seq
        while slot[DONE] != seq:  # (the async pool asks once it is done: no wait then)
            left = None if deadline in (None, math.inf) else deadline - time.monotonic()
            if not self.board.ready([self], None if left is None else max(left, 0.0), True):
                raise TimeoutError
            # nothing of this step comes by pipe before ``done``: a hang-up (raises
            # WorkerDiedError), a late answer (dropped) or this step's error (raised)
            while slot[DONE] != seq:
                if self._rmsg is None and self._read_some(call):
                    break  # (nothing, or the rest of a message is on its way)
                self._take(call)
        fence()  # its results were written before ``done``
        msg = int(slot[MSG])
        if msg == IN_COLUMNS:
            assert self.columns is not None and self.schema is not None
            if slot[SCHEMAS] != self.schemas:  # (an invariant: never seen)
                raise self.error(
                    RemoteEnvError,
                    f"is at info schema {int(slot[SCHEMAS])}, this process at "
                    f"{self.schemas} (an envfactory bug: please report it)",
                    call,
                )
            return self.columns.read(self.schema, self.start, self.stop - self.start), None
        if msg:
            self.via_slot, self._learn_at = False, self.seq  # a retry reads the pipe
            return self._recv(deadline, call)
        return NO_INFOS
