"""A plugin whose ``envfactory_wrappers`` hook raises."""

from __future__ import annotations

import envfactory


@envfactory.hookimpl
def envfactory_wrappers() -> list[envfactory.WrapperPlugin]:
    raise RuntimeError("bad_wrappers: wrapper table corrupt")
