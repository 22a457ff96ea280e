"""The per-env calls: each an `EnvCall` a backend starts and finishes, pending like a step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..transport.ctrl_c import CallState, PendingCall

__all__ = ["EnvCall", "EnvCalls", "PoolOnly", "env_indices", "tile_images"]


def env_indices(indices: int | Sequence[int] | None, num_envs: int) -> list[int]:
    """The env indices of ``indices`` (None: all; negative ones from the end), or IndexError."""
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
    """One per-env call, checked (``what``: its name in messages; ``values``: a set_attr's)."""

    what: str
    name: Any
    args: Any
    kwargs: Any
    indices: list[int]
    values: list[Any] | None = None


def tile_images(frames: Sequence[np.ndarray], ncols: int | None = None) -> np.ndarray:
    """Tile ``N`` frames of shape (H, W[, C]) into one image, row-major, padding with black."""
    if len(frames) == 0:
        raise ValueError("tile_images needs at least one frame")
    arrs = [np.asarray(f) for f in frames]
    ncols = ncols or int(np.ceil(np.sqrt(len(arrs))))
    nrows = int(np.ceil(len(arrs) / ncols))
    h, w = arrs[0].shape[:2]
    out = np.zeros((nrows * h, ncols * w, *arrs[0].shape[2:]), dtype=arrs[0].dtype)
    for k, a in enumerate(arrs):
        r, c = divmod(k, ncols)
        out[r * h : (r + 1) * h, c * w : (c + 1) * w] = a
    return out


class PoolOnly:
    """The pool's ``async_reset``/``recv``/``send`` elsewhere: an ``AttributeError`` saying where
    they are (``hasattr`` stays False)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:  # (it always raises)
        raise AttributeError(
            f"{getattr(objtype, '__name__', 'this VectorEnv')} has no {self.name}(): "
            "async_reset/recv/send belong to the async pool, which vectorizer=subproc (or "
            "subproc-atari) builds with vectorizer.batch_size=N (recv returns the first N envs "
            "ready); this VectorEnv steps every env at once with reset()/step()",
            name=self.name,
            obj=obj,
        )


class EnvCalls(CallState):
    """The per-env calls over a backend's ``_start_call``/``_finish_call``."""

    num_envs: int
    _start_call: Callable[[EnvCall], None]
    _finish_call: Callable[[float | None], list[Any]]

    def call(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each env's method ``name`` called with ``args``/``kwargs`` (its attribute if not
        callable), as a tuple. A function runs as ``name(env, *args, **kwargs)`` where the env
        lives: ``envs.call(stable_baselines3.common.env_util.is_wrapped, Monitor)``."""
        self._check_ready("call", "call")
        return _run(self, EnvCall("call", name, args, kwargs, list(range(self.num_envs))))

    def env_method(
        self, name: str | Callable[..., Any], *args: Any, indices: Any = None, **kwargs: Any
    ) -> list[Any]:
        """Stable-Baselines3 spelling of `call`: only the envs of ``indices`` (an
        int, a list, or None for all), results as a list."""
        self._check_ready("env_method", "env_method")
        idx = env_indices(indices, self.num_envs)
        return list(_run(self, EnvCall("env_method", name, args, kwargs, idx)))

    def call_async(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Start `call` on every env and return at once; ``call_wait`` returns its results."""
        self._check_ready("call_async", "call")
        request = EnvCall("call", name, args, kwargs, list(range(self.num_envs)))
        self._start_for(PendingCall.CALL, self._start_call, request)

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """The results of the pending `call_async`, or of a per-env call a Ctrl-C cut in its
        wait (``set_attr``: None each); ``timeout`` as ``step_wait``'s."""
        return tuple(self._wait_for(PendingCall.CALL, self._finish_call, timeout, "call_wait"))

    def get_attr(self, name: str, indices: Any = None) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (or of ``indices``), via ``get_wrapper_attr``."""
        self._check_ready("get_attr", "get_attr")
        if not isinstance(name, str):
            raise TypeError(
                f"get_attr(name) takes an attribute name (str), got {type(name).__name__}; "
                "to run a function on each env use envs.call(fn)"
            )
        idx = env_indices(indices, self.num_envs)
        return _run(self, EnvCall("get_attr", name, None, None, idx))

    def set_attr(self, name: str, values: Any, indices: Any = None) -> None:
        """Set attribute ``name`` (``set_wrapper_attr``) of every env or of ``indices``: one
        value for all, or a list or tuple of one per env."""
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
        """One frame per env, from each env's ``render()`` (``tile_images`` tiles them)."""
        if self.closed:
            self._check_ready("render", "render")
        return self.call("render")


def _run(env: EnvCalls, request: EnvCall) -> tuple:
    """Start ``request`` and wait for it (a Ctrl-C in the wait leaves it to ``call_wait()``)."""
    env._start_for(PendingCall.CALL, env._start_call, request)
    return tuple(env._wait_for(PendingCall.CALL, env._finish_call, None))
