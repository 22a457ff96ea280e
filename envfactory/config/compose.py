"""Compose envfactory configs (Hydra's config loader, no global state) and validate them."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from ..errors import ConfigError, OptionError, UnknownNameError, did_you_mean
from ..plugin.manager import Registry, get_registry
from .checks import check_keys, checked_options, omegaconf_error, one_line
from .schema import EnvfactoryConfig, RunConfig
from .store import extend_search_path, root_configs, schema_node, search_dirs

__all__ = [
    "checked_node",
    "compose",
    "hydra_error",
    "resolve_config",
    "validate",
    "wrapper_options",
]

_GROUP_KIND = {"env": "env (family or preset)", "vectorizer": "vectorizer"}


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose envfactory's config (``conf/config.yaml``) with Hydra overrides.

    Example:
        >>> import envfactory
        >>> cfg = envfactory.compose(["env=mountaincar", "num_envs=2"])
        >>> cfg.env.family, cfg.num_envs, cfg.vectorizer.name
        ('mountaincar', 2, 'dummy')
    """
    from hydra.types import RunMode

    from .. import _compat

    reg = root_configs()
    search_path, make_loader = _compat.hydra_config_loader(search_dirs(reg)[0])
    extend_search_path(search_path, reg)
    loader = make_loader(search_path)
    overrides = [str(o) for o in overrides]
    try:
        cfg = loader.load_configuration(config_name, overrides, RunMode.RUN, from_shell=False)
    except (ConfigCompositionException, HydraException, OmegaConfBaseException) as exc:
        raise hydra_error(exc) from None
    with open_dict(cfg):
        cfg.pop("hydra", None)
    validate(cfg, reg)
    return cfg


def hydra_error(exc: BaseException) -> ConfigError:
    """One line (path, value, valid choices, fix) for an error Hydra raised while composing:
    an unknown config group option, an unknown key, a wrong type."""
    if isinstance(exc, MissingConfigException):
        missing = exc.missing_cfg_file or ""
        group, _, value = missing.rpartition("/")
        if group in _GROUP_KIND:
            return UnknownNameError(
                _GROUP_KIND[group], value, list(exc.options or []), key=f"{group}={value}"
            )
        options = f" Valid options: {', '.join(exc.options)}." if exc.options else ""
        return ConfigError(f"{one_line(exc)}.{options}".replace("..", "."))
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OmegaConfBaseException):
        cause = cause.__cause__
    text = one_line(exc)
    override = ""
    for prefix in ("Could not override '", "Could not append to config. An item is already at '"):
        if text.startswith(prefix):
            override = text[len(prefix) :].split("'", 1)[0]
    if cause is not None and override:
        unknown = unknown_key_error(cause, override)
        if unknown is not None:
            return unknown
    if isinstance(cause, OmegaConfBaseException):
        merging = text.startswith("Error merging override ")
        what = f" (in {text[len('Error merging override ') :]})" if merging else ""
        err = omegaconf_error(cause)
        return ConfigError(f"{err}{what}")
    return ConfigError(f"invalid envfactory config: {text}")


def unknown_key_error(exc: BaseException, default_key: str = "") -> ConfigError | None:
    """The unknown-key message (valid keys, did you mean) for OmegaConf's struct-mode
    error, or None if ``exc`` is not one."""
    parent = getattr(exc, "parent_node", None)
    if not isinstance(exc, (ConfigAttributeError, ConfigKeyError)):
        return None
    if not isinstance(parent, DictConfig) or not OmegaConf.is_struct(parent):
        return None
    full = str(getattr(exc, "full_key", "") or default_key)
    path, _, key = full.rpartition(".")
    valid = [str(k) for k in parent if str(k) != "hydra"]
    return ConfigError(
        f"unknown key {full}.{did_you_mean(key, valid)} Valid keys"
        f"{' under ' + path if path else ''}: {', '.join(sorted(valid))}. Fix the "
        "spelling (a '+' cannot add keys to envfactory's config)"
    )


def validate(cfg: DictConfig, registry: Registry | None = None) -> None:
    """Check everything about a composed ``envfactory`` node before any env exists.

    Unknown keys anywhere (also those added with ``+``), interpolations that cannot be
    resolved, the top-level ranges, every family/vectorizer schema's own checks
    (:mod:`envfactory.config.checks`) and every wrapper entry.

    Raises:
        ConfigError: one line naming the key's path, the value and what is valid.
    """
    reg = registry or get_registry()
    try:
        OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc) from None
    top = {f.name for f in dataclasses.fields(EnvfactoryConfig)}
    check_keys({str(k): None for k in cfg if str(k) != "hydra"}, top, "")
    run = cfg.get("run")
    if isinstance(run, DictConfig):
        check_keys(run, [f.name for f in dataclasses.fields(RunConfig)], "run")
        steps = run.get("total_steps")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ConfigError(
                f"run.total_steps={steps!r}: expected an integer >= 1 (env steps summed over "
                "envs); set run.total_steps=1000, say"
            )
        for key, hint in (
            ("render_steps", "the render job's vector steps"),
            ("fps", "MP4 frames/s"),
        ):
            value = run.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"run.{key}={value!r}: expected an integer >= 1 ({hint}); set run.{key}=30, say"
                )
    num_envs = cfg.get("num_envs")
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs <= 0:
        raise ConfigError(
            f"num_envs must be a positive integer, got {num_envs!r}; set num_envs=1 or more"
        )
    seed = cfg.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(
            f"seed={seed!r}: expected an integer >= 0 or null (gymnasium seeds are "
            "non-negative); set seed=0, say"
        )
    for group, name_key, table, lookup in _groups(reg):
        node = cfg.get(group)
        if not isinstance(node, DictConfig) or name_key not in node:
            raise ConfigError(
                f"the config has no {group} node with a {name_key!r} key; select one with "
                f"{group}=<{name_key}> (valid: {', '.join(sorted(table))})"
            )
        name = str(node[name_key])
        checked_options(node, lookup(name, key=f"{group}={name}").config, group, name_key, name)
    _check_batch_size(cfg, num_envs)
    for key, vector in (("wrappers", False), ("vector_wrappers", True)):
        for i, entry in enumerate(cfg.get(key) or []):
            wrapper_options(entry, vector=vector, key=f"{key}[{i}]", registry=reg)


def _check_batch_size(cfg: DictConfig, num_envs: int) -> None:
    """``vectorizer.batch_size`` (the async pool of subproc/subproc-atari) is at most
    ``num_envs``: the one option whose range depends on another node."""
    node = cfg.get("vectorizer")
    if not isinstance(node, DictConfig) or node.get("name") not in ("subproc", "subproc-atari"):
        return
    size = node.get("batch_size")
    if size is not None and node.get("in_parent"):
        raise OptionError(
            "in_parent",
            node.get("in_parent"),
            f"0 or null with vectorizer.batch_size={size} (the async pool steps every env "
            "in a worker)",
            hint="Set vectorizer.in_parent=0 (or null), or vectorizer.batch_size=null",
            path="vectorizer",
        )
    if isinstance(size, int) and not isinstance(size, bool) and size > num_envs:
        raise OptionError(
            "batch_size",
            size,
            f"an integer in [1, num_envs={num_envs}] or null (null: a synchronous VecEnv)",
            hint=f"Lower vectorizer.batch_size or raise num_envs (now {num_envs})",
            path="vectorizer",
        )


def _groups(reg: Registry) -> list[tuple[str, str, Any, Any]]:
    return [
        ("env", "family", reg.families, reg.family),
        ("vectorizer", "name", reg.vectorizers, reg.vectorizer),
    ]


def checked_node(cfg: DictConfig, group: str, registry: Registry | None = None) -> Any:
    """``(record, options)`` of the ``env`` or ``vectorizer`` node of a config: the
    family/vectorizer record and the schema-checked options for its ``make``/``build``."""
    reg = registry or get_registry()
    [(_, name_key, _, lookup)] = [g for g in _groups(reg) if g[0] == group]
    node = cfg[group]
    name = str(node[name_key])
    rec = lookup(name, key=f"{group}={name}")
    return rec, checked_options(node, rec.config, group, name_key, name)


def wrapper_options(
    entry: Any, *, vector: bool, key: str, registry: Registry | None = None
) -> tuple[Any, dict[str, Any]]:
    """Check one ``wrappers`` entry; return ``(record, options)``."""
    reg = registry or get_registry()
    if isinstance(entry, str):
        entry = {"name": entry}
    if isinstance(entry, DictConfig):
        entry = OmegaConf.to_container(entry, resolve=True)
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ConfigError(
            f"{key} must be a mapping with a 'name' key, like "
            f"{{name: time_limit, max_episode_steps: 500}}; got {entry!r}"
        )
    options = {k: v for k, v in entry.items() if k != "name"}
    rec = reg.wrapper(str(entry["name"]), vector=vector, key=f"{key}.name")
    config = rec.config
    lazy = getattr(rec.wrap, "envfactory_config", None)
    if config is None and callable(lazy):  # a schema known only once its class is imported
        try:
            config = lazy()
        except ConfigError as exc:
            raise ConfigError(f"{key}.name={rec.name}: {exc}") from None
        if config is None:
            raise ConfigError(
                f"wrapper {rec.name!r} at {key} needs values a config cannot hold (a "
                "function, a module, a space); wrap the env in Python instead"
            )
    if config is not None:
        node = schema_node(config, "name", rec.name)
        fields = [f.name for f in dataclasses.fields(config) if f.name != "name"]
        check_keys(options, fields, key, f"wrapper {rec.name!r}", fix="Fix the spelling")
        try:
            merged = OmegaConf.merge(node, options)
        except OmegaConfBaseException as exc:
            raise ConfigError(
                f"{omegaconf_error(exc, prefix=key)} (wrapper {rec.name!r})"
            ) from None
        for k in merged:
            if OmegaConf.is_missing(merged, str(k)):
                raise ConfigError(
                    f"wrapper {rec.name!r} at {key} needs option {k!s}; add {k!s}: <value>, "
                    f"e.g. {{name: {rec.name}, {k!s}: ...}}"
                )
        options = OmegaConf.to_container(merged, resolve=True, enum_to_str=True)  # type: ignore[assignment]
        options.pop("name", None)
    else:
        _check_signature(rec, options, key)
    return rec, options


def _check_signature(rec: Any, options: Mapping[str, Any], key: str) -> None:
    try:
        sig = inspect.signature(rec.wrap)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    valid = [p.name for p in params]
    from ..errors import did_you_mean

    for k in options:
        if k not in valid:
            raise ConfigError(
                f"wrapper {rec.name!r} at {key} has no option {k!r}.{did_you_mean(k, valid)} "
                f"Valid options: {', '.join(valid) or '(none)'}"
            )


def resolve_config(
    cfg: DictConfig | Mapping[str, Any] | None = None, overrides: Sequence[str] | None = None
) -> DictConfig:
    """Turn what a user passes to ``make_vec`` (a composed DictConfig, a plain dict, or
    overrides) into a validated config."""
    if cfg is None:
        return compose(overrides or [])
    if isinstance(cfg, DictConfig):
        if overrides:
            raise ConfigError("pass either a composed config or overrides, not both")
        validate(cfg)
        return cfg
    if isinstance(cfg, Mapping):
        data = dict(cfg)
        picks = []
        env, vec = data.get("env"), data.get("vectorizer")
        if isinstance(env, str):
            picks.append(f"env={env}")
            data.pop("env")
        elif isinstance(env, Mapping) and "family" in env:
            picks.append(f"env={env['family']}")
        if isinstance(vec, str):
            picks.append(f"vectorizer={vec}")
            data.pop("vectorizer")
        elif isinstance(vec, Mapping) and "name" in vec:
            picks.append(f"vectorizer={vec['name']}")
        base = compose([*picks, *(overrides or [])])
        try:
            merged = OmegaConf.merge(base, data)
        except OmegaConfBaseException as exc:
            raise (unknown_key_error(exc) or omegaconf_error(exc)) from None
        assert isinstance(merged, DictConfig)
        validate(merged)
        return merged
    raise ConfigError(
        f"make_vec takes a composed DictConfig, a dict, or overrides=[...]; got "
        f"{type(cfg).__name__}"
    )
