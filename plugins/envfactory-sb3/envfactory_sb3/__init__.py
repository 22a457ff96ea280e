"""Stable-Baselines3 adapter for envfactory: ``to_sb3(envfactory.make_vec(...))``.

Example:
    >>> import envfactory, numpy as np
    >>> from envfactory_sb3 import to_sb3
    >>> venv = to_sb3(envfactory.make_vec(overrides=["num_envs=2", "autoreset_mode=same_step"]))
    >>> venv.reset().shape
    (2, 4)
    >>> venv.close()
"""

from __future__ import annotations

from .adapter import SB3VecEnv, dict_infos_to_list, dummy_vec_env, subproc_vec_env, to_sb3

__all__ = ["SB3VecEnv", "dict_infos_to_list", "dummy_vec_env", "subproc_vec_env", "to_sb3"]
__version__ = "0.1.0"
