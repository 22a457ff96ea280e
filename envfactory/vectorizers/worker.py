"""The worker process: hosts a slice of envs and answers small batched messages (the
messages are in :mod:`.protocol`)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import sys
import time
import traceback
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from .protocol import (
    ERROR,
    OK,
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
    StepResult,
    WorkerSpec,
    dumps,
)

__all__ = ["Poller", "worker_main"]

PR_SET_PDEATHSIG = 1
# Seconds to busy-poll (yielding the CPU) for the next message before blocking. Waking a
# blocked process costs ~25-100 us on a VM; a CartPole step costs ~9 us. See spin_wait.
SPIN_SECONDS = 200e-6


class Poller:
    """A cheap readiness check for one connection (``Connection.poll`` builds a selector
    per call: ~10 us; ``select.poll`` registered once: ~1 us)."""

    def __init__(self, conn: Any, spin_seconds: float = SPIN_SECONDS) -> None:
        self.spin_seconds = spin_seconds
        self.fd = conn.fileno()
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def ready(self, timeout_ms: int = 0) -> bool:
        return bool(self._poll.poll(timeout_ms))

    def spin(self) -> bool:
        """Busy-poll for up to ``spin_seconds``, with ``sched_yield`` so a spinning process
        never starves a runnable one; True if a message (or EOF) is ready."""
        if self._poll.poll(0):
            return True
        if self.spin_seconds <= 0:
            return False
        end = time.perf_counter() + self.spin_seconds
        while time.perf_counter() < end:
            os.sched_yield()
            if self._poll.poll(0):
                return True
        return False


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
    try:
        sender.send((0, OK, info))
        _serve(sender, envs, spec)
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass
    finally:
        for e in envs:
            try:
                e.close()
            except Exception:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _serve(sender: Sender, envs: list, spec: WorkerSpec) -> None:
    from multiprocessing.reduction import recv_handle

    from .runner import EnvRunner
    from .shared import SharedBuffers

    conn, mode, main_pid = sender.conn, spec.autoreset_mode, spec.main_pid
    runner = EnvRunner(envs, mode)
    poller = Poller(conn, spec.spin_seconds)
    n = len(envs)
    out = _Results(runner, spec.start)
    lost: dict[int, Any] = {}  # envs of a rebuilt worker whose lost episode is yet to end
    payload: Any
    wake: _Wake | None = None  # after ATTACH: steps through the shared control slot
    while True:
        if wake is not None:
            seq = wake.wait(poller, main_pid)
            if seq < 0:
                return  # the main process is gone
            if seq > 0:  # a step through shared memory
                try:
                    actions = wake.actions()
                    calls = runner.step(actions) if not lost else _step_lost(runner, actions, lost)
                    result = out.collect(calls, None)
                    answer = None
                    if result[0] or result[1] is not None:  # infos or pickled observations
                        answer = sender.dumps((seq, OK, result))
                except Exception as exc:
                    answer = sender.dumps((seq, ERROR, _failure(exc)))
                wake.finish(seq, answer is not None)
                if answer is not None:
                    conn.send_bytes(answer)
                continue
        elif not poller.spin():
            while not poller.ready(1000):  # watchdog: exit if the main process is gone
                if not _alive(main_pid):
                    return
        cmd, seq, data = conn.recv()
        try:
            if cmd == Cmd.STEP:
                calls = runner.step(data) if not lost else _step_lost(runner, data, lost)
                payload = out.collect(calls, None)
            elif cmd == Cmd.STEP_ENVS:  # the async pool: step only some of the envs
                local, acts = data
                step_some = _step_lost if lost else _step_some
                calls = step_some(runner, acts, lost, local)
                stepped = np.zeros(n, dtype=np.bool_)
                stepped[local] = True
                payload = out.collect(calls, stepped)
            elif cmd == Cmd.RESET:
                r: Reset = data
                if r.mask is None:
                    lost.clear()
                else:
                    for j in np.flatnonzero(r.mask).tolist():
                        lost.pop(j, None)
                payload = out.collect(runner.reset(r.seeds, r.options, r.mask), r.mask)
            elif cmd == Cmd.RESTARTED:
                # this worker replaces one that failed during a step: each env ends its lost
                # episode now (truncated, at the last observation the caller saw), or, if
                # that step was its next_step autoreset, is reset
                rs: Restarted = data
                due = [i for i in range(n) if rs.done[i] and mode is AutoresetMode.NEXT_STEP]
                for i in range(n):
                    if i in due:
                        runner.autoreset[i] = True
                    else:
                        lost[i] = rs.last_obs[i]
                calls = _step_lost(runner, [None] * n, lost)
                calls += [(i, {"restarted": True}) for i in due]
                payload = out.collect(calls, None)
            elif cmd == Cmd.RESTART_RESET:
                # it replaces one that failed during a reset: the reset is redone (same seeds
                # and options); with a reset_mask, the unmasked envs keep the observation
                # the caller saw and end their lost episode (truncated) at their next step
                rr: RestartReset = data
                mask = rr.reset.mask
                calls = runner.reset(rr.reset.seeds, rr.reset.options, mask)
                lost.clear()
                for i in range(n):
                    if mask is not None and not mask[i]:
                        runner.obs[i] = rr.last_obs[i]
                        if rr.done[i] and mode is AutoresetMode.NEXT_STEP:
                            runner.autoreset[i] = True  # its next step is the autoreset
                        elif not (rr.done[i] and mode is AutoresetMode.DISABLED):  # awaits reset
                            lost[i] = rr.last_obs[i]
                    else:
                        calls.append((i, {"restarted": True}))
                payload = out.collect(calls, None)
            elif cmd == Cmd.ATTACH:
                att: Attach = data
                out.buffers = SharedBuffers(att.layout, recv_handle(conn))
                if spec.shared_memory and out.buffers.obs is not None:
                    out.write = out.buffers.writer()
                if att.worker >= 0:
                    go, done = recv_handle(conn), recv_handle(conn)
                    wake = _Wake(out.buffers, att.worker, spec, go, done, n)
                payload = None
            elif cmd == Cmd.CALL:
                c: Call = data
                payload = []
                for i in c.local:
                    if callable(c.name):  # call(fn): fn(env, *args, **kwargs) in this process
                        payload.append(c.name(envs[i], *c.args, **c.kwargs))
                        continue
                    attr = envs[i].get_wrapper_attr(c.name)
                    payload.append(
                        attr(*c.args, **c.kwargs) if c.args is not None and callable(attr) else attr
                    )
            elif cmd == Cmd.SET_ATTR:
                sa: SetAttr = data
                for i, v in zip(sa.local, sa.values):
                    envs[i].set_wrapper_attr(sa.name, v)
                payload = None
            elif cmd == Cmd.CLOSE:
                if wake is not None:
                    wake.close()
                if out.buffers is not None:
                    out.buffers.close()
                for e in envs:  # before answering, so the parent's close budget covers it
                    with contextlib.suppress(Exception):
                        e.close()
                envs.clear()  # worker_main's finally has nothing left to close
                sender.send((seq, OK, None))
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
            answer = sender.dumps((seq, OK, payload))  # an unpicklable result
        except Exception as exc:  # (get_attr of a lock, say) is an error, not a dead worker
            sender.send((seq, ERROR, _failure(exc)))
            continue
        conn.send_bytes(answer)


class _Wake:
    """The worker's side of :mod:`.wakeup`: waits for a step (or a pipe message) and
    reports a finished one."""

    def __init__(self, buffers: Any, worker: int, spec: WorkerSpec, go: int, done: int, n: int):
        from .wakeup import CMD, Waiter

        self.slot = buffers.control[worker]
        self.go, self.done = go, done
        self.waiter = Waiter(spec.spin_seconds)
        self.last = int(self.slot[CMD])  # steps asked for before this worker existed
        self.buffers, self.start, self.stop = buffers, spec.start, spec.start + n
        self.since = time.perf_counter()

    def actions(self) -> Any:
        return self.buffers.actions[self.start : self.stop].copy()

    def wait(self, poller: Poller, main_pid: int) -> int:
        """The seq of the next shared-memory step (> 0), 0 if a pipe message is ready, or
        -1 if the main process is gone. A step asked for before a pipe message goes first
        (the parent sends a message only once the steps it asked for are answered, except
        ``close`` with a step pending)."""
        from .wakeup import CMD, SLEEP_SLICE_MS, WORKER_SLEEPING, drain_eventfd, fence

        slot, last = self.slot, self.last
        t0 = time.perf_counter()

        def ready() -> bool:
            return bool(slot[CMD] != last or poller.ready(0))

        if not ready() and not self.waiter.wait(ready, t0):
            pl = select.poll()
            pl.register(self.go, select.POLLIN)
            pl.register(poller.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
            while True:
                slot[WORKER_SLEEPING] = 1
                fence()
                if slot[CMD] != last or poller.ready(0):
                    slot[WORKER_SLEEPING] = 0
                    break
                events = pl.poll(SLEEP_SLICE_MS)
                slot[WORKER_SLEEPING] = 0
                drain_eventfd(self.go)
                if slot[CMD] != last or poller.ready(0):
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
        from .wakeup import DONE, MSG, PARENT_SLEEPING, fence, signal_eventfd

        slot = self.slot
        slot[MSG] = 1 if message else 0
        fence()
        slot[DONE] = seq
        fence()
        if slot[PARENT_SLEEPING]:
            signal_eventfd(self.done)

    def close(self) -> None:
        for fd in (self.go, self.done):
            try:
                os.close(fd)
            except OSError:
                pass


class _LostEnv:
    """Stands in for an env of a rebuilt worker for one step: the caller's episode was
    lost with the old worker, so that step reports it truncated at the last observation
    the caller saw (reward 0). ``reset`` is the new env's (same_step resets at once)."""

    def __init__(self, env: Any, obs: Any) -> None:
        self.env, self.obs = env, obs

    def step(self, action: Any) -> tuple:
        return self.obs, 0.0, False, True, {"restarted": True}

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)


def _step_some(runner: Any, actions: Any, lost: dict[int, Any], only: Any) -> list:
    return runner.step(actions, only)


def _step_lost(runner: Any, actions: Any, lost: dict[int, Any], only: Any = None) -> list:
    """``runner.step`` with the ``lost`` envs ending their lost episode instead of stepping
    (every autoreset mode's bookkeeping is then the runner's own); removes the stepped
    envs (all, or those of ``only``) from ``lost``."""
    real = runner.envs
    runner.envs = [_LostEnv(e, lost[i]) if i in lost else e for i, e in enumerate(real)]
    try:
        calls = runner.step(actions, only)
    finally:
        runner.envs = real
    ended = sorted(lost) if only is None else sorted(i for i in only if i in lost)
    calls += [(i, {"restarted": True}) for i in ended]  # also top level in same_step
    for i in ended:
        del lost[i]
    return calls


class _Results:
    """Puts the runner's latest rewards, flags and (shared-memory) observations where the
    parent reads them, and makes the :data:`~.protocol.StepResult` answer."""

    def __init__(self, runner: Any, start: int) -> None:
        self.runner, self.start, self.stop = runner, start, start + len(runner.envs)
        self.buffers: Any = None
        self.write: Any = None  # writes one env's observation into shared memory

    def collect(self, calls: list, mask: Any) -> StepResult:
        runner, b, start, stop = self.runner, self.buffers, self.start, self.stop
        b.rewards[start:stop] = runner.rewards
        b.terminations[start:stop] = runner.terminations
        b.truncations[start:stop] = runner.truncations
        if self.write is not None:
            for i, o in enumerate(runner.obs):
                if mask is None or mask[i]:
                    self.write(start + i, o)
            return calls, None
        return calls, [o if (mask is None or mask[i]) else None for i, o in enumerate(runner.obs)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit("envfactory.vectorizers.worker is started by the subproc vectorizer")
