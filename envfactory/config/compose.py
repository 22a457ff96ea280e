"""Compose envfactory configs (Hydra's config loader, no global state) and validate them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import (
    ConfigCompositionException,
    HydraException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from ..errors import ArgumentTypeError, ConfigError, UnknownKeyError, echo
from ..plugin.manager import Registry, get_registry
from . import keywords
from .checks import did_you_mean_key, omegaconf_error, one_line
from .overrides import override_parse_error, sweep_error
from .plan import Plan, plan_of
from .prestart import prestart, records_of
from .store import extend_search_path, root_configs, search_dirs, usable_choices

__all__ = [
    "compose",
    "header_error",
    "hydra_error",
    "override_list",
    "override_parse_error",
    "resolve",
    "resolve_config",
    "validate",
    "yaml_error",
]

_GROUP_KIND = {"env": "env (family or preset)", "vectorizer": "vectorizer"}
_GROUP_TABLE = {"env": "families", "vectorizer": "vectorizers"}


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose envfactory's config (``conf/config.yaml``) with Hydra overrides.

    Example:
        >>> import envfactory
        >>> cfg = envfactory.compose(["env=mountaincar", "num_envs=2"])
        >>> cfg.env.family, cfg.num_envs, cfg.vectorizer.name
        ('mountaincar', 2, 'dummy')
    """
    cfg, presets = _composed(override_list(overrides), config_name)
    validate(cfg, presets=presets)
    return cfg


def _load(overrides: list[str], config_name: str = "config") -> DictConfig:
    """Compose with Hydra's config loader, unchecked (the caller validates once)."""
    return _composed(overrides, config_name)[0]


def _composed(
    overrides: list[str], config_name: str = "config"
) -> tuple[DictConfig, dict[str, str]]:
    """`_load`'s config and the preset files it chose (`preset_files`)."""
    from hydra.types import RunMode

    from .. import _compat

    reg = root_configs()
    prestart(overrides, *records_of(reg))
    search_path, make_loader = _compat.hydra_config_loader(search_dirs(reg)[0])
    extend_search_path(search_path, reg)
    loader = make_loader(search_path)
    try:
        cfg = loader.load_configuration(
            config_name, [*overrides, *_unused_hydra_groups(overrides)], RunMode.RUN,
            from_shell=False,
        )  # fmt: skip
    except (ConfigCompositionException, HydraException, OmegaConfBaseException) as exc:
        raise hydra_error(exc, overrides) from None
    except yaml.YAMLError as exc:  # a config file of a preset folder that is not YAML
        raise yaml_error(exc) from None
    except ValueError as exc:  # a "# @package" header Hydra cannot read
        raise (header_error(exc) or exc) from None
    except OSError as exc:  # Hydra looks for a config file named after an override's key
        raise ConfigError(
            f"invalid envfactory config: {one_line(exc)}; check the overrides' keys"
        ) from None
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg, preset_files(choices, search_dirs(reg))


def preset_files(choices: Mapping[str, Any], folders: Sequence[str]) -> dict[str, str]:
    """``{group: file}`` of the ``env`` / ``vectorizer`` options chosen (Hydra's
    ``hydra.runtime.choices``) that are YAML presets in one of ``folders``, so that a bad
    ``family`` / ``name`` in a preset is reported at its file (`plan_of`), not at an
    override the user never typed."""
    files = {}
    for group in _GROUP_KIND:
        choice = choices.get(group)
        if not isinstance(choice, str):
            continue
        path = next((p for f in folders if (p := Path(f, group, f"{choice}.yaml")).is_file()), None)
        if path is not None:
            files[group] = str(path)
    return files


#: Hydra's own config groups that only a Hydra run reads (its help texts and logging):
#: composing them costs ~5 ms of a start, and `_load` drops the ``hydra`` node anyway
_RUN_ONLY = {
    "hydra/help": "~hydra/help",
    "hydra/hydra_help": "~hydra/hydra_help",
    "hydra/job_logging": "hydra/job_logging=none",
    "hydra/hydra_logging": "hydra/hydra_logging=none",
}


def _unused_hydra_groups(overrides: list[str]) -> list[str]:
    """The overrides that leave out `_RUN_ONLY`'s groups, but any the caller names."""
    return [drop for group, drop in _RUN_ONLY.items() if not any(group in o for o in overrides)]


def hydra_error(exc: BaseException, overrides: Sequence[str] = ()) -> ConfigError:
    """One line (path, value, valid choices, fix) for an error Hydra raised while composing:
    an unknown config group option, an unknown key, a wrong type, a YAML file that does not
    parse. An error inside a preset (``In 'vectorizer/mine': ...``) or another config file of
    a group (``In 'experiment/pong': ...``) names it and its file. ``overrides`` (the command
    line's) give the value of an override that the fix repeats, and its ``--config-dir``."""
    if isinstance(exc, yaml.YAMLError):
        return yaml_error(exc)
    header = header_error(exc)
    if header is not None:
        return header
    name, file = _preset_of(exc, overrides)
    kind = _file_kind(name or "")
    err = _hydra_error(exc, name if kind == "preset" else None, overrides)
    if name is None or f"{name}.yaml" in str(err):  # (one that names the file already)
        return err
    said = str(err) if kind == "preset" else str(err).replace(_PLUS_NOTE, "Fix the config file")
    err.args = (f"in the {kind} {name} ({file}): {said}",)  # (its class kept)
    return err


def _file_kind(name: str) -> str:
    """``preset`` for an env / vectorizer option's file, else ``config file``."""
    return "preset" if name.split("/", 1)[0] in _GROUP_KIND else "config file"


#: Hydra's launcher plugins a sweep names (``hydra/launcher=joblib``) and how to install each
_LAUNCHER_PACKAGES = {
    "hydra/launcher/joblib": "'envfactory[joblib]' (Hydra's joblib launcher)",
    "hydra/launcher/ray": "hydra-ray-launcher (docs/guides/sweeps-and-ray.md)",
    "hydra/launcher/submitit_local": "hydra-submitit-launcher",
    "hydra/launcher/submitit_slurm": "hydra-submitit-launcher",
}


def _hydra_error(
    exc: BaseException, preset: str | None, overrides: Sequence[str] = ()
) -> ConfigError:
    if isinstance(exc, MissingConfigException):
        missing = exc.missing_cfg_file or ""
        group, _, value = missing.rpartition("/")
        if group in _GROUP_KIND:
            reg = get_registry()
            # the base of a preset comes without Hydra's list of options: the group's names
            table = reg.families if group == "env" else reg.vectorizers
            options = exc.options or ([*table] if preset else [])
            unknown_name = reg.unknown_name(
                _GROUP_TABLE[group],
                value,
                usable_choices(group, options, reg),
                key=f"{group}={value}",
                kind=_GROUP_KIND[group],
            )
            if group == "env" and re.search(r"-v\d+$", value):  # a gymnasium id, not a family
                fam = "atari" if value.startswith("ALE/") else "gym"
                hint = f" (a gymnasium id goes in env.id: env={fam} env.id={value})"
                unknown_name.args = (f"{unknown_name}{hint}",)
            return unknown_name
        options = f" Valid options: {', '.join(exc.options)}." if exc.options else ""
        plugin = _LAUNCHER_PACKAGES.get(missing) if group == "hydra/launcher" else None
        if plugin:
            options += f" Install it: pip install {plugin}"
        return ConfigError(f"{one_line(exc)}.{options}".replace("..", "."))
    if isinstance(exc, OverrideParseException):
        return override_parse_error(exc.override, one_line(exc))
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OmegaConfBaseException):
        cause = cause.__cause__ or cause.__context__
    if preset is not None and cause is not None:  # a key or value of the preset's own
        unknown = unknown_key_error(cause)
        if unknown is None:
            return omegaconf_error(cause)
        return ConfigError(str(unknown).replace(_PLUS_NOTE, "Fix the preset file"))
    text = one_line(exc)
    override = ""
    for prefix in ("Could not override '", "Could not append to config. An item is already at '"):
        if text.startswith(prefix):
            override = text[len(prefix) :].split("'", 1)[0]
    if cause is not None and override:
        unknown = unknown_key_error(cause, override)
        if unknown is not None:
            return unknown
    if override and text.startswith("Could not append"):  # +num_envs=2: the key exists
        given = next((o for o in overrides if o.startswith(f"+{override}=")), "")
        value = given.partition("=")[2] if given else "<value>"
        return ConfigError(
            f"{override} already exists ('+' adds a key the config does not have); drop the "
            f"'+': {override}={value}"
        )
    packaged = _package_error(text, cause)
    if packaged is not None:
        return packaged
    if isinstance(cause, OmegaConfBaseException):
        merging = text.startswith("Error merging override ")
        given = text[len("Error merging override ") :] if merging else ""
        what = f" (in {given})" if merging else ""
        key, _, value = given.partition("=")
        if merging and value.startswith("{") and _mapping_for_a_list(cause):
            return ConfigError(
                f"{given}: {key} takes a list, not a mapping; write '{key}=[{value}]'"
            )
        err = unknown_key_error(cause) or omegaconf_error(cause)
        if merging and str(err).startswith((given, f"{key}=")):
            what = ""  # the message starts with the override (its key=value) already
        return ConfigError(f"{err}{what}")
    sweep = sweep_error(text)
    if sweep is not None:
        return sweep
    missing_dir = re.match(r"Additional config directory '(.+)' not found", text)
    if missing_dir:
        return ConfigError(
            f"--config-dir {missing_dir.group(1)}: no such folder; give the folder that holds "
            "your config groups (DIR with DIR/experiment/NAME.yaml for +experiment=NAME)"
        )
    return ConfigError(f"invalid envfactory config: {text.rstrip('.')}{_own_group_hint(text)}")


def _mapping_for_a_list(cause: BaseException) -> bool:
    """OmegaConf's error for a mapping given to a list key (``wrappers={name: x}``)."""
    merge = one_line(cause).startswith("Cannot merge DictConfig with ListConfig")
    return merge and getattr(cause, "object_type", None) is list


def _package_error(text: str, cause: BaseException | None) -> ConfigError | None:
    """A file of the user's own group (``+experiment=x``) without a ``# @package _global_``
    header (its keys land under the group's name) or with a mistyped one (``_globl_``):
    the unknown top-level key is the group or the header's word, and the fix is the header."""
    in_file = re.match(r"In '([\w-]+)/([^']+)': ", text)
    if in_file is None or not isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        return None
    key = str(getattr(cause, "full_key", "") or "")
    group, name = in_file.groups()
    if not key or "." in key or not (key == group or key.startswith("_")):
        return None
    how = (
        f"its header '# @package {key}' puts its keys under '{key}'"
        if key != group
        else f"without a '# @package' header its keys go under its group's name, '{group}'"
    )
    return ConfigError(
        f"the config file {group}/{name}.yaml sets envfactory's keys, but {how}: make "
        "'# @package _global_' its first line (as the files in examples/)"
    )


def _own_group_hint(text: str) -> str:
    """How to fix Hydra's two messages about a config group of the user's own (an
    experiment file): selected without ``+``, or a file without its package header."""
    own = re.match(r"Could not override '(\w+)'\. No match in the defaults list", text)
    if own:
        group = own.group(1)
        return (
            f". {group} is not one of envfactory's config groups: add your own with '+' "
            f"(+{group}=NAME), its folder on the search path (--config-dir DIR)"
        )
    header = re.match(r"In '(\w+)/[^']+': Could not override '\w+@", text)
    if header:
        return (
            f". A file of {header.group(1)} that sets envfactory's groups (env, vectorizer, ...) "
            "needs '# @package _global_' as its first line (as the files in examples/)"
        )
    return ""


_PLUS_NOTE = "Fix the spelling (a '+' cannot add keys to envfactory's config)"
_IN_PRESET = re.compile(r"^In '((?!hydra/)[^'/]+/[^']+)': ")  # (a preset, an experiment file)


def _preset_of(exc: BaseException, args: Sequence[str] = ()) -> tuple[str | None, str]:
    """The preset (``vectorizer/mine``) or other group file an error of Hydra's happened in,
    and its file (in a ``--config-dir`` of the command line's ``args`` too); a missing config
    that is itself the preset named on the command line is not "in" it."""
    m = _IN_PRESET.match(str(exc))
    if m is None:
        return None, ""
    name = m.group(1)
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file == name:
        return None, ""
    folders = [*search_dirs(get_registry())]
    for k, arg in enumerate(args):  # (the command line's --config-dir first)
        flag, eq, value = arg.partition("=")
        if flag in ("--config-dir", "-cd"):
            folders.insert(0, value if eq else "".join(args[k + 1 : k + 2]))
    for folder in filter(None, folders):
        path = Path(folder, f"{name}.yaml")
        if path.is_file():
            return name, str(path)
    return (name, f"{name}.yaml") if _file_kind(name) == "preset" else (None, "")


_BAD_HEADER = re.compile(
    r"^(?:Too many components in|Expected header format: KEY VALUE, got) '(.*)'$"
)


def header_error(exc: BaseException) -> ConfigError | None:
    """One line for a config file whose ``# @package`` header Hydra cannot read (a plain
    ``ValueError`` of Hydra's, without the file): the file (found in the traceback, where
    Hydra's file source was reading it), the header and the fix. None for another error."""
    m = _BAD_HEADER.match(str(exc)) if isinstance(exc, ValueError) else None
    if m is None:
        return None
    where, tb = "a config file", exc.__traceback__
    while tb is not None:  # the innermost file source's frame names the file
        frame = tb.tb_frame
        path = frame.f_locals.get("full_path") if frame.f_code.co_name == "load_config" else None
        where = f"the config file {path}" if isinstance(path, str) else where
        tb = tb.tb_next
    header = m.group(1)
    key, *words = header.split()
    fix = f"remove {' '.join(words[1:])!r}" if words else "give it one (or remove the line)"
    return ConfigError(
        f"{where} has a header Hydra cannot read, '# {header}': a header takes one word after "
        f"{key} (e.g. '# @package _global_'); {fix}"
    )


def yaml_error(exc: yaml.YAMLError) -> ConfigError:
    """One line for a config file that is not YAML: the file, where and what."""

    def at(mark: Any) -> str:
        return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""

    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    started = f"{context}{at(getattr(exc, 'context_mark', None))}: " if context else ""
    name = getattr(mark, "name", "") if mark is not None else ""
    what = name if name and not name.startswith("<") else "a config file"
    return ConfigError(
        f"{what} is not valid YAML: {started}{problem}{at(mark)}; fix the file (a list is "
        "[a, b] or '- a' lines, a mapping 'key: value')"
    )


def unknown_key_error(exc: BaseException, default_key: str = "") -> ConfigError | None:
    """The unknown-key message (valid keys, did you mean) for OmegaConf's struct-mode
    error, or None if ``exc`` is not one."""
    parent = getattr(exc, "parent_node", None)
    schema = getattr(exc, "object_type", None)  # merging a preset into a schema: no parent
    if not isinstance(exc, (ConfigAttributeError, ConfigKeyError)):
        return None
    if isinstance(parent, DictConfig) and OmegaConf.is_struct(parent):
        valid = [str(k) for k in parent if str(k) != "hydra"]
    elif isinstance(schema, type) and dataclasses.is_dataclass(schema):
        valid = [f.name for f in dataclasses.fields(schema)]
    else:
        return None
    full = str(getattr(exc, "full_key", "") or default_key)
    path, _, key = full.rpartition(".")
    return UnknownKeyError(
        f"unknown key {full}.{did_you_mean_key(key, valid, path)} Valid keys"
        f"{' under ' + path if path else ''}: {', '.join(sorted(valid))}. "
        f"{_owners_note(path, key) or _PLUS_NOTE}"
    )


def _owners_note(group: str, key: str) -> str:
    """For ``vectorizer.batch_size`` under ``dummy``: which vectorizers (families) have
    that option, and how to select one ("" if none or not a group)."""
    reg = get_registry()
    table: Any = {"vectorizer": reg.vectorizers, "env": reg.families}.get(group, {})
    owners = [  # envfactory's own first
        name
        for _, name, entry in sorted(
            (e.provider.distribution != "envfactory", n, e) for n, e in table.items()
        )
        if getattr(entry.record, "config", None) is not None
        and key in {f.name for f in dataclasses.fields(entry.record.config)}
    ]
    if not owners:
        return ""
    return (
        f"{key} is an option of {group}={', '.join(owners)}: select one of those "
        f"({group}={owners[0]} {group}.{key}=...), or drop it"
    )


def validate(
    cfg: DictConfig, registry: Registry | None = None, *, presets: Mapping[str, str] | None = None
) -> Plan:
    """Check everything about a composed ``envfactory`` node before any env exists, and
    return what was checked, the `Plan` that
    [`envfactory.make_vec`][envfactory.make_vec] and [`envfactory.make_env`][envfactory.make_env]
    also take.

    Unknown keys anywhere (also those added with ``+``), interpolations that cannot be
    resolved, the top-level ranges, every family/vectorizer schema's own checks
    (`envfactory.config.checks`) and every wrapper entry.

    ``presets`` (``{group: file}``, `preset_files`): the preset files the config was
    composed from; a bad name in one of them is reported at that file.

    Raises:
        ConfigError: one line naming the key's path, the value and what is valid.
    """
    return plan_of(cfg, registry, presets=presets)


def resolve(
    cfg: Plan | DictConfig | Mapping[str, Any] | None = None,
    overrides: Sequence[str] | str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Plan:
    """Turn what a user passes to ``make_vec`` / ``make_env`` (a plan, a composed
    DictConfig, a plain dict, or overrides, and keyword ``options``) into a checked plan,
    checking each schema once. A dict and ``options`` are read as `envfactory.config.keywords`
    says (``options`` win)."""
    overrides = override_list(overrides)
    options = dict(options or {})
    if isinstance(cfg, Plan):
        if overrides or options:
            raise ConfigError("pass either a checked plan or overrides / keyword options, not both")
        return cfg
    if cfg is None and not options:
        composed, presets = _composed(overrides)
        return validate(composed, presets=presets)
    if isinstance(cfg, DictConfig):
        if overrides:
            raise ConfigError("pass either a composed config or overrides, not both")
        if not options:
            return validate(cfg)
        return validate(_on_composed(cfg, options))
    if cfg is None or isinstance(cfg, Mapping):
        reading = keywords.read([cfg or {}, options])
        base, presets = _composed([*reading.pick_overrides, *overrides, *reading.overrides])
        return validate(_merged(base, reading), presets=presets)
    if isinstance(cfg, str) or (
        isinstance(cfg, Sequence) and cfg and all(isinstance(o, str) for o in cfg)
    ):
        given = [cfg] if isinstance(cfg, str) else list(cfg)
        named = [o for g in given for o in _as_override(g)]
        ids = " (an env id as env.id=ID)" if named != given else ""
        raise ArgumentTypeError(
            f"make_vec's first argument is a config (a composed DictConfig or a dict), got "
            f"{type(cfg).__name__} {echo(cfg)}; overrides go by name{ids}: "
            f"make_vec(overrides={[*named, *overrides]!r}{_call_options(options)})"
        )
    raise ArgumentTypeError(
        f"make_vec takes a composed DictConfig, a dict, or overrides=[...]; got "
        f"{type(cfg).__name__}"
    )


def _as_override(given: str) -> list[str]:
    """A string passed where the config goes, as overrides: one without ``=`` is an env id
    (``CartPole-v1``; ``ALE/Pong-v5`` is the atari family's), or a family's name."""
    if "=" in given:
        return [given]
    if given in get_registry().families:
        return [f"env={given}"]
    return ["env=atari", f"env.id={given}"] if given.startswith("ALE/") else [f"env.id={given}"]


def _call_options(options: Mapping[str, Any]) -> str:
    """Keyword options as they were passed (``, num_envs=4``), for a call to show."""
    if not all(str(k).isidentifier() for k in options):
        return ", ..." if options else ""
    return "".join(f", {k}={v!r}" for k, v in options.items())


def _on_composed(cfg: DictConfig, options: Mapping[str, Any]) -> DictConfig:
    """Keyword options on a composed config: merged into a copy of it. A group pick or
    overrides need composing, which that config has already done."""
    reading = keywords.read([options])
    for group, name in reading.picks.items():
        if cfg.get(group) is None or _picked(cfg, group) != name:
            raise ConfigError(
                f"{group}={name!r} picks a config group, which the composed config passed has "
                f"already done: compose it with '{group}={name}', or pass a dict"
            )
    if reading.overrides:
        raise ConfigError("pass either a composed config or overrides, not both")
    return _merged(cfg, reading)


def _picked(cfg: DictConfig, group: str) -> Any:
    return cfg[group].get("family" if group == "env" else "name")


def _merged(base: DictConfig, reading: keywords.Reading) -> DictConfig:
    reading.check_keys([str(k) for k in base])
    try:
        merged = OmegaConf.merge(base, *reading.layers)
    except OmegaConfBaseException as exc:
        raise (unknown_key_error(exc) or omegaconf_error(exc)) from None
    assert isinstance(merged, DictConfig)
    return merged


def resolve_config(
    cfg: DictConfig | Mapping[str, Any] | None = None, overrides: Sequence[str] | None = None
) -> DictConfig:
    """The validated config of `resolve` (its plan's ``config``)."""
    return resolve(cfg, overrides).config


def override_list(overrides: Any) -> list[str]:
    """Overrides as a list of strings. One string is refused with a ``TypeError`` rather than
    read a character at a time or guessed at: it may hold several overrides as typed on a
    command line (``"num_envs=2 env=gym"``), and a list is the one spelling (as Hydra's own
    ``compose(overrides=[...])``)."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise ArgumentTypeError(
            f"overrides must be a list of strings, got the string {echo(overrides)}; pass "
            f"overrides=[{echo(overrides)}] (one list entry per override)"
        )
    if not isinstance(overrides, Sequence) or isinstance(overrides, (bytes, Mapping)):
        raise ArgumentTypeError(
            f"overrides must be a list of strings like ['num_envs=2', 'env=mountaincar'], "
            f"got {type(overrides).__name__} {echo(overrides)}"
        )
    return [str(o) for o in overrides]
