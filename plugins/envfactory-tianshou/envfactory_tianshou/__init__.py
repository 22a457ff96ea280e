"""Tianshou adapter for envfactory: ``to_tianshou(envfactory.make_vec(...))``.

Example:
    >>> import envfactory
    >>> from envfactory_tianshou import to_tianshou
    >>> venv = to_tianshou(envfactory.make_vec(overrides=["num_envs=2"]))
    >>> obs, infos = venv.reset()
    >>> obs.shape, len(venv), infos[1]["env_id"]
    ((2, 4), 2, 1)
    >>> venv.close()
"""

from __future__ import annotations

from .adapter import TianshouVectorEnv, to_tianshou

__all__ = ["TianshouVectorEnv", "to_tianshou"]
__version__ = "0.1.0"
