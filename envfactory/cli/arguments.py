"""Checks of the ``envfactory`` command line that Hydra does not make, run before Hydra
parses it: an option Hydra does not have (``--verison``), and a ``--config-dir`` preset named
like a config envfactory already has.

Decisions:
    * An unknown option is one line naming it, the closest option and the options there
      are (Hydra's argparse prints its whole usage banner and ``__main__.py: error:``).
      Options are matched as Hydra's parser matches them (a unique prefix of a long option
      is that option).
    * A preset in the ``--config-dir`` folder named like an env or vectorizer that another
      config source gives (``vectorizer/subproc.yaml``; envfactory's ``conf/env/pong.yaml``)
      is refused, naming both: one name means one config. Hydra would not use it (its
      search path puts ``--config-dir`` after envfactory's own configs), so the run would
      silently be the built-in's. A preset of a new name that starts from the built-in
      (``defaults: [subproc, _self_]``) is the way to change it; this is also the rule for
      the user config folder and plugins' folders
      (`envfactory.plugin.clashes`).
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Sequence
from pathlib import Path

from envfactory.errors import ConfigError

__all__ = ["check_arguments", "unknown_option", "usage_line"]

_ENVFACTORY_OPTIONS = ("--rerun",)  # taken out before Hydra parses (`envfactory.cli.rerun`)
_MODES = ("--run/-r", "--multirun/-m", "--cfg/-c", "--info/-i", "--shell-completion/-sc")


def check_arguments(args: Sequence[str]) -> None:
    """Raise a ConfigError (one line) for an option Hydra does not have or a ``--config-dir``
    preset that clashes; nothing else is checked here (Hydra parses the rest)."""
    from hydra._internal.utils import get_args_parser

    actions = [a for a in get_args_parser()._actions if a.option_strings]
    takes_value = {s for a in actions if a.nargs != 0 for s in a.option_strings}
    options = [s for a in actions for s in a.option_strings] + list(_ENVFACTORY_OPTIONS)
    config_dir, skip, modes = None, False, []
    flags: list[str] = []  # the options and their values, in order
    overrides: list[str] = []
    after = split = False  # an option after an override; then an override again (refused)
    for k, arg in enumerate(args):
        if skip:
            skip = False
            flags.append(arg)
            continue
        if not arg.startswith("-") or arg in ("-", "--"):
            split = split or after
            overrides.append(arg)
            continue  # an override (key=value, +key=..., ~key)
        flags.append(arg)
        after = after or bool(overrides)
        flag, eq, value = arg.partition("=")
        if flag not in options:
            longs = [o for o in options if o.startswith("--")]
            prefixed = [o for o in longs if flag.startswith("--") and o.startswith(flag)]
            if len(prefixed) != 1:
                raise ConfigError(unknown_option(flag, options, "envfactory --help"))
            flag = prefixed[0]
        if flag in takes_value and not eq and k + 1 < len(args):
            value, skip = args[k + 1], True
        if flag in ("--config-dir", "-cd"):
            config_dir = value
        modes += [m for m in _MODES if flag in m.split("/")]
    if split:
        raise ConfigError(
            "options go before the overrides (Hydra reads the overrides as one list): "
            f"envfactory {' '.join([*flags, *overrides])}"
        )
    if len(set(modes)) > 1:  # Hydra raises a ValueError (a traceback) for it
        raise ConfigError(
            f"{' and '.join(sorted(set(modes)))} cannot be given together: give only one of "
            f"{', '.join(_MODES)}"
        )
    if config_dir:
        _check_config_dir(config_dir)


def unknown_option(flag: str, options: Sequence[str], help_command: str) -> str:
    """The line for an option a command does not have: the closest one ("did you mean"),
    the long options there are, and where they are all shown (``help_command``). Used by
    ``envfactory`` and ``envfactory tune``."""
    longs = [o for o in options if o.startswith("--")]
    # matched without their dashes, which would make '--frobnicate' look like '--name'
    bare = {o.lstrip("-"): o for o in reversed(options)}
    close = difflib.get_close_matches(flag.lstrip("-"), list(bare), n=1, cutoff=0.5)
    hint = f" Did you mean {bare[close[0]]!r}?" if close else ""
    return (
        f"unknown option {flag}.{hint} Options: {', '.join(longs)}; "
        f"overrides take no dashes (key=value); {help_command} shows them all"
    )


def usage_line(parser: argparse.ArgumentParser, message: str) -> str:
    """One line for an argparse ``parser``'s error ``message`` (``envfactory tune``'s):
    `unknown_option` for the first unrecognized option, else the message and where the
    help is. argparse's own says only ``unrecognized arguments: --budegt``."""
    help_command = f"{parser.prog} --help"
    words = message.split(": ", 1)[1].split() if "unrecognized arguments" in message else []
    flag = next((w.split("=", 1)[0] for w in words if w.startswith("-")), None)
    if flag is None:
        return f"{message} (see {help_command})"
    return unknown_option(flag, list(parser._option_string_actions), help_command)


def _check_config_dir(folder: str) -> None:
    """A ConfigError for the first preset of ``folder`` that another config source names."""
    from envfactory import __version__
    from envfactory.plugin.clashes import preset_sources
    from envfactory.plugin.folders import PRESET_GROUPS, PresetFile, preset_files
    from envfactory.plugin.manager import get_registry
    from envfactory.plugin.registry import _source

    reg = get_registry()
    if any(os.path.realpath(d) == os.path.realpath(folder) for d, _ in reg.config_dirs):
        return  # the user config folder itself: its clashes are the registry's conflicts
    given = preset_sources(reg, __version__)
    for group in PRESET_GROUPS:
        for preset in preset_files(folder, group):
            others = [
                r
                for r in given[group].get(preset.name, [])
                if not isinstance(r.record, PresetFile)
                or os.path.realpath(r.record.path) != os.path.realpath(preset.path)
            ]
            if not others:
                continue
            name, mine = preset.name, f"my_{preset.name}"
            raise ConfigError(
                f"--config-dir {folder}: its preset {preset.path} is named like the {group} "
                f"{name!r} of {' and '.join(_source(r) for r in others)}, and one name means "
                f"one config, so it is not used. Rename it (e.g. "
                f"{Path(folder, group, mine + '.yaml')}, with 'defaults: [{name}, _self_]' to "
                f"start from {name}) and select it with {group}={mine}"
            )
