"""``import envfactory.envpool as envpool``: envpool's interface over envfactory's pool.

The loops here make the calls of envpool's README (sync and async) and of CleanRL's
``ppo_atari_envpool.py`` (code written here). The reference for trajectories is one plain
gymnasium env per env id, seeded ``seed + i`` at its first reset and reset without a seed
after each episode (envpool's seeding and auto-reset).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envfactory.envpool as envpool
from envfactory.errors import ClosedError, ConfigError


def _policy(obs: np.ndarray) -> np.ndarray:
    return (obs[:, 2] > 0).astype(np.int64)  # push towards the pole's lean: real episodes


def test_readme_async_loop_per_env_trajectories_match_gymnasium() -> None:
    num_envs, batch_size, seed = 4, 2, 5
    env = envpool.make(
        "CartPole-v1", env_type="gymnasium", num_envs=num_envs, batch_size=batch_size, seed=seed
    )
    refs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    first = [True] * num_envs
    ref_done = [True] * num_envs
    seen: set[int] = set()
    steps = np.zeros(num_envs, dtype=int)
    last = np.zeros(num_envs, dtype=np.int64)  # each env's last action
    action_num = env.action_space.n  # per env, as envpool
    assert action_num == 2 and env.is_async and len(env) == num_envs
    env.async_reset()
    for _ in range(120):
        obs, rew, term, trunc, info = env.recv()
        env_id = info["env_id"]
        assert obs.shape == (batch_size, 4) and rew.dtype == np.float32
        np.testing.assert_array_equal(info["players"]["env_id"], env_id)
        for k, i in enumerate(env_id):
            seen.add(int(i))
            if ref_done[i]:  # envpool: the step after an episode's end is its reset
                ref_obs, _ = refs[i].reset(seed=seed + int(i) if first[i] else None)
                first[i], ref_done[i], steps[i] = False, False, 0
                assert rew[k] == 0 and not term[k] and not trunc[k]
            else:
                ref_obs, ref_rew, ref_term, ref_trunc, _ = refs[i].step(int(last[i]))
                ref_done[i] = ref_term or ref_trunc
                steps[i] += 1
                assert (rew[k], term[k], trunc[k]) == (ref_rew, ref_term, ref_trunc)
            np.testing.assert_array_equal(obs[k], ref_obs)
            assert info["elapsed_step"][k] == steps[i]
        action = _policy(obs)
        last[env_id] = action
        env.send(action, env_id)
    env.close()
    assert seen == set(range(num_envs))
    assert sum(not f for f in first) == num_envs


def test_readme_sync_example_on_pong_with_envpools_atari_defaults() -> None:
    num_envs = 2
    env = envpool.make("Pong-v5", env_type="gym", num_envs=num_envs)
    assert env.observation_space.shape == (4, 84, 84)
    cfg = env.config
    expected = {
        "num_envs": 2,
        "batch_size": 2,
        "seed": 42,
        "episodic_life": False,
        "reward_clip": False,
        "stack_num": 4,
        "img_height": 84,
        "img_width": 84,
        "noop_max": 30,
        "frame_skip": 4,
        "repeat_action_probability": 0.0,
        "max_episode_steps": 27000,
        "use_fire_reset": True,
        "task": "pong",
    }
    assert {k: cfg[k] for k in expected} == expected
    assert not env.is_async
    obs, info = env.reset()  # env_type="gym" is gymnasium's API since envpool 1.2
    obs, rew, _term, _trunc, info = env.step(np.zeros(num_envs, dtype=int))
    assert obs.shape == (num_envs, 4, 84, 84) and obs.dtype == np.uint8
    assert rew.dtype == np.float32
    assert set(info) >= {"env_id", "players", "elapsed_step", "lives", "reward", "terminated"}
    np.testing.assert_array_equal(info["elapsed_step"], [1, 1])
    env.close()


def test_sync_mode_steps_and_resets_a_subset_in_env_id_order() -> None:
    env = envpool.make_gymnasium("CartPole-v1", num_envs=4, seed=0)
    obs, info = env.reset()
    np.testing.assert_array_equal(info["env_id"], [0, 1, 2, 3])
    for _ in range(3):
        env.step(np.zeros(4, dtype=int))
    obs, _rew, _term, _trunc, info = env.step(np.ones(2, dtype=int), env_id=np.array([3, 1]))
    np.testing.assert_array_equal(info["env_id"], [3, 1])
    np.testing.assert_array_equal(info["elapsed_step"], [4, 4])
    assert obs.shape == (2, 4)
    # envpool's dict form
    env.send({"action": np.zeros(1, dtype=np.int32), "env_id": np.array([0], dtype=np.int32)})
    _, _, _, _, info = env.recv()
    np.testing.assert_array_equal(info["elapsed_step"], [4])
    obs, info = env.reset(env_id=np.array([2]))
    assert obs.shape == (1, 4)
    np.testing.assert_array_equal(info["elapsed_step"], [0])
    _, _, _, _, info = env.step(np.zeros(4, dtype=int))
    np.testing.assert_array_equal(info["elapsed_step"], [5, 5, 1, 5])
    env.close()


def test_seed_at_construction_gives_the_same_episodes() -> None:
    def rollout(seed: int) -> np.ndarray:
        with envpool.make_gymnasium("CartPole-v1", num_envs=2, seed=seed) as env:
            obs, _ = env.reset()
            out = [obs]
            for _ in range(30):
                obs = env.step(_policy(obs))[0]
                out.append(obs)
        return np.stack(out)

    a, b, c = rollout(3), rollout(3), rollout(4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    ref, _ = gym.make("CartPole-v1").reset(seed=4)  # env 1 of seed 3 is seeded 3 + 1
    np.testing.assert_array_equal(a[0, 1], ref)


def test_cleanrl_envpool_script_calls() -> None:
    """What ppo_atari_envpool.py does to the env (on CartPole to stay fast): its attribute
    assignments still work; ``env_type="gym"`` is gymnasium's API, as envpool 1.2's
    (before: the classic 4-tuple API when gym < 0.26 or no gym was installed)."""
    envs = envpool.make("CartPole-v1", env_type="gym", num_envs=2, seed=1)
    envs.num_envs = 2
    envs.single_action_space = envs.action_space
    envs.single_observation_space = envs.observation_space
    assert envs.single_action_space.n == 2
    obs, info = envs.reset()
    assert obs.shape == (2, 4) and set(info) >= {"env_id", "elapsed_step"}
    out = envs.step(np.zeros(2, dtype=np.int64))
    assert len(out) == 5
    envs.close()


def test_bad_input_says_what_and_how_to_fix() -> None:
    with pytest.raises(ConfigError, match=r"unknown task_id 'Pongg-v5'.*Did you mean 'Pong-v5'"):
        envpool.make("Pongg-v5", "gymnasium")
    with pytest.raises(ConfigError, match=r"unknown option 'stack_nm'.*Did you mean 'stack_num'"):
        envpool.make("Pong-v5", "gymnasium", stack_nm=4)
    with pytest.raises(ConfigError, match=r"batch_size=5 must be an int in \[1, num_envs=2\]"):
        envpool.make("CartPole-v1", "gymnasium", num_envs=2, batch_size=5)
    with pytest.raises(ConfigError, match="dm_env's 'dm' is not offered"):
        envpool.make_dm("CartPole-v1")
    with pytest.raises(ConfigError, match="env_type='gymnasim' is not offered"):
        envpool.make("CartPole-v1", env_type="gymnasim")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bad_env_ids_are_refused_as_the_pool_refuses_them(mode: str) -> None:
    """A negative, out-of-range, float, string or repeated env id is a ValueError naming it
    (before: ``[-1]`` reset env 3, ``[0.7]`` env 0, ``['0', '1']`` envs 0 and 1), and
    nothing moved: the env stays usable."""
    batch = {"batch_size": 2} if mode == "async" else {}
    env = envpool.make_gymnasium("CartPole-v1", num_envs=4, seed=0, **batch)
    if mode == "sync":
        env.reset()
    else:
        env.async_reset()
        env.recv()
        env.recv()
    acts = np.zeros(2, dtype=int)
    cases = [
        ([-1, 0], r"ids \[-1\] out of range; pass each env id in \[0, 4\) at most once"),
        ([4, 0], r"ids \[4\] out of range"),
        ([0.9, 1.2], r"env_ids must be a 1-D array of ints .*got \[0\.9, 1\.2\]"),
        (["0", "1"], r"env_ids must be a 1-D array of ints .*got \['0', '1'\]"),
        ([1, 1], "a repeated id"),
    ]
    for ids, message in cases:
        if mode == "sync":
            with pytest.raises(ValueError, match=r"envpool: reset\(env_id.*" + message):
                env.reset(env_id=ids)
            with pytest.raises(ValueError, match=r"envpool: step\(action, env_id.*" + message):
                env.step(acts, env_id=ids)
        with pytest.raises(ValueError, match=r"envpool: send\(action, env_id.*" + message):
            env.send(acts, env_id=ids)
    with pytest.raises(ValueError, match=r"reset\(env_id=\[0\.7\]\)|got \[0\.7\]"):
        env.reset(env_id=[0.7])
    # nothing moved: the envs step on as before
    if mode == "sync":
        _, _, _, _, info = env.step(np.zeros(4, dtype=int))
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1, 1, 1])
    else:
        env.send(np.zeros(2, dtype=int), env_id=np.array([0, 1]))
        env.send(np.zeros(2, dtype=int), env_id=np.array([2, 3]))
        _, _, _, _, info = env.recv()
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1])
    env.close()


def test_a_bad_seed_is_refused_by_make() -> None:
    """Before: ``seed=1.5`` or ``None`` built the workers and failed at the first reset
    with ``TypeError: 'float' object is not iterable``; ``'abc'`` said "seed has 3
    entries"."""
    for seed in (1.5, None, "abc", [0, 1, 2], [0, 1.5, 2, 3], [0, -1, 2, 3], -2, True):
        with pytest.raises(
            ConfigError,
            match=r"^envpool\.make: seed=.* must be an int >= 0 \(env i gets seed \+ i\) or "
            r"a list of num_envs=4 ints >= 0; e\.g\. seed=0$",
        ):
            envpool.make("CartPole-v1", "gymnasium", num_envs=4, seed=seed)
    with envpool.make("CartPole-v1", "gymnasium", num_envs=2, seed=np.array([3, 9])) as env:
        obs, _ = env.reset()
    np.testing.assert_array_equal(obs[1], gym.make("CartPole-v1").reset(seed=9)[0])


def test_calls_after_close_say_envpool_make() -> None:
    env = envpool.make_gymnasium("CartPole-v1", num_envs=2, seed=0)
    env.reset()
    env.close()
    env.close()  # idempotent
    for call in (
        env.reset,
        env.async_reset,
        env.recv,
        lambda: env.step(np.zeros(2, dtype=int)),
        lambda: env.send(np.zeros(2, dtype=int)),
    ):
        with pytest.raises(ClosedError, match=r"on a closed EnvPool; make a new one with envpool"):
            call()


@pytest.mark.slow
def test_breakout_episodic_life_clip_and_atari_infos() -> None:
    env = envpool.make_gymnasium(
        "Breakout-v5", num_envs=1, episodic_life=True, reward_clip=True, seed=0
    )
    assert env.config["episodic_life"] and env.config["reward_clip"]
    _, info = env.reset()
    assert info["lives"][0] == 5
    life_lost = False
    rng = np.random.default_rng(0)
    for _ in range(2000):
        _obs, rew, term, _trunc, info = env.step(rng.integers(0, 4, size=1))
        np.testing.assert_array_equal(rew, np.sign(info["reward"]))
        if term[0]:
            life_lost = True
            assert info["lives"][0] == 4 and info["terminated"][0] == 0
            elapsed = info["elapsed_step"][0]
            # the continued game keeps counting steps, as envpool
            _, _, _, _, info = env.step(np.array([0]))
            assert info["elapsed_step"][0] == elapsed
            break
    env.close()
    assert life_lost


def test_a_bad_task_option_names_envpools_option() -> None:
    """Before: ``stack_num=0`` said ``env.num_stack=0`` (envfactory's key, which the user
    never typed), and ``stack_num=1.5`` was cut to 1 without a word."""
    cases = [
        ("Pong-v5", {"stack_num": 0}, r"stack_num=0 must be an int >= 1; e\.g\. stack_num=4"),
        ("Pong-v5", {"stack_num": 1.5}, r"stack_num=1\.5 must be an int >= 1"),
        ("Pong-v5", {"img_width": 0}, r"img_width=0 must be an int >= 1; e\.g\. img_width=84"),
        ("Pong-v5", {"noop_max": -1}, r"noop_max=-1 must be an int >= 0"),
        ("Pong-v5", {"repeat_action_probability": 2}, r"repeat_action_probability=2 must be "),
        ("Pong-v5", {"reward_clip": "yes"}, r"reward_clip='yes' must be True or False"),
        ("CartPole-v1", {"max_episode_steps": 0}, r"max_episode_steps=0 .*_steps=500"),
    ]
    for task, kwargs, message in cases:
        with pytest.raises(ConfigError, match=r"^envpool\.make\(.*\): " + message) as err:
            envpool.make(task, "gymnasium", num_envs=2, **kwargs)
        assert "env." not in str(err.value)  # no envfactory key the user never typed
