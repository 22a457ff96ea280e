"""``vector_wrappers=[{name: legacy_final_info}]``: gymnasium 0.29's final infos.

The reference is gymnasium 1.x's own ``SyncVectorEnv`` in ``same_step`` mode over the same
seeded envs: every step, ``final_observation`` / ``final_info`` must carry exactly its
``final_obs`` / ``final_info`` of the envs that ended, in 0.29's shape (object arrays of
``num_envs`` with ``None`` elsewhere, and their ``_`` masks). The CleanRL-style loops below
are written here: the logging of ``ppo.py`` and the truncation handling of ``dqn.py``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import envfactory
from envfactory.errors import ConfigError
from envfactory.wrappers.legacy_final_info import LegacyFinalInfo, unbatch_info

LEGACY = ["autoreset_mode=same_step", "vector_wrappers=[{name: legacy_final_info}]"]
STATS = "wrappers=[{name: record_episode_statistics}]"


def _reference(n: int, max_steps: int) -> gym.vector.SyncVectorEnv:
    def thunk() -> gym.Env:
        env = gym.make("CartPole-v1", max_episode_steps=max_steps)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return gym.vector.SyncVectorEnv(
        [thunk for _ in range(n)], autoreset_mode=AutoresetMode.SAME_STEP
    )


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_final_infos_match_gymnasium_same_step_in_0_29_shape(vectorizer: str) -> None:
    n, max_steps = 3, 12  # short episodes: truncations and terminations both happen
    overrides = [
        *LEGACY,
        f"vectorizer={vectorizer}",
        f"num_envs={n}",
        f"env.kwargs={{max_episode_steps: {max_steps}}}",
        STATS,
    ]
    ref = _reference(n, max_steps)
    rng = np.random.default_rng(0)
    ended = 0
    with envfactory.make_vec(overrides=overrides) as envs:
        obs, _ = envs.reset(seed=7)
        ref_obs, _ = ref.reset(seed=7)
        np.testing.assert_array_equal(obs, ref_obs)
        for _ in range(60):
            actions = rng.integers(0, 2, size=n)
            obs, _, term, trunc, infos = envs.step(actions)
            ref_obs, _, ref_term, ref_trunc, ref_infos = ref.step(actions)
            np.testing.assert_array_equal(obs, ref_obs)
            done = term | trunc
            np.testing.assert_array_equal(done, ref_term | ref_trunc)
            assert "final_obs" not in infos and "_final_obs" not in infos
            if not done.any():
                assert "final_observation" not in infos and "final_info" not in infos
                continue
            ended += int(done.sum())
            for key in ("final_observation", "final_info"):
                assert infos[key].dtype == object and infos[key].shape == (n,)
                np.testing.assert_array_equal(infos[f"_{key}"], done)
            for i in range(n):
                if not done[i]:
                    assert infos["final_observation"][i] is None
                    assert infos["final_info"][i] is None
                    continue
                np.testing.assert_array_equal(
                    infos["final_observation"][i], ref_infos["final_obs"][i]
                )
                episode = infos["final_info"][i]["episode"]
                assert episode["l"] == ref_infos["final_info"]["episode"]["l"][i]
                assert episode["r"] == ref_infos["final_info"]["episode"]["r"][i]
    ref.close()
    assert ended >= 6


def test_cleanrl_style_loop_logs_every_episode_and_takes_truncated_final_obs() -> None:
    """ppo.py's logging and dqn.py's ``real_next_obs`` (code written here, same calls)."""
    max_steps = 9
    overrides = [*LEGACY, "num_envs=2", f"env.kwargs={{max_episode_steps: {max_steps}}}", STATS]
    logged: list[int] = []
    truncated = 0
    with envfactory.make_vec(overrides=overrides) as envs:
        envs.reset(seed=1)
        for _ in range(40):
            actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
            next_obs, _, _, truncations, infos = envs.step(actions)
            if "final_info" in infos:
                for info in infos["final_info"]:
                    if info and "episode" in info:
                        logged.append(int(info["episode"]["l"]))
            real_next_obs = next_obs.copy()
            for idx, trunc in enumerate(truncations):
                if trunc:
                    real_next_obs[idx] = infos["final_observation"][idx]
                    truncated += 1
                    # the last observation of the episode, not the reset one
                    assert not np.array_equal(real_next_obs[idx], next_obs[idx])
    assert truncated >= 2
    assert logged and all(1 <= length <= max_steps for length in logged)


def test_other_autoreset_modes_are_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        envfactory.make_vec(overrides=["vector_wrappers=[{name: legacy_final_info}]"])
    msg = str(err.value)
    assert "legacy_final_info needs autoreset_mode=same_step" in msg
    assert "got autoreset_mode=next_step" in msg
    assert "add the override autoreset_mode=same_step" in msg
    ref = _reference(1, 5)
    ref.metadata = {"autoreset_mode": AutoresetMode.DISABLED}
    with pytest.raises(ConfigError, match="got autoreset_mode=disabled"):
        LegacyFinalInfo(ref)


def test_registered_as_a_vector_wrapper_with_no_options() -> None:
    assert "legacy_final_info" in envfactory.available()["vector_wrappers"]
    assert "legacy_final_info" not in envfactory.available()["wrappers"]
    with pytest.raises(ConfigError, match="legacy_final_info"):
        envfactory.make_vec(
            overrides=[
                "autoreset_mode=same_step",
                "vector_wrappers=[{name: legacy_final_info, keep: true}]",
            ]
        )


def test_unbatch_info_follows_the_masks_into_nested_dicts() -> None:
    batched = {
        "episode": {
            "r": np.array([0.0, 5.0]),
            "_r": np.array([False, True]),
        },
        "_episode": np.array([False, True]),
        "lives": np.array([3, 2]),
        "_lives": np.array([True, True]),
    }
    assert unbatch_info(batched, 0) == {"lives": 3}
    assert unbatch_info(batched, 1) == {"episode": {"r": 5.0}, "lives": 2}
