"""SB3's own ``tests/test_vec_envs.py``, run against envfactory through ``to_sb3``.

The file is fetched at test time from the stable-baselines3 source distribution on PyPI
(``pip download --no-binary :all: --no-deps stable-baselines3==<installed version>``; cached
in ``$ENVFACTORY_SB3_CACHE`` or ``~/.cache/envfactory-sb3``; nothing of it is committed), then
run twice in ONE pytest run: as it is (SB3's own DummyVecEnv / SubprocVecEnv) and with the
names ``DummyVecEnv`` / ``SubprocVecEnv`` bound to
[`envfactory_sb3.dummy_vec_env`][envfactory_sb3.dummy_vec_env] /
[`envfactory_sb3.subproc_vec_env`][envfactory_sb3.subproc_vec_env] (envfactory's ``dummy`` and
``subproc`` vectorizers through ``to_sb3``). The pass counts are printed side by side; every test
that passes with SB3's classes must pass with envfactory's (``KNOWN_DIFFERENCES`` lists the
explained exceptions, none today).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

VERSION = md.version("stable-baselines3")
MEMBER = f"stable_baselines3-{VERSION}/tests/test_vec_envs.py"
IMPORT = "from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv"
SUBSTITUTE = (
    "from envfactory_sb3 import dummy_vec_env as DummyVecEnv, "
    "subproc_vec_env as SubprocVecEnv  # envfactory through to_sb3"
)
# test name -> why it differs (also in the plugin README); every other test must agree
KNOWN_DIFFERENCES: dict[str, str] = {}


def fetch_sb3_vec_env_tests() -> str:
    """The text of SB3's ``tests/test_vec_envs.py`` for the installed SB3 version."""
    cache = Path(os.environ.get("ENVFACTORY_SB3_CACHE", Path.home() / ".cache" / "envfactory-sb3"))
    target = cache / VERSION / "test_vec_envs.py"
    if not target.exists():
        dl = cache / VERSION / "sdist"
        dl.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"stable-baselines3=={VERSION}",
            "-d",
            str(dl),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sdists = sorted(dl.glob("stable_baselines3-*.tar.gz"))
        if proc.returncode != 0 or not sdists:
            pytest.fail(
                f"could not download the stable-baselines3=={VERSION} sdist "
                f"({' '.join(cmd)}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )
        with tarfile.open(sdists[-1]) as tar:
            member = tar.extractfile(MEMBER)
            assert member is not None, f"{MEMBER} is not in {sdists[-1]}"
            text = member.read().decode()
        target.write_text(text)
    return target.read_text()


def _outcomes(junit: Path) -> dict[str, dict[str, str]]:
    """{module: {test name: passed|failed|skipped}} from a junit XML report."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        kinds = {child.tag for child in case}
        state = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
        out.setdefault(module, {})[case.get("name", "")] = state
    return out


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_sb3_vec_env_tests_pass_through_to_sb3() -> None:
    """3 minutes on a quiet 2-core machine, 10 to 19 loaded (load average 8 to 13): SB3's own
    SubprocVecEnv starts one process per env, each importing torch. (A folder of its own,
    not ``tmp_path``: another pytest session's clean-up may remove an old ``tmp_path``
    during a run this long.)"""
    with tempfile.TemporaryDirectory(prefix="envfactory-sb3-") as tmp:
        _run_sb3_tests(Path(tmp))


def _run_sb3_tests(tmp_path: Path) -> None:
    source = fetch_sb3_vec_env_tests()
    assert IMPORT in source, f"SB3 {VERSION} changed its import line; update IMPORT"
    (tmp_path / "test_sb3_own.py").write_text(source)
    # rebind the two names right after SB3's import line (VEC_ENV_CLASSES and every test
    # that names them then use envfactory's)
    lines = source.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(IMPORT))
    lines.insert(at + 1, SUBSTITUTE + "\n")
    (tmp_path / "test_sb3_envfactory.py").write_text("".join(lines))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # none of this repository's settings
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "-c",
            str(tmp_path / "pytest.ini"),
            f"--junitxml={junit}",
            "test_sb3_own.py",
            "test_sb3_envfactory.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=2900,
    )
    assert junit.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = _outcomes(junit)
    assert {"test_sb3_own", "test_sb3_envfactory"} <= results.keys(), proc.stdout[-6000:]
    own = results["test_sb3_own"]
    # parametrize ids name the class or the factory: compare by SB3's names
    ours = {
        name.replace("dummy_vec_env", "DummyVecEnv").replace("subproc_vec_env", "SubprocVecEnv"): v
        for name, v in results["test_sb3_envfactory"].items()
    }
    rows = []
    for label, res in (
        ("SB3's own DummyVecEnv/SubprocVecEnv", own),
        ("envfactory dummy/subproc via to_sb3", ours),
    ):
        counts = {k: sum(v == k for v in res.values()) for k in ("passed", "failed", "skipped")}
        rows.append(
            f"  {label:<38} passed {counts['passed']:>3}  failed {counts['failed']:>3}"
            f"  skipped {counts['skipped']:>3}  of {len(res)}"
        )
    print(f"\nSB3 {VERSION} tests/test_vec_envs.py, one pytest run:\n" + "\n".join(rows))
    assert own.keys() == ours.keys()
    differ = {
        name: (own[name], ours[name])
        for name in own
        if own[name] != ours[name] and name not in KNOWN_DIFFERENCES
    }
    assert not differ, f"{differ}\n{proc.stdout[-6000:]}"
    assert all(v != "failed" for v in own.values()), proc.stdout[-6000:]
