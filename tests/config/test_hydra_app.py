"""envfactory and other Hydra apps in the same environment (real ``@hydra.main`` apps run
in subprocesses).

An app that does not ask for envfactory imports nothing of it and sees none of its
options, even with an ``env`` group of its own; an app that asks
(``envfactory.register_configs()``) composes envfactory's groups under ``envfactory/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra.core.config_store import ConfigStore
from hydra.core.object_type import ObjectType

import envfactory

# An ordinary Hydra app with its own `env` group (one option, `mine`). With ASK=1 it opts
# in to envfactory's groups and builds the env its `envfactory` node describes.
APP = """
import json, os, sys

import hydra
from omegaconf import OmegaConf

ASK = os.environ.get("ASK") == "1"
if ASK:
    import envfactory

    envfactory.register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg):
    out = {"env": OmegaConf.to_container(cfg.env), "lr": cfg.lr,
           "imported": sorted(m for m in ("envfactory", "gymnasium") if m in sys.modules)}
    if ASK:
        node = cfg.envfactory
        with envfactory.make_vec(node) as envs:
            obs, _ = envs.reset(seed=0)
            envs.step(envs.action_space.sample())
        out.update(shape=list(obs.shape), family=node.env.family, g=node.env.get("g"),
                   vectorizer=node.vectorizer.name, kind=type(envs).__name__)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
"""

CONFIG = """
defaults:
  - env: mine
  - _self_
lr: 0.001
"""

CONFIG_ASKING = """
defaults:
  - env: mine
  - envfactory: default
  - _self_
envfactory:
  num_envs: 2
lr: 0.001
"""


def _app(tmp_path: Path, config: str) -> Path:
    (tmp_path / "conf" / "env").mkdir(parents=True)
    (tmp_path / "conf" / "config.yaml").write_text(config)
    (tmp_path / "conf" / "env" / "mine.yaml").write_text("name: mine\nsize: 3\n")
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def _run(run: Any, app: Path, *overrides: str, ask: bool) -> Any:
    env = {"ASK": "1" if ask else "0"}
    return run(["python", "app.py", f"hydra.run.dir={app / 'out'}", *overrides], cwd=app, env=env)


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_an_app_that_does_not_ask_is_untouched(run: Any, tmp_path: Path) -> None:
    app = _app(tmp_path, CONFIG)
    proc = _run(run, app, ask=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # neither envfactory nor gymnasium was imported by Hydra's plugin discovery
    assert out == {"env": {"name": "mine", "size": 3}, "lr": 0.001, "imported": []}

    for option in ("atari", "gym", "pong"):
        proc = _run(run, app, f"env={option}", ask=False)
        assert proc.returncode == 1
        assert f"Could not find 'env/{option}'" in proc.stderr
        assert "Available options in 'env':\n\tmine\n" in proc.stderr, proc.stderr
    proc = _run(run, app, "--info", "searchpath", ask=False)
    assert proc.returncode == 0 and "envfactory" not in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], {"shape": [2, 4], "family": "gym", "g": None, "lr": 0.001}),
        (
            ["envfactory/env=pendulum_moon", "envfactory.num_envs=3", "lr=0.1"],
            {"shape": [3, 3], "family": "pendulum", "g": 1.62, "lr": 0.1},
        ),
        (
            ["envfactory/env=mountaincar", "envfactory.env.num_stack=2"],
            {"shape": [2, 4], "family": "mountaincar", "g": None, "lr": 0.001},
        ),
    ],
)
def test_an_app_that_asks_composes_under_envfactory(
    run: Any, tmp_path: Path, overrides: list[str], expected: dict[str, Any]
) -> None:
    app = _app(tmp_path, CONFIG_ASKING)
    proc = _run(run, app, *overrides, ask=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: out[k] for k in expected} == expected
    assert out["env"] == {"name": "mine", "size": 3}  # the app's own env group is its own
    assert out["vectorizer"] == "dummy"


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_an_app_that_asks_keeps_its_own_env_group(run: Any, tmp_path: Path) -> None:
    app = _app(tmp_path, CONFIG_ASKING)
    proc = _run(run, app, "env=atari", ask=True)
    assert proc.returncode == 1
    assert "Available options in 'env':\n\tmine\n" in proc.stderr, proc.stderr
    proc = _run(run, app, "envfactory/vectorizer=subproc", "envfactory.vectorizer.in_series=2",
                ask=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["vectorizer"], out["kind"], out["shape"]) == ("subproc", "SubprocVecEnv", [2, 4])
    # a typo names envfactory's own options
    proc = _run(run, app, "envfactory/env=mountaincat", ask=True)
    assert proc.returncode == 1
    assert "Could not find 'envfactory/env/mountaincat'" in proc.stderr
    assert "\tmountaincar\n" in proc.stderr and "\tpong\n" in proc.stderr


def test_compose_leaves_the_global_config_store_alone() -> None:
    cs = ConfigStore.instance()
    before = set(cs.list(""))
    cfg = envfactory.compose(["env=pendulum_moon", "vectorizer=subproc"])
    assert (cfg.env.family, cfg.env.g) == ("pendulum", 1.62)
    assert set(cs.list("")) == before
    for group in ("env", "vectorizer", "envfactory"):
        assert cs.get_type(group) is ObjectType.NOT_FOUND


def test_register_configs_stores_only_under_the_namespace() -> None:
    cs = ConfigStore.instance()
    before = set(cs.list(""))
    envfactory.register_configs()
    assert set(cs.list("")) - before == {"envfactory"}
    assert set(cs.list("envfactory")) == {"default.yaml", "schema.yaml", "env", "vectorizer"}
    envs = set(cs.list("envfactory/env"))
    assert {"gym.yaml", "atari.yaml", "pendulum.yaml", "pong.yaml", "pendulum_moon.yaml"} <= envs
    assert cs.load("envfactory/env/pendulum.yaml").provider == "envfactory-example"
    # reset_plugins forgets them; a non-envfactory entry is never overwritten
    envfactory.reset_plugins()
    assert cs.get_type("envfactory/env/gym.yaml") is ObjectType.NOT_FOUND
    cs.store(group="envfactory/env", name="gym", node={"x": 1}, provider="someone-else")
    try:
        with pytest.raises(ValueError, match=r"stored by .someone-else.*refuses to overwrite"):
            envfactory.register_configs()
    finally:
        from envfactory import _compat

        _compat.configstore_remove(cs, "envfactory/env", "gym")
        envfactory.reset_plugins()


def test_the_wheel_installs_no_hydra_plugin(wheel_site: Path) -> None:
    assert (wheel_site / "envfactory" / "conf" / "envfactory.yaml").is_file()
    assert not (wheel_site / "hydra_plugins").exists()


# -- no global state changed on import, registry build or make_vec ---------------------

SIDE_EFFECTS = r"""
import json, multiprocessing as mp, multiprocessing.forkserver as fsmod
import ale_py

ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Info)  # the user's choice
mp.get_context("forkserver").set_forkserver_preload(["json"])  # the user's preload
import envfactory
from envfactory.vectorizers.plan import launch

envfactory.get_registry()
envfactory.compose(["env=gym"])
out = {"hook_after_import": launch._fork_hook[0]}
with envfactory.make_vec(overrides=["env=pong", "num_envs=1"]) as envs:  # dummy: here
    envs.reset(seed=0)
spawn = ["vectorizer=subproc", "vectorizer.context=spawn", "num_envs=1"]
with envfactory.make_vec(overrides=spawn) as envs:
    envs.reset(seed=0)
out["hook_after_spawn"] = launch._fork_hook[0]
with envfactory.make_vec(overrides=["vectorizer=subproc", "num_envs=1"]) as envs:
    envs.reset(seed=0)
out["hook_after_forkserver"] = launch._fork_hook[0]
out["preload"] = fsmod._forkserver._preload_modules
print(json.dumps(out))
"""


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_no_global_state_changes(run: Any) -> None:
    proc = run(["python", "-c", SIDE_EFFECTS])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the at-fork hook only once a forkserver is used
    assert out["hook_after_import"] is False
    assert out["hook_after_spawn"] is False
    assert out["hook_after_forkserver"] is True
    # the user's forkserver preload is extended, not replaced
    assert out["preload"][:1] == ["json"]
    assert {"envfactory.vectorizers.worker.worker", "gymnasium"} <= set(out["preload"])
    # the ALE logger stays as the user set it (Info: ALE prints its banner in this process)
    assert proc.stderr.count("A.L.E: Arcade Learning Environment") == 1, proc.stderr
