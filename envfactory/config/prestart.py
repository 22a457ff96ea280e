"""Start a picked vectorizer's slow set-up (``subproc``'s fork server) from the overrides,
before the config is composed, so that it overlaps the composition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["prestart", "records_of"]


def prestart(
    overrides: Sequence[str], vectorizers: Mapping[str, Any], families: Mapping[str, Any]
) -> None:
    """When the overrides pick a vectorizer with a ``prestart`` (``vectorizer=subproc``:
    its fork server), call it now with the vectorizer's own overrides and the picked env
    family's modules: that work then overlaps the composition instead of delaying the first
    worker (issue 28, start-up). A vectorizer picked in a config file starts it when the env
    is built, as before.

    ``vectorizers`` and ``families``: the records by name, the registry's (`records_of`),
    or envfactory's own read from their hooks before the registry is built or Hydra
    imported (``make_vec`` does, ~0.2 s sooner; a built-in name is never shadowed, a clash
    being an error, so the pick means the same once the registry is built). A second call
    for the same vectorizer changes nothing (the fork server runs).
    """
    picks = dict(o.partition("=")[::2] for o in overrides if isinstance(o, str) and "=" in o)
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


def records_of(reg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The registry's vectorizer and family records by name, for `prestart`."""
    return (
        {name: r.record for name, r in reg.vectorizers.items()},
        {name: r.record for name, r in reg.families.items()},
    )
