"""Built-in vectorizers; their registrations are in :mod:`.builtin`."""

from __future__ import annotations

from .base import VecEnvBase, tile_images
from .builtin import envfactory_vectorizers
from .dummy import DummyVecEnv

__all__ = ["DummyVecEnv", "VecEnvBase", "envfactory_vectorizers", "tile_images"]
