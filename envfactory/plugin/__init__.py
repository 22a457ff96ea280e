"""envfactory's plugin system: hook specs, registration records and the manager."""

from .manager import (
    available,
    get_plugin_manager,
    get_registry,
    register_plugin,
    reset_plugins,
)
from .spec import NAME, hookimpl, hookspec
from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin

__all__ = [
    "NAME",
    "EnvFamilyPlugin",
    "VectorizerPlugin",
    "WrapperPlugin",
    "available",
    "get_plugin_manager",
    "get_registry",
    "hookimpl",
    "hookspec",
    "register_plugin",
    "reset_plugins",
]
