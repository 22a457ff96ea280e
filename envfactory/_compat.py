"""Every use of another library's private API, in one place.

Each function here touches something a dependency does not promise to keep (a private
attribute, a module under ``_internal``). ``tests/project/test_compat.py`` exercises each one
against the installed versions, so an upgrade that moves one of them fails there, loudly
and by name, rather than somewhere deep in a run. Where a public API does the job it is
used instead (and noted here).

* Hydra: `hydra_config_loader` (``hydra._internal``): composing without
  ``GlobalHydra``, so [`envfactory.compose`][envfactory.compose] works inside a running
  ``@hydra.main`` app (``hydra.compose`` needs ``initialize()``, which refuses to run there);
  `configstore_remove` (``ConfigStore.repo``): ConfigStore has no public removal.
  Registering a config source or a search-path plugin uses the public
  ``Plugins.instance().register``.
* multiprocessing: `non_daemonic` (``Process._config["daemon"]``),
  `forget_inherited_forkserver`, `release_forkserver_alive_fd` and
  `forkserver_preload` (``multiprocessing.forkserver._forkserver``), `helper_pids`
  (that and ``multiprocessing.resource_tracker._resource_tracker``), `forget_children`
  (``multiprocessing.process._children``) and `without_main` (wraps the undocumented
  ``multiprocessing.spawn.get_preparation_data``).
* gymnasium: `add_info` (``VectorEnv._add_info``, how a vector env merges one
  env's info into the batch's infos, called for a batch that is not a ``VectorEnv``'s
  own: the async pool's ``batch_size`` rows). Episode statistics use envfactory's own
  wrapper, not ``RecordEpisodeStatistics``' private fields.
* pluggy: `replace_hookimpl_function` (``HookImpl.function``, typed ``Final``):
  the plugin manager guards each plugin's hook implementation where pluggy calls it.
* OmegaConf: none (``config/store.py`` reads a schema node's children with ``node[key]``
  after ``OmegaConf.is_missing`` / ``is_interpolation``, not ``_get_node``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "add_info",
    "configstore_remove",
    "forget_children",
    "forget_inherited_forkserver",
    "forkserver_preload",
    "helper_pids",
    "hydra_config_loader",
    "non_daemonic",
    "register_config_source",
    "register_hydra_plugin",
    "release_forkserver_alive_fd",
    "replace_hookimpl_function",
    "without_main",
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
    """Remove one entry from Hydra's ConfigStore (private: ``ConfigStore.repo``), and the
    groups it leaves empty (an empty group still lists, and ``get_type`` says GROUP)."""
    path = [cs.repo]
    for part in (group or "").split("/"):
        if part:
            path.append(path[-1].get(part, {}))
    path[-1].pop(f"{name}.yaml", None)
    parts = [p for p in (group or "").split("/") if p]
    for depth in range(len(parts), 0, -1):  # the innermost group first
        if path[depth] or parts[depth - 1] not in path[depth - 1]:
            break
        del path[depth - 1][parts[depth - 1]]


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


def _forkserver() -> Any:
    """``multiprocessing.forkserver._forkserver`` (None: the module is not imported)."""
    return getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)


def helper_pids() -> list[int]:
    """The pids of this process's fork server and resource tracker, where they run
    (``_forkserver._forkserver_pid``, ``_resource_tracker._pid``)."""
    module = sys.modules.get("multiprocessing.resource_tracker")
    tracker = getattr(module, "_resource_tracker", None)
    pids = [getattr(_forkserver(), "_forkserver_pid", None), getattr(tracker, "_pid", None)]
    return [pid for pid in pids if isinstance(pid, int)]


def _drop_alive_fd(fs: Any) -> None:
    """Forget the forkserver's address and "alive" pipe end, and close that end."""
    import os

    alive = getattr(fs, "_forkserver_alive_fd", None)
    fs._forkserver_address = fs._forkserver_alive_fd = None
    if alive is not None:
        try:
            os.close(alive)
        except OSError:
            pass


def forget_inherited_forkserver() -> None:
    """In a forked child: forget the parent's forkserver, so the child starts its own
    instead of talking to the parent's (private: ``multiprocessing.forkserver._forkserver``
    and its ``_forkserver_*`` fields)."""
    fs = _forkserver()
    if fs is None or getattr(fs, "_forkserver_pid", None) is None:
        return
    fs._forkserver_pid = None
    _drop_alive_fd(fs)


def release_forkserver_alive_fd() -> None:
    """In a child of the forkserver: close the write end of the forkserver's "alive" pipe
    that every such child inherits, and forget it, so the forkserver can exit as soon as
    the process that started it dies (private: ``multiprocessing.forkserver._forkserver``'s
    ``_forkserver_alive_fd`` / ``_forkserver_address``, set by the forkserver in each child
    it forks; ``_forkserver_pid`` is None there). Does nothing in the process that started
    a forkserver (the forkserver is its own) or with nothing inherited."""
    fs = _forkserver()
    if fs is None or getattr(fs, "_forkserver_pid", None) is not None:
        return  # (this process started that forkserver: it is its own)
    if getattr(fs, "_forkserver_alive_fd", None) is not None:
        _drop_alive_fd(fs)


def ensure_forkserver() -> None:
    """Start the fork server unless it runs (``multiprocessing.forkserver.ensure_running``,
    public but undocumented)."""
    from multiprocessing import forkserver

    forkserver.ensure_running()


def forkserver_preload(ctx: Any, modules: Sequence[str]) -> None:
    """Add ``modules`` to the forkserver's preload list, keeping what the user set there
    (``set_forkserver_preload`` replaces the list; the current list is the private
    ``multiprocessing.forkserver._forkserver._preload_modules``)."""
    current = list(getattr(_forkserver(), "_preload_modules", None) or [])
    wanted = current + [m for m in modules if m not in current]
    if wanted != current:
        ctx.set_forkserver_preload(wanted)


def forget_children(procs: Sequence[Any]) -> None:
    """In a forked child: drop ``procs`` (the parent's workers) from multiprocessing's list
    of this process's children, so the child's exit does not terminate them (private:
    ``multiprocessing.process._children``)."""
    children = getattr(sys.modules.get("multiprocessing.process"), "_children", None)
    if children is not None:
        for proc in procs:
            children.discard(proc)


# Under spawn and forkserver, multiprocessing makes every child re-run the parent's main
# script (as ``__mp_main__``) so that objects pickled by reference to ``__main__`` resolve.
# An unguarded script (no ``if __name__ == "__main__":``) then builds a vec env again in
# each worker while it bootstraps, and every worker dies with multiprocessing's
# "bootstrapping phase" traceback. envfactory's workers need nothing from ``__main__``: the
# env constructors travel by cloudpickle, which carries ``__main__``'s functions and classes
# by value, and the worker's own target lives in envfactory. multiprocessing has no option
# for this: the preparation data comes from ``spawn.get_preparation_data``, called inline by
# every Popen class. So that function is wrapped once (on envfactory's first worker start,
# never on import), and the wrapper drops the main-module entries only while a thread-local
# flag is set: other code's processes, in other threads or outside the block, are untouched.
_starting = threading.local()


def _install_prep_filter() -> None:
    from multiprocessing import spawn

    original = spawn.get_preparation_data
    if getattr(original, "_envfactory_filter", False):
        return

    def get_preparation_data(name: str) -> dict:
        data = original(name)
        if getattr(_starting, "worker", False):
            data.pop("init_main_from_name", None)
            data.pop("init_main_from_path", None)
            if data.get("start_method") not in ("fork", "forkserver", "spawn"):
                # a start method the worker cannot know: joblib's loky workers (Hydra's joblib
                # launcher) set the global one to "loky", and the child's set_start_method
                # would fail; the worker needs none (it starts no processes of its own)
                data.pop("start_method", None)
        return data

    get_preparation_data._envfactory_filter = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = get_preparation_data


@contextmanager
def without_main() -> Iterator[None]:
    """Processes started by this thread inside the block do not re-run ``__main__``."""
    _install_prep_filter()
    _starting.worker = True
    try:
        yield
    finally:
        _starting.worker = False


# -- gymnasium --------------------------------------------------------------------------


class _InfoBatch:
    """What ``VectorEnv._add_info`` reads of its vector env: ``num_envs`` (and itself,
    for nested info dicts)."""

    def __init__(self, num_envs: int) -> None:
        from gymnasium.vector import VectorEnv

        self.num_envs = num_envs
        self._add_info = VectorEnv._add_info.__get__(self)


def add_info(infos: dict[str, Any], info: dict[str, Any], index: int, num_envs: int) -> dict:
    """Merge env ``index``'s ``info`` into ``infos``, the infos of a batch of ``num_envs``
    rows, as gymnasium's vector envs do (``VectorEnv._add_info``: one array per key and a
    ``_key`` mask; ``final_obs`` as an object array; nested dicts recursively)."""
    return _InfoBatch(num_envs)._add_info(infos, info, index)


def wrapper_submodule(module: Any, name: str) -> str | None:
    """The submodule of ``gymnasium.wrappers`` (or ``gymnasium.wrappers.vector``) that
    defines wrapper ``name``, read from the package's lazy-import table (private:
    ``_wrapper_to_class``) so the wrapper's docstring can be read without importing it;
    None where the table or the name is missing."""
    table = getattr(module, "_wrapper_to_class", None)
    return table.get(name) if isinstance(table, dict) else None


def episode_statistics_key(env: Any, default: str | None) -> str | None:
    """The info key a gymnasium ``RecordEpisodeStatistics`` writes its statistics under
    (private: ``_stats_key``; gymnasium takes it as ``info_key`` and keeps no public
    attribute), or ``default``."""
    key = getattr(env, "_stats_key", None)
    return default if key is None else str(key)


# -- pluggy (the plugin manager's) -------------------------------------------------------


def replace_hookimpl_function(impl: Any, function: Any) -> None:
    """Make pluggy call ``function`` for one registered hook implementation instead of the
    plugin's own (private: ``HookImpl.function``, what pluggy's ``_multicall`` calls; it is
    typed ``Final`` and pluggy has no public way to wrap one implementation). The plugin
    manager uses it to guard each plugin's implementation inside pluggy's normal call path,
    so tracing, monitoring and hook wrappers still see every call."""
    setattr(impl, "function", function)  # noqa: B010  (a Final attribute, set on purpose)
