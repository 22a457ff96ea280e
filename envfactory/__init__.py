"""envfactory: a plugin-registry environment factory with Hydra config composition.

Example:
    >>> import envfactory
    >>> cfg = envfactory.compose(["env=gym", "num_envs=2"])
    >>> with envfactory.make_vec(cfg) as envs:
    ...     obs, infos = envs.reset(seed=0)
    >>> obs.shape
    (2, 4)

The names below are imported on first use (PEP 562): ``import envfactory`` itself loads
neither Hydra nor gymnasium, so a worker process (whose forkserver preloads the worker
module of this package) and a program that only needs the errors start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from .config.compose import compose
    from .config.store import register_configs
    from .episode_stats import EpisodeStatistics
    from .errors import (
        AlreadyPendingError,
        ArgumentTypeError,
        AsyncCallError,
        ClosedError,
        ConfigError,
        EnvfactoryError,
        InvalidActionError,
        InvalidSeedError,
        NoPendingCallError,
        ObservationError,
        OptionError,
        PluginConflictError,
        PluginLoadWarning,
        RemoteEnvError,
        ResetNeededError,
        SpaceMismatchError,
        UnknownKeyError,
        UnknownNameError,
        UnpicklableEnvError,
        VecEnvBrokenError,
        WorkerDiedError,
        WorkerError,
        WorkerTimeoutError,
    )
    from .factory import make_env, make_vec
    from .plugin import (
        EnvFamilyPlugin,
        VectorizerPlugin,
        WrapperPlugin,
        available,
        get_registry,
        hookimpl,
        register_plugin,
        reset_plugins,
    )
    from .vectorizers.front.base import VecEnvBase
    from .vectorizers.front.env_calls import tile_images

__version__ = "0.1.0"
"""envfactory's version: its one source (the package build reads it from here)."""

#: where each public name lives (imported on first use); the others are error classes,
#: from [`errors`][envfactory.errors]
_LAZY = {
    "compose": ".config.compose",
    "register_configs": ".config.store",
    "EpisodeStatistics": ".episode_stats",
    "make_env": ".factory",
    "make_vec": ".factory",
    "EnvFamilyPlugin": ".plugin",
    "VectorizerPlugin": ".plugin",
    "WrapperPlugin": ".plugin",
    "available": ".plugin",
    "get_registry": ".plugin",
    "hookimpl": ".plugin",
    "register_plugin": ".plugin",
    "reset_plugins": ".plugin",
    "VecEnvBase": ".vectorizers.front.base",
    "tile_images": ".vectorizers.front.env_calls",
}

__all__ = [
    "AlreadyPendingError",
    "ArgumentTypeError",
    "AsyncCallError",
    "ClosedError",
    "ConfigError",
    "EnvFamilyPlugin",
    "EnvfactoryError",
    "EpisodeStatistics",
    "InvalidActionError",
    "InvalidSeedError",
    "NoPendingCallError",
    "ObservationError",
    "OptionError",
    "PluginConflictError",
    "PluginLoadWarning",
    "RemoteEnvError",
    "ResetNeededError",
    "SpaceMismatchError",
    "UnknownKeyError",
    "UnknownNameError",
    "UnpicklableEnvError",
    "VecEnvBase",
    "VecEnvBrokenError",
    "VectorizerPlugin",
    "WorkerDiedError",
    "WorkerError",
    "WorkerTimeoutError",
    "WrapperPlugin",
    "__version__",
    "available",
    "compose",
    "get_registry",
    "hookimpl",
    "make_env",
    "make_vec",
    "register_configs",
    "register_plugin",
    "reset_plugins",
    "tile_images",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'envfactory' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY.get(name, ".errors"), __name__), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
