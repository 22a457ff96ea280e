"""Put every schema in Hydra's ConfigStore, and compose configs.

Families and vectorizers registered by plugins become Hydra config groups (``env=<name>``,
``vectorizer=<name>``) with their dataclass defaults and validation: no YAML needed.
``ConfigStore.store`` overwrites silently, so overwrites are refused here (the registry
already refused duplicate names) and entries from a previous registry are removed first.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from ..plugin.manager import Registry, _reset_callbacks, get_registry
from .schema import EnvfactoryConfig

__all__ = ["register_configs", "schema_node"]

_lock = threading.Lock()
_stored: list[tuple[str | None, str]] = []


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
    return node


def _forget() -> None:
    cs = ConfigStore.instance()
    for group, name in _stored:
        d = cs.repo
        if group:
            for part in group.split("/"):
                d = d.get(part, {})
        d.pop(f"{name}.yaml", None)
    _stored.clear()


def _store(group: str | None, name: str, node: Any, provider: str) -> None:
    cs = ConfigStore.instance()
    d = cs.repo
    if group:
        for part in group.split("/"):
            d = d.get(part, {})
    if f"{name}.yaml" in d and (group, name) not in _stored:
        where = f"{group}/{name}" if group else name
        raise ValueError(
            f"Hydra's ConfigStore already holds {where!r} (stored by "
            f"{d[f'{name}.yaml'].provider!r}); envfactory refuses to overwrite it"
        )
    cs.store(group=group, name=name, node=node, provider=provider)
    _stored.append((group, name))


def register_configs(registry: Registry | None = None) -> Registry:
    """Store the top-level schemas and every family/vectorizer schema in ConfigStore.

    Call it before composing envfactory's groups from your own ``@hydra.main`` app if the
    envfactory search-path plugin is not active (it calls this for you).
    """
    reg = registry or get_registry()
    with _lock:
        if _stored and _stored_for[0] is reg:
            return reg
        _forget()
        _store(None, "envfactory_schema", EnvfactoryConfig, "envfactory")
        for name, item in reg.families.items():
            node = schema_node(item.record.config, "family", name)
            _store("env", name, node, item.provider.distribution)
        for name, vitem in reg.vectorizers.items():
            node = schema_node(vitem.record.config, "name", name)
            _store("vectorizer", name, node, vitem.provider.distribution)
        _stored_for[0] = reg
    return reg


_stored_for: list[Registry | None] = [None]


def _on_reset() -> None:
    with _lock:
        _forget()
        _stored_for[0] = None


_reset_callbacks.append(_on_reset)


def search_dirs(registry: Registry) -> Sequence[str]:
    from .paths import conf_dir

    return [str(conf_dir()), *[d for d, _ in registry.config_dirs]]
