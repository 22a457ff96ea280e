"""Built-in vectorizers (registered in `builtin`); the names below are imported on first use,
so a worker process loads only what a worker runs (not the plugin system or the configs)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .builtin import envfactory_vectorizers
    from .dummy import DummyVecEnv
    from .front.base import VecEnvBase
    from .front.env_calls import tile_images

_LAZY = {
    "DummyVecEnv": ".dummy",
    "VecEnvBase": ".front.base",
    "envfactory_vectorizers": ".builtin",
    "tile_images": ".front.env_calls",
}

__all__ = ["DummyVecEnv", "VecEnvBase", "envfactory_vectorizers", "tile_images"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)
