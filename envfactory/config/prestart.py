"""Start a picked vectorizer's slow set-up (``subproc``'s fork server) from the overrides,
before the config is composed, so that it overlaps the composition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["prestart"]


def prestart(overrides: Sequence[str], reg: Any = None) -> None:
    """When the overrides pick a vectorizer with a ``prestart`` (``vectorizer=subproc``:
    its fork server), call it now with the vectorizer's own overrides and the picked env
    family's modules: that work then overlaps the composition instead of delaying the first
    worker (issue 28, start-up). A vectorizer picked in a config file starts it when the env
    is built, as before.

    Without ``reg`` only envfactory's own vectorizers and families are looked at, read from
    their hooks without building the registry or importing Hydra (~0.2 s sooner: Hydra's
    import and the plugins' scan); a built-in name is never shadowed (a clash is an error),
    so the pick means the same once the registry is built. With ``reg`` a plugin's vectorizer
    is started too (a second call for a built-in one changes nothing: the fork server runs).
    """
    picks = dict(o.partition("=")[::2] for o in overrides if isinstance(o, str) and "=" in o)
    vectorizers, families = _records(reg)
    vec = vectorizers.get(picks.get("vectorizer", ""))
    if vec is None or vec.prestart is None:
        return
    own = {
        k.removeprefix("vectorizer."): v for k, v in picks.items() if k.startswith("vectorizer.")
    }
    family = families.get(picks.get("env", "gym"))
    modules = [] if family is None else [family.make.__module__, *family.preload]
    try:
        vec.prestart(own, modules)
    except Exception:
        pass  # a head start only: the build starts what it needs, and reports its errors


def _records(reg: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    if reg is not None:
        return (
            {name: r.record for name, r in reg.vectorizers.items()},
            {name: r.record for name, r in reg.families.items()},
        )
    from ..families.builtin import envfactory_env_families
    from ..vectorizers.builtin import envfactory_vectorizers

    return (
        {rec.name: rec for rec in envfactory_vectorizers()},
        {rec.name: rec for rec in envfactory_env_families()},
    )
