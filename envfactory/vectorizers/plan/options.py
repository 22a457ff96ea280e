"""The options, checked where they are read (``timeout=inf`` becomes null here, once)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Optional

from ...config.checks import check_bool, check_choice, check_int
from ...errors import OptionError

__all__ = [
    "START_METHODS",
    "AutoConfig",
    "FaultOptions",
    "SubprocAtariConfig",
    "SubprocConfig",
    "check_fault_options",
    "check_split",
]

START_METHODS = ("fork", "forkserver", "spawn")


def check_fault_options(options: Any) -> None:
    """Check `FaultOptions`' fields a schema has (`OptionError`); ``timeout=inf`` -> null."""
    seconds = (
        ("timeout", "a number of seconds > 0, or null (or inf) for no timeout"),
        ("restart_window", "a number of seconds > 0"),
    )
    for key, expected in seconds:
        value = getattr(options, key, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, Real) or not float(value) > 0:
            raise OptionError(key, value, expected)
    if getattr(options, "timeout", None) == math.inf:
        options.timeout = None
    for key in ("restart", "copy"):
        if hasattr(options, key):
            check_bool(options, key)
    if hasattr(options, "max_restarts"):
        check_int(options, "max_restarts", 0)


@dataclass
class FaultOptions:
    """The fault options every [`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv] takes,
    as fields for a backend's config schema to inherit (``@dataclass class MyConfig(FaultOptions)``,
    whose fields follow these; a ``__post_init__`` of its own calls ``super().__post_init__()``).

    Attributes:
        timeout: seconds a worker may take for one call (> 0); null or ``inf`` waits
            forever.
        restart: rebuild the envs of a worker that dies, hangs past ``timeout`` or raises
            during ``step``/``reset``, and report their episodes as truncated (at the last
            observation seen; ``infos["restarted"]``) instead of raising.
        max_restarts: with ``restart``, the fault after this many restarts of one worker
            within ``restart_window`` seconds is raised (a simulator that keeps failing).
        restart_window: seconds over which ``max_restarts`` counts.
        copy: return a copy of the observation batch (false: a buffer the next step
            overwrites).
    """

    timeout: Optional[float] = None  # noqa: UP045 (OmegaConf needs Optional on Python 3.10)
    restart: bool = False
    max_restarts: int = 5
    restart_window: float = 60.0
    copy: bool = True

    def __post_init__(self) -> None:
        """[`check_fault_options`][envfactory.vectorizers.remote.check_fault_options] at compose
        time."""
        check_fault_options(self)


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
        check_int(self, "in_series", 1, optional=True)
        check_choice(self, "context", START_METHODS)
        check_bool(self, "shared_memory")
        check_int(self, "spin_us", 0)
        check_int(self, "batch_size", 1, optional=True)  # <= num_envs: config.compose
        check_int(self, "in_parent", 0, optional=True)
        super().__post_init__()  # the fault options

    def check_config(self, top: Any) -> None:
        """The checks against the top level (`check_split`)."""
        check_split(top.num_envs, self.batch_size, self.in_parent)


def check_split(num_envs: int, batch_size: Any, in_parent: Any, path: str = "") -> None:
    """``batch_size`` and ``in_parent`` against ``num_envs``: the one check of both."""
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
