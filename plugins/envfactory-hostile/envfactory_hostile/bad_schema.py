"""A family whose config dataclass OmegaConf cannot handle (a ``complex`` field)."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

import envfactory


@dataclass
class WavyConfig:
    family: str = "wavy"
    phase: complex = 1j


def make_wavy(phase: complex = 1j) -> gym.Env:
    return gym.make("CartPole-v1")


@envfactory.hookimpl
def envfactory_env_families() -> list[envfactory.EnvFamilyPlugin]:
    return [envfactory.EnvFamilyPlugin("wavy", make_wavy, WavyConfig)]
