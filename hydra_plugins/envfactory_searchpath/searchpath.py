"""The envfactory SearchPathPlugin (see the package docstring)."""

from __future__ import annotations

import warnings

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class EnvfactorySearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        try:
            from envfactory.config.store import register_configs, search_dirs

            dirs = search_dirs(register_configs())
        except Exception as exc:  # never break an unrelated Hydra app
            warnings.warn(f"envfactory configs unavailable: {exc}", stacklevel=2)
            return
        present = {e.path for e in search_path.get_path()}
        for i, d in enumerate(dirs):
            if d not in present and f"file://{d}" not in present:
                search_path.append(provider=f"envfactory-{i}", path=f"file://{d}")
