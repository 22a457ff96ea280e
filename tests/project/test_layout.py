"""The shape of the package, as the next engineer needs it: no import cycle between
envfactory's modules (lazy imports inside functions count too), no module over 600 lines,
and the subprocess vectorizer's class small (issue 17's acceptance)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import envfactory
from envfactory.vectorizers.subproc import SubprocVecEnv

PKG = Path(envfactory.__file__).parent
MAX_MODULE_LINES = 600
MAX_VECTORIZER_MODULE_LINES = 450  # issue 37: the subprocess core, where most changes land


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """envfactory modules ``path`` imports anywhere in its body (``from x import y`` counts
    ``x.y`` when that is a module, else ``x``), except under ``if TYPE_CHECKING:``, which
    never runs."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for sub in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
                break
    return out


def _graph() -> dict[str, set[str]]:
    """Who imports whom. A package's ``__init__`` importing its own submodules counts (a
    submodule that imports the package, directly or round about, closes a circle), and
    importing ``a.b.c`` counts as importing ``a.b`` too (Python runs ``a/b/__init__.py``
    first). Only a submodule reaching one of its own packages is left out: Python has
    started that ``__init__`` already."""
    files = {_module_name(p): p for p in PKG.rglob("*.py") if "hydra_plugin_path" not in p.parts}
    names = set(files)
    graph = {n: _imports(p, n, names) for n, p in files.items()}
    for n, targets in graph.items():
        parents = {".".join(t.split(".")[:i]) for t in targets for i in range(2, t.count(".") + 1)}
        graph[n] = {m for m in targets | parents if m != n and not n.startswith(m + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_envfactorys_modules() -> None:
    graph = _graph()
    assert "envfactory.vectorizers.asyncpool.pool" in graph and graph["envfactory.cli.main"]
    assert _cycles(graph) == []


def test_the_graph_keeps_a_packages_imports_and_the_packages_a_module_runs() -> None:
    graph = _graph()
    assert "envfactory.plugin.manager" in graph["envfactory.plugin"]  # __init__ -> submodule
    # ``from ..plugin.spec import hookimpl`` runs envfactory/plugin/__init__.py first
    assert {"envfactory.plugin", "envfactory.plugin.spec"} <= graph["envfactory.wrappers.builtin"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _longer_than(root: Path, most: int) -> dict[str, int]:
    """The modules under ``root`` over ``most`` lines, with their length."""
    return {
        str(p.relative_to(PKG.parent)): n
        for p in root.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > most
    }


def test_no_module_over_600_lines() -> None:
    assert _longer_than(PKG, MAX_MODULE_LINES) == {}


def test_no_vectorizer_module_is_over_450_lines() -> None:
    assert _longer_than(PKG / "vectorizers", MAX_VECTORIZER_MODULE_LINES) == {}


def test_the_subprocess_vectorizer_class_is_small() -> None:
    assert len(inspect.getsource(SubprocVecEnv).splitlines()) < 400
