"""A plugin module that fails at import, like one whose optional simulator is missing."""

import envfactory

raise ImportError(
    "envfactory_broken.broken_import needs the 'fancy_simulator' package, which is not installed"
)


@envfactory.hookimpl
def envfactory_env_families():  # never reached
    return []
