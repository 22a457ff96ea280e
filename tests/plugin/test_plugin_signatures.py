"""A hook implementation with the wrong signature is refused in one line (pluggy's own
``PluginValidationError`` is three), from an installed package and in code."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import pluggy
import pytest

import envfactory
from envfactory.plugin.manager import get_plugin_manager

BAD_SIGNATURE = (
    "hook 'envfactory_env_families' takes no arguments (def envfactory_env_families():), "
    "but bad_plugin's takes (config). Remove config from its parameters"
)

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "bad-plugin"
version = "0.1.0"

[project.entry-points.envfactory]
bad_plugin = "bad_plugin"

[tool.hatch.build.targets.wheel]
packages = ["bad_plugin"]
"""

MODULE = """\
import envfactory


@envfactory.hookimpl
def envfactory_env_families(config):
    return []
"""

WARNINGS = r"""
import json, warnings
import envfactory
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    envfactory.get_registry()
print(json.dumps([str(w.message) for w in caught
                  if issubclass(w.category, envfactory.PluginLoadWarning)]))
"""


@pytest.fixture
def bad_plugin_site(tmp_path: Path) -> Path:
    """The trial's package (``bad-plugin`` 0.1.0, entry point ``bad_plugin``) built in
    ``tmp_path`` and pip-installed into a ``--target`` folder used only by subprocesses."""
    src = tmp_path / "src"
    (src / "bad_plugin").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "bad_plugin" / "__init__.py").write_text(MODULE)
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    cmd += ["--no-build-isolation", "--disable-pip-version-check", "--target", str(site), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return site


@pytest.mark.slow  # > 3 s (a pip install): CI runs it; the quick loop does not
def test_a_hook_with_the_wrong_signature_is_one_line(run: Any, bad_plugin_site: Path) -> None:
    proc = run(["python", "-c", WARNINGS], pythonpath=[bad_plugin_site])
    assert proc.returncode == 0, proc.stderr
    [warning] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "\n" not in warning
    assert warning.startswith(
        "envfactory plugin 'bad_plugin' from distribution 'bad-plugin' 0.1.0 was skipped: "
        f"it failed in registration: PluginValidationError: {BAD_SIGNATURE}. Fix or "
    ), warning

    listing = run(["envfactory-plugins"], pythonpath=[bad_plugin_site])
    assert listing.returncode == 0, listing.stderr
    rows = [ln.split() for ln in listing.stdout.splitlines() if ln.strip()]
    assert [r[1:4] for r in rows if r[0] == "bad_plugin"] == [
        ["bad-plugin", "0.1.0", "failed"],  # the plugins table
        ["bad-plugin", "0.1.0", "registration"],  # the failed plugins table
    ]
    assert listing.stdout.count(f"PluginValidationError: {BAD_SIGNATURE}\n") == 2
    data = json.loads(run(["envfactory-plugins", "--json"], pythonpath=[bad_plugin_site]).stdout)
    [status] = [p for p in data["plugins"] if p["plugin"] == "bad_plugin"]
    assert status["status"] == "failed"
    assert status["detail"] == f"in registration: PluginValidationError: {BAD_SIGNATURE}"


def test_register_plugin_refuses_a_wrong_signature_in_one_line() -> None:
    module = types.ModuleType("bad_plugin")
    exec(MODULE, module.__dict__)
    with pytest.raises(pluggy.PluginValidationError) as err:
        envfactory.register_plugin(module)
    assert str(err.value) == BAD_SIGNATURE
    assert not get_plugin_manager().is_registered(module)  # nothing half-registered


class _MethodPlugin:
    @envfactory.hookimpl
    def envfactory_wrappers(self, env: Any, scale: float = 1.0) -> list[Any]:
        return []


def test_a_method_hook_names_its_parameters_without_self() -> None:
    with pytest.raises(pluggy.PluginValidationError) as err:
        envfactory.register_plugin(_MethodPlugin(), name="methods")
    assert str(err.value) == (
        "hook 'envfactory_wrappers' takes no arguments (def envfactory_wrappers():), but "
        "methods's takes (env, scale). Remove env from its parameters"
    )


# -- a vectorizer's build that cannot take autoreset_mode -------------------------------


def _build_without_autoreset_mode(env_fns: Any, *, copy: bool = True) -> Any:
    return gym.vector.SyncVectorEnv(list(env_fns), copy=copy)


@dataclasses.dataclass
class _MySyncConfig:
    name: str = "my-sync"
    copy: bool = True


NO_AUTORESET_MODE = (
    "VectorizerPlugin 'my-sync': build takes no autoreset_mode parameter (it takes env_fns, "
    "copy), but envfactory calls every build with autoreset_mode=<gymnasium AutoresetMode>; "
    "add an autoreset_mode parameter (e.g. autoreset_mode=AutoresetMode.NEXT_STEP) or **kwargs "
    "to build and pass it on to the VectorEnv it returns"
)


def test_a_build_without_autoreset_mode_is_refused_at_registration() -> None:
    """It registered, then ``make_vec(overrides=["vectorizer=my-sync"])`` failed with a bare
    ``build() got an unexpected keyword argument 'autoreset_mode'``."""
    with pytest.raises(TypeError) as err:
        envfactory.VectorizerPlugin("my-sync", _build_without_autoreset_mode, _MySyncConfig)
    assert str(err.value) == NO_AUTORESET_MODE

    # **kwargs, or the parameter by any kind that takes a keyword, is fine
    def with_kwargs(env_fns: Any, **options: Any) -> Any: ...
    def positional(env_fns: Any, autoreset_mode: Any, copy: bool = True) -> Any: ...

    for build in (with_kwargs, positional):
        assert envfactory.VectorizerPlugin("my-sync", build, _MySyncConfig).build is build


class _MySyncPlugin:
    @envfactory.hookimpl
    def envfactory_vectorizers(self) -> list[Any]:
        return [envfactory.VectorizerPlugin("my-sync", _build_without_autoreset_mode)]


def test_a_plugin_whose_build_lacks_autoreset_mode_is_named_in_one_line() -> None:
    with pytest.warns(envfactory.PluginLoadWarning) as caught:
        envfactory.register_plugin(_MySyncPlugin(), name="my_sync_plugin")
    [warning] = [str(w.message) for w in caught]
    assert "\n" not in warning
    assert warning.startswith(
        "envfactory plugin 'my_sync_plugin' from distribution '<registered in code>' - was "
        "skipped: it failed in envfactory_vectorizers: TypeError: VectorizerPlugin 'my-sync': "
        "build takes no autoreset_mode parameter (it takes env_fns, copy)"
    ), warning
    assert "my-sync" not in envfactory.available()["vectorizers"]
