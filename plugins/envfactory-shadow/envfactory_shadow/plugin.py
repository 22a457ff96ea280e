"""Ships a config folder whose presets take names envfactory already gives."""

from __future__ import annotations

from pathlib import Path

import envfactory


@envfactory.hookimpl
def envfactory_config_dirs() -> list[str]:
    return [str(Path(__file__).parent / "conf")]
