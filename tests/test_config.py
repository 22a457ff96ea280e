"""Config composition: defaults, every error message, make_vec(dict), envfactory inside a
user's own Hydra app, config-only experiments, and the conf dir of a non-editable install."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import envfactory
from envfactory.errors import ConfigError, UnknownNameError


def test_defaults() -> None:
    cfg = envfactory.compose([])
    assert (cfg.env.family, cfg.env.id, cfg.vectorizer.name) == ("gym", "CartPole-v1", "dummy")
    assert (cfg.num_envs, cfg.seed, cfg.wrappers, cfg.vector_wrappers) == (4, None, [], [])
    assert cfg.run.total_steps > 0 and cfg.run.progress is True
    assert "hydra" not in cfg


@pytest.mark.parametrize(
    ("overrides", "error", "fragments"),
    [
        pytest.param(
            ["env=nope"],
            UnknownNameError,
            [
                "unknown env (family or preset) 'nope' (at env=nope)",
                "atari",
                "gym",
                "mountaincar",
                "pendulum",
                "envfactory-plugins",
            ],
            id="unknown-family-lists-valid-names",
        ),
        pytest.param(
            ["vectorizer=dumy"],
            UnknownNameError,
            ["unknown vectorizer 'dumy'", "Did you mean 'dummy'?", "dummy, gym-sync"],
            id="vectorizer-did-you-mean",
        ),
        pytest.param(
            ["env.idd=CartPole-v1"],
            ConfigError,
            ["Could not override 'env.idd'", "full_key: env.idd"],
            id="unknown-key-path",
        ),
        pytest.param(
            ["num_envs=abc"],
            ConfigError,
            ["Value 'abc' of type 'str' could not be converted to Integer", "full_key: num_envs"],
            id="wrong-type",
        ),
        pytest.param(
            ["num_envs=0"],
            ConfigError,
            ["num_envs must be a positive integer, got 0; set num_envs=1 or more"],
            id="num-envs-zero",
        ),
        pytest.param(
            ["wrappers=[{name:time_limt,max_episode_steps:5}]"],
            UnknownNameError,
            ["unknown wrapper 'time_limt' (at wrappers[0].name)", "Did you mean 'time_limit'?"],
            id="unknown-wrapper-did-you-mean",
        ),
        pytest.param(
            ["wrappers=[{name:record_episode_statistics},{name:time_limit,max_episode_steps:x}]"],
            ConfigError,
            [
                "invalid option for wrapper 'time_limit' at wrappers[1]",
                "full_key: wrappers[1].max_episode_steps",
            ],
            id="bad-wrapper-option-type-second",
        ),
        pytest.param(
            ["wrappers=[{name:time_limit,max_episode_steps:abc}]"],
            ConfigError,
            [
                "invalid option for wrapper 'time_limit' at wrappers[0]",
                "could not be converted to Integer",
                "full_key: wrappers[0].max_episode_steps",
            ],
            id="bad-wrapper-option-type",
        ),
        pytest.param(
            ["env=pendulum", "env.g=heavy"],
            ConfigError,
            ["Value 'heavy' of type 'str' could not be converted to Float", "full_key: env.g"],
            id="plugin-schema-wrong-type",
        ),
        pytest.param(
            ["wrappers=[{name:scale_reward,scael:2}]"],
            ConfigError,
            ["invalid option for wrapper 'scale_reward' at wrappers[0]", "scael"],
            id="plugin-wrapper-unknown-option",
        ),
    ],
)
def test_config_error_messages(
    overrides: list[str], error: type[Exception], fragments: list[str]
) -> None:
    with pytest.raises(error) as info:
        envfactory.compose(overrides)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message


def test_wrapper_options_reach_the_wrapper() -> None:
    cfg = envfactory.compose(["wrappers=[{name:time_limit,max_episode_steps:5}]", "num_envs=1"])
    with envfactory.make_vec(cfg) as envs:
        envs.reset(seed=0)
        truncated = [envs.step([0])[3][0] for _ in range(5)]
    assert truncated == [False] * 4 + [True]


def test_make_vec_from_a_dict() -> None:
    with envfactory.make_vec({"env": "mountaincar", "num_envs": 2}) as envs:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 8)
    spec = {
        "env": {"family": "pendulum", "g": 3.0},
        "vectorizer": "gym-sync",
        "num_envs": 3,
        "autoreset_mode": "same_step",
    }
    with envfactory.make_vec(spec) as envs:
        assert envs.num_envs == 3 and envs.get_attr("g") == (3.0, 3.0, 3.0)
        assert envs.metadata["autoreset_mode"].name == "SAME_STEP"
    with pytest.raises(ConfigError, match="num_envs must be a positive integer, got 0"):
        envfactory.make_vec({"num_envs": 0})
    with pytest.raises(UnknownNameError, match="Did you mean 'mountaincar'"):
        envfactory.make_vec({"env": "mountaincat"})


# A user's own @hydra.main app composing envfactory: tests/test_hydra_app.py


def test_config_only_experiment(run: Any, tmp_path: Path) -> None:
    exp_dir = tmp_path / "my_experiments" / "experiment"
    exp_dir.mkdir(parents=True)
    (exp_dir / "fast_mountaincar.yaml").write_text(
        textwrap.dedent(
            """\
            # @package _global_
            defaults:
              - override /env: mountaincar

            num_envs: 2
            run:
              total_steps: 100
            """
        )
    )
    out = tmp_path / "run"
    proc = run(
        [
            "envfactory",
            "--config-dir",
            tmp_path / "my_experiments",
            "+experiment=fast_mountaincar",
            f"hydra.run.dir={out}",
            "run.progress=false",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["family"], summary["env"]) == ("mountaincar", "MountainCar-v0")
    assert (summary["num_envs"], summary["steps"]) == (2, 100)
    assert "+experiment=fast_mountaincar" in summary["overrides"]


def test_conf_dir_of_a_non_editable_install(run: Any, wheel_site: Path, tmp_path: Path) -> None:
    code = (
        "import json, envfactory, envfactory.config\n"
        "cfg = envfactory.compose(['env=mountaincar'])\n"
        "print(json.dumps({'conf': str(envfactory.config.conf_dir()),"
        " 'module': envfactory.__file__, 'family': cfg.env.family}))\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run(["python", "-c", code], cwd=elsewhere, pythonpath=[wheel_site])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    site = wheel_site.resolve()
    assert Path(out["module"]).resolve().is_relative_to(site)
    assert Path(out["conf"]).resolve() == site / "envfactory" / "conf"
    assert (site / "envfactory" / "conf" / "envfactory.yaml").is_file()
    assert out["family"] == "mountaincar"


def test_missing_required_wrapper_option_names_it() -> None:
    with pytest.raises(ConfigError) as info:
        envfactory.compose(["wrappers=[{name: time_limit}]"])
    message = str(info.value)
    assert "wrapper 'time_limit' at wrappers[0] needs option max_episode_steps" in message
    assert "{name: time_limit, max_episode_steps: ...}" in message
