"""No import cycle outside envfactory/ either (issue 26.5): between the benchmark scripts
(each imports the others by file name, ``import scale``), and inside each plugin package
under plugins/. Lazy imports inside functions count; a package's ``__init__`` importing its
own submodule counts too (here that is a real circle, not a re-export to forgive). The
import reader and the cycle finder are tests/project/test_layout.py's."""

from __future__ import annotations

from pathlib import Path

from test_layout import _cycles, _imports

REPO = Path(__file__).resolve().parents[2]


def _graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module name -> the modules among ``files`` it imports anywhere in its body."""
    return {name: _imports(path, name, set(files)) for name, path in files.items()}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _benchmarks() -> dict[str, Path]:
    return {p.stem: p for p in sorted((REPO / "benchmarks").glob("*.py"))}


def _plugin_packages() -> dict[str, dict[str, Path]]:
    """``{plugin folder: {module: path}}`` for each package right under plugins/<name>/."""
    out: dict[str, dict[str, Path]] = {}
    for plugin in sorted((REPO / "plugins").iterdir()):
        for init in sorted(plugin.glob("*/__init__.py")):
            files = {_module_name(p, plugin): p for p in init.parent.rglob("*.py")}
            out.setdefault(plugin.name, {}).update(files)
    return out


def test_no_import_cycle_between_the_benchmark_scripts() -> None:
    graph = _graph(_benchmarks())
    assert "bench" in graph["scale"] or "peers" in graph["scale"]  # the reader sees the edges
    assert _cycles(graph) == []


def test_no_import_cycle_inside_a_plugin_package() -> None:
    packages = _plugin_packages()
    assert "envfactory_ale.plugin" in packages["envfactory-ale"]
    assert len(packages) >= 11, sorted(packages)
    cycles = {name: c for name, files in packages.items() if (c := _cycles(_graph(files)))}
    assert cycles == {}
