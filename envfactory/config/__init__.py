"""Hydra config schemas, ConfigStore registration and composition.

The names below are imported on first use: a module that needs only the option checks
(`checks`, used by every family's schema, also in worker processes) does not load
Hydra."""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checks import TopLevel
    from .compose import compose, resolve, resolve_config, validate
    from .paths import conf_dir
    from .plan import Plan
    from .schema import AutoresetMode, EnvfactoryConfig, Policy, RunConfig, Seeding
    from .store import register_configs

_LAZY = {
    "TopLevel": ".checks",
    **dict.fromkeys(("compose", "resolve", "resolve_config", "validate"), ".compose"),
    "conf_dir": ".paths",
    "Plan": ".plan",
    **dict.fromkeys(
        ("AutoresetMode", "EnvfactoryConfig", "Policy", "RunConfig", "Seeding"), ".schema"
    ),
    "register_configs": ".store",
}

__all__ = [
    "AutoresetMode",
    "EnvfactoryConfig",
    "Plan",
    "Policy",
    "RunConfig",
    "Seeding",
    "TopLevel",
    "compose",
    "conf_dir",
    "register_configs",
    "resolve",
    "resolve_config",
    "validate",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


class _Package(types.ModuleType):
    """``compose`` is both a submodule and its function; the package's ``compose`` is the
    function (as when this package imported it eagerly), also once the import system has
    bound the submodule to that name."""

    @property
    def compose(self) -> Any:
        from .compose import compose

        return compose

    @compose.setter
    def compose(self, submodule: Any) -> None:
        pass  # the import system binding the submodule ``compose``: the function stays


sys.modules[__name__].__class__ = _Package
