"""The plugin manager: load built-ins and entry points, collect and check records.

Built-ins register through the same hooks as third parties. Entry points in group
``envfactory`` are loaded one at a time (not with pluggy's all-or-nothing
``load_setuptools_entrypoints``) so one broken plugin is reported by distribution name and
skipped while the others still load.

The registry degrades instead of failing:

* ``ENVFACTORY_DISABLED_PLUGINS`` (plugin or distribution names, comma-separated) goes
  to pluggy's own block list (``set_blocked``); a blocked plugin is never imported.
* Hooks are called once each through pluggy's normal call path (``pm.hook.<name>()``),
  so ``pm.enable_tracing()``, ``add_hookcall_monitoring`` and hook wrappers
  (``@hookimpl(wrapper=True)``) work. Each plugin's implementation is guarded when it is
  registered: one that raises (``SystemExit`` included) is reported by distribution and
  its result left out, and every result is attributed to the plugin that returned it.
* A name registered by two plugins is unusable (using it raises
  :class:`~envfactory.errors.ConflictingNameError` naming both distributions and how to
  disable one), everything else works, and ``envfactory-plugins`` shows the conflict.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy

from .. import _compat
from ..errors import (
    ConflictingNameError,
    PluginConflictError,
    PluginLoadWarning,
    UnknownNameError,
    did_you_mean,
    echo,
)
from . import spec
from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin

__all__ = [
    "BUILTIN_MODULES",
    "DISABLE_ENV_VAR",
    "PluginFailure",
    "PluginStatus",
    "Provider",
    "Registered",
    "Registry",
    "available",
    "get_plugin_manager",
    "get_registry",
    "register_plugin",
    "reset_plugins",
]

DISABLE_ENV_VAR = "ENVFACTORY_DISABLED_PLUGINS"
IN_CODE = "<registered in code>"  # the distribution of a plugin given to register_plugin()
BUILTIN_MODULES = {  # plugin name -> the module holding its hook implementations
    "envfactory.families": "envfactory.families.builtin",
    "envfactory.vectorizers": "envfactory.vectorizers.builtin",
    "envfactory.wrappers": "envfactory.wrappers.builtin",
    "envfactory.user_config": "envfactory.cli.presets",  # presets of `envfactory tune`
}
_TABLE_KIND = {
    "families": "env family",
    "vectorizers": "vectorizer",
    "wrappers": "wrapper",
    "vector_wrappers": "vector wrapper",
}

R = TypeVar("R")


@dataclass(frozen=True)
class Provider:
    """Who registered a record: plugin name, distribution and its version."""

    plugin: str
    distribution: str
    version: str

    def __str__(self) -> str:
        return f"{self.distribution} {self.version} (plugin {self.plugin!r})"


@dataclass(frozen=True)
class Registered(Generic[R]):
    record: R
    provider: Provider


@dataclass(frozen=True)
class PluginFailure:
    provider: Provider
    stage: str  # "import" or the hook name
    error: str
    traceback: str


@dataclass(frozen=True)
class PluginStatus:
    """One plugin's state: ``active``, ``disabled`` (``detail``: by what), ``failed``
    (``detail``: the stage and error) or ``conflicting`` (``detail``: with whom)."""

    provider: Provider
    status: str
    detail: str = ""


@dataclass
class Registry:
    """Every record the loaded plugins gave, by kind and name, with its provider.

    ``conflicts`` holds the names two or more plugins registered (``{"families": {"gym":
    [Registered, Registered]}}``): they are in no table, and looking one up raises
    :class:`~envfactory.errors.ConflictingNameError`.
    """

    families: dict[str, Registered[EnvFamilyPlugin]] = field(default_factory=dict)
    vectorizers: dict[str, Registered[VectorizerPlugin]] = field(default_factory=dict)
    wrappers: dict[str, Registered[WrapperPlugin]] = field(default_factory=dict)
    vector_wrappers: dict[str, Registered[WrapperPlugin]] = field(default_factory=dict)
    config_dirs: list[tuple[str, Provider]] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    conflicts: dict[str, dict[str, list[Registered[Any]]]] = field(default_factory=dict)
    plugins: list[PluginStatus] = field(default_factory=list)
    blocked: dict[str, tuple[Provider, str]] = field(default_factory=dict)

    def family(self, name: str, key: str = "env.family") -> EnvFamilyPlugin:
        return self._lookup("families", name, key).record

    def vectorizer(self, name: str, key: str = "vectorizer.name") -> VectorizerPlugin:
        return self._lookup("vectorizers", name, key).record

    def wrapper(self, name: str, *, vector: bool = False, key: str = "") -> WrapperPlugin:
        return self._lookup("vector_wrappers" if vector else "wrappers", name, key).record

    def _lookup(self, table_name: str, name: str, key: str) -> Registered[Any]:
        table: dict[str, Registered[Any]] = getattr(self, table_name)
        kind = _TABLE_KIND[table_name]
        try:
            return table[name]
        except KeyError:
            clash = self.conflicts.get(table_name, {}).get(name)
            if clash:
                raise ConflictingNameError(conflict_message(kind, name, clash, key)) from None
            valid = [*table, *self.conflicts.get(table_name, {})]
            raise self.unknown_name(table_name, name, valid, key=key) from None

    def unknown_name(
        self, table_name: str, name: str, valid: list[str], *, key: str = "", kind: str = ""
    ) -> UnknownNameError:
        """The error for a name no enabled plugin registers: it says so when a disabled
        built-in plugin registers it (and by what it is disabled), and names the disabled
        third-party plugins, which may."""
        kind = kind or _TABLE_KIND[table_name]
        maybe = []
        for plugin, (provider, reason) in self.blocked.items():
            if plugin not in BUILTIN_MODULES:
                maybe.append(f"{plugin} ({provider.distribution}, by {reason})")
            elif name in _builtin_names(plugin).get(table_name, ()):
                disabled = (
                    f"plugin {plugin!r} ({provider.distribution}), which registers it, is "
                    f"disabled by {reason}. Remove {plugin} from {DISABLE_ENV_VAR} to use it"
                )
                return UnknownNameError(kind, name, valid, key=key, disabled=disabled)
        note = f"Disabled plugins, which may provide it: {', '.join(maybe)}." if maybe else ""
        return UnknownNameError(kind, name, valid, key=key, note=note)

    def as_dict(self) -> dict[str, Any]:
        def rows(table: dict[str, Registered[Any]]) -> dict[str, dict[str, str]]:
            return {
                name: {
                    "distribution": reg.provider.distribution,
                    "version": reg.provider.version,
                    "plugin": reg.provider.plugin,
                    "summary": reg.record.summary,
                }
                for name, reg in sorted(table.items())
            }

        return {
            "plugins": [
                {
                    "plugin": p.provider.plugin,
                    "distribution": p.provider.distribution,
                    "version": p.provider.version,
                    "status": p.status,
                    "detail": p.detail,
                    "registers": self.registered_by(p.provider.plugin),
                }
                for p in self.plugins
            ],
            "families": rows(self.families),
            "vectorizers": rows(self.vectorizers),
            "wrappers": rows(self.wrappers),
            "vector_wrappers": rows(self.vector_wrappers),
            "conflicts": [
                {
                    "kind": _TABLE_KIND[table_name],
                    "name": name,
                    "providers": [
                        {
                            "plugin": r.provider.plugin,
                            "distribution": r.provider.distribution,
                            "version": r.provider.version,
                        }
                        for r in regs
                    ],
                    "error": conflict_message(_TABLE_KIND[table_name], name, regs),
                }
                for table_name, names in sorted(self.conflicts.items())
                for name, regs in sorted(names.items())
            ],
            "config_dirs": [
                {"path": p, "distribution": prov.distribution, "version": prov.version}
                for p, prov in self.config_dirs
            ],
            "failures": [
                {
                    "plugin": f.provider.plugin,
                    "distribution": f.provider.distribution,
                    "version": f.provider.version,
                    "stage": f.stage,
                    "error": f.error,
                }
                for f in self.failures
            ],
            "disabled": list(self.disabled),
        }

    def registered_by(self, plugin: str) -> dict[str, list[str]]:
        """The names ``plugin`` registered, by kind (conflicting ones included)."""
        out: dict[str, list[str]] = {}
        for table_name in _TABLE_KIND:
            table: dict[str, Registered[Any]] = getattr(self, table_name)
            names = [n for n, r in table.items() if r.provider.plugin == plugin]
            names += [
                n
                for n, regs in self.conflicts.get(table_name, {}).items()
                if any(r.provider.plugin == plugin for r in regs)
            ]
            if names:
                out[table_name] = sorted(names)
        dirs = [d for d, prov in self.config_dirs if prov.plugin == plugin]
        if dirs:
            out["config_dirs"] = dirs
        return out


def _builtin_names(plugin: str) -> dict[str, list[str]]:
    """The names a built-in plugin registers, by table, from its hook functions called
    directly (envfactory's own module, imported only for this message)."""
    import importlib

    module = importlib.import_module(BUILTIN_MODULES[plugin])
    out: dict[str, list[str]] = {}
    for hook in ("envfactory_env_families", "envfactory_vectorizers", "envfactory_wrappers"):
        fn = getattr(module, hook, None)
        for rec in fn() if callable(fn) else []:
            if isinstance(rec, EnvFamilyPlugin):
                table = "families"
            elif isinstance(rec, VectorizerPlugin):
                table = "vectorizers"
            else:
                table = "vector_wrappers" if rec.vector else "wrappers"
            out.setdefault(table, []).append(rec.name)
    return out


def conflict_message(kind: str, name: str, regs: list[Registered[Any]], key: str = "") -> str:
    """One line: who registered ``name``, that it is unusable, how to disable one."""
    providers = [r.provider for r in regs]
    where = f" (at {key})" if key else ""
    who = " and ".join(str(p) for p in providers)
    fixes = []
    # a built-in never needs disabling: suggest the third-party plugins first
    third = [p for p in providers if p.distribution != "envfactory"] or providers
    installed = [p for p in third if p.distribution != IN_CODE]
    if installed:
        how = " or ".join(f"{DISABLE_ENV_VAR}={p.plugin}" for p in installed)
        dists = " / ".join(sorted({p.distribution for p in installed}))
        fixes.append(f"Disable one with {how} (or uninstall {dists})")
    if len(installed) < len(third):  # register_plugin(): the environment variable cannot help
        fixes.append(
            f"{'or r' if fixes else 'R'}ename the record registered in code, or call "
            "envfactory.reset_plugins() to forget the plugins registered in code (a re-run "
            "cell that defines the record again makes a new one)"
        )
    return (
        f"the {kind} {name!r}{where} is registered by {len(providers)} plugins: {who}, so it "
        f"cannot be used. {' '.join(fixes)}; 'envfactory-plugins' lists every conflict"
    )


class EnvfactoryPluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers which distribution gave each plugin, guards each
    plugin's hook implementations and blocks what ``ENVFACTORY_DISABLED_PLUGINS`` names."""

    def __init__(self) -> None:
        super().__init__(spec.NAME)
        self.add_hookspecs(spec)
        self.providers: dict[str, Provider] = {}
        self.failures: list[PluginFailure] = []
        self.disabled: list[str] = []
        self.blocked_by: dict[str, tuple[Provider, str]] = {}
        self._disable_tokens: dict[str, str] = {}  # normalized token -> as written
        self._returned: list[tuple[Provider, Any]] | None = None
        self._warned: set[tuple[Any, ...]] = set()

    # -- blocking -------------------------------------------------------------------

    def block(self, names: Iterable[str]) -> None:
        """Block plugins by plugin or distribution name (``ENVFACTORY_DISABLED_PLUGINS``),
        with pluggy's own block list: a blocked plugin is never imported or registered."""
        for raw in names:
            token = raw.strip()
            if not token:
                continue
            self._disable_tokens[_normalize(token)] = token
            if not self.is_blocked(token):
                self.set_blocked(token)

    def _blocked_reason(self, plugin: str, distribution: str) -> str | None:
        for name in (plugin, distribution):
            token = self._disable_tokens.get(_normalize(name))
            if token is not None:
                return f"{DISABLE_ENV_VAR}={token}"
        if self.is_blocked(plugin):
            return "set_blocked() in code"
        return None

    def _skip_blocked(self, provider: Provider) -> bool:
        reason = self._blocked_reason(provider.plugin, provider.distribution)
        if reason is None:
            return False
        if not self.is_blocked(provider.plugin):
            self.set_blocked(provider.plugin)  # blocked by its distribution's name
        if provider.plugin not in self.blocked_by:
            self.blocked_by[provider.plugin] = (provider, reason)
            self.disabled.append(f"{provider.plugin} ({provider.distribution})")
        return True

    # -- registration ---------------------------------------------------------------

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """pluggy's ``register``, then each (non-wrapper) hook implementation of the
        plugin is guarded: it runs in pluggy's normal call path, but an exception (also
        ``SystemExit``) is reported by distribution and the plugin's result left out,
        a plugin still busy after :data:`SLOW_AFTER_S` is named, and each result is
        attributed to its plugin."""
        registered = super().register(plugin, name)
        if registered is None:
            return None
        for caller in self.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and not (impl.hookwrapper or impl.wrapper):
                    guarded = self._guard(caller.name, impl.plugin_name, impl.function)
                    _compat.replace_hookimpl_function(impl, guarded)
        return registered

    def _guard(self, hook_name: str, plugin_name: str, fn: Callable[..., Any]) -> Any:
        if getattr(fn, "_envfactory_guarded", False):
            return fn

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            provider = self.provider(plugin_name)
            try:
                with _watch(provider, hook_name):
                    result = fn(*args, **kwargs)
            except (Exception, SystemExit) as exc:  # sys.exit in a plugin ends nothing here
                self._fail(provider, hook_name, exc)
                return None
            if result is not None and self._returned is not None:
                self._returned.append((provider, result))
            return result

        guarded._envfactory_guarded = True  # type: ignore[attr-defined]
        return guarded

    def provider(self, plugin_name: str) -> Provider:
        """Who gave the plugin registered as ``plugin_name``."""
        return self.providers.get(plugin_name) or Provider(plugin_name, IN_CODE, "-")

    def register_plugin(self, plugin: object, provider: Provider) -> None:
        """Register ``plugin`` and check its hook names at once.

        pluggy's ``check_pending()`` would only notice a misspelled hook after every
        plugin is loaded, and then raise for the whole process. Here a plugin whose
        ``@hookimpl`` names no known hook is unregistered again and
        ``pluggy.PluginValidationError`` is raised naming the hook and the closest valid
        name, so the caller can report and skip just that plugin.
        """
        if self.register(plugin, name=provider.plugin) is None:  # blocked
            return
        unknown = [
            caller.name
            for caller in self.get_hookcallers(plugin) or []
            if not caller.has_spec()
            and any(
                impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls()
            )
        ]
        if unknown:
            self.unregister(plugin)
            valid = sorted(n for n in vars(spec) if n.startswith(f"{spec.NAME}_"))
            hints = "; ".join(
                f"unknown hook {name!r}.{did_you_mean(name, valid)}" for name in sorted(unknown)
            )
            raise pluggy.PluginValidationError(plugin, f"{hints} Valid hooks: {', '.join(valid)}")
        self.providers[provider.plugin] = provider

    def load_builtins(self) -> None:
        import importlib

        version = _version("envfactory")
        for name, modname in BUILTIN_MODULES.items():
            provider = Provider(name, "envfactory", version)
            if self._skip_blocked(provider):
                continue
            self.register_plugin(importlib.import_module(modname), provider)

    def load_entrypoints(self, group: str = spec.NAME, disabled: Iterable[str] = ()) -> None:
        self.block(disabled)
        eps = _entry_points(group)
        self._warn_unknown_tokens(eps)
        for ep in eps:
            dist = ep.dist.name if ep.dist is not None else "<unknown distribution>"
            version = ep.dist.version if ep.dist is not None else "?"
            provider = Provider(ep.name, dist, version)
            if self._skip_blocked(provider):
                continue
            if self.has_plugin(ep.name):
                continue
            try:
                with _watch(provider, "import"):
                    plugin = ep.load()
            except (Exception, SystemExit) as exc:  # a broken plugin must not break envfactory
                self._fail(provider, "import", exc)
                continue
            try:
                self.register_plugin(plugin, provider)
            except (Exception, SystemExit) as exc:  # misspelled hook, bad signature, ...
                self._fail(provider, "registration", exc)

    def _warn_unknown_tokens(self, eps: list[md.EntryPoint]) -> None:
        """A name in ``ENVFACTORY_DISABLED_PLUGINS`` that is no installed plugin or
        distribution is a typo or a stale setting: say so once (it blocks nothing)."""
        names = {*BUILTIN_MODULES, "envfactory"}
        for ep in eps:
            names.add(ep.name)
            if ep.dist is not None:
                names.add(ep.dist.name)
        known = {_normalize(n) for n in names}
        choices = sorted({*BUILTIN_MODULES, *(ep.name for ep in eps)})
        for norm, token in self._disable_tokens.items():
            if norm in known:
                continue
            warnings.warn(
                f"{DISABLE_ENV_VAR} names {token!r}, which is no installed envfactory plugin "
                f"or distribution, so it blocks nothing.{did_you_mean(token, sorted(names))} "
                f"Plugins: {', '.join(choices)}",
                PluginLoadWarning,
                stacklevel=4,
            )

    def _fail(self, provider: Provider, stage: str, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        if any((f.provider, f.stage, f.error) == (provider, stage, error) for f in self.failures):
            return  # reported once
        failure = PluginFailure(provider, stage, error, traceback.format_exc())
        self.failures.append(failure)
        warnings.warn(
            f"envfactory plugin {provider.plugin!r} from distribution "
            f"{provider.distribution!r} {provider.version} was skipped: it failed in "
            f"{stage}: {failure.error}. Fix or uninstall it, or set "
            f"{DISABLE_ENV_VAR}={provider.plugin} to silence this.",
            PluginLoadWarning,
            stacklevel=3,
        )

    # -- calling --------------------------------------------------------------------

    def call_hook(self, hook_name: str) -> list[tuple[Provider, Any]]:
        """Call one hook once, through pluggy's normal call path, and return each
        plugin's result with its provider, in registration order.

        A result a hook wrapper added or replaced is attributed to the wrapper's plugin.
        If a hook wrapper itself raises, it is reported and the hook is called again
        without the wrappers, so the other plugins' results still count.
        """
        hook = getattr(self.hook, hook_name)
        wrappers = [i for i in hook.get_hookimpls() if i.hookwrapper or i.wrapper]
        results, returned = self._call_once(hook, hook_name, wrappers)
        by_result = {id(result): provider for provider, result in returned}
        by_record = {
            id(rec): provider
            for provider, result in returned
            if isinstance(result, (list, tuple))
            for rec in result
        }
        fallback = (
            self.provider(wrappers[0].plugin_name)
            if len(wrappers) == 1
            else Provider("+".join(w.plugin_name for w in wrappers) or "?", "<hook wrappers>", "-")
        )
        out: list[tuple[Provider, Any]] = []
        for result in reversed(results):  # pluggy calls the last registered first
            provider = by_result.get(id(result), fallback)
            if isinstance(result, (str, os.PathLike)) and hook_name == "envfactory_config_dirs":
                result = [result]
            if not isinstance(result, (list, tuple)):
                self._fail(
                    provider,
                    hook_name,
                    TypeError(f"{hook_name} must return a list, got {type(result).__name__}"),
                )
                continue
            if id(result) in by_result:
                out.append((provider, result))
                continue
            # a list a hook wrapper made: each record keeps the plugin that returned it
            for rec in result:
                out.append((by_record.get(id(rec), fallback), [rec]))
        return out

    def _call_once(
        self, hook: Any, hook_name: str, wrappers: list[Any]
    ) -> tuple[list[Any], list[tuple[Provider, Any]]]:
        returned: list[tuple[Provider, Any]] = []
        self._returned = returned
        try:
            try:
                return list(hook() or []), returned
            except (Exception, SystemExit) as exc:  # a hook wrapper raised
                if not wrappers:
                    raise
                for w in wrappers:
                    self._fail(self.provider(w.plugin_name), f"{hook_name} (hook wrapper)", exc)
            plain = [w.plugin for w in wrappers]
            self._returned = returned = []
            return list(self.subset_hook_caller(hook_name, plain)() or []), returned
        finally:
            self._returned = None

    def build_registry(self, warn: bool = True) -> Registry:
        """Call each hook once and index the records; a name two plugins register goes to
        ``conflicts`` (one :class:`PluginLoadWarning` each, unless ``warn`` is false)."""
        reg = Registry(failures=self.failures, disabled=self.disabled, blocked=self.blocked_by)
        _collect(self, reg, "envfactory_env_families", EnvFamilyPlugin, lambda rec: "families")
        _collect(self, reg, "envfactory_vectorizers", VectorizerPlugin, lambda rec: "vectorizers")
        # one call of the wrappers hook (a failure is reported once), split by ``vector``
        _collect(
            self,
            reg,
            "envfactory_wrappers",
            WrapperPlugin,
            lambda rec: "vector_wrappers" if rec.vector else "wrappers",
        )
        for provider, dirs in self.call_hook("envfactory_config_dirs"):
            for d in dirs:
                reg.config_dirs.append((os.fspath(d), provider))
        reg.plugins = self.statuses(reg)
        for table_name, names in reg.conflicts.items() if warn else ():
            for name, regs in names.items():
                key = (table_name, name, tuple(r.provider for r in regs))
                if key in self._warned:
                    continue
                self._warned.add(key)
                warnings.warn(
                    conflict_message(_TABLE_KIND[table_name], name, regs),
                    PluginLoadWarning,
                    stacklevel=3,
                )
        return reg

    def statuses(self, reg: Registry) -> list[PluginStatus]:
        """Every plugin's status: registered ones in registration order, then the ones
        that failed before registering, then the disabled ones."""
        out: list[PluginStatus] = []
        seen: set[str] = set()
        clashes: dict[str, list[str]] = {}
        for table_name, names in reg.conflicts.items():
            for name, regs in names.items():
                for r in regs:
                    others = ", ".join(
                        f"{o.provider.plugin} ({o.provider.distribution})"
                        for o in regs
                        if o.provider != r.provider
                    )
                    clashes.setdefault(r.provider.plugin, []).append(
                        f"{_TABLE_KIND[table_name]} {name!r} with {others}"
                    )
        failed: dict[str, list[PluginFailure]] = {}
        for f in reg.failures:
            failed.setdefault(f.provider.plugin, []).append(f)
        providers = [*self.providers.values()]
        providers += [f.provider for f in reg.failures if f.provider.plugin not in self.providers]
        for provider in providers:
            if provider.plugin in seen:
                continue
            seen.add(provider.plugin)
            if provider.plugin in failed:
                detail = "; ".join(f"in {f.stage}: {f.error}" for f in failed[provider.plugin])
                if provider.plugin in clashes:
                    detail += "; conflicts: " + "; ".join(clashes[provider.plugin])
                out.append(PluginStatus(provider, "failed", detail))
            elif provider.plugin in clashes:
                detail = "; ".join(clashes[provider.plugin])
                out.append(PluginStatus(provider, "conflicting", detail))
            else:
                out.append(PluginStatus(provider, "active"))
        for name, (provider, reason) in self.blocked_by.items():
            if name not in seen:
                out.append(PluginStatus(provider, "disabled", f"by {reason}"))
        return out


def _normalize(name: str) -> str:
    """Plugin and distribution names compare as PEP 503 does (``Foo_Bar`` = ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _collect(
    pm: EnvfactoryPluginManager,
    reg: Registry,
    hook_name: str,
    rtype: type[Any],
    table_of: Callable[[Any], str],
) -> None:
    for provider, records in pm.call_hook(hook_name):
        rec: Any
        for rec in records:
            if not isinstance(rec, rtype):
                pm._fail(
                    provider,
                    hook_name,
                    TypeError(f"{hook_name} must return {rtype.__name__} records, got {rec!r}"),
                )
                continue
            problem = _schema_problem(rec)
            if problem is not None:
                pm._fail(provider, hook_name, problem)
                continue
            table_name = table_of(rec)
            table: dict[str, Registered[Any]] = getattr(reg, table_name)
            clashes = reg.conflicts.setdefault(table_name, {})
            entry = Registered(rec, provider)
            if rec.name in clashes:
                clashes[rec.name].append(entry)
            elif rec.name in table:
                clashes[rec.name] = [table.pop(rec.name), entry]
            else:
                table[rec.name] = entry
        for table_name in _TABLE_KIND:
            if not reg.conflicts.get(table_name):
                reg.conflicts.pop(table_name, None)


def _schema_problem(rec: Any) -> Exception | None:
    """Why OmegaConf cannot make a config node of ``rec.config`` (None when it can), so a
    bad schema is that plugin's failure rather than every config's."""
    if rec.config is None:
        return None
    from omegaconf import OmegaConf

    try:
        OmegaConf.structured(rec.config)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return TypeError(
            f"the config dataclass {rec.config.__qualname__} of {rec.name!r} is not a valid "
            f"OmegaConf schema: {first}"
        )
    return None


SLOW_AFTER_S = 5.0
"""A plugin still importing (or in a hook) after this many seconds is named on stderr."""


@contextmanager
def _watch(provider: Provider, stage: str) -> Iterator[None]:
    """Name a plugin that is still busy after :data:`SLOW_AFTER_S` seconds, with how to
    disable it (it is not interrupted: it may just be slow)."""

    def warn() -> None:
        stage_text = "importing" if stage == "import" else f"in its hook {stage}"
        print(
            f"envfactory: warning: plugin {provider.plugin!r} from distribution "
            f"{provider.distribution!r} {provider.version} is still {stage_text} after "
            f"{SLOW_AFTER_S:g} s. If it hangs, press Ctrl-C and disable it with "
            f"{DISABLE_ENV_VAR}={provider.plugin} (or uninstall {provider.distribution}).",
            file=sys.stderr,
            flush=True,
        )

    timer = threading.Timer(SLOW_AFTER_S, warn)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _entry_points(group: str) -> list[md.EntryPoint]:
    return sorted(md.entry_points(group=group), key=lambda ep: (ep.name, ep.value))


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "0+unknown"


_lock = threading.RLock()
_state: dict[str, Any] = {}


def get_plugin_manager() -> EnvfactoryPluginManager:
    """The process-wide plugin manager (built once: built-ins, then entry points)."""
    with _lock:
        if "pm" not in _state:
            pm = EnvfactoryPluginManager()
            pm.block(os.environ.get(DISABLE_ENV_VAR, "").split(","))
            pm.load_builtins()
            pm.load_entrypoints()
            pm.check_pending()
            _state["pm"] = pm
        pm_: EnvfactoryPluginManager = _state["pm"]
        return pm_


def get_registry() -> Registry:
    """The registry of every family, vectorizer and wrapper, built once per process."""
    with _lock:
        if "registry" not in _state:
            _state["registry"] = get_plugin_manager().build_registry()
        reg: Registry = _state["registry"]
        return reg


def reset_plugins() -> None:
    """Forget the plugin manager and registry (tests; after installing a plugin)."""
    with _lock:
        _state.clear()
        for cb in _reset_callbacks:
            cb()


_reset_callbacks: list[Callable[[], None]] = []


def available() -> dict[str, dict[str, str]]:
    """Names of every registered family / vectorizer / wrapper and the distribution that
    gave each: ``{"families": {"gym": "envfactory 0.1.0", ...}, ...}``."""
    reg = get_registry()
    return {
        kind: {name: f"{r.provider.distribution} {r.provider.version}" for name, r in table.items()}
        for kind, table in (
            ("families", reg.families),
            ("vectorizers", reg.vectorizers),
            ("wrappers", reg.wrappers),
            ("vector_wrappers", reg.vector_wrappers),
        )
    }


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
    """A plugin object made from records passed to :func:`register_plugin`."""

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
