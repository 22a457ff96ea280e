"""The messages between a parent and its workers: the parent sends ``(cmd, seq, data)``, a worker
answers ``(seq, OK, payload)`` or ``(seq, ERROR, Failure)`` (its first message has seq 0); an answer
whose seq is not awaited is dropped. Pickled with multiprocessing's pickler, cloudpickle as the
fallback (see `Sender`)."""

from __future__ import annotations

import contextlib
import pickle
import struct
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from multiprocessing.reduction import ForkingPickler
from typing import Any

from gymnasium.vector import AutoresetMode

__all__ = [
    "ERROR",
    "HEADER",
    "LONG",
    "OK",
    "Call",
    "Cmd",
    "EnvInfo",
    "Failure",
    "Reset",
    "RestartReset",
    "Restarted",
    "Sender",
    "SetAttr",
    "StepResult",
    "WorkerSpec",
    "dumps",
    "failure_of",
]

OK, ERROR = "ok", "error"

#: What ``step``/``reset`` answer: the info calls, and the observations not in shared memory.
StepResult = tuple[list[tuple[int, dict[str, Any]]], "list[Any] | None"]


class Cmd(str, Enum):
    """The commands a backend sends its workers (a ``str`` enum, pickled as the plain string)."""

    __str__ = str.__str__  # "step", not "Cmd.STEP", in messages (and f-strings, 3.10 to 3.13)

    STEP = "step"  #: data: this worker's actions; answer: StepResult
    #: the async pool: data: (local env indices, their actions); answer: StepResult
    STEP_ENVS = "step-envs"
    RESET = "reset"  #: data: Reset; answer: StepResult
    #: data: (the region's `Layout`, the worker's index), then by SCM_RIGHTS the region's fd
    #: and two eventfds; answer: None
    ATTACH = "attach"
    CALL = "call"  #: data: Call; answer: one result per env
    SET_ATTR = "set_attr"  #: data: SetAttr; answer: None
    RESTARTED = "restarted"  #: data: Restarted; answer: StepResult
    RESTART_RESET = "restart-reset"  #: data: RestartReset; answer: StepResult
    CLOSE = "close"  #: data: None; answer: None, then the worker exits


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process starts with (its env constructors, first env, autoreset mode, ...)."""

    env_fns: Any
    start: int
    autoreset_mode: AutoresetMode
    shared_memory: bool
    main_pid: int
    close_fds: list[Any] | None
    spin_seconds: float


@dataclass(frozen=True)
class EnvInfo:
    """What a worker reports about each env it built."""

    observation_space: Any
    action_space: Any
    metadata: dict[str, Any]
    render_mode: str | None

    @classmethod
    def of(cls, env: Any) -> EnvInfo:
        return cls(env.observation_space, env.action_space, dict(env.metadata), env.render_mode)


@dataclass(frozen=True)
class Reset:
    """Reset the worker's envs (``mask``: only those; ``None``: all)."""

    seeds: list[int | None]
    options: dict[str, Any] | None
    mask: Any


@dataclass(frozen=True)
class Call:
    """Call ``name`` (``args`` None: get attribute ``name``) of envs ``local``."""

    name: str | Callable[..., Any]
    args: Any
    kwargs: Any
    local: list[int]


@dataclass(frozen=True)
class SetAttr:
    """Set attribute ``name`` of envs ``local`` to ``values`` (one each)."""

    name: str
    values: list[Any]
    local: list[int]


@dataclass(frozen=True)
class Restarted:
    """To a rebuilt worker, for the step its predecessor lost (see `recovery`)."""

    last_obs: list[Any]
    done: list[bool]


@dataclass(frozen=True, kw_only=True)
class RestartReset(Restarted):
    """To a rebuilt worker, for the reset its predecessor lost (see `recovery`)."""

    reset: Reset


@dataclass(frozen=True)
class Failure:
    """An exception in the worker: type name, the exception if it pickles (else None), traceback."""

    exc_type: str
    exc: BaseException | None
    traceback: str


def failure_of(exc: BaseException, pickles: Callable[[Any], Any] | None = None) -> Failure:
    """The `Failure` of ``exc`` (being handled); with ``exc`` only if ``pickles`` round-trips it."""
    tb = traceback.format_exc()
    picklable: BaseException | None = exc
    if pickles is not None:
        try:
            pickle.loads(pickles(exc))
        except Exception:  # (it does not round-trip: its type's name and traceback only)
            picklable = None
    return Failure(f"{type(exc).__module__}.{type(exc).__qualname__}", picklable, tb)


def dumps(obj: Any) -> Any:
    """Pickle ``obj`` for a connection: multiprocessing's pickler, else cloudpickle."""
    return Sender(None).dumps(obj)


HEADER = struct.Struct("!i")  # multiprocessing.connection's framing: a message's length
LONG = struct.Struct("!Q")  # after a header of -1: messages over 2 GiB


class Sender:
    """Sends messages on one connection with `dumps`: plain pickle first, cloudpickle for what
    needs it (a worker's, ``by_value=False``, remembers that); the parent's pickles by value but for
    ``plain=True`` (a step's actions)."""

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
        import cloudpickle

        return cloudpickle.dumps(obj)

    def frame(self, obj: Any, plain: bool = False) -> memoryview:
        """``obj`` as the bytes to write on a non-blocking pipe, in multiprocessing's framing."""
        message = None
        if plain:
            with contextlib.suppress(Exception):
                message = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        if message is None:
            message = self.dumps(obj, plain)
        n = len(message)
        header = HEADER.pack(n) if n <= 0x7FFFFFFF else HEADER.pack(-1) + LONG.pack(n)
        return memoryview(header + message)

    def send(self, obj: Any, plain: bool = False) -> None:
        self.conn.send_bytes(self.dumps(obj, plain))
