"""Built-in environment families; their registrations are in `builtin`.

``envfactory_env_families`` is imported on first use, so a worker process that unpickles
one family's ``make`` loads that family's module only (not the plugin system)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .builtin import envfactory_env_families

__all__ = ["envfactory_env_families"]


def __getattr__(name: str) -> Any:
    if name == "envfactory_env_families":
        from .builtin import envfactory_env_families

        return envfactory_env_families
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
