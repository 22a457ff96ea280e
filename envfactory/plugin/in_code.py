"""Plugins registered in code ([`register_plugin`][envfactory.register_plugin]: notebooks, scripts),
without packaging: records or hook objects checked, idempotent for the same object."""

from __future__ import annotations

from typing import Any

from ..errors import (
    PluginConflictError,
    echo,
)
from . import spec
from .manager import EnvfactoryPluginManager, _lock, _state, get_plugin_manager
from .registry import _TABLE_KIND, IN_CODE, Provider, Registry, conflict_message
from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin

__all__ = ["register_plugin"]


def register_plugin(plugin: object, name: str | None = None) -> str:
    """Register a plugin in this process, without packaging (notebooks, scripts).

    ``plugin`` is a module or object with ``@envfactory.hookimpl`` functions, or one record
    (``EnvFamilyPlugin`` / ``VectorizerPlugin`` / ``WrapperPlugin``) or a list of records.
    The registry is rebuilt at once, so ``compose`` / ``make_vec`` see the new names.

    Registering the very same object again (a re-run notebook cell that registers a
    record defined in an earlier cell) changes nothing and returns its name. A name already
    registered (by any plugin), or the same name on a new object (a re-run cell that
    defines the record again), raises ``PluginConflictError`` naming who holds it and
    leaves everything as it was: call ``envfactory.reset_plugins()`` to forget the plugins
    registered in code and register again. Identity is the only safe test of "the same":
    a record defined again holds new functions, and replacing a registration silently
    would hide a real clash. Distribute a plugin with an ``envfactory`` entry point instead.

    Raises:
        TypeError: ``plugin`` is no record, list of records, module or object with
            ``@envfactory.hookimpl`` functions (``None``, ``42``, ``"x"``, ``{}``, ``[]``,
            a list with anything but records in it).
        PluginConflictError: a name is taken.

    Example:
        >>> import gymnasium as gym
        >>> import envfactory
        >>> def make_cartpole_long(max_episode_steps: int = 1000) -> gym.Env:
        ...     return gym.make("CartPole-v1", max_episode_steps=max_episode_steps)
        >>> record = envfactory.EnvFamilyPlugin("cartpole_long", make_cartpole_long)
        >>> envfactory.register_plugin(record)
        'cartpole_long'
        >>> envfactory.register_plugin(record)  # the same object again: nothing changes
        'cartpole_long'
        >>> with envfactory.make_vec(overrides=["env=cartpole_long", "num_envs=2"]) as envs:
        ...     envs.num_envs
        2
        >>> envfactory.reset_plugins()  # forget it again
    """
    records = _records_of(plugin)
    if records is not None:
        plugin = _RecordsPlugin(records)
        name = name or "+".join(r.name for r in records)
    elif name is not None and not isinstance(name, str):
        raise TypeError(f"register_plugin(name=...) must be a string, got {echo(name)}")
    name = name or getattr(plugin, "__name__", None) or f"in-process-{id(plugin):x}"
    with _lock:
        pm = get_plugin_manager()
        same = _registered_same(pm, plugin, records)
        if same is not None:
            return same
        if pm.has_plugin(name) or pm.is_registered(plugin):
            holder = pm.provider(name)
            who = "in code" if holder.distribution == IN_CODE else str(holder)
            raise PluginConflictError(
                f"a plugin named {echo(name)} is already registered in this process ({who}), "
                "and this is another object (a cell that defines its records again makes "
                "new ones); call envfactory.reset_plugins() first to forget the plugins "
                "registered in code, then register again"
            )
        pm.register_plugin(plugin, Provider(name, IN_CODE, "-"))
        try:
            if not pm.get_hookcallers(plugin):
                raise TypeError(
                    f"register_plugin() got {_what(plugin)}, which has no "
                    "@envfactory.hookimpl functions: pass a record (EnvFamilyPlugin, "
                    "VectorizerPlugin, WrapperPlugin), a list of records, or a module or "
                    "object with @envfactory.hookimpl functions"
                )
            registry = pm.build_registry(warn=False)
            clash = _conflicts_of(registry, name)
            if clash is not None:
                raise PluginConflictError(clash)
        except Exception:
            pm.unregister(plugin)
            pm.providers.pop(name, None)
            raise
        _state["registry"] = registry
    return name


_RECORD_TYPES = (EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin)


def _records_of(plugin: object) -> list[Any] | None:
    """The records ``plugin`` is (one, or a list/tuple of them), None for a module or an
    object that may hold hook implementations; a ``TypeError`` naming what was passed
    for anything else."""
    if isinstance(plugin, _RECORD_TYPES):
        return [plugin]
    if isinstance(plugin, (list, tuple)):
        if not plugin:
            raise TypeError(
                f"register_plugin() got an empty {type(plugin).__name__}: pass one or more "
                "records (EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin)"
            )
        for i, rec in enumerate(plugin):
            if not isinstance(rec, _RECORD_TYPES):
                raise TypeError(
                    f"register_plugin() got a list whose item {i} is {_what(rec)}, not a "
                    "record: every item must be an EnvFamilyPlugin, VectorizerPlugin or "
                    "WrapperPlugin"
                )
        return list(plugin)
    if plugin is None or isinstance(plugin, (str, bytes, int, float, dict, set)):
        raise TypeError(
            f"register_plugin() got {_what(plugin)}: pass a record (EnvFamilyPlugin, "
            "VectorizerPlugin, WrapperPlugin), a list of records, or a module or object with "
            "@envfactory.hookimpl functions"
        )
    return None


def _what(obj: object) -> str:
    return "None" if obj is None else f"{type(obj).__name__} {echo(obj)}"


def _registered_same(pm: EnvfactoryPluginManager, plugin: object, records: Any) -> str | None:
    """The name under which this very object (or, for records, these very records) is
    already registered, or None."""
    for registered_name, registered in pm.list_name_plugin():
        if registered is plugin:
            return registered_name
        if (
            records is not None
            and isinstance(registered, _RecordsPlugin)
            and len(registered.records) == len(records)
            and all(a is b for a, b in zip(registered.records, records))
        ):
            return registered_name
    return None


def _conflicts_of(reg: Registry, plugin: str) -> str | None:
    """The conflict message of the first name ``plugin`` clashes on (None if none)."""
    for table_name, names in reg.conflicts.items():
        for name, regs in names.items():
            if any(r.provider.plugin == plugin for r in regs):
                return conflict_message(_TABLE_KIND[table_name], name, regs)
    return None


class _RecordsPlugin:
    """A plugin object made from records passed to
    [`register_plugin`][envfactory.register_plugin]."""

    def __init__(self, records: list[Any]) -> None:
        self.records = records

    @spec.hookimpl
    def envfactory_env_families(self) -> list[Any]:
        return [r for r in self.records if isinstance(r, EnvFamilyPlugin)]

    @spec.hookimpl
    def envfactory_vectorizers(self) -> list[Any]:
        return [r for r in self.records if isinstance(r, VectorizerPlugin)]

    @spec.hookimpl
    def envfactory_wrappers(self) -> list[Any]:
        return [r for r in self.records if isinstance(r, WrapperPlugin)]
