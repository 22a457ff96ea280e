"""A family named ``"gym\\n"``: it would show as a second ``gym`` row."""

from __future__ import annotations

import gymnasium as gym

import envfactory


def make(**options: object) -> gym.Env:
    return gym.make("CartPole-v1")


@envfactory.hookimpl
def envfactory_env_families() -> list[envfactory.EnvFamilyPlugin]:
    return [envfactory.EnvFamilyPlugin("gym\n", make)]
