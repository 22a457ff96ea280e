"""A plugin whose hook calls ``sys.exit``."""

from __future__ import annotations

import sys

import envfactory


@envfactory.hookimpl
def envfactory_env_families() -> list[envfactory.EnvFamilyPlugin]:
    sys.exit("exit_hook: no licence, giving up")
