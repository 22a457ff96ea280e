"""Built-in environment families; their registrations are in :mod:`.builtin`."""

from __future__ import annotations

from .builtin import envfactory_env_families

__all__ = ["envfactory_env_families"]
