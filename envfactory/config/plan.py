"""A config resolved once: the checked `Plan` that ``make_vec`` / ``make_env`` build.

`plan_of` checks a composed ``envfactory`` node (every rule of
`envfactory.config.validate`) and keeps what it checked: the family and vectorizer
records with their schema-checked options, each wrapper record with its options, the
top-level values. Each schema's ``__post_init__`` (and ``check_config``, below) runs once
per plan; the factory reads the plan and checks nothing again.

A schema whose valid range depends on the top level (``vectorizer.batch_size <=
num_envs``) defines ``check_config(self, top: TopLevel) -> None`` next to its
``__post_init__`` and raises [`OptionError`][envfactory.OptionError] there; envfactory names the
node's path in the message. So no config code names a family or a vectorizer.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..episode_stats import DEFAULT_KEY
from ..errors import ConfigError, OptionError, UnknownNameError, did_you_mean, echo
from ..plugin.manager import Registry, get_registry
from ..plugin.types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin
from ..wrappers.misfits import family_misfit
from .checks import (
    FIX_SPELLING,
    TopLevel,
    check_keys,
    checked_options,
    omegaconf_error,
    one_line,
)
from .schema import EnvfactoryConfig, RunConfig
from .store import schema_node

__all__ = ["Plan", "TopLevel", "accepts_keyword", "plan_of", "wrapper_options"]


@dataclass(frozen=True)
class Plan:
    """Everything ``make_vec`` / ``make_env`` need, checked once (`plan_of`).

    Attributes:
        config: the composed config it was resolved from.
        top: the top-level values (``num_envs``, ``autoreset_mode``, ``seeding``).
        seed: the config's ``seed`` (the CLI resets with it; ``make_vec`` does not).
        family: the env family's record.
        env_options: its schema-checked options (``make(**env_options)``).
        vectorizer: the vectorizer's record.
        vectorizer_options: its schema-checked options, without ``name``.
        wrappers: ``(record, options)`` of each per-env wrapper, in order.
        vector_wrappers: ``(record, options)`` of each vector wrapper, in order.
        stats_key: ``episode_stats_key`` (None: envfactory's statistics are off).
    """

    config: DictConfig
    top: TopLevel
    seed: int | None
    family: EnvFamilyPlugin
    env_options: dict[str, Any]
    vectorizer: VectorizerPlugin
    vectorizer_options: dict[str, Any]
    wrappers: tuple[tuple[WrapperPlugin, dict[str, Any]], ...]
    vector_wrappers: tuple[tuple[WrapperPlugin, dict[str, Any]], ...]
    stats_key: str | None

    @property
    def num_envs(self) -> int:
        return self.top.num_envs

    @property
    def autoreset_mode(self) -> gym.vector.AutoresetMode:
        """The autoreset mode as gymnasium's ``AutoresetMode`` (its spelling past the
        config boundary, for every vectorizer)."""
        return gym.vector.AutoresetMode[self.top.autoreset_mode.upper()]

    def build_options(self) -> dict[str, Any]:
        """The keyword arguments of ``vectorizer.build(env_fns, **options)``: the
        vectorizer node's checked fields plus the top-level ``autoreset_mode`` and
        ``seeding``, both passed the same way.

        A third-party ``build`` that names no ``seeding`` parameter (and takes no
        ``**kwargs``) predates it: with ``seeding=offset`` it is called without it, since
        env *i* seeded with ``seed + i`` is what every gymnasium ``VectorEnv`` does
        anyway; ``seeding=spawn`` it cannot honour, and `plan_of` refuses that
        config before anything is built (a ``ConfigError`` naming the vectorizer).
        ``autoreset_mode`` is always passed: it has been part of ``build``'s signature
        from the start, and a ``build`` that cannot take it is refused when its
        ``VectorizerPlugin`` is made.
        """
        options = dict(self.vectorizer_options)
        options["autoreset_mode"] = self.autoreset_mode
        if accepts_keyword(self.vectorizer.build, "seeding"):
            options["seeding"] = self.top.seeding
        return options


def accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` can be called with the keyword ``name`` (a parameter of that name,
    or ``**kwargs``); False when its signature cannot be read."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == name and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in params
    )


def plan_of(
    cfg: DictConfig, registry: Registry | None = None, *, presets: Mapping[str, str] | None = None
) -> Plan:
    """Check a composed ``envfactory`` node before any env exists and return the plan.

    Unknown keys anywhere (also those added with ``+``), interpolations that cannot be
    resolved, the top-level ranges, every family/vectorizer schema's own checks
    (``__post_init__``, then ``check_config(top)``), every wrapper entry, and whether the
    vectorizer can honour ``seeding``.

    ``presets``: ``{group: file}`` of the preset files composed (``env`` / ``vectorizer``);
    an unknown ``family`` / ``name`` that one of them sets is reported at that file.

    Raises:
        ConfigError: one line naming the key's path, the value and what is valid.
    """
    reg = registry or get_registry()
    try:
        OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc) from None
    top_keys = {f.name for f in dataclasses.fields(EnvfactoryConfig)}
    check_keys(
        {str(k): None for k in cfg if str(k) != "hydra"}, top_keys, "", fix=_own_group_fix(cfg)
    )
    _check_run(cfg.get("run"))
    num_envs = cfg.get("num_envs")
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs <= 0:
        raise ConfigError(
            f"num_envs must be a positive integer, got {echo(num_envs)}; set num_envs=1 or more"
        )
    seed = cfg.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(
            f"seed={echo(seed)}: expected an integer >= 0 or null (gymnasium seeds are "
            "non-negative); set seed=0, say"
        )
    top = TopLevel(
        num_envs,
        str(_value(cfg.get("autoreset_mode", "next_step"))),
        str(_value(cfg.get("seeding", "offset"))),
    )
    presets = presets or {}
    family, env_options = _checked_node(
        cfg, "env", "family", reg.families, reg.family, top, presets.get("env")
    )
    vec, vec_options = _checked_node(
        cfg, "vectorizer", "name", reg.vectorizers, reg.vectorizer, top, presets.get("vectorizer")
    )
    wrappers, vector_wrappers = (
        tuple(
            wrapper_options(entry, vector=vector, key=f"{key}[{i}]", registry=reg)
            for i, entry in enumerate(cfg.get(key) or [])
        )
        for key, vector in (("wrappers", False), ("vector_wrappers", True))
    )
    _refuse_vector_wrappers_over_a_pool(vector_wrappers, vec_options)
    misfit = family_misfit(family, env_options, wrappers)  # atari_preprocessing on atari
    if misfit is not None:
        raise ConfigError(misfit)
    if top.seeding != "offset" and not accepts_keyword(vec.build, "seeding"):
        raise ConfigError(
            f"seeding={top.seeding} is not supported by vectorizer {vec.name!r}; use seeding=offset"
        )
    return Plan(
        cfg,
        top,
        seed,
        family,
        env_options,
        vec,
        vec_options,
        wrappers,
        vector_wrappers,
        _stats_key(cfg.get("episode_stats_key", DEFAULT_KEY)),
    )


def _own_group_fix(cfg: DictConfig) -> Callable[[str], str]:
    """The fix for an unknown top-level key: a typo, or a config group of the user's own
    (``+experiment=pong_subproc``) whose folder is not on the search path."""

    def fix(key: str) -> str:
        top_keys = [f.name for f in dataclasses.fields(EnvfactoryConfig)]
        if did_you_mean(key, top_keys):
            return FIX_SPELLING  # a typo of one of envfactory's keys
        value = cfg.get(key) if OmegaConf.is_dict(cfg) else None
        name = value if isinstance(value, str) and value.isidentifier() else "NAME"
        return (
            f"{FIX_SPELLING}; if {key} is a config group of your own (DIR/{key}/{name}.yaml, "
            f"like an experiment file), put its folder on the search path: envfactory "
            f"--config-dir DIR +{key}={name} (or set ENVFACTORY_CONFIG_DIR=DIR, also for Python)"
        )

    return fix


def _check_run(run: Any) -> None:
    if not isinstance(run, DictConfig):
        return
    check_keys(run, [f.name for f in dataclasses.fields(RunConfig)], "run")
    steps = run.get("total_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(
            f"run.total_steps={echo(steps)}: expected an integer >= 1 (env steps summed over "
            "envs); set run.total_steps=1000, say"
        )
    for key, hint in (("render_steps", "the render job's vector steps"), ("fps", "MP4 frames/s")):
        value = run.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"run.{key}={echo(value)}: expected an integer >= 1 ({hint}); set run.{key}=30, say"
            )


def _refuse_vector_wrappers_over_a_pool(
    vector_wrappers: tuple[tuple[WrapperPlugin, dict[str, Any]], ...], vec_options: dict[str, Any]
) -> None:
    """``vector_wrappers`` with ``vectorizer.batch_size`` set (the async pool, of any
    vectorizer whose schema has ``batch_size``) is refused here, at compose time. A vector
    wrapper (gymnasium's ``VectorWrapper``) wraps ``reset``/``step`` only: it has no
    ``async_reset``/``recv``/``send``, and passing them through would hand the user
    observations and rewards the wrapper never saw (``normalize_reward`` would silently not
    normalize), so the pool's calls were an ``AttributeError`` after the workers started."""
    batch = vec_options.get("batch_size")
    if not vector_wrappers or batch is None:
        return
    names = ", ".join(rec.name for rec, _ in vector_wrappers)
    raise ConfigError(
        f"vector_wrappers ({names}) with vectorizer.batch_size={batch} (the async pool): a "
        "vector wrapper wraps reset/step and would hide the pool's async_reset/recv/send "
        "(and it never sees what recv returns); drop the vector wrappers (vector_wrappers=[]) "
        "or the pool (vectorizer.batch_size=null)"
    )


def _checked_node(
    cfg: DictConfig,
    group: str,
    name_key: str,
    table: Mapping[str, Any],
    lookup: Callable[..., Any],
    top: TopLevel,
    preset: str | None = None,
) -> tuple[Any, dict[str, Any]]:
    node = cfg.get(group)
    if not isinstance(node, DictConfig) or name_key not in node:
        raise ConfigError(
            f"the config has no {group} node with a {name_key!r} key; select one with "
            f"{group}=<{name_key}> (valid: {', '.join(sorted(table))})"
        )
    name = str(node[name_key])
    try:
        rec = lookup(name, key=f"{group}={name}")
    except UnknownNameError as exc:  # (not a ConflictingNameError: the name is registered)
        if preset is not None and _preset_sets(preset, name_key, name):
            raise exc.in_preset(preset, name_key) from None
        raise
    return rec, checked_options(node, rec.config, group, name_key, name, top=top)


def _preset_sets(path: str, key: str, value: str) -> bool:
    """Whether the preset file ``path`` itself sets ``key: value`` (so the name is the
    file's, not an override's or a base preset's)."""
    try:
        node = OmegaConf.load(path)
        return isinstance(node, DictConfig) and str(node.get(key)) == value
    except Exception:  # (a file Hydra read a moment ago: unreadable now is not this error)
        return False


def _stats_key(key: Any) -> str | None:
    """The config's ``episode_stats_key`` (the info key of envfactory's episode
    statistics; None when they are off)."""
    if key is None:
        return None
    if not isinstance(key, str) or not key or key.startswith("_"):
        raise ConfigError(
            f"episode_stats_key={echo(key)} is not a valid info key; expected a non-empty "
            "string not starting with '_' (e.g. episode_stats), or null to turn envfactory's "
            "episode statistics off"
        )
    return key


def wrapper_options(
    entry: Any, *, vector: bool, key: str, registry: Registry | None = None
) -> tuple[WrapperPlugin, dict[str, Any]]:
    """Check one ``wrappers`` entry; return ``(record, options)``.

    An entry is ``{name: <wrapper>, <option>: <value>, ...}`` or a bare name, which is
    ``{name: <it>}``: the wrapper with its defaults (``wrappers=[record_episode_statistics]``
    on the command line, ``make_vec({"wrappers": ["flatten_observation"]})``)."""
    reg = registry or get_registry()
    if isinstance(entry, str):
        entry = {"name": entry}
    if isinstance(entry, DictConfig):
        entry = OmegaConf.to_container(entry, resolve=True)
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ConfigError(
            f"{key} must be a wrapper name or a mapping with a 'name' key, like "
            f"record_episode_statistics or {{name: time_limit, max_episode_steps: 500}}; got "
            f"{echo(entry)}"
        )
    options = {k: v for k, v in entry.items() if k != "name"}
    rec = reg.wrapper(str(entry["name"]), vector=vector, key=f"{key}.name", options=options)
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
    if config is None:
        _check_signature(rec, options, key)
        return rec, options
    node = schema_node(config, "name", rec.name)
    fields = [f.name for f in dataclasses.fields(config) if f.name != "name"]
    check_keys(options, fields, key, f"wrapper {rec.name!r}", fix="Fix the spelling")
    try:
        merged = OmegaConf.merge(node, options)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc, prefix=key, note=f" (wrapper {rec.name!r})") from None
    for k in merged:
        if OmegaConf.is_missing(merged, str(k)):
            raise ConfigError(
                f"wrapper {rec.name!r} at {key} needs option {k!s}; add {k!s}: <value>, "
                f"e.g. {{name: {rec.name}, {k!s}: ...}}"
            )
    try:  # the schema's own checks (``__post_init__``), as for a family or a vectorizer
        obj = OmegaConf.to_object(merged)
    except OptionError as exc:
        raise exc.at(key) from None
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc, prefix=key, note=f" (wrapper {rec.name!r})") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{key} (wrapper {rec.name!r}): {one_line(exc)}") from None
    fields_ = dataclasses.fields(obj)  # type: ignore[arg-type]
    return rec, {f.name: _value(getattr(obj, f.name)) for f in fields_ if f.name != "name"}


def _check_signature(rec: Any, options: Mapping[str, Any], key: str) -> None:
    try:
        sig = inspect.signature(rec.wrap)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    valid = [p.name for p in params]
    for k in options:
        if k not in valid:
            raise ConfigError(
                f"wrapper {rec.name!r} at {key} has no option {echo(k)}."
                f"{did_you_mean(k, valid)} Valid options: {', '.join(valid) or '(none)'}"
            )


def _value(x: Any) -> Any:
    return getattr(x, "value", x)
