"""Why pluggy refused a plugin, in one line: a hook implementation whose parameters the
hookspec does not give, or one that implements no hook at all.

pluggy's own ``PluginValidationError`` text is three lines (plugin and hook, the
definition, the rule broken); envfactory's warnings, ``envfactory-plugins`` rows and
``register_plugin`` errors are one line each, in the style of the misspelled-hook message.
"""

from __future__ import annotations

import pluggy

from ..errors import did_you_mean
from . import spec

__all__ = ["invalid_hookimpl", "no_hook"]


def _hooks() -> list[str]:
    return sorted(n for n in vars(spec) if n.startswith(f"{spec.NAME}_"))


def invalid_hookimpl(
    pm: pluggy.PluginManager, plugin: object, plugin_name: str, exc: Exception
) -> str:
    """One line for pluggy's ``PluginValidationError`` ``exc`` raised while registering
    ``plugin``: for a hook implementation that takes a parameter its hookspec does not give,
    the hook, what the hookspec takes and what the plugin's takes, and how to fix it; for
    anything else pluggy refuses, its own text with the lines joined."""
    for attr in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attr)
        if opts is None:
            continue
        hook_name = opts.get("specname") or attr
        caller = getattr(pm.hook, hook_name, None)
        if caller is None or caller.spec is None:
            continue
        impl = pluggy.HookImpl(plugin, plugin_name, getattr(plugin, attr), opts)
        given = {*caller.spec.argnames, *caller.spec.kwargnames}
        extra = [a for a in impl.argnames if a not in given]
        if not extra:
            continue
        spec_args = ", ".join(caller.spec.argnames)
        takes = f"({spec_args})" if spec_args else "no arguments"
        theirs = ", ".join((*impl.argnames, *impl.kwargnames))
        return (
            f"hook {hook_name!r} takes {takes} (def {hook_name}({spec_args}):), but "
            f"{plugin_name}'s takes ({theirs}). Remove {', '.join(extra)} from its parameters"
        )
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return "; ".join(lines) or type(exc).__name__


def no_hook(plugin: object) -> str:
    """Why a plugin whose entry point loaded has no hook implementation: the functions
    named like hooks that lack ``@envfactory.hookimpl`` (the plugin guide's module with
    that line left out), else that its module has none at all."""
    valid = _hooks()
    where = getattr(plugin, "__name__", type(plugin).__name__)
    named = sorted(
        n for n in dir(plugin) if n.startswith(f"{spec.NAME}_") and callable(getattr(plugin, n))
    )
    if named:
        hints = "".join(did_you_mean(n, valid) for n in named if n not in valid)
        return (
            f"it implements no hook: {', '.join(named)} in {where} "
            f"{'has' if len(named) == 1 else 'have'} no @envfactory.hookimpl decorator.{hints} "
            "Put @envfactory.hookimpl on the line above each hook function"
        )
    return (
        f"it implements no hook: {where} has no @envfactory.hookimpl function (hooks: "
        f"{', '.join(valid)}). Mark each hook function with @envfactory.hookimpl, or point the "
        "entry point at the module that has them"
    )
