"""Release checks: envfactory and every plugin package under plugins/ build (``python -m
build``: sdist, then the wheel from the sdist) and pass ``twine check --strict``; each shipped
wheel carries ``py.typed``, its metadata (license, classifiers, URLs) and the version of its
one source, ``__version__``; and envfactory's wheel, installed into a fresh virtual
environment, runs the main job.

The builds use ``--no-isolation`` with the build backend of the test extra (hatchling), so
they need no network; the fresh venv installs envfactory's dependencies with pip (its cache,
else PyPI).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mdblocks import ROOT

# distribution -> (project folder, top-level module); the shipped packages
SHIPPED = {
    "envfactory": (ROOT, "envfactory"),
    **{
        f"envfactory-{n}": (ROOT / "plugins" / f"envfactory-{n}", f"envfactory_{n}")
        for n in ("ale", "example", "gymnasium", "ray", "sb3", "tianshou", "threads")
    },
}
# the deliberately broken plugins the tests install: built and checked too, but they are test
# fixtures (no module version, no types to ship)
FIXTURES = {
    f"envfactory-{n}": (ROOT / "plugins" / f"envfactory-{n}", f"envfactory_{n}")
    for n in ("broken", "conflict", "hang", "hostile", "nohook", "shadow", "typo")
}
PACKAGES = {**SHIPPED, **FIXTURES}


def test_every_plugin_folder_is_checked() -> None:
    folders = {p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").exists()}
    assert folders == set(PACKAGES) - {"envfactory"}


def _source_version(folder: Path, module: str) -> str:
    tree = ast.parse((folder / module / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant)
            return str(node.value.value)
    raise AssertionError(f"{module}/__init__.py defines no __version__")


@pytest.mark.parametrize("dist", sorted(SHIPPED))
def test_version_has_one_source(dist: str) -> None:
    """pyproject.toml reads the version from __version__ (hatch's dynamic version) and
    states none itself; the CHANGELOG names that version."""
    folder, module = SHIPPED[dist]
    pyproject = (folder / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]$', pyproject, re.M), dist
    assert not re.search(r"^version\s*=", pyproject, re.M), f"{dist}: a static version too"
    assert f'path = "{module}/__init__.py"' in pyproject
    version = _source_version(folder, module)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"`{dist}`" in changelog or dist == "envfactory"
    assert version in changelog, f"{dist} {version} is not in CHANGELOG.md"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Every package built once: distribution -> [sdist, wheel]."""
    out = tmp_path_factory.mktemp("dist")

    def build(dist: str) -> tuple[str, list[Path]]:
        folder, _ = PACKAGES[dist]
        target = out / dist
        proc = subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(target), str(folder)],
            capture_output=True,
            text=True,
            timeout=280,
        )
        assert proc.returncode == 0, f"python -m build {dist} failed:\n{proc.stderr[-3000:]}"
        return dist, sorted(target.iterdir())

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(build, sorted(PACKAGES)))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_packages_build_and_pass_twine_check_strict(built: dict[str, list[Path]]) -> None:
    for dist, files in built.items():
        kinds = sorted(f.suffix for f in files)
        assert kinds == [".gz", ".whl"], (dist, files)
    files = [str(f) for fs in built.values() for f in fs]
    proc = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == len(files)


def _wheel(built: dict[str, list[Path]], dist: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(next(f for f in built[dist] if f.suffix == ".whl"))


def _metadata(whl: zipfile.ZipFile) -> str:
    name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    return whl.read(name).decode()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("dist", sorted(SHIPPED))
def test_shipped_wheel_is_release_ready(built: dict[str, list[Path]], dist: str) -> None:
    folder, module = SHIPPED[dist]
    whl = _wheel(built, dist)
    assert f"{module}/py.typed" in whl.namelist(), f"{dist}: no py.typed in the wheel"
    meta = _metadata(whl)
    assert re.search(rf"^Version: {re.escape(_source_version(folder, module))}$", meta, re.M)
    assert re.search(r"^License-Expression: MIT$", meta, re.M), dist
    assert "Classifier: Typing :: Typed" in meta
    assert "Classifier: Programming Language :: Python :: 3" in meta
    urls = dict(
        line.split(": ", 1)[1].split(", ", 1)
        for line in meta.splitlines()
        if line.startswith("Project-URL: ")
    )
    assert {"Homepage", "Repository", "Documentation", "Changelog"} <= urls.keys(), urls
    assert re.search(r"^Description-Content-Type: text/markdown", meta, re.M)
    if dist == "envfactory":  # the Hydra configs travel with the package
        assert "envfactory/conf/config.yaml" in whl.namelist()
        assert any(n.endswith("licenses/LICENSE") for n in whl.namelist())


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_wheel_in_a_fresh_venv_runs_the_main_job(
    built: dict[str, list[Path]], tmp_path: Path
) -> None:
    """``pip install envfactory-<v>.whl`` into a new venv (no system site-packages, nothing
    of the repository on the path), then ``envfactory`` with no arguments: exit 0 and a
    ``summary.json`` in the Hydra run directory."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    wheel = next(f for f in built["envfactory"] if f.suffix == ".whl")
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.run(
        [str(venv / "bin" / "envfactory")],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    summaries = list(run.glob("outputs/*/*/summary.json"))
    assert len(summaries) == 1, proc.stdout
    summary = json.loads(summaries[0].read_text())
    assert summary["status"] == "ok" and summary["steps"] >= 2000, summary
    # the installed package is the wheel's, not the repository's
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import envfactory; print(envfactory.__file__)"],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(venv)), where
