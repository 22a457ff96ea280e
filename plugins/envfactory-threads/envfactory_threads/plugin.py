"""The plugin module named by the ``envfactory`` entry point: vectorizer ``threads``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Optional

import gymnasium as gym

import envfactory
from envfactory import OptionError
from envfactory.vectorizers.remote import check_fault_options

__all__ = ["ThreadsConfig", "build_threads", "envfactory_vectorizers"]


@dataclass
class ThreadsConfig:
    """Schema of ``vectorizer=threads``.

    Attributes:
        name: always ``threads``.
        in_series: envs per thread (any split of num_envs, as even as possible); null =
            one thread per core (ceil(num_envs / cpu count) envs each).
        timeout: seconds a thread may take for one call (> 0); null or ``inf`` waits
            forever. A thread cannot be killed: one that timed out is left to finish (a
            daemon thread) and its envs are not used again.
        restart: rebuild the envs of a thread whose env raised or hung past ``timeout``
            during ``step``/``reset`` (in a new thread), and report their episodes as
            truncated (``infos["restarted"]``), as ``subproc``'s ``restart``.
        max_restarts: with ``restart``, the fault after this many restarts of one thread
            within ``restart_window`` seconds is raised.
        restart_window: seconds over which ``max_restarts`` counts.
        copy: return a copy of the observation batch (false: a buffer reused each step).
    """

    name: str = "threads"
    in_series: Optional[int] = None  # noqa: UP045 (OmegaConf needs Optional on Python 3.10)
    timeout: Optional[float] = None  # noqa: UP045
    restart: bool = False
    max_restarts: int = 5
    restart_window: float = 60.0
    copy: bool = True

    def __post_init__(self) -> None:
        """The checks envfactory runs at compose time (each raises ``OptionError``)."""
        n = self.in_series
        if n is not None and (isinstance(n, bool) or not isinstance(n, Integral) or n < 1):
            raise OptionError("in_series", n, "an integer >= 1 or null")
        check_fault_options(self)


def build_threads(env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> Any:
    """The ``threads`` vectorizer's build function: a
    :class:`envfactory_threads.vecenv.ThreadVecEnv`."""
    from .vecenv import ThreadVecEnv

    options.pop("name", None)
    return ThreadVecEnv(env_fns, **options)


@envfactory.hookimpl
def envfactory_vectorizers() -> list[envfactory.VectorizerPlugin]:
    return [
        envfactory.VectorizerPlugin(
            "threads",
            build_threads,
            ThreadsConfig,
            summary="envs stepped by threads of this process (envs that release the GIL)",
        )
    ]
