"""The plugin guide's ``my_pendulum`` family, without ``@envfactory.hookimpl`` (sic)."""

from dataclasses import dataclass

import gymnasium as gym

import envfactory


@dataclass
class MyPendulumConfig:  # the schema of env=my_pendulum: defaults, types, checks
    family: str = "my_pendulum"
    g: float = 10.0

    def __post_init__(self) -> None:  # runs in the parent at compose time
        if not self.g > 0:
            raise envfactory.OptionError("g", self.g, "a gravity > 0")


def make(g: float) -> gym.Env:  # receives the checked fields (not "family")
    return gym.make("Pendulum-v1", g=g)


def envfactory_env_families():  # no @envfactory.hookimpl (sic)
    return [envfactory.EnvFamilyPlugin("my_pendulum", make, MyPendulumConfig)]
