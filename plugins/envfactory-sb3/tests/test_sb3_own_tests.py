"""SB3's own VecEnv tests (``tests/test_vec_envs.py``, ``test_vec_normalize.py``,
``test_vec_monitor.py``, ``test_vec_check_nan.py``), run against envfactory through ``to_sb3``.

The files are fetched at test time from the stable-baselines3 source distribution on PyPI
(``pip download --no-binary :all: --no-deps stable-baselines3==<installed version>``; cached
in ``$ENVFACTORY_SB3_CACHE`` or ``~/.cache/envfactory-sb3``; nothing of them is committed), then
each is run twice in ONE pytest run: as it is (SB3's own DummyVecEnv / SubprocVecEnv) and with
the names ``DummyVecEnv`` / ``SubprocVecEnv`` it imports bound to
[`envfactory_sb3.dummy_vec_env`][envfactory_sb3.dummy_vec_env] /
[`envfactory_sb3.subproc_vec_env`][envfactory_sb3.subproc_vec_env] (envfactory's ``dummy`` and
``subproc`` vectorizers through ``to_sb3``), right after SB3's import: the only line changed. The
pass counts are printed side by side; every test that passes with SB3's classes must pass with
envfactory's, except the one test ``KNOWN_DIFFERENCES`` explains, which must fail with exactly
the error it names (so everything it checks before that line passes).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

VERSION = md.version("stable-baselines3")
#: SB3's VecEnv test files that the drop-in must pass (DESIGN.md, "Drop-ins")
FILES = (
    "test_vec_envs.py",
    "test_vec_normalize.py",
    "test_vec_monitor.py",
    "test_vec_check_nan.py",
)
#: SB3's import of its vector envs: one line, or a parenthesized block
IMPORT = re.compile(
    r"^from stable_baselines3\.common\.vec_env import (\((?P<block>[^)]*)\)|(?P<line>.*))$",
    re.MULTILINE,
)
OURS = {"DummyVecEnv": "dummy_vec_env", "SubprocVecEnv": "subproc_vec_env"}
#: test name -> (the error it fails with through to_sb3, why; also in the plugin README); every
#: other test must agree
KNOWN_DIFFERENCES: dict[str, tuple[str, str]] = {
    "test_check_nan": (
        "InvalidActionError: actions have shape (2, 2), but this vectorized env expects (1, 1)",
        "its last step sends a (2, 2) batch to one env of Box(1,) actions; SB3 hands env i "
        "actions[i] unchecked, envfactory refuses a batch that does not fit action_space before "
        "any env steps (its subproc backend writes actions into a buffer of that shape); every "
        "NaN/inf check before that line passes",
    ),
}


def imported(source: str) -> set[str]:
    """The names ``source`` imports from SB3's ``vec_env``."""
    match = IMPORT.search(source)
    assert match is not None, f"SB3 {VERSION} changed its vec_env import; update IMPORT"
    return {n.strip() for n in (match["block"] or match["line"]).split(",")}


def variants(source: str) -> dict[str, dict[str, str]]:
    """Copy name -> {SB3 name: envfactory's} for one file: its ``DummyVecEnv`` /
    ``SubprocVecEnv`` bound to ``dummy_vec_env`` / ``subproc_vec_env``; a file that imports
    ``DummyVecEnv`` alone runs a second time with it bound to ``subproc_vec_env``, so its tests
    see both of envfactory's vectorizers (what SB3's own test_vec_envs.py does by parametrizing)."""
    names = imported(source)
    out = {"envfactory": {n: OURS[n] for n in OURS if n in names}}
    assert out["envfactory"], "no DummyVecEnv / SubprocVecEnv imported from SB3's vec_env"
    if "SubprocVecEnv" not in names:
        out["envfactory_subproc"] = {"DummyVecEnv": "subproc_vec_env"}
    return out


def rebind(source: str, names: dict[str, str]) -> str:
    """``source`` with each SB3 name of ``names`` bound to envfactory's, on one line inserted
    right after SB3's import (the only change)."""
    match = IMPORT.search(source)
    assert match is not None
    ours = ", ".join(f"{theirs} as {sb3}" for sb3, theirs in names.items())
    line = f"from envfactory_sb3 import {ours}  # envfactory through to_sb3\n"
    return source[: match.end()] + "\n" + line + source[match.end() + 1 :]


def fetch_sb3_test(name: str) -> str:
    """The text of SB3's ``tests/<name>`` for the installed SB3 version."""
    cache = Path(os.environ.get("ENVFACTORY_SB3_CACHE", Path.home() / ".cache" / "envfactory-sb3"))
    target = cache / VERSION / name
    if not target.exists():
        dl = cache / VERSION / "sdist"
        dl.mkdir(parents=True, exist_ok=True)
        sdists = sorted(dl.glob("stable_baselines3-*.tar.gz"))
        if not sdists:
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
        member_name = f"stable_baselines3-{VERSION}/tests/{name}"
        with tarfile.open(sdists[-1]) as tar:
            member = tar.extractfile(member_name)
            assert member is not None, f"{member_name} is not in {sdists[-1]}"
            text = member.read().decode()
        target.write_text(text)
    return target.read_text()


def _outcomes(junit: Path, failures: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """{module: {test name: passed|failed|skipped}} from a junit XML report; ``failures`` gets
    ``{module.name: failure text}``."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if failures is not None:
            failed = [c for c in case if c.tag in ("failure", "error")]
            if failed:
                key = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name', '')}"
                failures[key] = f"{failed[0].get('message', '')}\n{failed[0].text or ''}"
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
@pytest.mark.parametrize("name", FILES)
def test_sb3_vec_env_tests_pass_through_to_sb3(name: str) -> None:
    """test_vec_envs.py: 3 minutes on a quiet 2-core machine, 10 to 19 loaded (load average
    8 to 13): SB3's own SubprocVecEnv starts one process per env, each importing torch; the
    other three files take under a minute each. (A folder of its own, not ``tmp_path``:
    another pytest session's clean-up may remove an old ``tmp_path`` during a run this long.)"""
    with tempfile.TemporaryDirectory(prefix="envfactory-sb3-") as tmp:
        _run_sb3_tests(name, Path(tmp))


def test_only_the_import_line_is_changed() -> None:
    """Each copy differs from SB3's file by one inserted line, which binds only the names that
    file imports (test_vec_check_nan.py imports DummyVecEnv alone)."""
    for name in FILES:
        source = fetch_sb3_test(name)
        theirs = source.splitlines()
        for names in variants(source).values():
            ours = rebind(source, names).splitlines()
            [added] = [line for line in ours if line not in theirs]
            assert len(ours) == len(theirs) + 1, name
            assert added.startswith("from envfactory_sb3 import "), added
            bound = dict(re.findall(r"(\w+) as (\w+)", added))
            assert set(bound.values()) == imported(source) & set(OURS), (name, added)


def _run_sb3_tests(name: str, tmp_path: Path) -> None:
    source = fetch_sb3_test(name)
    stem = name.removesuffix(".py")
    own = f"{stem}_sb3_own"
    (tmp_path / f"{own}.py").write_text(source)
    copies = {f"{stem}_{label}": names for label, names in variants(source).items()}
    for module, names in copies.items():
        (tmp_path / f"{module}.py").write_text(rebind(source, names))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # none of this repository's settings
    junit = tmp_path / "junit.xml"
    temp = tmp_path / "tmp"
    temp.mkdir()
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
            f"{own}.py",
            *(f"{module}.py" for module in copies),
        ],
        cwd=tmp_path,
        # (SB3's logger makes a folder in the temp dir at each learn(): kept in ours, removed)
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=2900,
    )
    assert junit.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    failures: dict[str, str] = {}
    results = _outcomes(junit, failures)
    assert {own, *copies} <= results.keys(), proc.stdout[-6000:]
    theirs = results[own]
    rows = [_counts("SB3's own DummyVecEnv/SubprocVecEnv", theirs)]
    for module, names in copies.items():
        # parametrize ids name the class or the factory: compare by SB3's names
        ours = {
            n.replace("dummy_vec_env", "DummyVecEnv").replace("subproc_vec_env", "SubprocVecEnv"): v
            for n, v in results[module].items()
        }
        label = " / ".join(f"{sb3}={theirs_}" for sb3, theirs_ in names.items())
        rows.append(_counts(f"envfactory via to_sb3: {label}", ours))
        assert theirs.keys() == ours.keys()
        differ = {
            n: (theirs[n], ours[n])
            for n in theirs
            if theirs[n] != ours[n] and n not in KNOWN_DIFFERENCES
        }
        assert not differ, f"{module}: {differ}\n{proc.stdout[-6000:]}"
        for n, (error, _) in KNOWN_DIFFERENCES.items():
            if n in theirs:  # (this file's)
                assert theirs[n] == "passed" and ours[n] == "failed", (n, theirs[n], ours[n])
                assert error in failures[f"{module}.{n}"], failures[f"{module}.{n}"][-3000:]
    print(f"\nSB3 {VERSION} tests/{name}, one pytest run:\n" + "\n".join(rows))
    assert all(v != "failed" for v in theirs.values()), proc.stdout[-6000:]


def _counts(label: str, res: dict[str, str]) -> str:
    counts = {k: sum(v == k for v in res.values()) for k in ("passed", "failed", "skipped")}
    return (
        f"  {label:<62} passed {counts['passed']:>3}  failed {counts['failed']:>3}"
        f"  skipped {counts['skipped']:>3}  of {len(res)}"
    )
