"""Options of the subprocess vectorizers: their schemas, how envs are split over workers,
and the start-method fix-ups (forked children; workers that do not re-run ``__main__``)."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Optional

from .. import _compat
from ..config.checks import check_bool, check_choice, check_int
from ..errors import OptionError
from . import remote
from .checks import FaultOptions
from .probe import step_seconds

__all__ = [
    "CLOSE_TIMEOUT",
    "STARTUP_TIMEOUT",
    "START_METHODS",
    "AutoConfig",
    "SubprocAtariConfig",
    "SubprocConfig",
    "check_descriptors",
    "default_in_series",
    "image_split",
    "no_core_for_a_worker",
    "parent_share",
    "split_envs",
    "start_process",
    "step_seconds",
]

START_METHODS = ("fork", "forkserver", "spawn")
STARTUP_TIMEOUT, CLOSE_TIMEOUT = remote.STARTUP_TIMEOUT, remote.CLOSE_TIMEOUT


@dataclass
class SubprocConfig(FaultOptions):
    """Schema of ``vectorizer=subproc``.

    Attributes:
        name: always ``subproc``.
        in_series: envs per worker process (any split of num_envs; the workers get as even
            a share as possible); null = ceil(num_envs / cpu count), one worker per core
            (for a pool, ``batch_size`` set, at most batch_size), or
            ceil((num_envs - in_parent) / (cpu count - 1)) when the parent steps a share
            (a core is left to it); on 8 or more cpus, with no parent share, one worker per
            two cpus when a probe (one env built and stepped in a throwaway process before
            the envs are built) finds a step under 50 us.
        context: start method: ``forkserver`` (default: safe with threads, fast with its
            preloaded imports), ``fork`` or ``spawn``.
        shared_memory: observations through shared memory (Box/Dict/Tuple spaces; other
            spaces are pickled).
        copy: return a copy of the observation batch (false: a view of shared memory that
            the next step overwrites).
        spin_us: the most microseconds a waiting process spins (yielding the CPU) before
            it sleeps; it spins only while recent waits were shorter than this (waking a
            sleeping process costs 25-300 us on a VM, more than a cheap env step). 0:
            never spin (a machine whose cores are all busy). Workers of a vec env whose
            parent steps a share (``in_parent`` > 0) spin at least 1000 us: each step they
            wait while the parent steps its own envs.
        in_parent: envs the parent steps itself while the workers step theirs (the last
            ``in_parent`` envs; 0 .. num_envs - 1). 0 (default): every env in a worker
            process, the isolation ``subproc`` promises (an env that crashes its process is
            a ``WorkerDiedError``, never the end of the caller's program). A value > 0
            trades that isolation for speed for those envs (cheap envs on an idle core: no
            hand-off for them). null = decided once, before any env is built: a worker's
            share (num_envs // cpus) when a core is idle at build time (sampled from
            /proc/loadavg over 10 ms) and ``in_series``, ``timeout`` and ``restart`` are unset
            (an env in the parent can be neither timed out nor restarted), else 0. An env
            never moves between processes once built. The parent's envs' exceptions are
            RemoteEnvErrors naming worker -1 (the parent); ``call``/``get_attr`` on them
            answer in-process, as ``dummy``.
        batch_size: null: a synchronous VecEnv (every step waits for every env). An int in
            [1, num_envs]: an async pool with envpool's calls (``async_reset``, ``send``,
            ``recv`` returning the first batch_size envs that are ready, with
            ``infos["env_id"]``); any value works with any in_series (a multiple of
            in_series is fastest). See the README's async pool section.

    The fault options (``timeout``, ``restart``, ``max_restarts``, ``restart_window``) are
    [`FaultOptions`][envfactory.vectorizers.remote.FaultOptions]'.
    """

    name: str = "subproc"
    in_series: Optional[int] = None  # noqa: UP045
    context: str = "forkserver"
    shared_memory: bool = True
    spin_us: int = 200
    batch_size: Optional[int] = None  # noqa: UP045
    in_parent: Optional[int] = 0  # noqa: UP045

    def __post_init__(self) -> None:
        """The checks envfactory runs at compose time (see `envfactory.config.checks`);
        ``timeout=inf`` becomes None (no timeout)."""
        check_int(self, "in_series", 1, optional=True)
        check_choice(self, "context", START_METHODS)
        check_bool(self, "shared_memory")
        check_int(self, "spin_us", 0)
        check_int(self, "batch_size", 1, optional=True)  # <= num_envs: config.compose
        check_int(self, "in_parent", 0, optional=True)
        super().__post_init__()  # the fault options

    def check_config(self, top: Any) -> None:
        """The cross-field checks against the top level (see
        `envfactory.config.checks`): ``batch_size`` (the async pool) is at most
        ``num_envs`` and excludes a parent share; ``in_parent`` leaves at least one env to
        the workers. ``SubprocAtariConfig`` inherits them."""
        check_split(top.num_envs, self.batch_size, self.in_parent)


def check_split(num_envs: int, batch_size: Any, in_parent: Any, path: str = "") -> None:
    """``batch_size`` (the async pool) and ``in_parent`` against ``num_envs``: the one check
    of both, run by the schema at compose time and by the constructors (``path``
    ``vectorizer``: an `OptionError` names ``vectorizer.<key>`` there too). ``batch_size``
    is null or an integer in [1, num_envs] and excludes a parent share; ``in_parent`` is null
    or an integer in [0, num_envs - 1] (at least one env in a worker)."""
    if batch_size is not None and (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, Integral)
        or not 1 <= int(batch_size) <= num_envs
    ):
        raise OptionError(
            "batch_size",
            batch_size,
            f"an integer in [1, num_envs={num_envs}] or null (null: a synchronous VecEnv)",
            hint=f"Lower vectorizer.batch_size or raise num_envs (now {num_envs})",
            path=path,
        )
    if in_parent is None:
        return
    ok = (
        not isinstance(in_parent, bool)
        and isinstance(in_parent, Integral)
        and 0 <= int(in_parent) < num_envs
    )
    if ok and batch_size is not None and in_parent:
        raise OptionError(
            "in_parent",
            in_parent,
            f"0 or null with vectorizer.batch_size={batch_size} (the async pool steps every env "
            "in a worker)",
            hint="Set vectorizer.in_parent=0 (or null), or vectorizer.batch_size=null",
            path=path,
        )
    if not ok:
        raise OptionError(
            "in_parent",
            in_parent,
            f"an integer in [0, num_envs - 1 = {num_envs - 1}] or null (auto): the "
            "parent steps that many envs itself, and at least one must be in a worker",
            hint=f"Lower vectorizer.in_parent or raise num_envs (now {num_envs}); for "
            "every env in this process, use vectorizer=dummy",
            path=path,
        )


@dataclass
class SubprocAtariConfig(SubprocConfig):
    """Schema of ``vectorizer=subproc-atari``: ``subproc`` for uint8 image observations
    (always shared memory; frames are stacked in the worker and written once), one worker
    per core (with ``in_parent`` null: the parent steps a worker's share while a core is
    idle at build time, as ``subproc``), and a longer spin: a Pong step of 4 envs takes
    ~2 ms, and a 1 ms spin catches the straggling worker and the next command without a
    sleep/wake-up (measured: +10-40% over no spinning at 8 envs on 2 cores)."""

    name: str = "subproc-atari"
    spin_us: int = 1000


@dataclass
class AutoConfig(SubprocConfig):
    """Schema of ``vectorizer=auto``: ``subproc`` that trades isolation for speed, decided
    once, before any env is built, from the cores free then (`others_running`): with a
    core free beside the parent and a worker, the parent steps a worker's share itself
    (``in_parent`` null, as ``subproc``'s option); with none (a busy machine: a worker
    would wait for a core at every step), every env steps in this process, as ``dummy``.
    An env in this process is not isolated (a crash of its simulator ends your program)
    and can be neither timed out nor restarted. Every env stays where it was built.
    Measured on 2 cores, 16 CartPoles: 1.39x ``dummy`` idle (every env in a worker:
    1.11x; docs/bench_cartpole_readme.json); with a busy core 0.99x (every env in a worker:
    0.59x)."""

    name: str = "auto"
    in_parent: Optional[int] = None  # noqa: UP045


def no_core_for_a_worker(load: float | None = None) -> bool:
    """Whether a worker process would wait for a core at every step: fewer than two cores
    are free (``load``: other programs' runnable threads now, `others_running`), one
    for the parent and one for a worker."""
    cpus = os.cpu_count() or 1
    return cpus - (others_running() if load is None else load) < 1.5


def default_in_series(num_envs: int, leave_parent_a_core: bool, load: float | None = None) -> int:
    """Envs per worker: one worker per core, or (``leave_parent_a_core``: the parent steps a
    share of the envs itself) one worker per core but one. With ``load`` (other programs'
    running threads, `others_running`): one worker per core they leave free, when they
    leave some but not all (a synchronous step waits for its slowest worker, and a worker
    sharing a core with a busy program is slow: CartPole 8 envs with one busy core on 2 cores
    made 0.62x ``dummy`` in one worker, 0.54x in two); on an oversubscribed machine still
    one per core (a program's share of the CPUs grows with its process count there: 0.39x
    in two workers, 0.29x in one)."""
    cpus = os.cpu_count() or 1
    workers = max(1, cpus - 1) if leave_parent_a_core else cpus
    if load is not None and not leave_parent_a_core:
        free = cpus - round(load)
        if 0 < free < cpus:
            workers = free
    return math.ceil(num_envs / workers)


def others_running(samples: int = 8, gap: float = 0.001) -> float:
    """How many threads of other programs are running or runnable now: the mean of
    ``/proc/loadavg``'s running count over ``samples`` reads ``gap`` seconds apart (about
    10 ms), less this reader and multiprocessing's helper processes of this program (the
    fork server and the resource tracker: a fork server still booting, numpy's threads
    included, is no load a worker will meet, and counting it put 8 Pongs in one worker
    instead of two: 0.55 s for the first reset against 0.28 s). Unlike the 1-minute load
    average it does not remember processes that have just exited (a previous vec env's
    workers, a benchmark's last variant). Falls back to the 1-minute load average where
    there is no /proc."""
    counts = []
    helpers = _compat.helper_pids()
    try:
        for k in range(samples):
            if k:
                time.sleep(gap)
            with open("/proc/loadavg", encoding="ascii") as f:
                running = int(f.read().split()[3].split("/")[0]) - 1
            counts.append(max(0, running - _running(helpers)))
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except OSError:  # pragma: no cover - no load average on this platform
            return 0.0
    return sum(counts) / len(counts)


def _running(pids: list[int]) -> int:
    """How many threads of ``pids`` are running or runnable (R)."""
    n = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # exited
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            n += stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"R"
    return n


def parent_share(
    num_envs: int,
    in_parent: int | None,
    in_series: int | None,
    timeout: float | None,
    restart: bool,
    images: bool,
    load: float | None = None,
) -> int:
    """How many envs (the last ones) the parent steps itself: ``in_parent``, or (null) as
    many as one worker gets, when nothing asks for what only a worker process gives
    (``timeout``, ``restart``, a fixed ``in_series`` split), ``images`` is False (a
    ``SubprocVecEnv`` built directly for uint8 images keeps every env in a worker;
    ``subproc-atari``'s build function decides its split itself, with this function),
    and a core is idle for the parent to step them on beside its workers (``load``: other
    programs' runnable threads now, `others_running`). On 2 idle cores a parent share
    made CartPole at 16 envs 1.34x dummy against 0.62x without; with a busy core it made
    steps slower, because the parent and the worker must then both get a core at once."""
    if in_parent is not None:
        check_split(num_envs, None, in_parent, "vectorizer")
        return int(in_parent)
    if in_series is not None or timeout is not None or restart or images:
        return 0
    cpus = os.cpu_count() or 1
    if cpus < 2:
        return 0
    if load is None:
        load = others_running()
    share = num_envs // cpus  # as many as each of the cpus - 1 workers
    workers = min(cpus - 1, num_envs - share)
    if share == 0 or load > cpus - 1 - workers + 0.5:  # no core left for the parent
        return 0
    return share


def image_split(
    num_envs: int,
    in_parent: int | None,
    timeout: float | None,
    restart: bool,
    load: float | None = None,
) -> tuple[int, int]:
    """``subproc-atari``'s default split, ``(in_parent, in_series)``: the parent steps a
    worker's share when `parent_share` gives one (a core idle; ``load`` as there)
    and one worker steps the rest, as ``subproc``; otherwise every env is in a worker, one
    worker per core (a synchronous step leaves the parent nothing to do while it waits,
    so it only pays to keep the parent out when it has no core of its own)."""
    share = parent_share(num_envs, in_parent, None, timeout, restart, False, load)
    return share, default_in_series(num_envs - share, leave_parent_a_core=share > 0)


def split_envs(
    num_envs: int,
    in_series: int | None,
    parent_steps: bool = True,
    probe: Callable[[], float | None] | None = None,
    load: float | None = None,
) -> list[tuple[int, int]]:
    """[`split_envs`][envfactory.vectorizers.remote.split_envs], with ``in_series`` null resolved as
    ``subproc``'s default (`default_in_series`): a core left to the parent when it steps a
    share of the envs itself (``parent_steps``), else one worker per core that other programs
    leave free now (a synchronous step leaves the parent nothing to do while it waits: 8 Pongs
    start in 1.16 s in two workers, 1.71 s in one, and 16 CartPoles step 1.15x as fast; 4-8
    CartPoles 0.86-0.93x), or fewer workers for cheap envs on many cores (`cheap_in_series`,
    timed by ``probe``). Decided once, before the envs are built; ``load``: other programs'
    running threads as the build sampled them (None: sampled here if needed)."""
    if in_series is None:
        if parent_steps:
            load = None
        elif load is None:
            load = others_running()
        in_series = default_in_series(num_envs, leave_parent_a_core=parent_steps, load=load)
        if probe is not None and not parent_steps:
            in_series = cheap_in_series(num_envs, in_series, probe)
    return remote.split_envs(num_envs, in_series)


#: on 8 or more cpus, an env whose step takes less than this goes two or more to a worker
CHEAP_STEP_SECONDS = 50e-6


def cheap_in_series(num_envs: int, in_series: int, probe: Callable[[], float | None]) -> int:
    """Envs per worker for ``subproc``'s default on 8 or more cpus: enough for one worker
    per two cpus when ``probe()`` (an env step's seconds, `probe.step_seconds`) is under
    `CHEAP_STEP_SECONDS`, else ``in_series``. The probe runs only where it could change
    the split. Measured on 16 vCPUs (2026-11-27, docs/benchmarks.md): 16 CartPoles (a step
    of ~10 us) made 165k steps/s in 8 workers against 122k in 16, and 32 made 211k in 8
    against 185k in 16; 16 Pongs (~600 us) made 0.77x in 8 workers, so they keep one each."""
    cpus = os.cpu_count() or 1
    fewer = math.ceil(num_envs / max(1, cpus // 2))
    if cpus < 8 or fewer <= in_series:
        return in_series
    seconds = probe()
    return fewer if seconds is not None and seconds < CHEAP_STEP_SECONDS else in_series


#: file descriptors each worker holds in this process (its pipe, its two wake-up eventfds,
#: the process's sentinel and its spare), and those of the shared region (measured:
#: 5.25 a worker at 8 workers, 5.5 at 4, under fork and forkserver)
FDS_PER_WORKER, FDS_SHARED = 5, 3


def check_descriptors(workers: int) -> None:
    """Refuse a start whose workers cannot all have their descriptors in this process
    (``ulimit -n`` too low, or envs left open), before any worker or fork server is asked:
    a start that runs out part-way kills the fork server mid-message, which prints its
    own traceback before envfactory's error. Raises ``OSError(EMFILE)``, which the front
    words with the fix (`too_many_open_files`); a lower bound, so it never refuses a start
    that could succeed."""
    import errno

    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        open_now = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError, ValueError):  # (no /proc or no resource module)
        return
    if soft == resource.RLIM_INFINITY:
        return
    if FDS_PER_WORKER * workers + FDS_SHARED > soft - open_now:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


_fork_hook: list[bool] = [False]


def install_fork_hook() -> None:
    """Once a forkserver is in use: make a forked child forget the parent's forkserver
    handle, whose ``ensure_running`` would ``waitpid`` a process that is not the child's
    own and raise ChildProcessError (e.g. a daemonic job process forked by a launcher whose
    parent used ``context=forkserver``); the child starts its own on first use. Installed
    only when envfactory starts a forkserver, never on import."""
    if not _fork_hook[0] and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_compat.forget_inherited_forkserver)
        _fork_hook[0] = True


# Worker processes started in this process: a child that the user's program forks must not
# treat them as its own. multiprocessing's list of children is inherited by os.fork(), and
# at the child's normal exit its atexit hook would terminate every "daemonic child" on it:
# the parent's workers. Installed when envfactory first starts a worker, never on import.
_started: weakref.WeakSet = weakref.WeakSet()
_child_hook: list[bool] = [False]


def _after_fork_in_child() -> None:
    global _launcher_lock
    _launcher_lock = threading.Lock()  # another thread may have held it at the fork
    _compat.forget_children(list(_started))
    _started.clear()


# -- workers are started from one thread that lives as long as the process ----------------
# The workers ask Linux for SIGKILL when their parent dies (PR_SET_PDEATHSIG). Linux sends it
# when the *thread* that started the process ends, not the process: a vec env built in a
# short-lived thread (an executor, some launchers) would lose every worker with that thread.
# So every worker is started from one daemon thread, started on first use (and again in a
# forked child, where it does not exist), that lives until the process exits.
_launcher: tuple[int, queue.SimpleQueue] | None = None
_launcher_lock = threading.Lock()


def _serve_launches(jobs: queue.SimpleQueue) -> None:
    # Ctrl-C is the main process's to handle (it ends the workers): every process started
    # from here (a worker, the fork server) starts with SIGINT blocked, so a Ctrl-C at the
    # terminal, sent to the whole process group, prints no traceback from a process still
    # importing its modules (the fork server's preload, a spawned worker's start-up)
    while True:
        fn, box, done = jobs.get()
        try:
            box["result"] = fn()
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
    """Start multiprocessing's resource tracker and (under forkserver) its fork server from
    this thread with SIGINT blocked, and leave it blocked here: every process started from
    the launcher thread (a worker, the fork server) starts with SIGINT blocked, so a Ctrl-C
    at the terminal, sent to the whole process group, prints no traceback from a process
    still importing its modules (Ctrl-C is the main process's to handle: it ends the
    workers; a worker ignores it). The resource tracker unblocks SIGINT in the thread that
    starts it, so it goes first."""
    if not hasattr(signal, "pthread_sigmask"):
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if method == "forkserver":
        _compat.ensure_forkserver()


def _start(proc: Any) -> None:
    # multiprocessing refuses children of daemonic processes (some Hydra launchers run
    # jobs in one). Our workers die with their parent (PDEATHSIG + watchdog), which is
    # the concern behind that rule, so lift it while starting them.
    if not _child_hook[0] and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _child_hook[0] = True
    _servers_up(getattr(proc, "_start_method", None))
    with _compat.without_main(), _compat.non_daemonic():
        proc.start()
    _started.add(proc)


#: what every worker imports: the fork server preloads it (see SubprocGroup.start)
WORKER_PRELOAD = ("envfactory.vectorizers.worker", "gymnasium", "envfactory.factory")


def boot_forkserver(modules: Sequence[str] = ()) -> None:
    """Start multiprocessing's fork server now, in the background (the launcher thread),
    preloading `WORKER_PRELOAD` and ``modules``: its boot (a Python start and the imports
    every worker needs, ~0.2 s) then overlaps the caller's own work, such as composing the
    config, instead of delaying the first worker. Nothing if a fork server already runs
    (its preloads stay as they were)."""
    _compat.forkserver_preload(mp.get_context("forkserver"), [*WORKER_PRELOAD, *modules])
    install_fork_hook()
    _launcher_queue().put((lambda: _servers_up("forkserver"), {}, threading.Event()))


def prestart(options: Mapping[str, str], modules: Sequence[str]) -> None:
    """``subproc``'s `VectorizerPlugin.prestart`: the fork server boots while the config is
    composed (`boot_forkserver`), unless the overrides pick another start method."""
    if options.get("context", "forkserver") == "forkserver":
        boot_forkserver(modules)


def start_process(proc: Any) -> None:
    """``proc.start()`` from the launcher thread (see above), without re-running
    ``__main__`` in it, also from inside a daemonic process."""
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
