"""What the ``envfactory`` commands (the Hydra app and ``envfactory tune``) do before Hydra
composes: load the plugins, store the config schemas, register envfactory's sweeper."""

from __future__ import annotations

import sys
import warnings

__all__ = ["load_registry"]


def load_registry() -> str:
    """Load plugins and store the config schemas before Hydra composes; plugin load
    warnings are printed as one line each. Returns the conf dir."""
    from envfactory.cli.sweeper import register_sweeper
    from envfactory.config import conf_dir
    from envfactory.config.store import use_in_this_app
    from envfactory.errors import PluginLoadWarning

    register_sweeper()  # hydra/sweeper=envfactory (a -m sweep's: with_sweeper)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginLoadWarning)
        use_in_this_app()
    for w in caught:
        if issubclass(w.category, PluginLoadWarning):
            print(f"envfactory: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return str(conf_dir())
