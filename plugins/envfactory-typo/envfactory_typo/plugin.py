"""``envfactory_env_familys`` is a typo of ``envfactory_env_families``."""

from __future__ import annotations

import gymnasium as gym

import envfactory


def _identity(env: gym.Env) -> gym.Env:
    return env


@envfactory.hookimpl
def envfactory_env_familys() -> list[envfactory.EnvFamilyPlugin]:  # sic
    return [envfactory.EnvFamilyPlugin("typo_family", gym.make)]


@envfactory.hookimpl
def envfactory_wrappers() -> list[envfactory.WrapperPlugin]:
    return [envfactory.WrapperPlugin("typo_identity", _identity)]
