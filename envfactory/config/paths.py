"""Where envfactory's own Hydra configs live, in a wheel or in a source checkout."""

from __future__ import annotations

from pathlib import Path

__all__ = ["conf_dir"]


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
