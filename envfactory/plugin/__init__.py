"""envfactory's plugin system: hook specs, registration records and the manager."""

from .in_code import register_plugin
from .manager import (
    available,
    get_plugin_manager,
    get_registry,
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
