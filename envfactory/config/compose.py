"""Compose envfactory configs (Hydra's config loader, no global state) and validate them."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from ..errors import ConfigError, UnknownNameError
from ..plugin.manager import Registry, get_registry
from .store import extend_search_path, root_configs, schema_node, search_dirs

__all__ = ["compose", "resolve_config", "validate", "wrapper_options"]

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
    except MissingConfigException as exc:
        raise _missing(exc, overrides) from None
    except (ConfigCompositionException, HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"invalid envfactory config: {_cause_text(exc)}") from exc
    with open_dict(cfg):
        cfg.pop("hydra", None)
    validate(cfg, reg)
    return cfg


def _cause_text(exc: BaseException) -> str:
    parts = [str(exc)]
    cause = exc.__cause__
    while cause is not None and str(cause) not in parts[-1]:
        parts.append(str(cause))
        cause = cause.__cause__
    return "\n".join(p for p in parts if p)


def _missing(exc: MissingConfigException, overrides: Sequence[str]) -> Exception:
    missing = exc.missing_cfg_file or ""
    if "/" in missing:
        group, _, value = missing.rpartition("/")
        if group in _GROUP_KIND:
            return UnknownNameError(
                _GROUP_KIND[group], value, list(exc.options or []), key=f"{group}={value}"
            )
    return ConfigError(f"invalid envfactory config: {exc}")


def validate(cfg: DictConfig, registry: Registry | None = None) -> None:
    """Check what a schema cannot: ranges, registered names, wrapper options."""
    reg = registry or get_registry()
    num_envs = cfg.get("num_envs")
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs <= 0:
        raise ConfigError(
            f"num_envs must be a positive integer, got {num_envs!r}; set num_envs=1 or more"
        )
    groups = (("env", "family", reg.families, reg.family),
              ("vectorizer", "name", reg.vectorizers, reg.vectorizer))  # fmt: skip
    for group, name_key, table, lookup in groups:
        node = cfg.get(group)
        if not isinstance(node, DictConfig) or name_key not in node:
            raise ConfigError(
                f"the config has no {group} node with a {name_key!r} key; select one with "
                f"{group}=<{name_key}> (valid: {', '.join(sorted(table))})"
            )
        _check_keys(node, lookup(str(node[name_key])).config, group, name_key)
    for key, vector in (("wrappers", False), ("vector_wrappers", True)):
        for i, entry in enumerate(cfg.get(key) or []):
            wrapper_options(entry, vector=vector, key=f"{key}[{i}]", registry=reg)


def _check_keys(node: DictConfig, schema: type | None, path: str, name_key: str) -> None:
    """Keys added with Hydra's ``+`` bypass struct mode; check them against the schema."""
    if schema is None:
        return
    import dataclasses

    from ..errors import did_you_mean

    valid = {f.name for f in dataclasses.fields(schema)} | {name_key}
    for key in node:
        if key not in valid:
            raise ConfigError(
                f"unknown option {path}.{key!s} for {path}={node[name_key]!s}."
                f"{did_you_mean(str(key), valid)} "
                f"Valid options: {', '.join(sorted(valid - {name_key}))}"
            )


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
    if rec.config is not None:
        node = schema_node(rec.config, "name", rec.name)
        try:
            merged = OmegaConf.merge(node, options)
        except OmegaConfBaseException as exc:
            raise ConfigError(
                f"invalid option for wrapper {rec.name!r} at {key}: {exc}".replace(
                    "full_key: ", f"full_key: {key}."
                )
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
            raise ConfigError(f"invalid envfactory config: {exc}") from None
        assert isinstance(merged, DictConfig)
        validate(merged)
        return merged
    raise ConfigError(
        f"make_vec takes a composed DictConfig, a dict, or overrides=[...]; got "
        f"{type(cfg).__name__}"
    )
