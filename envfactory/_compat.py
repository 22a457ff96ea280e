"""Every use of another library's private API, in one place.

Each function here touches something a dependency does not promise to keep (a private
attribute, a module under ``_internal``). ``tests/test_compat.py`` exercises each one
against the installed versions, so an upgrade that moves one of them fails there, loudly
and by name, rather than somewhere deep in a run. Where a public API does the job it is
used instead (and noted here).

* Hydra: :func:`hydra_config_loader` (``hydra._internal``): composing without
  ``GlobalHydra``, so :func:`envfactory.compose` works inside a running ``@hydra.main`` app
  (``hydra.compose`` needs ``initialize()``, which refuses to run there);
  :func:`configstore_remove` (``ConfigStore.repo``): ConfigStore has no public removal.
  Registering a config source or a search-path plugin uses the public
  ``Plugins.instance().register``.
* multiprocessing: :func:`parent_daemon_flag` (``Process._config["daemon"]``) and
  :func:`forget_inherited_forkserver` (``multiprocessing.forkserver._forkserver``).
* gymnasium: none (episode statistics use envfactory's own wrapper, not
  ``RecordEpisodeStatistics``' private fields).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "configstore_remove",
    "forget_inherited_forkserver",
    "hydra_config_loader",
    "non_daemonic",
    "register_config_source",
    "register_hydra_plugin",
]


# -- Hydra -----------------------------------------------------------------------------


def register_hydra_plugin(cls: type) -> None:
    """Register a Hydra plugin class in this process (public: ``Plugins.register``)."""
    from hydra.core.plugins import Plugins

    plugins = Plugins.instance()
    from hydra.plugins.search_path_plugin import SearchPathPlugin

    if issubclass(cls, SearchPathPlugin) and cls in plugins.discover(SearchPathPlugin):
        return
    plugins.register(cls)


def register_config_source(cls: type) -> None:
    """Make Hydra resolve ``<cls.scheme()>://`` search-path entries (public API:
    ``Plugins.register`` also registers a ConfigSource's scheme)."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource

    plugins = Plugins.instance()
    if cls not in plugins.discover(ConfigSource):
        plugins.register(cls)


def hydra_config_loader(primary_dir: str) -> tuple[Any, Any]:
    """``(search_path, make_loader)``: Hydra's default search path for ``primary_dir``
    (with every registered SearchPathPlugin applied, as ``@hydra.main`` does) and a
    function building a config loader over it. Private: ``hydra._internal``."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    def make_loader(search_path: Any) -> Any:
        return ConfigLoaderImpl(config_search_path=search_path)

    return create_config_search_path(primary_dir), make_loader


def configstore_remove(cs: Any, group: str | None, name: str) -> None:
    """Remove one entry from Hydra's ConfigStore (private: ``ConfigStore.repo``)."""
    d = cs.repo
    for part in (group or "").split("/"):
        if part:
            d = d.get(part, {})
    d.pop(f"{name}.yaml", None)


# -- multiprocessing -------------------------------------------------------------------


@contextmanager
def non_daemonic() -> Iterator[None]:
    """Let a daemonic process (some Hydra launchers run jobs in one) start children.

    multiprocessing refuses with "daemonic processes are not allowed to have children";
    the flag it checks is the private ``Process._config["daemon"]``."""
    import multiprocessing

    current = multiprocessing.current_process()
    was_daemon = current._config.get("daemon", False)  # type: ignore[attr-defined]
    if not was_daemon:
        yield
        return
    current._config["daemon"] = False  # type: ignore[attr-defined]
    try:
        yield
    finally:
        current._config["daemon"] = True  # type: ignore[attr-defined]


def forget_inherited_forkserver() -> None:
    """In a forked child: forget the parent's forkserver, so the child starts its own
    instead of talking to the parent's (private: ``multiprocessing.forkserver._forkserver``
    and its ``_forkserver_*`` fields)."""
    import os

    fs = getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)
    if fs is None or getattr(fs, "_forkserver_pid", None) is None:
        return
    alive = getattr(fs, "_forkserver_alive_fd", None)
    fs._forkserver_pid = fs._forkserver_address = fs._forkserver_alive_fd = None
    if alive is not None:
        try:
            os.close(alive)
        except OSError:
            pass


def forkserver_preload(ctx: Any, modules: Sequence[str]) -> None:
    """Add ``modules`` to the forkserver's preload list, keeping what the user set there
    (``set_forkserver_preload`` replaces the list; the current list is the private
    ``multiprocessing.forkserver._forkserver._preload_modules``)."""
    fs = getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)
    current = list(getattr(fs, "_preload_modules", None) or [])
    wanted = current + [m for m in modules if m not in current]
    if wanted != current:
        ctx.set_forkserver_preload(wanted)
