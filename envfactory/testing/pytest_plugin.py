"""envfactory's pytest plugin: hermetic tests for envfactory and for plugin packages.

The autouse fixture [`hermetic_envfactory`][envfactory.testing.pytest_plugin.hermetic_envfactory]
gives every test a fresh plugin manager and registry (built before the test, thrown away after it),
no ``ENVFACTORY_DISABLED_PLUGINS`` inherited from the developer's shell, and an empty user config
folder (``ENVFACTORY_CONFIG_DIR`` set to a new temporary folder): the developer's own presets
(``envfactory tune`` writes them to ``~/.config/envfactory`` or
``$XDG_CONFIG_HOME/envfactory``) never reach a test, in this process or in the subprocesses
it starts. Installed plugin packages are still found through their entry points, as users
get them.

Use it from a plugin's ``tests/conftest.py`` (one line; pytest finds fixtures by name in a
conftest):

    from envfactory.testing.pytest_plugin import hermetic_envfactory  # noqa: F401

or from a project's top-level ``conftest.py`` as ``pytest_plugins =
["envfactory.testing.pytest_plugin"]`` (as tox ships ``tox.pytest``). This module needs
pytest; the rest of [`envfactory.testing`][envfactory.testing] does not import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cli.presets import CONFIG_DIR_ENV_VAR
from ..plugin import reset_plugins
from ..plugin.registry import DISABLE_ENV_VAR

__all__ = ["hermetic_envfactory"]


@pytest.fixture(autouse=True)
def hermetic_envfactory(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A fresh plugin registry around every test, nothing disabled by the shell, and an
    empty user config folder.

    Yields:
        The test's user config folder (``$ENVFACTORY_CONFIG_DIR``; empty, it exists): a
        test that writes a preset there composes it by name.
    """
    monkeypatch.delenv(DISABLE_ENV_VAR, raising=False)
    folder = tmp_path_factory.mktemp("user-config")
    monkeypatch.setenv(CONFIG_DIR_ENV_VAR, str(folder))
    reset_plugins()
    yield folder
    reset_plugins()
