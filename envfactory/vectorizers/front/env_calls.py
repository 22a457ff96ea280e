"""The call state every call goes through (`PendingCall`, `CallState`) and the per-env calls:
``call`` (a name or a function run next to each env), SB3's ``env_method``/``get_attr``/
``set_attr`` with ``indices=``, gymnasium's ``call_async``/``call_wait``, and ``render``. Each
per-env call is an `EnvCall` a backend starts and finishes, pending in between like a step."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import AlreadyPendingError, ClosedError, NoPendingCallError, VecEnvBrokenError
from ..transport.ctrl_c import HOLD
from .checks import check_wait_timeout

__all__ = [
    "CallState",
    "EnvCall",
    "EnvCalls",
    "PendingCall",
    "env_indices",
    "tile_images",
]


class PendingCall(enum.Enum):
    """Which async half a vectorized env waits on (gymnasium's ``AsyncState``, by call)."""

    NONE = "none"
    RESET = "reset"
    STEP = "step"
    CALL = "call"


_IDLE = PendingCall.NONE  # (a module global: read without any call, see _wait_for)
#: what a ``*_wait()`` with none of its call pending says to call first
_FIRST = {
    PendingCall.RESET: "reset_async(seed=..., options=...)",
    PendingCall.STEP: "step_async(actions)",
    PendingCall.CALL: "call_async(name, ...)",
}


class CallState:
    """The pending-call state: every call is refused (`_check_ready`), started (`_start_for`)
    and finished (`_wait_for`) through it."""

    closed: bool
    #: the fault that left the env unusable (None: usable; set by ``RemoteVecEnv.apply``)
    _broken: BaseException | None = None
    _pending: PendingCall = PendingCall.NONE
    _interrupted: bool = False  # a Ctrl-C cut the pending call: only its *_wait() runs
    _held: Any = None  # a batch in hand not yet returned (its *_wait() returns it)
    _pending_mask: np.ndarray | None = None  # the reset_mask of a pending reset
    _done: np.ndarray  # each env's episode ended at its last step
    _ready: bool = False  # a full reset() has been done
    #: an interrupted ``step``/``reset`` can be finished by its ``*_wait()`` while usable
    #: (a worker backend's: cut only in its wait, which it repeats; see `_can_finish`)
    _resumes: bool = False

    def _check_ready(self, what: str, call: str) -> None:
        """Raise why ``what`` (a start of ``call``) cannot run now: closed, broken (named
        before any other error) or a call pending (one a Ctrl-C left pending is only
        finished by its ``*_wait()`` or abandoned by ``close()``). Called only when a cheap
        test says one holds."""
        if self.closed:
            raise ClosedError(
                f"{what}() on a closed {type(self).__name__}; make a new one with "
                "envfactory.make_vec(...)"
            )
        if self._broken is not None:
            advice = (
                "Close it and make a new one (vectorizer.restart=true rebuilds a failed worker "
                "process, up to vectorizer.max_restarts per vectorizer.restart_window, but "
                "not past this fault)"
                if getattr(self, "restart", False)
                else "Close it and make a new one, or set vectorizer.restart=true to rebuild "
                "failed workers automatically"
            )
            raise VecEnvBrokenError(
                f"{call}() on a {type(self).__name__} that is unusable since: {self._broken}\n"
                + advice
            )
        if self._pending is not _IDLE:
            p = self._pending.value
            if self._interrupted:
                raise AlreadyPendingError(
                    f"{what}() called while a {p}() interrupted by Ctrl-C is pending; call "
                    f"{p}_wait() to get its results (nothing of it is lost), or close() to "
                    "abandon it",
                    p,
                )
            raise AlreadyPendingError(
                f"{what}() called while a {p}_async() is pending; call {p}_wait() first (or, "
                f"re-entered from a signal handler or a callback while a {p}() is in "
                f"progress, make the call once it returned)",
                p,
            )

    def _start_for(self, kind: PendingCall, start: Callable[..., None], *args: Any) -> None:
        """``start(*args)``, the backend's start of ``kind``, held (`ctrl_c`): a Ctrl-C
        meanwhile is raised once it is sent, leaving it pending if the backend can finish it
        (`_can_finish`); one let through by a wait of the start leaves nothing sent."""
        try:
            with HOLD:
                start(*args)
                self._pending = kind
        except Exception:
            raise
        except BaseException:  # (a Ctrl-C) pending if it was sent and can be finished
            finishable = self._pending is kind and self._can_finish()
            self._pending, self._interrupted = (kind, True) if finishable else (_IDLE, False)
            raise

    def _wait_for(
        self, kind: PendingCall, finish: Callable[[Any], Any], timeout: Any, what: str = ""
    ) -> Any:
        """``finish(timeout)``, the backend's wait for the pending ``kind`` (``what``: a public
        ``*_wait()``, whose state and ``timeout`` are checked first), then the batch's
        bookkeeping (which envs are done; it may run twice). Done or failed, nothing is
        pending after it; a Ctrl-C before the batch was in hand leaves it pending if the
        backend can finish it, after, the batch is kept (``_held``) for the next ``*_wait()``.
        Nothing between the end of ``finish`` and the return lets an interrupt in (no call:
        CPython checks for signals on entering a Python function and after a C call)."""
        if what:
            if self.closed:
                self._check_ready(what, kind.value)
            if timeout is not None:
                timeout = check_wait_timeout(timeout, what)
            if self._pending is not kind:
                p = self._pending.value
                now = "nothing is pending" if p == "none" else f"a {p}_async() is pending"
                raise NoPendingCallError(
                    f"{what}() called but {now}; call {_FIRST[kind]} first",
                    "" if p == "none" else p,
                )
        try:
            with HOLD:  # (a Ctrl-C is let through only in the backend's wait, `ctrl_c`)
                batch = self._held
                if batch is None:
                    batch = finish(timeout)
                    self._held = batch
                if kind is PendingCall.STEP:
                    np.logical_or(batch[2], batch[3], out=self._done)
                elif kind is PendingCall.CALL:
                    pass
                elif self._pending_mask is None:  # a reset: its envs are not done any more
                    self._done[:] = False
                    self._ready = True
                else:
                    self._done[self._pending_mask] = False
        except Exception:
            self._pending, self._interrupted, self._held = _IDLE, False, None
            raise
        except BaseException:
            finishable = self._held is not None or self._can_finish()  # (results in hand)
            self._pending, self._interrupted = (kind, True) if finishable else (_IDLE, False)
            raise
        self._held = None
        self._pending = _IDLE
        self._interrupted = False
        return batch

    def _can_finish(self) -> bool:
        """After an interrupt of ``step``/``reset``: whether its ``*_wait()`` can finish it."""
        return self._resumes and self._broken is None


def env_indices(indices: int | Sequence[int] | None, num_envs: int) -> list[int]:
    """The env indices a call names: None (every env), an int, or a sequence (negative ones
    count from the end); an index out of range is an IndexError naming it."""
    if indices is None:
        return list(range(num_envs))
    if isinstance(indices, (int, np.integer)):
        indices = [int(indices)]
    out = [int(i) for i in indices]
    bad = [i for i in out if not -num_envs <= i < num_envs]
    if bad:
        raise IndexError(f"env indices {bad} out of range for num_envs={num_envs}")
    return [i % num_envs for i in out]


@dataclass(frozen=True)
class EnvCall:
    """One per-env call, checked: ``what`` its name in messages, the method or attribute
    ``name`` (or a function), ``args``/``kwargs``, the env ``indices``, and ``values`` (one
    per index: a ``set_attr``; else None)."""

    what: str
    name: Any
    args: Any
    kwargs: Any
    indices: list[int]
    values: list[Any] | None = None


def tile_images(frames: Sequence[np.ndarray], ncols: int | None = None) -> np.ndarray:
    """Tile ``N`` frames of shape (H, W[, C]) into one image, row-major, padding with black.

    Example:
        >>> import numpy as np
        >>> tile_images([np.zeros((2, 3, 3), np.uint8)] * 3).shape
        (4, 6, 3)
    """
    if len(frames) == 0:
        raise ValueError("tile_images needs at least one frame")
    arrs = [np.asarray(f) for f in frames]
    n = len(arrs)
    ncols = ncols or int(np.ceil(np.sqrt(n)))
    nrows = int(np.ceil(n / ncols))
    h, w = arrs[0].shape[:2]
    rest = arrs[0].shape[2:]
    out = np.zeros((nrows * h, ncols * w, *rest), dtype=arrs[0].dtype)
    for k, a in enumerate(arrs):
        r, c = divmod(k, ncols)
        out[r * h : (r + 1) * h, c * w : (c + 1) * w] = a
    return out


class EnvCalls(CallState):
    """The per-env calls over a backend's ``_start_call``/``_finish_call``: start the
    checked `EnvCall`; finish it within ``timeout`` seconds, one result per index."""

    num_envs: int
    _start_call: Callable[[EnvCall], None]
    _finish_call: Callable[[float | None], list[Any]]

    def call(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env with ``args``/``kwargs`` (as gymnasium), or get
        attribute ``name`` if it is not callable. A function runs as ``name(env, *args,
        **kwargs)`` where the env lives, so it can inspect the env without pickling it:
        ``envs.call(stable_baselines3.common.env_util.is_wrapped, Monitor)``.

        Returns:
            One result per env, as a tuple.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> [spec.id for spec in envs.call("get_wrapper_attr", "spec")]
            ['CartPole-v1', 'CartPole-v1']
            >>> envs.close()
        """
        self._check_ready("call", "call")
        return _run(self, EnvCall("call", name, args, kwargs, list(range(self.num_envs))))

    def env_method(
        self, name: str | Callable[..., Any], *args: Any, indices: Any = None, **kwargs: Any
    ) -> list[Any]:
        """Stable-Baselines3 spelling of `call`: only the envs of ``indices`` (an
        int, a list, or None for all), results as a list.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=3"])
            >>> _ = envs.reset(seed=5)
            >>> envs.env_method("get_wrapper_attr", "np_random_seed", indices=[0, 2])
            [5, 7]
            >>> envs.close()
        """
        self._check_ready("env_method", "env_method")
        idx = env_indices(indices, self.num_envs)
        return list(_run(self, EnvCall("env_method", name, args, kwargs, idx)))

    def call_async(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Start `call` on every env and return at once (gymnasium's ``AsyncVectorEnv``
        spelling); ``call_wait`` returns its results. Worker processes run it while the
        caller does other work.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> envs.call_async("get_wrapper_attr", "spec")
            >>> [spec.id for spec in envs.call_wait()]
            ['CartPole-v1', 'CartPole-v1']
            >>> envs.close()
        """
        self._check_ready("call_async", "call")
        request = EnvCall("call", name, args, kwargs, list(range(self.num_envs)))
        self._start_for(PendingCall.CALL, self._start_call, request)

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """The results of the pending `call_async`, or of a `call` / `env_method` /
        `get_attr` / `set_attr` that a Ctrl-C cut while it waited (one per env of its
        indices; ``set_attr``: None each).

        Args:
            timeout: seconds to wait for worker processes (None: the vectorizer's own
                ``timeout``).

        Raises:
            NoPendingCallError: (gymnasium's ``NoAsyncCallError``) no call is pending.
        """
        return tuple(self._wait_for(PendingCall.CALL, self._finish_call, timeout, "call_wait"))

    def get_attr(self, name: str, indices: Any = None) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (or of ``indices``), via ``get_wrapper_attr``.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> envs.get_attr("gravity")
            (9.8, 9.8)
            >>> envs.get_attr("gravity", indices=1)
            (9.8,)
            >>> envs.close()
        """
        self._check_ready("get_attr", "get_attr")
        if not isinstance(name, str):
            raise TypeError(
                f"get_attr(name) takes an attribute name (str), got {type(name).__name__}; "
                "to run a function on each env use envs.call(fn)"
            )
        idx = env_indices(indices, self.num_envs)
        return _run(self, EnvCall("get_attr", name, None, None, idx))

    def set_attr(self, name: str, values: Any, indices: Any = None) -> None:
        """Set attribute ``name`` (via ``set_wrapper_attr``) of every env or of
        ``indices``: one value for all, or a list or tuple with one value per env.

        Raises:
            ValueError: a list of values of the wrong length.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> envs.set_attr("gravity", [9.8, 1.6])
            >>> envs.get_attr("gravity")
            (9.8, 1.6)
            >>> envs.close()
        """
        self._check_ready("set_attr", "set_attr")
        idx = env_indices(indices, self.num_envs)
        if not isinstance(values, (list, tuple)):
            values = [values] * len(idx)
        if len(values) != len(idx):
            raise ValueError(
                f"set_attr({name!r}) got {len(values)} values for {len(idx)} envs; pass one "
                "value, or a list with one value per env"
            )
        _run(self, EnvCall("set_attr", name, None, None, idx, list(values)))

    def render(self) -> tuple[Any, ...]:
        """One frame per env (as gymnasium's vector envs), from each env's ``render()``;
        [`tile_images`][envfactory.tile_images] tiles them into one image. Needs
        ``env.render_mode``.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> _ = envs.reset(seed=0)
            >>> envs.render()  # no render_mode: one None per env, as gymnasium
            (None, None)
            >>> envs.close()
        """
        if self.closed:
            self._check_ready("render", "render")
        return self.call("render")


def _run(env: EnvCalls, request: EnvCall) -> tuple:
    """Start ``request`` and wait for it, pending in between (a Ctrl-C while it waits leaves
    it to ``call_wait()``)."""
    env._start_for(PendingCall.CALL, env._start_call, request)
    return tuple(env._wait_for(PendingCall.CALL, env._finish_call, None))
