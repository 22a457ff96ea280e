"""Starting processes: workers (the launcher thread, the fork server, the descriptor check,
the hooks) and the plan's probe (one env's step timed in a throwaway process)."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing as mp
import os
import pickle
import queue
import signal
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ... import _compat
from ...errors import UnpicklableEnvError
from ..transport.handle import env_label

__all__ = [
    "check_descriptors",
    "context_of",
    "payload",
    "prestart",
    "start_process",
    "step_seconds",
]

#: file descriptors each worker holds in this process (measured: 5.25 at 8 workers, 5.5 at 4)
FDS_PER_WORKER, FDS_SHARED = 5, 3


def check_descriptors(workers: int) -> None:
    """Raise ``OSError(EMFILE)`` before a start whose workers cannot all have their descriptors."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        open_now = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError, ValueError):  # (no /proc or no resource module)
        return
    if soft != resource.RLIM_INFINITY and FDS_PER_WORKER * workers + FDS_SHARED > soft - open_now:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


# A child the user's program forks must not terminate the parent's workers at its exit (it
# inherits multiprocessing's list of children).
_started: weakref.WeakSet = weakref.WeakSet()


def _after_fork_in_child() -> None:
    global _launcher_lock
    _launcher_lock = threading.Lock()  # another thread may have held it at the fork
    _compat.forget_children(list(_started))
    _started.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


# Workers are started from one daemon thread that lives as long as the process: PDEATHSIG
# fires when the *thread* that started a worker ends, and a vec env may be built in any thread.
_launcher: tuple[int, queue.SimpleQueue] | None = None
_launcher_lock = threading.Lock()


def _serve_launches(jobs: queue.SimpleQueue) -> None:
    while True:  # (SIGINT blocked here by _servers_up)
        fn, box, done = jobs.get()
        try:
            fn()
        except BaseException as exc:  # handed to the thread that asked
            box["error"] = exc
        finally:
            done.set()


def _launcher_queue() -> queue.SimpleQueue:
    global _launcher
    with _launcher_lock:
        if _launcher is None or _launcher[0] != os.getpid():
            jobs: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(
                target=_serve_launches, args=(jobs,), name="envfactory-launcher", daemon=True
            ).start()
            _launcher = (os.getpid(), jobs)
        return _launcher[1]


def _servers_up(method: str | None) -> None:
    """Start the resource tracker and fork server from this thread with SIGINT blocked for good."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if method == "forkserver":
        _compat.ensure_forkserver()


def _start(proc: Any) -> None:
    # a daemonic process (some Hydra launchers) may start ours: they die with their parent
    _servers_up(getattr(proc, "_start_method", None))
    with _compat.without_main(), _compat.non_daemonic():
        proc.start()
    _started.add(proc)


#: what every worker imports: the fork server preloads it (see SubprocGroup.start)
WORKER_PRELOAD = ("envfactory.vectorizers.worker.worker", "gymnasium", "envfactory.factory")
_fork_hook: list[bool] = [False]


def _forkserver(modules: Sequence[str] = ()) -> Any:
    """The forkserver context, `WORKER_PRELOAD` and ``modules`` added to its preload; from now
    on a forked child forgets the parent's forkserver."""
    ctx = mp.get_context("forkserver")
    _compat.forkserver_preload(ctx, [*WORKER_PRELOAD, *modules])
    if not _fork_hook[0]:
        os.register_at_fork(after_in_child=_compat.forget_inherited_forkserver)
        _fork_hook[0] = True
    return ctx


def prestart(options: Mapping[str, str], modules: Sequence[str]) -> None:
    """``subproc``'s `VectorizerPlugin.prestart`: boots the fork server in the background while
    the config composes (nothing if one runs)."""
    if options.get("context", "forkserver") == "forkserver":
        _forkserver(modules)
        _launcher_queue().put((lambda: _servers_up("forkserver"), {}, threading.Event()))


def start_process(proc: Any) -> None:
    """``proc.start()`` from the launcher thread, without re-running ``__main__``."""
    box: dict[str, Any] = {}
    done = threading.Event()
    _launcher_queue().put((lambda: _start(proc), box, done))
    try:
        done.wait()
    except BaseException:  # Ctrl-C: the start is under way; let it finish, so that the
        done.wait()  # caller, which recorded ``proc``, can end it
        raise
    if "error" in box:
        raise box["error"]


def context_of(method: str) -> Any:
    """The multiprocessing context of ``method`` (forkserver: `WORKER_PRELOAD` added)."""
    return _forkserver() if method == "forkserver" else mp.get_context(method)


def payload(method: str, fns: list, start: int) -> Any:
    """Env constructors as a worker of ``method`` receives them (cloudpickled unless ``fork``)."""
    if method == "fork":
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
                    f"env {start + i} ({env_label(fn)!r}) cannot be sent to a worker process "
                    f"with context={method!r}: {type(inner).__name__}: {inner}. Make "
                    "the env constructor picklable (a module-level function or class, no "
                    "open files/locks/lambdas over unpicklable objects), or use "
                    "vectorizer.context=fork"
                ) from inner
        raise UnpicklableEnvError(f"env constructors cannot be pickled: {exc}") from exc


#: the probe's steps: at most this many, and no more once they took this long in all
PROBE_STEPS, PROBE_SECONDS = 30, 0.2
#: the longest the parent waits for the probe (build included) before it gives up on it
PROBE_TIMEOUT = 2.0


def step_seconds(ctx: Any, payload: Any, start: Any) -> float | None:
    """The median step time of ``payload``'s first env in a new process (None: it failed)."""
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_probe_main, args=(child_conn, payload), name="envfactory-probe", daemon=True
    )
    try:
        start(proc)
        child_conn.close()
        if not parent_conn.poll(PROBE_TIMEOUT):
            return None
        return parent_conn.recv()  # (the median, or None: see _probe_main)
    except (EOFError, OSError):
        return None
    finally:
        parent_conn.close()
        if proc.pid is not None:
            proc.join(1.0)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _probe_main(conn: Any, payload: Any) -> None:
    """The probe process: build the env, time up to `PROBE_STEPS` steps, send the median."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides (as a worker)
    answer: float | None = None  # (None: the env failed)
    with contextlib.suppress(Exception):
        if isinstance(payload, bytes):  # (cloudpickle's loads is pickle's)
            payload = pickle.loads(payload)
        env = payload[0]()
        try:
            env.reset(seed=0)
            env.action_space.seed(0)
            times: list[float] = []
            while len(times) < PROBE_STEPS and sum(times) < PROBE_SECONDS:
                action = env.action_space.sample()
                t0 = time.perf_counter()
                _, _, terminated, truncated, _ = env.step(action)
                times.append(time.perf_counter() - t0)
                if terminated or truncated:
                    env.reset()
            answer = sorted(times)[len(times) // 2]
        finally:
            with contextlib.suppress(Exception):
                env.close()
    with contextlib.suppress(OSError):
        conn.send(answer)
        conn.close()
