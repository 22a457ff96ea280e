"""The plugin manager: load built-ins and entry points, collect and check records.

Built-ins register through the same hooks as third parties. Entry points in group
``envfactory`` are loaded one at a time (not with pluggy's all-or-nothing
``load_setuptools_entrypoints``) so one broken plugin is reported by distribution name and
skipped while the others still load.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy

from ..errors import PluginConflictError, PluginLoadWarning, UnknownNameError, did_you_mean
from . import spec
from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin

__all__ = [
    "BUILTIN_MODULES",
    "DISABLE_ENV_VAR",
    "PluginFailure",
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
BUILTIN_MODULES = {  # plugin name -> the module holding its hook implementations
    "envfactory.families": "envfactory.families.builtin",
    "envfactory.vectorizers": "envfactory.vectorizers.builtin",
    "envfactory.wrappers": "envfactory.wrappers.builtin",
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


@dataclass
class Registry:
    """Every record the loaded plugins gave, by kind and name, with its provider."""

    families: dict[str, Registered[EnvFamilyPlugin]] = field(default_factory=dict)
    vectorizers: dict[str, Registered[VectorizerPlugin]] = field(default_factory=dict)
    wrappers: dict[str, Registered[WrapperPlugin]] = field(default_factory=dict)
    vector_wrappers: dict[str, Registered[WrapperPlugin]] = field(default_factory=dict)
    config_dirs: list[tuple[str, Provider]] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)

    def family(self, name: str, key: str = "env.family") -> EnvFamilyPlugin:
        return _lookup(self.families, "env family", name, key).record

    def vectorizer(self, name: str, key: str = "vectorizer.name") -> VectorizerPlugin:
        return _lookup(self.vectorizers, "vectorizer", name, key).record

    def wrapper(self, name: str, *, vector: bool = False, key: str = "") -> WrapperPlugin:
        table = self.vector_wrappers if vector else self.wrappers
        kind = "vector wrapper" if vector else "wrapper"
        return _lookup(table, kind, name, key).record

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
            "families": rows(self.families),
            "vectorizers": rows(self.vectorizers),
            "wrappers": rows(self.wrappers),
            "vector_wrappers": rows(self.vector_wrappers),
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


def _lookup(table: dict[str, Registered[R]], kind: str, name: str, key: str) -> Registered[R]:
    try:
        return table[name]
    except KeyError:
        raise UnknownNameError(kind, name, list(table), key=key) from None


class EnvfactoryPluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers which distribution gave each plugin."""

    def __init__(self) -> None:
        super().__init__(spec.NAME)
        self.add_hookspecs(spec)
        self.providers: dict[str, Provider] = {}
        self.failures: list[PluginFailure] = []
        self.disabled: list[str] = []

    def register_plugin(self, plugin: object, provider: Provider) -> None:
        """Register ``plugin`` and check its hook names at once.

        pluggy's ``check_pending()`` would only notice a misspelled hook after every
        plugin is loaded, and then raise for the whole process. Here a plugin whose
        ``@hookimpl`` names no known hook is unregistered again and
        ``pluggy.PluginValidationError`` is raised naming the hook and the closest valid
        name, so the caller can report and skip just that plugin.
        """
        self.register(plugin, name=provider.plugin)
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
            self.register_plugin(
                importlib.import_module(modname), Provider(name, "envfactory", version)
            )

    def load_entrypoints(self, group: str = spec.NAME, disabled: Iterable[str] = ()) -> None:
        blocked = {d.strip() for d in disabled if d.strip()}
        for ep in _entry_points(group):
            dist = ep.dist.name if ep.dist is not None else "<unknown distribution>"
            version = ep.dist.version if ep.dist is not None else "?"
            provider = Provider(ep.name, dist, version)
            if ep.name in blocked or dist in blocked:
                self.disabled.append(f"{ep.name} ({dist})")
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

    def _fail(self, provider: Provider, stage: str, exc: BaseException) -> None:
        failure = PluginFailure(
            provider, stage, f"{type(exc).__name__}: {exc}", traceback.format_exc()
        )
        self.failures.append(failure)
        warnings.warn(
            f"envfactory plugin {provider.plugin!r} from distribution "
            f"{provider.distribution!r} {provider.version} was skipped: it failed in "
            f"{stage}: {failure.error}. Fix or uninstall it, or set "
            f"{DISABLE_ENV_VAR}={provider.plugin} to silence this.",
            PluginLoadWarning,
            stacklevel=3,
        )

    def call_each(self, hook_name: str) -> list[tuple[Provider, Any]]:
        """Call one hook on every plugin separately, so results stay attributed and one
        plugin raising does not hide the others' results."""
        out: list[tuple[Provider, Any]] = []
        hook = getattr(self.hook, hook_name)
        for impl in reversed(hook.get_hookimpls()):  # registration order
            name = self.get_name(impl.plugin) or repr(impl.plugin)
            provider = self.providers.get(name, Provider(name, "<registered in code>", "-"))
            try:
                with _watch(provider, hook_name):
                    result = impl.function()
            except (Exception, SystemExit) as exc:  # sys.exit in a plugin ends nothing here
                self._fail(provider, hook_name, exc)
                continue
            if result is None:
                continue
            if isinstance(result, (str, os.PathLike)) and hook_name == "envfactory_config_dirs":
                result = [result]
            if not isinstance(result, (list, tuple)):
                self._fail(
                    provider,
                    hook_name,
                    TypeError(f"{hook_name} must return a list, got {type(result).__name__}"),
                )
                continue
            out.append((provider, result))
        return out

    def build_registry(self) -> Registry:
        reg = Registry(failures=self.failures, disabled=self.disabled)
        _collect(self, "envfactory_env_families", EnvFamilyPlugin, reg.families, "env family")
        _collect(self, "envfactory_vectorizers", VectorizerPlugin, reg.vectorizers, "vectorizer")
        # one call of the wrappers hook (a failure is reported once), split by ``vector``
        _collect(
            self,
            "envfactory_wrappers",
            WrapperPlugin,
            lambda rec: reg.vector_wrappers if rec.vector else reg.wrappers,
            lambda rec: "vector wrapper" if rec.vector else "wrapper",
        )
        for provider, dirs in self.call_each("envfactory_config_dirs"):
            for d in dirs:
                reg.config_dirs.append((os.fspath(d), provider))
        return reg


def _collect(
    pm: EnvfactoryPluginManager,
    hook_name: str,
    rtype: type[Any],
    table_: dict[str, Registered[Any]] | Callable[[Any], dict[str, Registered[Any]]],
    kind_: str | Callable[[Any], str],
) -> None:
    for provider, records in pm.call_each(hook_name):
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
            table = table_ if isinstance(table_, dict) else table_(rec)
            kind = kind_ if isinstance(kind_, str) else kind_(rec)
            if rec.name in table:
                other = table[rec.name].provider
                raise PluginConflictError(
                    f"two plugins register the {kind} {rec.name!r}: {other} and {provider}. "
                    f"Uninstall one of the distributions {other.distribution!r} / "
                    f"{provider.distribution!r}, or disable one plugin with "
                    f"{DISABLE_ENV_VAR}=<plugin name>."
                )
            table[rec.name] = Registered(rec, provider)


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
            pm.load_builtins()
            pm.load_entrypoints(disabled=os.environ.get(DISABLE_ENV_VAR, "").split(","))
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
    A name already registered (by any plugin) raises ``PluginConflictError`` and leaves
    everything as it was. Distribute a plugin with an ``envfactory`` entry point instead.

    Example:
        >>> import gymnasium as gym
        >>> import envfactory
        >>> def make_cartpole_long(max_episode_steps: int = 1000) -> gym.Env:
        ...     return gym.make("CartPole-v1", max_episode_steps=max_episode_steps)
        >>> record = envfactory.EnvFamilyPlugin("cartpole_long", make_cartpole_long)
        >>> envfactory.register_plugin(record)
        'cartpole_long'
        >>> with envfactory.make_vec(overrides=["env=cartpole_long", "num_envs=2"]) as envs:
        ...     envs.num_envs
        2
        >>> envfactory.reset_plugins()  # forget it again
    """
    records: list[Any] = list(plugin) if isinstance(plugin, (list, tuple)) else [plugin]
    if records and all(
        isinstance(r, (EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin)) for r in records
    ):
        plugin = _RecordsPlugin(records)
        name = name or "+".join(r.name for r in records)
    name = name or getattr(plugin, "__name__", None) or f"in-process-{id(plugin):x}"
    with _lock:
        pm = get_plugin_manager()
        if pm.has_plugin(name) or pm.is_registered(plugin):
            raise PluginConflictError(
                f"a plugin named {name!r} is already registered in this process; pass "
                f"name=... or call envfactory.reset_plugins() first"
            )
        pm.register_plugin(plugin, Provider(name, "<registered in code>", "-"))
        failures = len(pm.failures)
        try:
            registry = pm.build_registry()
        except Exception:
            pm.unregister(plugin)
            pm.providers.pop(name, None)
            raise
        finally:
            del pm.failures[failures:]  # rebuilding must not repeat earlier reports
        registry.failures = list(pm.failures)
        _state["registry"] = registry
    return name


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
