"""The registry: what the plugins registered (families, vectorizers, wrappers, config
folders), by whom, and the one-line messages for a name that is unknown, disabled or
registered twice. Built by `envfactory.plugin.manager`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import (
    ConflictingNameError,
    UnknownNameError,
)
from .folders import (
    CONF_PLUGIN,
    CONFIG_DIR_ENV_VAR,
    USER_CONFIG_PLUGIN,
    PresetFile,
    check_preset_name,
    user_config_dir,
)
from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin

__all__ = [
    "BUILTIN_MODULES",
    "DISABLE_ENV_VAR",
    "IN_CODE",
    "PLUGIN_PACKAGES",
    "PluginFailure",
    "PluginStatus",
    "Provider",
    "Registered",
    "Registry",
    "conflict_message",
]

DISABLE_ENV_VAR = "ENVFACTORY_DISABLED_PLUGINS"
IN_CODE = "<registered in code>"  # the distribution of a plugin given to register_plugin()
BUILTIN_MODULES = {  # plugin name -> the module holding its hook implementations
    "envfactory.families": "envfactory.families.builtin",
    "envfactory.vectorizers": "envfactory.vectorizers.builtin",
    "envfactory.wrappers": "envfactory.wrappers.builtin",
    USER_CONFIG_PLUGIN: "envfactory.cli.presets",  # presets of `envfactory tune`
}
PLUGIN_PACKAGES = {  # what envfactory's own plugin packages (plugins/ in its repo) register
    "vectorizers": {
        "threads": "envfactory-threads",
        "ray": "envfactory-ray",
        "ale-vector": "envfactory-ale",
        "gymnasium-sync": "envfactory-gymnasium",
        "gymnasium-async": "envfactory-gymnasium",
    },
}
_OTHER_LIST = {"wrappers": "vector_wrappers", "vector_wrappers": "wrappers"}
_TABLE_HOOK = {
    "families": "envfactory_env_families",
    "vectorizers": "envfactory_vectorizers",
    "wrappers": "envfactory_wrappers",
    "vector_wrappers": "envfactory_wrappers",
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

    ``unmatched_disabled`` says, one line each, which names in ``ENVFACTORY_DISABLED_PLUGINS``
    block nothing (a typo or a plugin since uninstalled), with a "did you mean".

    ``conflicts`` holds the names two or more plugins registered (``{"families": {"gym":
    [Registered, Registered]}}``): they are in no table, and looking one up raises
    [`ConflictingNameError`][envfactory.errors.ConflictingNameError].
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
    unmatched_disabled: list[str] = field(default_factory=list)  # a typo's one line each

    def family(self, name: str, key: str = "env.family") -> EnvFamilyPlugin:
        return self._lookup("families", name, key).record

    def vectorizer(self, name: str, key: str = "vectorizer.name") -> VectorizerPlugin:
        return self._lookup("vectorizers", name, key).record

    def wrapper(
        self,
        name: str,
        *,
        vector: bool = False,
        key: str = "",
        options: Mapping[str, Any] | None = None,
    ) -> WrapperPlugin:
        """The wrapper record of ``name``; ``options`` (the entry's other keys) go into the
        fix of a wrapper named in the other list, so that the suggested entry composes."""
        table = "vector_wrappers" if vector else "wrappers"
        return self._lookup(table, name, key, options).record

    def _lookup(
        self, table_name: str, name: str, key: str, options: Mapping[str, Any] | None = None
    ) -> Registered[Any]:
        table: dict[str, Registered[Any]] = getattr(self, table_name)
        kind = _TABLE_KIND[table_name]
        try:
            return table[name]
        except KeyError:
            clash = self.conflicts.get(table_name, {}).get(name)
            if clash:
                err = ConflictingNameError(conflict_message(kind, name, clash, key))
                err.table, err.name = table_name, name
                raise err from None
            valid = [*table, *self.conflicts.get(table_name, {})]
            other = _OTHER_LIST.get(table_name)
            if other is not None and name in getattr(self, other):
                raise self.in_other_list(table_name, name, valid, key, options) from None
            raise self.unknown_name(table_name, name, valid, key=key) from None

    def in_other_list(
        self,
        table_name: str,
        name: str,
        valid: list[str],
        key: str,
        options: Mapping[str, Any] | None = None,
    ) -> UnknownNameError:
        """A wrapper named in the wrong list: a vector wrapper under ``wrappers`` (per env)
        or a per-env wrapper under ``vector_wrappers``. It is registered, so "install the
        plugin" would point the wrong way: the error says which list takes it, and the
        suggested entry carries the entry's ``options`` (``time_limit`` needs its
        ``max_episode_steps``: the bare name would fail on its own)."""
        vector = table_name == "vector_wrappers"
        here, there = ("vector_wrappers", "wrappers") if vector else ("wrappers", "vector_wrappers")
        what = "a per-env wrapper" if vector else "a vector wrapper (it wraps the VectorEnv)"
        entry = key.rsplit(".name", 1)[0] if key.endswith(".name") else here
        fix = f"{there}=[{name}]"
        if options:
            import yaml

            flow = yaml.safe_dump(
                {"name": name, **options}, default_flow_style=True, sort_keys=False, width=1 << 16
            ).strip()
            fix = f"'{there}=[{flow}]'"
        return UnknownNameError(
            "wrapper",
            name,
            valid,
            key=key,
            other_list=(
                f"it is {what}, so it goes in {there}, not {here}; move {entry} there "
                f"({fix} on the command line)"
            ),
        )

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
        package = PLUGIN_PACKAGES.get(table_name, {}).get(name)
        if maybe:  # (a plugin is then the likelier fix than a missing preset)
            note = f"Disabled plugins, which may provide it: {', '.join(maybe)}."
        elif package:
            note = (
                f"{name!r} comes with envfactory's plugin package {package}: pip install "
                f"{package} (from envfactory's source: pip install ./plugins/{package})."
            )
        else:
            note = _no_preset(name) if table_name == "vectorizers" else ""
        # installed, and skipped: "install the plugin" would point the wrong way
        failed = "" if maybe else self._failed_for(table_name)
        return UnknownNameError(kind, name, valid, key=key, note=note, failed=failed)

    def _failed_for(self, table_name: str) -> str:
        """The installed plugins that may register a name of ``table_name`` but were
        skipped (failed to import or register, or raised in that table's hook), with why;
        "" when none was."""
        hook = _TABLE_HOOK[table_name]
        seen: dict[str, str] = {}
        for f in self.failures:
            if f.stage in ("import", "registration", hook) and f.provider.plugin not in seen:
                error = f.error if len(f.error) <= 300 else f.error[:297] + "..."
                seen[f.provider.plugin] = (
                    f"plugin {f.provider.plugin!r} ({f.provider.distribution} "
                    f"{f.provider.version}) failed in {f.stage}: {error.rstrip('.')}"
                )
        return "; ".join(seen.values())

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
                            "preset": getattr(r.record, "path", None),  # a preset file's
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
    """One line: who registered ``name`` (plugins, or config sources when a preset file is
    one of them), that it is unusable, and how to fix it (disable a plugin, rename a file)."""
    providers = [r.provider for r in regs]
    presets = [r for r in regs if isinstance(r.record, PresetFile)]
    where = f" (at {key})" if key else ""
    who = " and ".join(_source(r) for r in regs)
    own = [r.record.path for r in presets if r.provider.plugin == USER_CONFIG_PLUGIN]
    fixes = [f"Rename or remove {' and '.join(own)}"] if own else []
    # a built-in never needs disabling: suggest the third-party plugins first
    others = [r.provider for r in regs if r.provider.plugin != USER_CONFIG_PLUGIN]
    third = [p for p in others if p.distribution != "envfactory"] or ([] if own else others)
    installed = list(dict.fromkeys(p for p in third if p.distribution != IN_CODE))
    if installed:
        how = " or ".join(f"{DISABLE_ENV_VAR}={p.plugin}" for p in installed)
        dists = " / ".join(sorted({p.distribution for p in installed}))
        fixes.append(f"{'or d' if fixes else 'D'}isable one with {how} (or uninstall {dists})")
    if len(installed) < len(third):  # register_plugin(): the environment variable cannot help
        fixes.append(
            f"{'or r' if fixes else 'R'}ename the record registered in code, or call "
            "envfactory.reset_plugins() to forget the plugins registered in code (a re-run "
            "cell that defines the record again makes a new one)"
        )
    if presets:  # a preset may take no name another source gives: Hydra would pick one
        kind = _PRESET_KIND.get(kind, kind)
        given = f"is given by {len(providers)} config sources"
    else:
        given = f"is registered by {len(providers)} plugins"
    return (
        f"the {kind} {name!r}{where} {given}: {who}, so it cannot be used. "
        f"{' '.join(fixes)}; 'envfactory-plugins' lists every conflict"
    )


_PRESET_KIND = {"env family": "env"}


def _source(r: Registered[Any]) -> str:
    """Who gives a name: a plugin's provider, or a preset file and its folder's provider."""
    if not isinstance(r.record, PresetFile):
        return str(r.provider)
    if r.provider.plugin == USER_CONFIG_PLUGIN:
        return f"the preset {r.record.path} in your config folder ({CONFIG_DIR_ENV_VAR})"
    if r.provider.plugin == CONF_PLUGIN:
        return f"envfactory's own preset {r.record.path}"
    return f"the preset {r.record.path} from {r.provider}"


def _no_preset(name: str) -> str:
    """Where a vectorizer preset of ``name`` was looked for (``envfactory tune`` writes
    them; see `envfactory.plugin.folders`); empty for a name no preset can have."""
    if len(name) > 100 or check_preset_name(name, ()) is not None:
        return ""
    where = user_config_dir() / "vectorizer" / f"{name}.yaml"
    return (
        f"No preset {where} either: `envfactory tune ... --name {name}` writes one there; "
        f"for one in another folder pass --config-dir DIR or set {CONFIG_DIR_ENV_VAR}."
    )
