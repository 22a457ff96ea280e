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
    "positive_seconds",
]

START_METHODS = ("fork", "forkserver", "spawn")


def positive_seconds(value: Any) -> bool:
    """Whether ``value`` is a number of seconds > 0 (``inf`` too; not nan, not a bool)."""
    return not isinstance(value, bool) and isinstance(value, Real) and float(value) > 0


def check_fault_options(options: Any) -> None:
    """Check `FaultOptions`' fields a schema has (`OptionError`); ``timeout=inf`` -> null."""
    seconds = (
        ("timeout", "a number of seconds > 0, or null (or inf) for no timeout"),
        ("restart_window", "a number of seconds > 0"),
    )
    for key, expected in seconds:
        value = getattr(options, key, None)
        if value is not None and not positive_seconds(value):
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
    """The fault options every `RemoteVecEnv` takes, for a backend's schema to inherit (its own
    ``__post_init__`` calls ``super().__post_init__()``).

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
        check_fault_options(self)


@dataclass
class SubprocConfig(FaultOptions):
    """Schema of ``vectorizer=subproc``.

    Attributes:
        name: always ``subproc``.
        in_series: envs per worker process (as even a split as possible); null = one worker
            per core (a pool: at most batch_size envs each; a parent share: a core left to
            it; 8+ cpus: one worker per two cpus when a probe finds a step under 50 us).
        context: start method: ``forkserver`` (default: safe with threads, fast with its
            preloaded imports), ``fork`` or ``spawn``.
        shared_memory: observations through shared memory (Box/Dict/Tuple spaces; other
            spaces are pickled).
        copy: return a copy of the observation batch (false: a view of shared memory that
            the next step overwrites).
        spin_us: the most microseconds a waiting process spins before it sleeps, while its
            recent waits were shorter (a wake-up costs 25-300 us on a VM); 0: never spin.
            With ``in_parent`` > 0 workers spin at least 1000 us.
        in_parent: envs (the last ones) the parent steps itself, 0 .. num_envs - 1. 0
            (default): every env isolated in a worker (a crash is a ``WorkerDiedError``);
            > 0 trades that isolation for speed. null = decided once at build time: a
            worker's share when a core is idle and ``in_series``, ``timeout`` and
            ``restart`` are unset, else 0. An env never moves once built; the parent's envs'
            errors are RemoteEnvErrors naming worker -1.
        batch_size: null: a synchronous VecEnv. An int in [1, num_envs]: an async pool with
            envpool's ``async_reset``/``send``/``recv`` (the first batch_size envs ready,
            ``infos["env_id"]``); a multiple of in_series is fastest.

    The fault options are [`FaultOptions`][envfactory.vectorizers.remote.FaultOptions]'.
    """

    name: str = "subproc"
    in_series: Optional[int] = None  # noqa: UP045
    context: str = "forkserver"
    shared_memory: bool = True
    spin_us: int = 200
    batch_size: Optional[int] = None  # noqa: UP045
    in_parent: Optional[int] = 0  # noqa: UP045

    def __post_init__(self) -> None:
        check_int(self, "in_series", 1, optional=True, null="for one worker per core")
        check_choice(self, "context", START_METHODS)
        check_bool(self, "shared_memory")
        check_int(self, "spin_us", 0)
        # (batch_size <= num_envs: config.compose)
        check_int(self, "batch_size", 1, optional=True, null="for a synchronous VecEnv")
        check_int(self, "in_parent", 0, optional=True, null="to decide at build time")
        super().__post_init__()  # the fault options

    def check_config(self, top: Any) -> None:
        """The checks against the top level (`check_split`)."""
        check_split(top.num_envs, self.batch_size, self.in_parent)


def check_split(num_envs: int, batch_size: Any, in_parent: Any, path: str = "") -> None:
    """``batch_size`` and ``in_parent`` against ``num_envs``: the one check of both."""
    key, value = "in_parent", in_parent
    if batch_size is not None and not _int_in(batch_size, 1, num_envs):
        key, value = "batch_size", batch_size
        expected = f"an integer in [1, num_envs={num_envs}] or null (null: a synchronous VecEnv)"
        hint = f"Lower vectorizer.batch_size or raise num_envs (now {num_envs})"
    elif in_parent is not None and not _int_in(in_parent, 0, num_envs - 1):
        expected = (
            f"an integer in [0, num_envs - 1 = {num_envs - 1}] or null (auto): the parent steps "
            "that many envs itself, and at least one must be in a worker"
        )
        hint = f"Lower vectorizer.in_parent or raise num_envs (now {num_envs}); for every env "
        hint += "in this process, use vectorizer=dummy"
    elif batch_size is not None and in_parent:
        expected = f"0 or null with vectorizer.batch_size={batch_size} (the async pool steps "
        expected += "every env in a worker)"
        hint = "Set vectorizer.in_parent=0 (or null), or vectorizer.batch_size=null"
    else:
        return
    raise OptionError(key, value, expected, hint=hint, path=path)


def _int_in(value: Any, low: int, high: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, Integral) and low <= int(value) <= high


@dataclass
class SubprocAtariConfig(SubprocConfig):
    """Schema of ``vectorizer=subproc-atari``: ``subproc`` for uint8 image observations (always
    shared memory), one worker per core (or a parent share, as ``subproc``), and a 1 ms spin that
    catches the straggling worker (+10-40% at 8 Pongs on 2 cores)."""

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
    1.11x; docs/bench_cartpole_readme.json); with a busy core 1.01x (every env in a worker:
    0.73x; docs/benchmarks.md, "Under load, after issue 26")."""

    name: str = "auto"
    in_parent: Optional[int] = None  # noqa: UP045
