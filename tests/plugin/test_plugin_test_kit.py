"""What envfactory ships for testing plugin packages (issue 26.5): one hermetic fixture that
every suite's conftest uses (envfactory.testing.pytest_plugin), and the entry-point and
same-as-dummy checks (envfactory.testing.check_entry_point, check_same_as_dummy)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import envfactory
from envfactory.testing import check_entry_point, check_same_as_dummy

REPO = Path(__file__).resolve().parents[2]
SUITES = sorted([REPO / "tests", *(p for p in (REPO / "plugins").glob("*/tests") if p.is_dir())])

PROBE = """
import envfactory
import pytest


def test_the_users_own_presets_are_not_seen():
    with pytest.raises(envfactory.ConfigError, match="unknown vectorizer 'tuned'"):
        envfactory.compose(["vectorizer=tuned"])
    assert envfactory.compose(["vectorizer=dummy"]).vectorizer.name == "dummy"
"""


def _suites_with_a_probe(root: Path) -> list[Path]:
    """Each test suite's own conftest.py (when it has one) beside a probe test, under
    ``root``: what pytest runs there is the suite's fixtures around the probe."""
    out = []
    for suite in SUITES:
        name = suite.parent.name if suite.parent.name != REPO.name else "envfactory"
        folder = root / name / "tests"
        folder.mkdir(parents=True)
        if (suite / "conftest.py").exists():
            shutil.copy(suite / "conftest.py", folder / "conftest.py")
        (folder / f"test_probe_{name.replace('-', '_')}.py").write_text(PROBE)
        out.append(folder)
    return out


@pytest.mark.parametrize("variable", ["ENVFACTORY_CONFIG_DIR", "XDG_CONFIG_HOME"])
def test_a_users_tuned_presets_never_reach_a_plugins_tests(
    run: Any, tmp_path: Path, variable: str
) -> None:
    """A developer's own presets (``envfactory tune`` writes vectorizer/tuned.yaml; here a
    vectorizer/dummy.yaml that clashes with the built-in too) in ``$ENVFACTORY_CONFIG_DIR``
    or ``$XDG_CONFIG_HOME/envfactory`` are seen by no test of any suite."""
    xdg = tmp_path / "xdg"
    presets = xdg / "envfactory" / "vectorizer"
    presets.mkdir(parents=True)
    (presets / "tuned.yaml").write_text("name: subproc\nin_series: 2\n")
    (presets / "dummy.yaml").write_text("name: subproc\n")
    env = (
        {"ENVFACTORY_CONFIG_DIR": str(presets.parent)}
        if variable == "ENVFACTORY_CONFIG_DIR"
        else {"ENVFACTORY_CONFIG_DIR": "", "XDG_CONFIG_HOME": str(xdg)}
    )
    root = tmp_path / "suites"
    folders = _suites_with_a_probe(root)
    (root / "pytest.ini").write_text("[pytest]\n")
    proc = run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
         *folders],
        cwd=root,
        env=env,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and f"{len(folders)} passed" in proc.stdout, proc.stdout[-3000:]


def test_every_suites_conftest_is_the_shipped_fixture() -> None:
    """No suite keeps its own copy of the fixture (the copies drifted before)."""
    for suite in SUITES:
        text = (suite / "conftest.py").read_text()
        assert "from envfactory.testing.pytest_plugin import hermetic_envfactory" in text, suite
        assert "reset_plugins" not in text, suite


def test_the_fixture_gives_an_empty_user_config_folder_and_a_fresh_registry(
    hermetic_envfactory: Path,
) -> None:
    assert list(hermetic_envfactory.iterdir()) == []
    (hermetic_envfactory / "vectorizer").mkdir()
    (hermetic_envfactory / "vectorizer" / "mine.yaml").write_text("name: dummy\n")
    assert envfactory.compose(["vectorizer=mine"]).vectorizer.name == "dummy"


def test_check_entry_point_passes_for_an_installed_plugin(example_version: str) -> None:
    check_entry_point(
        "envfactory-example",
        entry_point="envfactory_example",
        families=["pendulum"],
        wrappers=["scale_reward"],
        vectorizers=["gym-sync"],
    )


@pytest.mark.parametrize(
    ("distribution", "kwargs", "says"),
    [
        ("envfactory-example", {"vectorizers": ["dummy"]}, "vectorizers 'dummy' comes from "
         "envfactory"),
        ("envfactory-example", {"vectorizers": ["nope"]}, "vectorizers 'nope' is not registered"),
        ("envfactory-example", {"entry_point": "other", "vectorizers": ["gym-sync"]},
         "has no entry point other in the group 'envfactory' (it has ['envfactory_example'])"),
        ("envfactory-nope", {"vectorizers": ["x"]}, "envfactory-nope is not installed"),
    ],
)  # fmt: skip
def test_check_entry_point_names_what_is_wrong(
    example_version: str, distribution: str, kwargs: dict, says: str
) -> None:
    with pytest.raises(AssertionError) as err:
        check_entry_point(distribution, **kwargs)
    assert says in str(err.value)


def test_check_entry_point_wants_a_name() -> None:
    with pytest.raises(TypeError, match="vectorizers=\\['my-vec'\\]"):
        check_entry_point("envfactory-example")


class _RewardPlusOne(gym.vector.VectorWrapper):
    def step(self, actions: Any) -> Any:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return obs, rewards + 1.0, terminations, truncations, infos


def _off_by_one(env_fns: Any, **options: Any) -> Any:
    return _RewardPlusOne(
        gym.vector.SyncVectorEnv(env_fns, autoreset_mode=options["autoreset_mode"])
    )


def test_check_same_as_dummy_passes_and_catches_a_difference() -> None:
    # the vectorizer's own option goes to it alone: dummy has no in_series
    check_same_as_dummy(["num_envs=3", "vectorizer.in_series=2"], "subproc", steps=20)
    envfactory.register_plugin(envfactory.VectorizerPlugin("off-by-one", _off_by_one))
    with pytest.raises(AssertionError, match=r"record 1 \(step\).*rewards"):
        check_same_as_dummy(["num_envs=2"], "off-by-one", steps=3)
