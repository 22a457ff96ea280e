"""Shared fixtures: every test hermetic (a fresh plugin manager, nothing disabled by the
shell, an empty user config folder: envfactory's pytest plugin,
[`envfactory.testing.pytest_plugin`][envfactory.testing.pytest_plugin], which the plugins' suites
use too), and real installs of plugin packages.

Plugin tests go through real discovery. ``plugins/envfactory-example`` is installed in the
test environment (``pip install ./plugins/envfactory-example``); the deliberately bad
plugins (broken, conflict, typo) are installed into temporary ``--target`` folders once per
session and only ever used by subprocesses that put that folder on ``PYTHONPATH``, so they
never leak into the environment or into this process.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from envfactory.testing.pytest_plugin import hermetic_envfactory  # noqa: F401 (autouse)

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "plugins"
BIN = Path(sys.executable).parent
BAD_PLUGINS = ("broken", "conflict", "typo", "hostile", "hang", "shadow", "nohook")

Run = Callable[..., "subprocess.CompletedProcess[str]"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The quick loop (``-m "not slow"``) runs each parametrized test once, with its first
    parameter set that is not a ``spawn`` variant (a spawned worker imports everything
    again, 1-2 s per start); its other parameter sets are marked slow. Together with the
    tests marked slow by hand (each above ~3 s on a 2-core machine: whole CLI jobs, pip
    installs, Atari conformance, Ray) that keeps it to a few minutes. CI runs them all."""
    seen: set[str] = set()
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        function = item.nodeid.split("[", 1)[0]
        if "spawn" in callspec.id.split("-") or function in seen:
            item.add_marker(pytest.mark.slow)
        else:
            seen.add(function)


def _pip_target(sources: Sequence[Path], target: Path) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--disable-pip-version-check",
        "--no-compile",
        "--target",
        str(target),
        *map(str, sources),
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait(procs: Mapping[str, subprocess.Popen[str]]) -> None:
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=240)
        if proc.returncode != 0:
            pytest.fail(f"pip install --target of {name} failed:\n{out}")


def _need_hatchling() -> None:
    if importlib.util.find_spec("hatchling") is None:
        pytest.fail(
            "these tests build packages with --no-build-isolation: pip install hatchling",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def example_version() -> str:
    """The installed version of ``envfactory-example`` (it must be installed)."""
    try:
        return md.version("envfactory-example")
    except md.PackageNotFoundError:
        pytest.fail(
            "the example plugin is not installed: pip install ./plugins/envfactory-example",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def plugin_sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"broken" | "conflict" | "typo" | ...: folder}``: each bad plugin pip-installed alone
    into its own ``--target`` folder (installed in parallel)."""
    _need_hatchling()
    root = tmp_path_factory.mktemp("plugin-sites")
    sites = {name: root / name for name in BAD_PLUGINS}
    _wait(
        {name: _pip_target([PLUGINS / f"envfactory-{name}"], site) for name, site in sites.items()}
    )
    return sites


@pytest.fixture(scope="session")
def wheel_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """envfactory itself installed NON-editable (``pip install --target``) into a folder."""
    _need_hatchling()
    site = tmp_path_factory.mktemp("envfactory-wheel")
    _wait({"envfactory": _pip_target([REPO], site)})
    return site


def subprocess_env(
    pythonpath: Sequence[Path] = (), extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVFACTORY_DISABLED_PLUGINS"}
    paths = [str(p) for p in pythonpath]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("HYDRA_FULL_ERROR", None)
    env.update(extra or {})
    return env


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """Run a command in a subprocess: ``run(argv, cwd=..., pythonpath=[...], env={...})``.

    ``argv[0]`` may be ``"envfactory"`` / ``"envfactory-plugins"`` (this environment's
    console scripts) or ``"python"``. The default cwd is the test's ``tmp_path``.
    """

    def _run(
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        pythonpath: Sequence[Path] = (),
        env: Mapping[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(a) for a in argv]
        if argv[0] == "python":
            argv[0] = sys.executable
        elif argv[0] in ("envfactory", "envfactory-plugins"):
            script = BIN / argv[0]
            module = "main" if argv[0] == "envfactory" else "plugins"
            argv[:1] = (
                [str(script)]
                if script.exists()
                else [sys.executable, "-m", f"envfactory.cli.{module}"]
            )
        return subprocess.run(
            argv,
            cwd=cwd or tmp_path,
            env=subprocess_env(pythonpath, env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return _run
