"""``envfactory-plugins``: list the installed plugins and everything they register.

Every plugin with its status (``active``; ``disabled`` and by what; ``failed`` with the
stage and error; ``conflicting`` and with whom), every family, vectorizer, wrapper and
vector wrapper, every name two plugins clash on, every config dir, every plugin that
failed to load and every disabled plugin, each with the distribution and version that gave
it, as readable tables; ``--json`` prints `envfactory.plugin.manager.Registry.as_dict`.

Exit status: 0. Failed, disabled and conflicting plugins do not change it: they are
listed (the one-line warnings they raise are silenced here, since the listing shows them).
A name in ``ENVFACTORY_DISABLED_PLUGINS`` that blocks nothing (a typo) is a note under the
disabled plugins, with a "did you mean", and a warning on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "render"]


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    # the last column is free text: no padding
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in cells:
        lines.append(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def _section(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    body = _table(headers, rows) if rows else "  (none)"
    return f"{title} ({len(rows)})\n{body}"


def render(
    data: dict[str, Any], plugins: Sequence[Sequence[str]] = (), notes: Sequence[str] = ()
) -> str:
    """The readable listing of a `Registry.as_dict` dict (and the loaded plugins as
    ``(plugin, distribution, version)`` rows); ``notes`` go under the disabled plugins
    (`Registry.unmatched_disabled`: names there that block nothing)."""
    parts = []
    if data.get("plugins"):
        rows = [
            (p["plugin"], p["distribution"], p["version"], p["status"], p["detail"])
            for p in data["plugins"]
        ]
        parts.append(
            _section("Plugins", ("PLUGIN", "DISTRIBUTION", "VERSION", "STATUS", "DETAIL"), rows)
        )
    elif plugins:
        parts.append(_section("Plugins", ("PLUGIN", "DISTRIBUTION", "VERSION"), plugins))
    record_headers = ("NAME", "DISTRIBUTION", "VERSION", "PLUGIN", "SUMMARY")
    for key, title in (
        ("families", "Env families (env=<name>)"),
        ("vectorizers", "Vectorizers (vectorizer=<name>)"),
        ("wrappers", "Wrappers (wrappers=[{name: <name>, ...}])"),
        ("vector_wrappers", "Vector wrappers (vector_wrappers=[{name: <name>, ...}])"),
    ):
        rows = [
            (name, r["distribution"], r["version"], r["plugin"], r["summary"])
            for name, r in data[key].items()
        ]
        parts.append(_section(title, record_headers, rows))
    parts.append(
        _section(
            "Conflicts (unusable until one plugin is disabled)",
            ("KIND", "NAME", "REGISTERED BY"),
            [
                (
                    c["kind"],
                    c["name"],
                    " and ".join(
                        f"{p.get('preset') or p['plugin']} ({p['distribution']} {p['version']}"
                        + (f", plugin {p['plugin']})" if p.get("preset") else ")")
                        for p in c["providers"]
                    ),
                )
                for c in data.get("conflicts", [])
            ],
        )
    )
    parts.append(
        _section(
            "Config dirs",
            ("PATH", "DISTRIBUTION", "VERSION"),
            [(d["path"], d["distribution"], d["version"]) for d in data["config_dirs"]],
        )
    )
    parts.append(
        _section(
            "Failed plugins (skipped)",
            ("PLUGIN", "DISTRIBUTION", "VERSION", "STAGE", "ERROR"),
            [
                (f["plugin"], f["distribution"], f["version"], f["stage"], f["error"])
                for f in data["failures"]
            ],
        )
    )
    parts.append(
        _section(
            "Disabled plugins (ENVFACTORY_DISABLED_PLUGINS)",
            ("PLUGIN (DISTRIBUTION)",),
            [(d,) for d in data["disabled"]],
        )
        + "".join(f"\n  note: {n}" for n in notes)
    )
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    from envfactory.errors import PluginLoadWarning
    from envfactory.plugin.manager import get_registry

    parser = argparse.ArgumentParser(
        prog="envfactory-plugins",
        description="List envfactory's plugins and every family, vectorizer, wrapper and "
        "config dir they register, with the distribution and version that gave each.",
    )
    parser.add_argument("--json", action="store_true", help="print the registry as JSON")
    args = parser.parse_args(argv)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)
        registry = get_registry()
    data = registry.as_dict()
    for note in registry.unmatched_disabled:  # on stderr also with --json
        print(f"envfactory-plugins: warning: {note}", file=sys.stderr)
    if args.json:
        return _emit(json.dumps(data, indent=2))
    return _emit(render(data, notes=registry.unmatched_disabled))


def _emit(text: str) -> int:
    """Print ``text``; a closed pipe (``envfactory-plugins | head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
