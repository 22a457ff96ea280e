"""A fresh envfactory plugin registry around every test (nothing leaks between tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import envfactory


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("ENVFACTORY_DISABLED_PLUGINS", raising=False)
    envfactory.reset_plugins()
    yield
    envfactory.reset_plugins()
