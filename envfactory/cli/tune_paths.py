"""Where ``envfactory tune`` writes: the preset (``vectorizer/<name>.yaml``), the raw
samples and the plot (``tune/``) in the user config folder or ``--config-dir``; checked
before anything is measured, and how the written preset is used."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

__all__ = ["check_destination", "folder_of", "plot_path", "usage_lines"]


def folder_of(args: argparse.Namespace) -> Path:
    """Where the preset (``vectorizer/``), the raw samples and the plot (``tune/``) go."""
    from .presets import user_config_dir

    return Path(args.config_dir).expanduser() if args.config_dir else user_config_dir()


def plot_path(args: argparse.Namespace) -> Path:
    return Path(args.plot) if args.plot else folder_of(args) / "tune" / f"{args.name}.png"


def _writable(folder: Path, made: list[Path]) -> str:
    """Make ``folder`` (with its missing parents, added to ``made``) and prove that files
    can be written there (a temporary file made and removed); why not (``""``: they can):
    a file in the way, or the OS error naming the path."""
    path = folder
    while not path.exists() and path != path.parent:
        path = path.parent
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a folder"
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        made.extend(p for p in reversed(missing) if p.is_dir())
        return f"cannot make the folder {exc.filename or folder}: {_os_error(exc)}"
    made.extend(reversed(missing))
    try:
        fd, probe = tempfile.mkstemp(prefix=".envfactory-tune-", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write a file in {folder}: {_os_error(exc)}"
    return ""


def _os_error(exc: OSError) -> str:
    return f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc) or type(exc).__name__


def _remove(made: list[Path]) -> None:
    """Remove the folders the check made (the deepest first), as long as they are empty."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty (another's files), or gone


def check_destination(args: argparse.Namespace) -> str | None:
    """Why the preset or the plot could not be written (None: they can), checked before
    anything is measured: the folders they go to are made (kept when the check passes,
    removed when it fails) and a file is written and removed in each."""
    folder = folder_of(args)
    made: list[Path] = []
    why = _check(args, folder, made)
    if why:
        _remove(made)
    return why


def _check(args: argparse.Namespace, folder: Path, made: list[Path]) -> str | None:
    from .presets import CONFIG_DIR_ENV_VAR

    for sub in ("vectorizer", "tune"):
        why = _writable(folder / sub, made)
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
    why = f"{plot} is a folder" if plot.is_dir() else _writable(plot.parent, made)
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
