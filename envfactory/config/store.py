"""envfactory's configs for Hydra, kept out of every other Hydra app's groups.

Families and vectorizers registered by plugins become config groups with their dataclass
defaults and validation: no YAML needed. They live in two places, and neither is a root
group of Hydra's global ``ConfigStore``, so an app with its own ``env`` group never sees
envfactory's options:

* **envfactory's own composition** ([`envfactory.compose`][envfactory.compose],
  ``make_vec(overrides=...)`` and the ``envfactory`` command) reads the root groups ``env``,
  ``vectorizer`` and ``envfactory_schema`` from a private config source, ``envfactory://``
  (`EnvfactoryConfigSource`), that only envfactory's own search paths name.
* **Your own Hydra app** opts in with [`register_configs`][envfactory.register_configs], which
  stores everything under the ``envfactory/`` namespace of Hydra's ``ConfigStore`` (Hydra 1.3's
  pattern for libraries): ``envfactory/default`` (the node), ``envfactory/env/<name>``,
  ``envfactory/vectorizer/<name>`` (schemas and the YAML presets of envfactory and its
  plugins). Nothing happens on ``import envfactory``.

``ConfigStore.store`` overwrites silently, so overwrites of entries envfactory did not
store are refused here.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import DictConfig, OmegaConf

from .. import _compat
from ..errors import PluginLoadWarning
from ..plugin.manager import Registry, _reset_callbacks, get_registry
from .schema import EnvfactoryConfig

__all__ = [
    "NAMESPACE",
    "EnvfactoryConfigSource",
    "EnvfactorySearchPathPlugin",
    "extend_search_path",
    "register_configs",
    "root_configs",
    "schema_node",
    "search_dirs",
    "usable_choices",
    "use_in_this_app",
]

NAMESPACE = "envfactory"
SCHEME = "envfactory"

_lock = threading.RLock()


def schema_node(cls: type | None, key: str, name: str) -> Any:
    """A structured node for a record's schema, with ``<key>: <name>`` as a field."""
    if cls is None:
        return OmegaConf.create({key: name})  # no schema: open node
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if key not in fields:
        cls = dataclasses.make_dataclass(
            cls.__name__, [(key, str, dataclasses.field(default=name))], bases=(cls,)
        )
    node = OmegaConf.structured(cls)
    node[key] = name
    for k in node:  # a dict field (``kwargs``) is free-form: ``env.kwargs={a: 1}`` adds keys
        if OmegaConf.is_missing(node, k) or OmegaConf.is_interpolation(node, k):
            continue
        child = node[k]  # a container field: its node itself
        if isinstance(child, DictConfig) and OmegaConf.get_type(child) is dict:
            OmegaConf.set_struct(child, False)
    return node


def _schema_entries(reg: Registry) -> Iterator[tuple[str, str, Callable[[], Any], str]]:
    """``(group, name, make_node, provider)`` of every family and vectorizer schema
    (``make_node()`` builds its `schema_node`: a structured node costs ~1 ms, and a
    composition loads only the few it picks)."""
    for name, item in reg.families.items():
        make = functools.partial(schema_node, item.record.config, "family", name)
        yield "env", name, make, item.provider.distribution
    for name, vitem in reg.vectorizers.items():
        make = functools.partial(schema_node, vitem.record.config, "name", name)
        yield "vectorizer", name, make, vitem.provider.distribution
    # a name two plugins register composes as an open node, so that validation (not
    # Hydra's "could not find") says who clashes and how to disable one
    for table, group, key in (("families", "env", "family"), ("vectorizers", "vectorizer", "name")):
        for name, regs in reg.conflicts.get(table, {}).items():
            dists = "+".join(r.provider.distribution for r in regs)
            yield group, name, functools.partial(schema_node, None, key, name), dists


# -- envfactory's own composition: the private ``envfactory://`` source -----------------

#: "env/gym.yaml" -> (node, or the function that builds it on first load; provider)
_root: dict[str, tuple[Any, str]] = {}
_root_for: list[Registry | None] = [None]


class EnvfactoryConfigSource(ConfigSource):
    """Hydra config source ``envfactory://``: envfactory's schemas as root groups.

    Only envfactory's own search paths ([`envfactory.compose`][envfactory.compose], the
    ``envfactory`` command) name it, so the root ``env`` / ``vectorizer`` groups it serves are never
    merged into another app's groups.
    """

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def load_config(self, config_path: str) -> ConfigResult:
        key = self._normalize_file_name(config_path)
        with _lock:
            entry = _filled().get(key)
        if entry is None:
            raise ConfigLoadError(f"envfactory config not found: {config_path}")
        node, provider = entry
        if callable(node):  # built on first load (see _schema_entries)
            with _lock:
                node = node()
                _root[key] = (node, provider)
        return ConfigResult(
            config=copy.deepcopy(node),
            path=f"{SCHEME}://{self.path}",
            provider=provider,
            header={"package": None},
        )

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        prefix = config_path.strip("/")
        with _lock:
            return prefix == "" or any(k.startswith(prefix + "/") for k in _filled())

    def is_config(self, config_path: str) -> bool:
        with _lock:
            return self._normalize_file_name(config_path.rstrip("/")) in _filled()

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        prefix = config_path.strip("/")
        prefix = f"{prefix}/" if prefix else ""
        with _lock:
            children = {k[len(prefix) :].split("/")[0] for k in _filled() if k.startswith(prefix)}
        out: list[str] = []
        for child in sorted(children):
            self._list_add_result(
                files=out,
                file_path=f"{prefix}{child}",
                file_name=child,
                results_filter=results_filter,
            )
        return sorted(set(out))


def _filled() -> dict[str, tuple[Any, str]]:
    """The root configs, filled from this process's registry if still empty: a Hydra
    launcher that runs jobs in other processes (joblib/loky, multiprocessing, submitit,
    Ray) pickles the config loader with this source, and its worker process has not
    loaded envfactory's plugins yet."""
    with _lock:
        if not _root:
            root_configs()
        return _root


def root_configs(registry: Registry | None = None) -> Registry:
    """Fill the private ``envfactory://`` source from the registry (once per registry) and
    make sure Hydra knows the scheme. Used by [`envfactory.compose`][envfactory.compose] and the
    command."""
    reg = registry or get_registry()
    with _lock:
        if _root_for[0] is not reg:
            entries: dict[str, tuple[Any, str]] = {
                "envfactory_schema.yaml": (OmegaConf.structured(EnvfactoryConfig), "envfactory")
            }
            for group, name, make, provider in _schema_entries(reg):
                entries[f"{group}/{name}.yaml"] = (make, provider)
            _root.clear()
            _root.update(entries)
            _root_for[0] = reg
        _compat.register_config_source(EnvfactoryConfigSource)
    return reg


def search_dirs(registry: Registry) -> Sequence[str]:
    """envfactory's ``conf/`` folder, then every plugin's config folder."""
    from .paths import conf_dir

    return [str(conf_dir()), *[d for d, _ in registry.config_dirs]]


def extend_search_path(search_path: ConfigSearchPath, registry: Registry) -> None:
    """Add the plugins' config folders and ``envfactory://`` to an envfactory search path
    (envfactory's ``conf/`` is the primary config dir there).

    ``envfactory://`` goes first: a name that two config sources give (a preset named like
    a registered vectorizer, or like another folder's preset) is in the registry's
    conflicts, and what ``envfactory://`` serves for it (an open node, whose validation
    raises the clash) must win over every folder's file of that name. It serves no other
    name a folder has, so the order changes nothing else."""
    from hydra.core.config_search_path import SearchPathQuery

    present = {e.path for e in search_path.get_path()}
    entries = [
        (f"envfactory-plugin-{i}", f"file://{d}")
        for i, d in enumerate(search_dirs(registry)[1:])
        if f"file://{d}" not in present and d not in present
    ]
    # right after the primary dir: Hydra wants its "schema" source to stay the last one
    anchor = SearchPathQuery(provider="main")
    for provider, path in reversed(entries):
        search_path.append(provider=provider, path=path, anchor=anchor)
    if f"{SCHEME}://" not in present:
        search_path.prepend(provider="envfactory", path=f"{SCHEME}://")


class EnvfactorySearchPathPlugin(SearchPathPlugin):
    """Search path of the ``envfactory`` command only: it is registered by the command
    (`use_in_this_app`), never installed into ``hydra_plugins``, so other Hydra apps
    in the environment do not import envfactory nor see its groups."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        extend_search_path(search_path, root_configs())


def use_in_this_app() -> Registry:
    """For the ``envfactory`` command (envfactory is the app): load the plugins, serve the
    root groups and put the plugins' config folders on this process's Hydra search path."""
    reg = root_configs()
    _compat.register_hydra_plugin(EnvfactorySearchPathPlugin)
    return reg


# -- your own Hydra app: the ``envfactory/`` namespace of ConfigStore -------------------

_stored: list[tuple[str, str]] = []  # (group, name) stored by register_configs
_stored_for: list[Registry | None] = [None]
_HEADER = re.compile(r"^\s*#\s*@package\s+(\S+)\s*$")


def _preset_entries(reg: Registry) -> Iterator[tuple[str, str, Any, str, str | None]]:
    """``(group, name, node, provider, package)`` of the YAML presets under ``env/`` and
    ``vectorizer/`` in envfactory's ``conf/`` and every plugin's config folder."""
    from .paths import conf_dir

    dirs = [(str(conf_dir()), "envfactory"), *[(d, p.distribution) for d, p in reg.config_dirs]]
    for folder, provider in dirs:
        for group in ("env", "vectorizer"):
            for path in sorted(Path(folder, group).glob("*.yaml")):
                try:
                    text = path.read_text()
                    ConfigSource._get_header_dict(text[:512])  # a header Hydra cannot read
                    node = OmegaConf.create(text) if text.strip() else OmegaConf.create({})
                except Exception as exc:
                    warnings.warn(
                        f"envfactory: the preset {path} from distribution {provider!r} was "
                        f"skipped: {type(exc).__name__}: {' '.join(str(exc).split())}",
                        PluginLoadWarning,
                        stacklevel=4,
                    )
                    continue
                package = None
                for line in text.splitlines():
                    if not line.strip():
                        continue
                    m = _HEADER.match(line)
                    if m is None and not line.lstrip().startswith("#"):
                        break
                    if m is not None:
                        package = m.group(1)
                yield group, path.stem, node, provider, package


def usable_choices(group: str, options: Iterable[str], reg: Registry) -> list[str]:
    """The ``options`` of the ``env`` / ``vectorizer`` group that compose: a registered
    name, or a preset whose defaults list names only usable ones (a preset of a disabled
    or missing family is left out)."""
    table = reg.families if group == "env" else reg.vectorizers
    bases = {
        name: [d for d in (node.get("defaults") or []) if isinstance(d, str) and d != "_self_"]
        for g, name, node, _, _ in _preset_entries(reg)
        if g == group
    }

    def usable(name: str, seen: tuple[str, ...] = ()) -> bool:
        if name in table:
            return True
        if name not in bases or name in seen:
            return False
        return all(usable(b, (*seen, name)) for b in bases[name])

    return [str(o) for o in options if usable(str(o))]


def _forget() -> None:
    for group, name in _stored:
        _compat.configstore_remove(ConfigStore.instance(), group, name)
    _stored.clear()
    _stored_for[0] = None


def _store(group: str, name: str, node: Any, provider: str, package: str | None = None) -> None:
    cs = ConfigStore.instance()
    path = f"{group}/{name}.yaml"
    if cs.get_type(path) is not ObjectType.NOT_FOUND and (group, name) not in _stored:
        raise ValueError(
            f"Hydra's ConfigStore already holds {group}/{name} (stored by "
            f"{cs.load(path).provider!r}); envfactory refuses to overwrite it"
        )
    cs.store(group=group, name=name, node=node, provider=provider, package=package)
    _stored.append((group, name))


def register_configs(registry: Registry | None = None) -> Registry:
    """Make envfactory's config groups composable in your own ``@hydra.main`` app.

    Call it once before the app composes (for example at module level, next to your own
    ``ConfigStore`` entries). Everything goes under the ``envfactory/`` namespace, so your
    app's own groups (an ``env`` group of yours included) are untouched:

    * ``envfactory/default``: the whole ``envfactory`` node (``conf/envfactory.yaml``).
    * ``envfactory/env/<name>``: every family's schema and every env preset
      (envfactory's and the plugins').
    * ``envfactory/vectorizer/<name>``: every vectorizer's schema and preset.

    In your primary config:

        defaults:
          - envfactory: default   # lands at cfg.envfactory
          - _self_

    and on the command line ``envfactory/env=atari envfactory.env.frame_skip=2
    envfactory/vectorizer=subproc envfactory.num_envs=8``. Pass ``cfg.envfactory`` to
    [`envfactory.make_vec`][envfactory.make_vec].

    Example:
        >>> import envfactory
        >>> from hydra.core.config_store import ConfigStore
        >>> _ = envfactory.register_configs()
        >>> ConfigStore.instance().load("envfactory/env/mountaincar.yaml").node.family
        'mountaincar'
    """
    from .paths import conf_dir

    reg = registry or get_registry()
    with _lock:
        if _stored and _stored_for[0] is reg:
            return reg
        _forget()
        _store(NAMESPACE, "schema", EnvfactoryConfig, "envfactory")
        node = OmegaConf.load(conf_dir() / "envfactory.yaml")
        assert isinstance(node, DictConfig)
        node.defaults = [
            "schema" if d == "envfactory_schema" else d for d in node.get("defaults", [])
        ]
        _store(NAMESPACE, "default", node, "envfactory")
        schemas = set()
        for group, name, make, provider in _schema_entries(reg):
            _store(f"{NAMESPACE}/{group}", name, make(), provider)
            schemas.add((group, name))
        for group, name, pnode, provider, package in _preset_entries(reg):
            if (group, name) in schemas:
                continue  # a preset never hides a registered family/vectorizer schema
            schemas.add((group, name))
            _store(f"{NAMESPACE}/{group}", name, pnode, provider, package)
        _stored_for[0] = reg
    return reg


def _on_reset() -> None:
    with _lock:
        _forget()
        _root.clear()
        _root_for[0] = None


_reset_callbacks.append(_on_reset)
