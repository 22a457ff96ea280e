"""gymnasium's registry (docs/guides/rllib.md): ``make_vec`` as a ``vector_entry_point`` (its
keyword arguments read as config keys, envfactory.config.keywords), the ``envfactory/...`` ids of
``envfactory.gym_ids``, and ``import envfactory`` registering nothing.

RLlib and TorchRL themselves: tests/clients/test_rllib.py."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envfactory
from envfactory import ConfigError, EpisodeStatistics, VecEnvBase
from envfactory.config import resolve
from envfactory.factory import find_wrapper

ID = "EnvfactoryTest/MyEnvs-v0"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def my_envs() -> Iterator[str]:
    gym.register(ID, vector_entry_point=envfactory.make_vec)
    yield ID
    gym.registry.pop(ID, None)


@pytest.fixture
def gym_ids() -> Iterator[ModuleType]:
    """``envfactory.gym_ids`` imported; afterwards its ids are gone from the registry (other
    tests see gymnasium's registry as it was) and the module is imported afresh next time."""
    before = set(gym.registry)
    import envfactory.gym_ids as module

    try:
        yield module
    finally:
        for env_id in set(gym.registry) - before:
            if env_id.startswith("envfactory/") or env_id.startswith("EnvfactoryTest"):
                gym.registry.pop(env_id, None)
        sys.modules.pop("envfactory.gym_ids", None)
        envfactory.__dict__.pop("gym_ids", None)


def rollout(envs: Any, steps: int = 80, seed: int = 7) -> list[Any]:
    """Everything a seeded random-action rollout returns (the same actions for any env)."""
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=seed)
    out = [obs]
    for _ in range(steps):
        obs, rew, term, trunc, _ = envs.step(rng.integers(0, 2, envs.num_envs))
        out += [obs, rew, term, trunc]
    envs.close()
    return out


def assert_same(a: list[Any], b: list[Any]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert sum(int(np.sum(t)) for t in a[3::4]) > 0  # episodes ended: the resets are compared


def reference(*overrides: str) -> list[Any]:
    return rollout(envfactory.make_vec(overrides=["num_envs=4", *overrides]))


def test_gym_make_vec_with_num_envs_builds_envfactory_envs(my_envs: str) -> None:
    envs = gym.make_vec(my_envs, num_envs=4, vectorization_mode="vector_entry_point")
    assert isinstance(envs, VecEnvBase) and envs.num_envs == 4
    assert envs.unwrapped.spec.id == my_envs  # gymnasium's make_vec recorded its spec
    assert_same(rollout(envs), reference())


def test_keyword_arguments_are_config_keys(my_envs: str) -> None:
    envs = gym.make_vec(
        my_envs,
        num_envs=2,
        vectorization_mode="vector_entry_point",
        env="mountaincar",  # a group pick
        vectorizer={"name": "subproc", "in_series": 2},  # a node
        **{"env.num_stack": 2},  # a dotted key
        max_episode_steps=5,  # gymnasium's: env.max_episode_steps
    )
    try:
        assert type(envs).__name__ == "SubprocVecEnv" and envs.num_envs == 2
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 4)  # MountainCar, 2 observations stacked
        truncs = [bool(envs.step(np.zeros(2, dtype=np.int64))[3].all()) for _ in range(5)]
        assert truncs == [False] * 4 + [True]
    finally:
        envs.close()


def test_a_dict_and_keywords_merge_key_by_key() -> None:
    cfg = {"env": {"id": "Acrobot-v1"}, "num_envs": 3, "overrides": ["autoreset_mode=same_step"]}
    plan = resolve(cfg, None, {"num_envs": 2, "env": {"render_mode": "rgb_array"}})
    assert plan.num_envs == 2  # the keyword wins over the dict
    env = plan.config.env
    assert (env.family, env.id, env.render_mode) == ("gym", "Acrobot-v1", "rgb_array")
    assert plan.config.autoreset_mode.value == "same_step"  # the dict's overrides
    env = resolve(None, None, {"max_episode_steps": 7, "render_mode": "rgb_array"}).config.env
    assert (env.max_episode_steps, env.render_mode) == (7, "rgb_array")


def test_keywords_on_a_composed_config_or_a_plan() -> None:
    cfg = envfactory.compose(["num_envs=3"])
    with envfactory.make_vec(cfg, num_envs=2) as envs:
        assert envs.num_envs == 2
    assert cfg.num_envs == 3  # the caller's config is not changed
    with pytest.raises(ConfigError, match="picks a config group, which the composed config"):
        envfactory.make_vec(cfg, env="mountaincar")
    with pytest.raises(ConfigError, match="a checked plan or overrides / keyword options"):
        envfactory.make_vec(resolve(cfg), num_envs=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_env": 3}, "unknown key 'num_env' .*Did you mean 'num_envs'\\? Valid keys: "),
        (
            {"vectorizer": {"name": "subproc", "in_serie": 2}},
            r"Did you mean 'vectorizer\.in_series'",
        ),
        ({"max_episode_steps": 0}, "env.max_episode_steps=0"),
    ],
)
def test_a_wrong_keyword_is_one_clear_error(
    my_envs: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        gym.make_vec(my_envs, num_envs=2, vectorization_mode="vector_entry_point", **kwargs)
    assert "\n" not in str(info.value)


def test_an_unknown_keyword_is_a_config_error_and_a_type_error() -> None:
    """Issue 38: as gymnasium's ``make`` (and any function) raises ``TypeError`` for an unknown
    keyword, so does envfactory, in Python's words, so a caller that probes keywords and drops
    the refused one on that ``TypeError`` works (TorchRL's ``GymEnv`` passes ``frameskip=``:
    tests/clients/test_rllib.py runs it); every unknown key is one ``UnknownKeyError``."""
    import envfactory.gym_ids  # (registers envfactory/CartPole-v1)

    calls = {
        "make_vec": lambda: envfactory.make_vec(num_envs=2, frameskip=4),
        "make_env": lambda: envfactory.make_env(frameskip=4),
        "gym.make": lambda: gym.make("envfactory/CartPole-v1", frameskip=4),
        "gym.make_vec": lambda: gym.make_vec(
            "envfactory/CartPole-v1", 2, vectorization_mode="vector_entry_point", frameskip=4
        ),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'") as info:
            call()
        assert isinstance(info.value, ConfigError), name
        assert isinstance(info.value, envfactory.UnknownKeyError), name
        assert "Valid keys: " in str(info.value) and "\n" not in str(info.value), name
    # a key of a config node, and an option of the atari family made directly
    with pytest.raises(envfactory.UnknownKeyError, match=r"Did you mean 'vectorizer\.in_series'"):
        envfactory.make_vec(vectorizer={"name": "subproc", "in_serie": 2})
    with pytest.raises(TypeError, match=r"atari: unknown option 'frameskip'.*frame_skip"):
        envfactory.get_registry().family("atari").make(frameskip=4)


def test_overrides_given_as_one_string_are_refused() -> None:
    for call in (
        lambda: envfactory.make_vec(overrides="num_envs=2"),
        lambda: envfactory.make_vec({"overrides": "num_envs=2"}),
    ):
        with pytest.raises(TypeError, match="overrides must be a list of strings"):
            call()


def test_rllibs_one_env_call_says_what_to_set() -> None:
    """RLlib's default vectorize mode calls the creator with its EnvContext for one env
    (a dict subclass; the vector mode passes a plain dict with num_envs)."""
    env_context = type("EnvContext", (dict,), {"__module__": "ray.rllib.env.env_context"})
    with pytest.raises(ConfigError, match="gym_env_vectorize_mode='vector_entry_point'") as info:
        envfactory.make_vec(env_context({"env": "gym"}))
    assert "envfactory.make_env" in str(info.value) and "\n" not in str(info.value)
    with envfactory.make_vec(dict(env_context({"env": "gym"})) | {"num_envs": 2}) as envs:
        assert envs.num_envs == 2
    env = envfactory.make_env(env_context({"env": "mountaincar"}))
    assert env.observation_space.shape == (8,)


def test_gym_ids_build_envfactory_envs_in_both_modes(gym_ids: ModuleType) -> None:
    envs = gym.make_vec("envfactory/CartPole-v1", num_envs=4, vectorizer="subproc")
    assert type(envs).__name__ == "SubprocVecEnv"  # vector_entry_point: gymnasium's default here
    assert_same(rollout(envs), reference())
    sync = gym.make_vec("envfactory/CartPole-v1", num_envs=4, vectorization_mode="sync")
    assert isinstance(sync, gym.vector.SyncVectorEnv)
    assert type(sync.envs[0].unwrapped).__name__ == "CartPoleEnv"
    assert find_wrapper(sync.envs[0], EpisodeStatistics) is not None  # built by make_env
    assert_same(rollout(sync), reference())  # gymnasium's seeding is seed + i too
    one = gym.make("envfactory/Config-v0", env="mountaincar")
    assert one.observation_space.shape == (8,)


def test_gym_ids_docstring_example_runs(gym_ids: ModuleType) -> None:
    result = doctest.testmod(gym_ids, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_gym_ids_names(gym_ids: ModuleType) -> None:
    ids = {i for i in gym.registry if i.startswith("envfactory/")}
    assert {"envfactory/Config-v0", "envfactory/CartPole-v1", "envfactory/Pong-v5"} <= ids
    assert "envfactory/Pong-v4" not in ids and "envfactory/Pong-ram-v5" not in ids
    pong = gym.spec("envfactory/Pong-v5").vector_entry_point.__self__
    assert pong.base == ("env=atari", "env.id=ALE/Pong-v5")
    with pytest.raises(ConfigError, match=r"envfactory/CartPole-v1 is env=gym .*Config-v0"):
        gym.make_vec("envfactory/CartPole-v1", num_envs=2, env="atari")
    assert gym_ids.register_gym_ids() == []  # registered already: nothing twice
    gym.register("EnvfactoryTestOnly-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    try:
        assert gym_ids.register_gym_ids() == ["envfactory/EnvfactoryTestOnly-v0"]
    finally:
        gym.registry.pop("EnvfactoryTestOnly-v0")


def _python(code: str) -> str:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_module_prefix_finds_the_ids_in_a_fresh_process() -> None:
    out = _python(
        "import gymnasium as gym\n"
        "envs = gym.make_vec('envfactory.gym_ids:envfactory/CartPole-v1', num_envs=2,\n"
        "                    vectorization_mode='vector_entry_point')\n"
        "print(type(envs).__name__, envs.num_envs); envs.close()\n"
    )
    assert out.split() == ["DummyVecEnv", "2"]


def test_import_envfactory_registers_nothing_in_gymnasium() -> None:
    out = _python(
        "import gymnasium as gym\n"
        "before = set(gym.registry)\n"
        "import envfactory\n"
        "from envfactory import *\n"
        "envfactory.available()\n"
        "envfactory.make_vec(overrides=['num_envs=2']).close()\n"
        "print(sorted(set(gym.registry) - before))\n"
    )
    assert out.strip() == "[]"
