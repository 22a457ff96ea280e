"""Hydra config schemas, ConfigStore registration and composition."""

from .checks import TopLevel
from .compose import compose, resolve, resolve_config, validate
from .paths import conf_dir
from .plan import Plan
from .schema import AutoresetMode, EnvfactoryConfig, Policy, RunConfig, Seeding
from .store import register_configs

__all__ = [
    "AutoresetMode",
    "EnvfactoryConfig",
    "Plan",
    "Policy",
    "RunConfig",
    "Seeding",
    "TopLevel",
    "compose",
    "conf_dir",
    "register_configs",
    "resolve",
    "resolve_config",
    "validate",
]
