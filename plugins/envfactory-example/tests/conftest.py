"""Every test hermetic: a fresh envfactory plugin registry, nothing disabled by the shell,
no user presets (envfactory's pytest plugin,
[`envfactory.testing.pytest_plugin`][envfactory.testing.pytest_plugin])."""

from envfactory.testing.pytest_plugin import hermetic_envfactory  # noqa: F401 (autouse)
