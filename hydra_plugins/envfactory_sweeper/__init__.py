"""envfactory's Hydra sweeper (a Hydra plugin: Hydra loads plugins only from its
``hydra_plugins`` namespace). The logic lives in :mod:`envfactory.cli.sweeper`."""

from .envfactory_sweeper import EnvfactorySweeper, EnvfactorySweeperConf

__all__ = ["EnvfactorySweeper", "EnvfactorySweeperConf"]
