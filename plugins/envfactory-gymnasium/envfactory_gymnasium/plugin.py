"""The plugin module named by the ``envfactory`` entry point.

It uses only envfactory's public API (``envfactory.hookimpl``, ``envfactory.VectorizerPlugin``,
``envfactory.ConfigError``), as any third-party package would. Every constructor option of
gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` is a config field, except
``AsyncVectorEnv(worker=...)`` (a function, not a config value) and an
``observation_mode`` given as spaces (config values are strings: ``same`` or ``different``).
"""

from __future__ import annotations

import functools
import multiprocessing
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import cloudpickle
import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import envfactory

__all__ = [
    "GymnasiumAsyncConfig",
    "GymnasiumAsyncVectorEnv",
    "GymnasiumSyncConfig",
    "GymnasiumSyncVectorEnv",
    "build_async",
    "build_sync",
    "to_autoreset_mode",
]

OBSERVATION_MODES = ("same", "different")


@dataclass
class GymnasiumSyncConfig:
    """Schema of ``vectorizer=gymnasium-sync`` (gymnasium's ``SyncVectorEnv``).

    Attributes:
        name: always ``gymnasium-sync``.
        copy: return a copy of the observation batch.
        observation_mode: ``same`` (every env has the same observation space) or
            ``different`` (same shape, different bounds).
    """

    name: str = "gymnasium-sync"
    copy: bool = True
    observation_mode: str = "same"


@dataclass
class GymnasiumAsyncConfig:
    """Schema of ``vectorizer=gymnasium-async`` (gymnasium's ``AsyncVectorEnv``, one worker
    process per env).

    Attributes:
        name: always ``gymnasium-async``.
        shared_memory: observations through shared memory.
        copy: return a copy of the observation batch.
        context: multiprocessing start method (``fork``, ``forkserver``, ``spawn``); null is
            Python's default.
        daemon: worker processes are daemonic (killed when the parent exits).
        observation_mode: ``same`` or ``different`` (as ``gymnasium-sync``).
        max_concurrency: at most this many workers step at once; null for no limit.
    """

    name: str = "gymnasium-async"
    shared_memory: bool = True
    copy: bool = True
    context: Optional[str] = None  # noqa: UP045 (OmegaConf needs Optional on Python 3.10)
    daemon: bool = True
    observation_mode: str = "same"
    max_concurrency: Optional[int] = None  # noqa: UP045


class _ContextManager:
    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()  # type: ignore[attr-defined]


def _check_name(name: Any) -> None:
    if not (isinstance(name, str) or callable(name)):
        raise TypeError(
            f"call(name): name must be a method or attribute name (str) or a function run as "
            f"fn(env, *args, **kwargs), got {type(name).__name__} {name!r}"
        )


class GymnasiumSyncVectorEnv(_ContextManager, SyncVectorEnv):
    """gymnasium's ``SyncVectorEnv``, usable as a context manager; ``call`` also takes a
    function, run as ``fn(env, *args, **kwargs)`` on each env (envfactory's VecEnv contract)."""

    def call(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """gymnasium's ``call(name, ...)``, or ``fn(env, *args, **kwargs)`` for each env."""
        _check_name(name)
        if callable(name):
            return tuple(name(env, *args, **kwargs) for env in self.envs)
        return super().call(name, *args, **kwargs)


# the method every gymnasium-async env gets from _WithCallFn: gymnasium's public "_call" path
# (its worker runs env.get_wrapper_attr(name)(*args, **kwargs)) then runs fn next to the env
_CALL_FN = "_envfactory_call_fn"


class _WithCallFn:
    """An env constructor whose env gets a ``_CALL_FN`` method running ``fn(env, ...)``
    (module-level, so it pickles by reference under any start method)."""

    def __init__(self, env_fn: Callable[[], gym.Env]) -> None:
        self.env_fn = env_fn

    def __call__(self) -> gym.Env:
        env = self.env_fn()
        setattr(env, _CALL_FN, functools.partial(_run_fn, env))
        return env


def _run_fn(env: gym.Env, payload: bytes) -> Any:
    fn, args, kwargs = pickle.loads(payload)
    return fn(env, *args, **kwargs)


class GymnasiumAsyncVectorEnv(_ContextManager, AsyncVectorEnv):
    """gymnasium's ``AsyncVectorEnv``, usable as a context manager; ``call`` /
    ``call_async`` also take a function, run as ``fn(env, *args, **kwargs)`` in each env's
    worker process (envfactory's VecEnv contract; built by
    [`build_async`][envfactory_gymnasium.plugin.build_async])."""

    def call_async(self, name: str | Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """gymnasium's ``call_async(name, ...)``, or ``fn(env, *args, **kwargs)`` in each
        worker (``fn`` and its arguments go there by cloudpickle: a lambda works)."""
        _check_name(name)
        if callable(name):
            return super().call_async(_CALL_FN, cloudpickle.dumps((name, args, kwargs)))
        return super().call_async(name, *args, **kwargs)


_SNAKE = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}


def to_autoreset_mode(value: Any) -> AutoresetMode:
    """gymnasium's ``AutoresetMode`` from what envfactory passes as ``autoreset_mode``: the
    enum itself, its value (``"NextStep"``), or envfactory's config spelling
    (``"next_step"``, or an enum whose value that is).

    Raises:
        envfactory.ConfigError: on anything else.
    """
    if isinstance(value, AutoresetMode):
        return value
    raw = getattr(value, "value", value)
    if isinstance(raw, str):
        if raw in _SNAKE:
            return _SNAKE[raw]
        try:
            return AutoresetMode(raw)
        except ValueError:
            pass
    raise envfactory.ConfigError(
        f"autoreset_mode={value!r} is not valid; valid choices: {', '.join(_SNAKE)}"
    )


def _check_choice(vectorizer: str, key: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise envfactory.ConfigError(
            f"vectorizer={vectorizer}: invalid {key}={value!r}; valid choices: "
            f"{', '.join(choices)} (set vectorizer.{key}=<choice>)"
        )


def build_sync(
    env_fns: Sequence[Callable[[], gym.Env]],
    *,
    copy: bool = True,
    observation_mode: str = "same",
    autoreset_mode: Any = AutoresetMode.NEXT_STEP,
) -> GymnasiumSyncVectorEnv:
    """``SyncVectorEnv(env_fns, ...)`` with the config node's options."""
    _check_choice("gymnasium-sync", "observation_mode", observation_mode, OBSERVATION_MODES)
    return GymnasiumSyncVectorEnv(
        list(env_fns),
        copy=copy,
        observation_mode=observation_mode,
        autoreset_mode=to_autoreset_mode(autoreset_mode),
    )


def build_async(
    env_fns: Sequence[Callable[[], gym.Env]],
    *,
    shared_memory: bool = True,
    copy: bool = True,
    context: str | None = None,
    daemon: bool = True,
    observation_mode: str = "same",
    max_concurrency: int | None = None,
    autoreset_mode: Any = AutoresetMode.NEXT_STEP,
) -> GymnasiumAsyncVectorEnv:
    """``AsyncVectorEnv(env_fns, ...)`` with the config node's options."""
    name = "gymnasium-async"
    _check_choice(name, "observation_mode", observation_mode, OBSERVATION_MODES)
    if context is not None:
        _check_choice(name, "context", context, multiprocessing.get_all_start_methods())
    if max_concurrency is not None and (isinstance(max_concurrency, bool) or max_concurrency < 1):
        raise envfactory.ConfigError(
            f"vectorizer={name}: invalid max_concurrency={max_concurrency!r}; expected an "
            "integer >= 1 or null (no limit)"
        )
    if multiprocessing.current_process().daemon:
        raise envfactory.ConfigError(
            f"vectorizer={name}: this process is daemonic and cannot start worker processes "
            "(Python forbids it); use vectorizer=subproc or vectorizer=gymnasium-sync"
        )
    mode = to_autoreset_mode(autoreset_mode)
    return GymnasiumAsyncVectorEnv(
        [_WithCallFn(fn) for fn in env_fns],
        shared_memory=shared_memory,
        copy=copy,
        context=context,
        daemon=daemon,
        observation_mode=observation_mode,
        autoreset_mode=mode,
        max_concurrency=max_concurrency,
    )


@envfactory.hookimpl
def envfactory_vectorizers() -> list[envfactory.VectorizerPlugin]:
    return [
        envfactory.VectorizerPlugin(
            "gymnasium-sync",
            build_sync,
            GymnasiumSyncConfig,
            summary="gymnasium's SyncVectorEnv (all envs in this process)",
        ),
        envfactory.VectorizerPlugin(
            "gymnasium-async",
            build_async,
            GymnasiumAsyncConfig,
            summary="gymnasium's AsyncVectorEnv (one worker process per env)",
        ),
    ]
