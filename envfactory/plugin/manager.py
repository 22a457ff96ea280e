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
  [`ConflictingNameError`][envfactory.errors.ConflictingNameError] naming both distributions and how
  to disable one), everything else works, and ``envfactory-plugins`` shows the conflict.
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
from typing import Any

import pluggy

from .. import _compat
from ..errors import (
    PluginLoadWarning,
    did_you_mean,
)
from . import spec
from .clashes import add_preset_clashes
from .registry import (
    _TABLE_KIND,
    BUILTIN_MODULES,
    DISABLE_ENV_VAR,
    IN_CODE,
    PluginFailure,
    PluginStatus,
    Provider,
    Registered,
    Registry,
    conflict_message,
)
from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin
from .validation import invalid_hookimpl, no_hook

__all__ = [
    "BUILTIN_MODULES",
    "DISABLE_ENV_VAR",
    "EnvfactoryPluginManager",
    "PluginFailure",
    "PluginStatus",
    "Provider",
    "Registered",
    "Registry",
    "available",
    "get_plugin_manager",
    "get_registry",
    "reset_plugins",
]


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
        self.unmatched: list[str] = []  # what each disable token that blocks nothing says
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
        a plugin still busy after `SLOW_AFTER_S` is named, and each result is
        attributed to its plugin. A hook implementation pluggy refuses (one that takes a
        parameter its hookspec does not give) is a one-line ``PluginValidationError``."""
        try:
            registered = super().register(plugin, name)
        except pluggy.PluginValidationError as exc:
            if self.is_registered(plugin):  # (pluggy < 1.6 registers part of it first)
                self.unregister(plugin)
            why = invalid_hookimpl(self, plugin, name or self.get_canonical_name(plugin), exc)
            raise pluggy.PluginValidationError(plugin, why) from None
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
                if not self.get_hookcallers(plugin):  # registered, and does nothing
                    self.unregister(plugin)
                    self.providers.pop(provider.plugin, None)
                    raise pluggy.PluginValidationError(plugin, no_hook(plugin))
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
            note = (
                f"{DISABLE_ENV_VAR} names {token!r}, which is no installed envfactory plugin "
                f"or distribution, so it blocks nothing.{did_you_mean(token, sorted(names))} "
                f"Plugins: {', '.join(choices)}"
            )
            if note not in self.unmatched:
                self.unmatched.append(note)
            warnings.warn(note, PluginLoadWarning, stacklevel=4)

    def _fail(self, provider: Provider, stage: str, exc: BaseException) -> None:
        lines = [ln.strip() for ln in f"{type(exc).__name__}: {exc}".splitlines()]
        error = "; ".join(ln for ln in lines if ln)  # a warning is one line
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
        ``conflicts`` (one [`PluginLoadWarning`][envfactory.errors.PluginLoadWarning] each, unless
        ``warn`` is false)."""
        reg = Registry(
            failures=self.failures,
            disabled=self.disabled,
            blocked=self.blocked_by,
            unmatched_disabled=self.unmatched,
        )
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
        add_preset_clashes(reg, _version("envfactory"))  # a preset named like another source
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
            problem = None if _own(provider) else _schema_problem(rec)
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


def _own(provider: Provider) -> bool:
    """envfactory's own records: their schemas are checked by its tests
    (tests/plugin/test_plugins.py), not at every start (~20 ms of OmegaConf)."""
    return provider.distribution == "envfactory" and provider.plugin in BUILTIN_MODULES


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
    """Name a plugin that is still busy after `SLOW_AFTER_S` seconds, with how to
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
