"""Where configs live: envfactory's own ``conf/`` (in a wheel or a source checkout) and the
user's config folder (presets that ``envfactory tune`` writes), with the rule for a preset's
name. It imports nothing of envfactory: the plugin registry (which the config code imports)
and the command line both use it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CONFIG_DIR_ENV_VAR",
    "CONF_PLUGIN",
    "PRESET_GROUPS",
    "USER_CONFIG_PLUGIN",
    "PresetFile",
    "check_preset_name",
    "conf_dir",
    "preset_files",
    "user_config_dir",
]


def conf_dir() -> Path:
    """The ``conf/`` folder: ``envfactory/conf`` inside a wheel, ``<repo>/conf`` in a
    source checkout or editable install."""
    pkg = Path(__file__).resolve().parent.parent
    for candidate in (pkg / "conf", pkg.parent / "conf"):
        if (candidate / "envfactory.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"envfactory's conf/ folder is missing (looked in {pkg / 'conf'} and "
        f"{pkg.parent / 'conf'}); reinstall envfactory"
    )


CONFIG_DIR_ENV_VAR = "ENVFACTORY_CONFIG_DIR"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def user_config_dir() -> Path:
    """``$ENVFACTORY_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/envfactory``, else
    ``~/.config/envfactory`` (it may not exist yet)."""
    own = os.environ.get(CONFIG_DIR_ENV_VAR)
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "envfactory"


def check_preset_name(name: str, taken: Mapping[str, str] | Iterable[str]) -> str | None:
    """Why ``name`` cannot name a vectorizer preset (None: it can). ``taken``: the names
    another config source gives, with who gives each where known (``{name: who}``)."""
    if not _NAME.match(name):
        return (
            f"--name {name!r}: expected letters, digits, '_', '-' or '.' (a file name and a "
            "Hydra option name), e.g. --name tuned_pong"
        )
    who = dict(taken) if isinstance(taken, Mapping) else dict.fromkeys(taken, "")
    if name not in who:
        return None
    if not who[name] or who[name].startswith("a registered "):
        return (
            f"--name {name!r} is a registered vectorizer; a preset of that name would hide "
            "it. Pick another name, e.g. --name tuned"
        )
    return (
        f"--name {name!r}: {who[name]} has that name, and a name two config sources give "
        "cannot be used. Pick another name, e.g. --name tuned"
    )


USER_CONFIG_PLUGIN = "envfactory.user_config"  # the built-in plugin naming the user's folder
CONF_PLUGIN = "envfactory.conf"  # the provider of the presets in envfactory's own conf/
PRESET_GROUPS = {"env": "families", "vectorizer": "vectorizers"}  # group -> registry table


@dataclass(frozen=True)
class PresetFile:
    """A YAML preset of a config folder, ``<folder>/<group>/<name>.yaml``: what a config
    source gives for ``<group>=<name>`` (a registry records it where it clashes)."""

    name: str
    path: str
    summary: str = ""


def preset_files(folder: str | os.PathLike[str], group: str) -> list[PresetFile]:
    """The presets of ``group`` (``env``, ``vectorizer``) in ``folder`` (none if absent)."""
    return [
        PresetFile(p.stem, str(p))
        for p in sorted(Path(folder, group).glob("*.yaml"))
        if p.is_file()
    ]
