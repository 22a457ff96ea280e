"""Registers a family named ``gym``, which the built-in family already is."""

from __future__ import annotations

import gymnasium as gym

import envfactory


def make_other_gym(id: str = "CartPole-v1") -> gym.Env:
    return gym.make(id)


@envfactory.hookimpl
def envfactory_env_families() -> list[envfactory.EnvFamilyPlugin]:
    return [envfactory.EnvFamilyPlugin("gym", make_other_gym, summary="a clashing 'gym'")]
