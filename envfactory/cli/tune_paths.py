"""Where ``envfactory tune`` writes: the preset (``vectorizer/<name>.yaml``), the raw
samples and the plot (``tune/``) in the user config folder or ``--config-dir``; checked
before anything is measured, and how the written preset is used."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["check_destination", "folder_of", "plot_path", "usage_lines"]


def folder_of(args: argparse.Namespace) -> Path:
    """Where the preset (``vectorizer/``), the raw samples and the plot (``tune/``) go."""
    from .presets import user_config_dir

    return Path(args.config_dir).expanduser() if args.config_dir else user_config_dir()


def plot_path(args: argparse.Namespace) -> Path:
    return Path(args.plot) if args.plot else folder_of(args) / "tune" / f"{args.name}.png"


def _unwritable(folder: Path) -> str:
    """Why files cannot be written in ``folder`` once made (``""``: they can): the nearest
    existing folder above it is a file, or not writable."""
    path = folder
    while not path.exists() and path != path.parent:
        path = path.parent
    if not path.is_dir():
        return f"{path} is a file, not a folder"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return ""


def check_destination(args: argparse.Namespace) -> str | None:
    """Why the preset or the plot could not be written (None: they can), checked before
    anything is measured."""
    from .presets import CONFIG_DIR_ENV_VAR

    folder = folder_of(args)
    for sub in ("vectorizer", "tune"):
        why = _unwritable(folder / sub)
        if why:
            given = f"--config-dir {args.config_dir}" if args.config_dir else str(folder)
            fix = (
                "name a folder you can write (it is made if missing), e.g. --config-dir presets"
                if args.config_dir
                else f"set {CONFIG_DIR_ENV_VAR} or pass --config-dir DIR"
            )
            return f"{given}: cannot write the preset there: {why}; {fix}"
    if args.no_plot:
        return None
    plot = plot_path(args)
    why = f"{plot} is a folder" if plot.is_dir() else _unwritable(plot.parent)
    if why:
        given = f"--plot {args.plot}" if args.plot else str(plot)
        return (
            f"{given}: cannot write the plot: {why}; name a PNG file in a folder you can "
            "write, or pass --no-plot"
        )
    return None


def usage_lines(args: argparse.Namespace, path: Path) -> list[str]:
    from .presets import user_config_dir

    name = args.name
    if path.parent.parent.resolve() == user_config_dir().resolve():
        return [
            f"  use it: envfactory vectorizer={name} ...   (Python: envfactory.compose("
            f'["vectorizer={name}", ...]) or make_vec(overrides=[...]))'
        ]
    folder = path.parent.parent
    return [
        f"  use it: envfactory --config-dir {folder} vectorizer={name} ...",
        f"          Python: ENVFACTORY_CONFIG_DIR={folder} makes envfactory.compose("
        f'["vectorizer={name}", ...]) find it',
    ]
