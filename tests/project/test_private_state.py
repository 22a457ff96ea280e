"""A seam is a boundary only when neither side writes the other's state (issue 37): no module
of envfactory assigns to (or into) another object's private attribute (``other._x = ...``,
``other._x[i] = ...``, ``other._x += ...``, ``del other._x``); ``self``/``cls`` are the
object's own. A component returns outcomes, or records them in its own public fields, and
the owner changes its own state.

Allowed, each for a reason: ``_compat.py`` is the one home of other libraries' private API
(each use has a test in tests/project/test_compat.py), and a marker attribute named
``_envfactory_*`` that envfactory sets on a foreign object (a function it wrapped)."""

from __future__ import annotations

import ast
from pathlib import Path

import envfactory

PKG = Path(envfactory.__file__).parent
ALLOWED_FILES = {"_compat.py"}


def private_writes(source: str) -> list[tuple[int, str]]:
    """``(line, target)`` of each write to another object's private attribute."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            continue
        flat: list[ast.expr] = []
        for t in targets:
            flat += t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        for t in flat:
            while isinstance(t, (ast.Subscript, ast.Starred)):
                t = t.value
            if not isinstance(t, ast.Attribute):
                continue
            name = t.attr
            if not name.startswith("_") or name.startswith("__") or name.startswith("_envfactory_"):
                continue
            if isinstance(t.value, ast.Name) and t.value.id in ("self", "cls"):
                continue
            out.append((node.lineno, ast.unparse(t)))
    return out


def test_no_module_writes_another_objects_private_attribute() -> None:
    found = [
        f"{path.relative_to(PKG.parent)}:{line}: {target}"
        for path in sorted(PKG.rglob("*.py"))
        if path.name not in ALLOWED_FILES
        for line, target in private_writes(path.read_text())
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_each_kind_of_write() -> None:
    source = (
        "def f(env, group, self):\n"
        "    env._broken = 1\n"
        "    group.env._done[ids] = 2\n"
        "    a, w._answer = 3, 4\n"
        "    h._n += 1\n"
        "    del h._x\n"
        "    self._mine = 5\n"
        "    env.public = 6\n"
        "    f._envfactory_marker = 7\n"
    )
    assert [t for _, t in private_writes(source)] == [
        "env._broken",
        "group.env._done",
        "w._answer",
        "h._n",
        "h._x",
    ]
