"""A plugin that imports fine but whose ``envfactory_env_families`` hook raises."""

from __future__ import annotations

import gymnasium as gym

import envfactory


def _identity(env: gym.Env) -> gym.Env:
    return env


@envfactory.hookimpl
def envfactory_env_families() -> list[envfactory.EnvFamilyPlugin]:
    raise RuntimeError("simulator licence server unreachable")


@envfactory.hookimpl
def envfactory_wrappers() -> list[envfactory.WrapperPlugin]:
    return [envfactory.WrapperPlugin("broken_identity", _identity, summary="does nothing")]
