"""envfactory: a plugin-registry environment factory with Hydra config composition.

>>> import envfactory
>>> cfg = envfactory.compose(["env=gym", "num_envs=2"])
>>> with envfactory.make_vec(cfg) as envs:
...     obs, infos = envs.reset(seed=0)
>>> obs.shape
(2, 4)
"""

from __future__ import annotations

from .config import compose, register_configs
from .episode_stats import EpisodeStatistics
from .errors import (
    AlreadyPendingError,
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
from .vectorizers.base import VecEnvBase, tile_images

__version__ = "0.1.0"
"""envfactory's version: its one source (the package build reads it from here)."""

__all__ = [
    "AlreadyPendingError",
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
