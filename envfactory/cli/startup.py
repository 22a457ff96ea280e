"""What the ``envfactory`` commands (the Hydra app and ``envfactory tune``) do before Hydra
composes: load the plugins, store the config schemas, register envfactory's sweeper.

A name two plugins or config sources give (a conflict) is one warning line, held until the
command knows whether its job uses that name (`release_conflicts`): a job that fails on it
prints the error line only (it names both sources already), not the same words twice."""

from __future__ import annotations

import sys
import warnings

__all__ = ["load_registry", "release_conflicts"]

# the conflict warnings not printed yet: ((registry table, name), line)
_held: list[tuple[tuple[str, str], str]] = []


def load_registry(*, hold_conflicts: bool = False) -> str:
    """Load plugins and store the config schemas before Hydra composes; plugin load
    warnings are printed as one line each (``hold_conflicts``: a conflict's is held until
    `release_conflicts`). Returns the conf dir."""
    from envfactory.cli.sweeper import register_sweeper
    from envfactory.config import conf_dir
    from envfactory.config.store import use_in_this_app
    from envfactory.errors import PluginLoadWarning
    from envfactory.plugin.registry import _TABLE_KIND, conflict_message

    register_sweeper()  # hydra/sweeper=envfactory (a -m sweep's: with_sweeper)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginLoadWarning)
        reg = use_in_this_app()
    conflicts = {
        conflict_message(_TABLE_KIND[table], name, regs): (table, name)
        for table, names in reg.conflicts.items()
        for name, regs in names.items()
    }
    for w in caught:
        if not issubclass(w.category, PluginLoadWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        elif hold_conflicts and str(w.message) in conflicts:
            _held.append((conflicts[str(w.message)], str(w.message)))
        else:
            print(f"envfactory: warning: {w.message}", file=sys.stderr)
    return str(conf_dir())


def release_conflicts(error: BaseException | None = None) -> None:
    """Print the held conflict warnings, but not the one ``error`` (a
    [`ConflictingNameError`][envfactory.errors.ConflictingNameError] the job failed on) is
    about: its line says it all. Called once the job's config is checked, when it fails, and
    when the command ends."""
    about = (getattr(error, "table", ""), getattr(error, "name", ""))
    while _held:
        key, line = _held.pop(0)
        if key != about:
            print(f"envfactory: warning: {line}", file=sys.stderr)
