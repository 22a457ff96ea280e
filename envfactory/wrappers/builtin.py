"""The built-in named wrappers (gymnasium's), registered through the same hook as third
parties."""

from __future__ import annotations

from ..plugin.spec import hookimpl
from ..plugin.types import WrapperPlugin
from . import gymnasium_wrappers, legacy_final_info

__all__ = ["envfactory_wrappers"]


@hookimpl
def envfactory_wrappers() -> list[WrapperPlugin]:
    return [*gymnasium_wrappers(), legacy_final_info.RECORD]
