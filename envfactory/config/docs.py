"""Markdown tables of every config option, generated from the schemas (README section).

``python -m envfactory.config.docs`` prints them; ``--write README.md`` replaces the text
between the ``<!-- options:begin -->`` and ``<!-- options:end -->`` markers.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from typing import Any

from omegaconf import MISSING

from ..plugin.manager import Registered, get_registry
from .schema import EnvfactoryConfig, RunConfig

BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"


def _attr_docs(cls: type) -> dict[str, str]:
    """Field descriptions from the ``Attributes:`` sections of a Google-style docstring and
    those of its base classes (a subclass documents only what it changes)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        out.update(_own_attr_docs(klass))
    return out


def _own_attr_docs(cls: type) -> dict[str, str]:
    doc = cls.__dict__.get("__doc__") or ""
    doc = inspect.cleandoc(doc)
    out: dict[str, str] = {}
    section = doc.split("Attributes:", 1)
    if len(section) < 2:
        return out
    current = None
    for line in section[1].splitlines():
        m = re.match(r"^\s{4}(\w+):\s*(.*)$", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and line.startswith(" " * 8):
            out[current] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    return out


def _type_name(t: Any) -> str:
    s = t if isinstance(t, str) else getattr(t, "__name__", None) or str(t)
    s = str(s).replace("typing.", "")
    if s.startswith("Optional["):
        s = s[len("Optional[") : -1] + " | None"
    return s


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        v = f.default
    elif f.default_factory is not dataclasses.MISSING:
        v = f.default_factory()
    else:
        return "(required)"
    if v is MISSING:
        return "(required)"
    v = getattr(v, "value", v)
    if dataclasses.is_dataclass(v):
        return "(see below)"
    if isinstance(v, bool):  # as an override is typed: true/false, beside null
        return f"`{str(v).lower()}`"
    return "null" if v is None else f"`{v}`"


def _cell(text: str) -> str:
    """A table cell: ``|`` escaped outside code spans only (the site's Markdown leaves a ``|``
    inside backticks alone and would show an escape there as a backslash)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in parts)


def table(cls: type, skip: tuple[str, ...] = ()) -> str:
    """One schema's options as a Markdown table, in a ``div.options`` (md_in_html) whose option
    names and defaults the site's stylesheet keeps on one line."""
    docs = _attr_docs(cls)
    rows = ["| option | type | default | what it does |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        desc = _cell(docs.get(f.name, "").replace("``", "`"))
        rows.append(f"| `{f.name}` | {_cell(_type_name(f.type))} | {_default(f)} | {desc} |")
    return '<div class="options" markdown>\n\n' + "\n".join(rows) + "\n\n</div>"


def options_markdown() -> str:
    reg = get_registry()
    parts = [
        "#### Top level (`conf/envfactory.yaml`)",
        "",
        table(EnvfactoryConfig, ("env", "vectorizer")),
        "",
        "#### `run` (the `envfactory` command's rollout)",
        "",
        table(RunConfig),
    ]
    groups: list[tuple[str, dict[str, Registered[Any]], str]] = [
        ("env", dict(reg.families), "family"),
        ("vectorizer", dict(reg.vectorizers), "name"),
    ]
    for kind, items, key in groups:
        for name, item in sorted(items.items()):
            if item.provider.distribution != "envfactory" or item.record.config is None:
                continue
            parts += [
                "",
                f"#### `{kind}={name}` — {item.record.summary}",
                "",
                table(item.record.config, (key,)),
            ]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = options_markdown()
    if args[:1] == ["--write"]:
        path = args[1]
        with open(path) as f:
            doc = f.read()
        a, b = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        with open(path, "w") as f:
            f.write(doc[:a] + "\n" + text + doc[b:])
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
