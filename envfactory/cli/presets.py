"""The user's own config folder: presets that ``envfactory tune`` writes, composable by name.

The folder is ``$ENVFACTORY_CONFIG_DIR`` if set, else ``$XDG_CONFIG_HOME/envfactory``, else
``~/.config/envfactory``. It is on envfactory's config search path through the same hook
that plugins use for their presets (``envfactory_config_dirs``; this module is a built-in
plugin), so a file ``<folder>/vectorizer/tuned.yaml`` composes as ``vectorizer=tuned`` in
``envfactory.compose``, ``make_vec(overrides=...)``, the ``envfactory`` command, and in a
user's own Hydra app as ``envfactory/vectorizer=tuned``
([`envfactory.register_configs`][envfactory.register_configs]). The folder need not exist: Hydra
skips a search path entry that is not a directory, so a preset written later in the same process
composes without reloading the plugins.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..plugin.folders import CONFIG_DIR_ENV_VAR, check_preset_name, user_config_dir
from ..plugin.spec import hookimpl

__all__ = [
    "CONFIG_DIR_ENV_VAR",
    "check_preset_name",
    "envfactory_config_dirs",
    "taken_names",
    "user_config_dir",
    "write_preset",
]


@hookimpl
def envfactory_config_dirs() -> list[str]:
    """The user's config folder, so its ``env/`` and ``vectorizer/`` presets compose."""
    return [str(user_config_dir())]


def taken_names(group: str, folder: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """``{name: who gives it}``: the ``group`` names a preset written to ``folder`` (the
    user's config folder by default) may not take, since another config source gives them
    (a registered vectorizer, a plugin's or envfactory's preset, the user's folder)."""
    from ..plugin.clashes import taken_names as taken
    from ..plugin.manager import get_registry

    return taken(get_registry(), group, Path(folder).expanduser() if folder else user_config_dir())


def write_preset(
    path: Path, base: str, options: Mapping[str, Any], comment: Iterable[str] = ()
) -> Path:
    """Write a vectorizer preset: ``defaults: [<base>, _self_]`` and ``options``, with
    ``comment`` lines at the top. Written to a temporary file first and renamed, so a
    reader (or a Ctrl-C) never sees half a file."""
    from omegaconf import OmegaConf

    lines = [f"# {line}".rstrip() for line in comment]
    lines += ["defaults:", f"  - {base}", "  - _self_"]
    body = OmegaConf.to_yaml(OmegaConf.create(dict(options))) if options else ""
    text = "\n".join(lines) + "\n" + body
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
