"""Where envfactory's own Hydra configs live, in a wheel or in a source checkout (see
`envfactory.plugin.folders`, which the plugin registry uses too)."""

from __future__ import annotations

from ..plugin.folders import conf_dir

__all__ = ["conf_dir"]
