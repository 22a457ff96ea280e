"""Hydra config schemas, ConfigStore registration and composition."""

from .compose import compose, resolve_config, validate
from .paths import conf_dir
from .schema import AutoresetMode, EnvfactoryConfig, Policy, RunConfig, Seeding
from .store import register_configs

__all__ = [
    "AutoresetMode",
    "EnvfactoryConfig",
    "Policy",
    "RunConfig",
    "Seeding",
    "compose",
    "conf_dir",
    "register_configs",
    "resolve_config",
    "validate",
]
