"""The worker process: hosts a slice of envs and answers small batched messages.

Protocol (one message per worker per call, pickled by ``Connection``): the parent sends
``(cmd, seq, data)``; the worker answers ``(seq, "ok", payload)`` or
``(seq, "error", (exc_type, exception or None, traceback text))``. ``seq`` lets the parent
drop a late answer to a call it gave up on, so no stale data is ever returned.

Both directions pickle with multiprocessing's pickler and fall back to cloudpickle (the
pickler that carried the env constructors) for what plain pickle cannot carry: classes and
functions of the user's ``__main__`` (a space, an info value, a call result), which exist
in a worker only by value. The fallback is sticky per connection end, so a stream that
needs it does not fail plain pickle on every step, and one that does not never pays for it.
"""

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
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

__all__ = ["Sender", "dumps", "worker_main"]

PR_SET_PDEATHSIG = 1
# Seconds to busy-poll (yielding the CPU) for the next message before blocking. Waking a
# blocked process costs ~25-100 us on a VM; a CartPole step costs ~9 us. See spin_wait.
SPIN_SECONDS = 200e-6


class Poller:
    """A cheap readiness check for one connection (``Connection.poll`` builds a selector
    per call: ~10 us; ``select.poll`` registered once: ~1 us)."""

    def __init__(self, conn: Any, spin_seconds: float = SPIN_SECONDS) -> None:
        self.spin_seconds = spin_seconds
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)

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


def dumps(obj: Any, by_value: bool = False) -> Any:
    """Pickle ``obj`` for a connection: multiprocessing's pickler, or cloudpickle if that
    fails (or ``by_value``). Both are read back by ``Connection.recv`` (pickle.loads)."""
    if not by_value:
        try:
            return ForkingPickler.dumps(obj)
        except Exception:
            pass
    import cloudpickle

    return cloudpickle.dumps(obj)


class Sender:
    """Sends messages on one connection with :func:`dumps`.

    A worker's sender (``by_value=False``) tries plain pickle first and remembers a message
    that needed cloudpickle (a class of ``__main__`` that exists in the worker only by
    value), using cloudpickle directly from then on. The parent's sender starts with
    ``by_value=True``: an object of the parent's ``__main__`` pickles fine by reference
    there but cannot be found in a worker, so only the hot path (a step's ndarray of
    actions) asks for plain pickle with ``plain=True``.
    """

    def __init__(self, conn: Any, by_value: bool = False) -> None:
        self.conn = conn
        self.by_value = by_value

    def dumps(self, obj: Any, plain: bool = False) -> Any:
        if plain or not self.by_value:
            try:
                return ForkingPickler.dumps(obj)
            except Exception:
                if not plain:
                    self.by_value = True
        return dumps(obj, by_value=True)

    def send(self, obj: Any, plain: bool = False) -> None:
        self.conn.send_bytes(self.dumps(obj, plain))


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (prctl PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # pragma: no cover - non-Linux: the ppid watchdog below still works
        pass


def _error_payload(exc: BaseException) -> tuple[str, Any, str]:
    tb = traceback.format_exc()
    try:
        pickle.loads(dumps(exc))  # some pickle but cannot be rebuilt (__init__ args)
        picklable: Any = exc
    except Exception:
        picklable = None
    return f"{type(exc).__module__}.{type(exc).__qualname__}", picklable, tb


def worker_main(
    conn: Any,
    env_fns: Any,
    start: int,
    mode: str,
    shared: bool,
    main_pid: int,
    close_fds: list[Any] | None = None,
    spin_seconds: float = SPIN_SECONDS,
) -> None:
    """Entry point of a worker process."""
    _die_with_parent()
    with contextlib.suppress(OSError):  # a process group of its own: the parent ends the
        os.setpgid(0, 0)  # env's helper processes with the worker (timeout, terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for c in close_fds or ():  # fork: drop inherited parent ends of other workers' pipes
        try:
            c.close()
        except OSError:
            pass
    if os.getppid() != main_pid and not _alive(main_pid):
        return
    try:
        if isinstance(env_fns, bytes):
            import cloudpickle

            env_fns = cloudpickle.loads(env_fns)
        envs = [fn() for fn in env_fns]
        info = [
            (
                e.observation_space,
                e.action_space,
                dict(e.metadata),
                e.render_mode,
                getattr(e.spec, "id", None),
            )
            for e in envs
        ]
    except BaseException as exc:
        conn.send_bytes(dumps((0, "error", _error_payload(exc))))
        return
    sender = Sender(conn)
    try:
        sender.send((0, "ok", info))
        _serve(sender, envs, start, mode, shared, main_pid, spin_seconds)
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


def _serve(
    sender: Sender, envs: list, start: int, mode: str, shared: bool, main_pid: int, spin: float
) -> None:
    from multiprocessing.reduction import recv_handle

    from .runner import EnvRunner
    from .shared import SharedBuffers

    conn = sender.conn
    runner = EnvRunner(envs, mode)
    poller = Poller(conn, spin)
    n = len(envs)
    stop = start + n
    buffers: SharedBuffers | None = None
    write = None
    lost: dict[int, Any] = {}  # envs of a rebuilt worker whose lost episode is yet to end
    while True:
        if not poller.spin():
            while not poller.ready(1000):  # watchdog: exit if the main process is gone
                if not _alive(main_pid):
                    return
        cmd, seq, data = conn.recv()
        try:
            if cmd == "step":
                calls = runner.step(data) if not lost else _step_lost(runner, data, lost)
                payload = _results(runner, buffers, write, start, stop, shared, calls, None)
            elif cmd == "reset":
                seeds, options, mask = data
                if mask is None:
                    lost.clear()
                else:
                    for j in np.flatnonzero(mask).tolist():
                        lost.pop(j, None)
                calls = runner.reset(seeds, options, mask)
                payload = _results(runner, buffers, write, start, stop, shared, calls, mask)
            elif cmd == "restarted":
                # this worker replaces one that failed during a step: each env ends its lost
                # episode now (truncated, at the last observation the caller saw), or, if
                # that step was its next_step autoreset, is reset
                last_obs, done = data
                due = [i for i in range(n) if done[i] and mode == "next_step"]
                for i in range(n):
                    if i in due:
                        runner.autoreset[i] = True
                    else:
                        lost[i] = last_obs[i]
                calls = _step_lost(runner, [None] * n, lost)
                calls += [(i, {"restarted": True}) for i in due]
                payload = _results(runner, buffers, write, start, stop, shared, calls, None)
            elif cmd == "restart-reset":
                # it replaces one that failed during a reset: the reset is redone (same seeds
                # and options); with a reset_mask, the unmasked envs keep the observation
                # the caller saw and end their lost episode (truncated) at their next step
                seeds, options, mask, last_obs, done = data
                calls = runner.reset(seeds, options, mask)
                lost.clear()
                for i in range(n):
                    if mask is not None and not mask[i]:
                        runner.obs[i] = last_obs[i]
                        if done[i] and mode == "next_step":
                            runner.autoreset[i] = True  # its next step is the autoreset
                        elif not (done[i] and mode == "disabled"):  # (that one awaits a reset)
                            lost[i] = last_obs[i]
                    else:
                        calls.append((i, {"restarted": True}))
                payload = _results(runner, buffers, write, start, stop, shared, calls, None)
            elif cmd == "attach":
                fd = recv_handle(conn)
                buffers = SharedBuffers(data, fd)
                write = buffers.writer() if (shared and buffers.obs is not None) else None
                payload = None
            elif cmd == "call":
                name, args, kwargs, local = data
                payload = []
                for i in local:
                    attr = envs[i].get_wrapper_attr(name)
                    payload.append(
                        attr(*args, **kwargs) if args is not None and callable(attr) else attr
                    )
            elif cmd == "set_attr":
                name, values, local = data
                for i, v in zip(local, values):
                    envs[i].set_wrapper_attr(name, v)
                payload = None
            elif cmd == "close":
                if buffers is not None:
                    buffers.close()
                for e in envs:  # before answering, so the parent's close budget covers it
                    with contextlib.suppress(Exception):
                        e.close()
                envs.clear()  # worker_main's finally has nothing left to close
                sender.send((seq, "ok", None))
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
            answer = sender.dumps((seq, "ok", payload))  # an unpicklable result
        except Exception as exc:  # (get_attr of a lock, say) is an error, not a dead worker
            sender.send((seq, "error", _error_payload(exc)))
            continue
        conn.send_bytes(answer)


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


def _step_lost(runner: Any, actions: Any, lost: dict[int, Any]) -> list:
    """``runner.step`` with the ``lost`` envs ending their lost episode instead of stepping
    (every autoreset mode's bookkeeping is then the runner's own); empties ``lost``."""
    real = runner.envs
    runner.envs = [_LostEnv(e, lost[i]) if i in lost else e for i, e in enumerate(real)]
    try:
        calls = runner.step(actions)
    finally:
        runner.envs = real
    calls += [(i, {"restarted": True}) for i in sorted(lost)]  # also top level in same_step
    lost.clear()
    return calls


def _results(
    runner: Any,
    buffers: Any,
    write: Any,
    start: int,
    stop: int,
    shared: bool,
    calls: list,
    mask: Any,
) -> Any:
    b = buffers
    b.rewards[start:stop] = runner.rewards
    b.terminations[start:stop] = runner.terminations
    b.truncations[start:stop] = runner.truncations
    if write is not None:
        for i, o in enumerate(runner.obs):
            if mask is None or mask[i]:
                write(start + i, o)
        return calls
    obs = [o if (mask is None or mask[i]) else None for i, o in enumerate(runner.obs)]
    return calls, obs


if __name__ == "__main__":  # pragma: no cover
    sys.exit("envfactory.vectorizers.worker is started by the subproc vectorizer")
