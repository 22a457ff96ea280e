"""Differential tests: the same config, seed and actions give bit-identical results.

1. ``dummy`` against gymnasium's own ``SyncVectorEnv`` built from the very same env
   constructors (``envfactory.factory.env_thunks``), in all three autoreset modes: obs,
   rewards, flags and infos (``final_obs``/``final_info``, episode statistics) over
   hundreds of steps with many episode ends (terminations and truncations).
2. ``subproc`` and ``subproc-atari`` against ``dummy``: every ``in_series`` split (uneven
   ones included), start method, autoreset mode and ``shared_memory`` setting over a short
   run (the full cross product), plus a few long runs.

Only ``infos["episode_stats"]["t"]`` (wall-clock seconds) is left out of the comparisons; its
``_t`` mask is compared.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import envfactory
from envfactory.factory import env_thunks
from envfactory.testing import Record, assert_rollouts_equal, rollout, sample_actions

MODES = ("next_step", "same_step", "disabled")
GYM_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,  # "NextStep"
    "same_step": AutoresetMode.SAME_STEP,  # "SameStep"
    "disabled": AutoresetMode.DISABLED,  # "Disabled"
}
SEED = 123

CARTPOLE = ("env=gym", "env.id=CartPole-v1")
MOUNTAINCAR = ("env=mountaincar", "env.max_episode_steps=30")  # truncations every 30 steps
MOUNTAINCAR_BOX = ("env=mountaincar", "env.id=MountainCarContinuous-v0", "env.max_episode_steps=30")
ATARI = ("env=atari", "env.id=ALE/Pong-v5", "env.max_episode_steps=15", "num_envs=3")


class RichEnv(gym.Env):
    """Nested Dict/Tuple observations of several dtypes (shared memory leaves), Box
    actions, and infos of every kind (python scalars, strings, arrays, nested dicts, keys
    present only on some steps): a stress test for batching and info merging. Episodes end
    by chance (seeded) or at 12 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-1, 1, (3,), np.float64),
                "k": spaces.Discrete(7),
                "t": spaces.Tuple((spaces.MultiBinary(4), spaces.Box(0, 255, (2, 2), np.uint8))),
            }
        )
        self.action_space = spaces.Box(-1, 1, (2,), np.float32)
        self.n = 0

    def _obs(self) -> dict[str, Any]:
        r = self.np_random
        return {
            "pos": r.uniform(-1, 1, 3),
            "k": np.int64(r.integers(7)),
            "t": (r.integers(0, 2, 4).astype(np.int8), r.integers(0, 255, (2, 2), np.uint8)),
        }

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.n = 0
        return self._obs(), {"start": True, "name": "x" * int(self.np_random.integers(1, 4))}

    def step(self, action: Any) -> Any:
        self.n += 1
        info: dict[str, Any] = {
            "arr": self.np_random.random(3),
            "nested": {"n": self.n, "a0": float(action[0])},
        }
        if self.n % 3 == 0:
            info["sometimes"] = "s"
        terminated = bool(self.np_random.random() < 0.1)
        return self._obs(), float(action.sum()), terminated, self.n >= 12, info


RICH_ID = "EnvfactoryTests/Rich-v0"
if RICH_ID not in gym.registry:
    gym.register(RICH_ID, entry_point=RichEnv)
RICH = ("env=gym", f"env.id={RICH_ID}")


def _compose(*overrides: str) -> Any:
    return envfactory.compose(list(overrides))


def _run(envs: Any, steps: int) -> list[Record]:
    try:
        actions = sample_actions(envs.single_action_space, envs.num_envs, steps, seed=SEED)
        return rollout(envs, steps=steps, seed=SEED, actions=actions)
    finally:
        envs.close()


@functools.cache
def dummy_rollout(env: tuple[str, ...], mode: str, steps: int) -> list[Record]:
    """The dummy reference of a config (cached: shared by many parametrizations)."""
    return _run(
        envfactory.make_vec(_compose(*env, "vectorizer=dummy", f"autoreset_mode={mode}")), steps
    )


def _ends(records: list[Record]) -> tuple[int, int]:
    steps = [r for r in records if r["call"] == "step"]
    return (
        int(sum(r["terminations"].sum() for r in steps)),
        int(sum(r["truncations"].sum() for r in steps)),
    )


def _has_final_obs(records: list[Record]) -> bool:
    return any("final_obs" in r["infos"] for r in records)


# --------------------------------------------------------------------------------------
# 1. dummy == gymnasium's SyncVectorEnv
# --------------------------------------------------------------------------------------
SYNC_CASES = {
    # name: (overrides, steps, min terminations, min truncations)
    "cartpole": ((*CARTPOLE, "num_envs=4"), 500, 40, 0),
    "mountaincar": ((*MOUNTAINCAR, "num_envs=3"), 300, 0, 25),
    "atari": (ATARI, 40, 0, 6),
    "rich": ((*RICH, "num_envs=5"), 150, 20, 20),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(SYNC_CASES))
def test_dummy_matches_gymnasium_sync_vector_env(case: str, mode: str) -> None:
    overrides, steps, min_terms, min_truncs = SYNC_CASES[case]
    cfg = _compose(*overrides, "vectorizer=dummy", f"autoreset_mode={mode}")
    ours = _run(envfactory.make_vec(cfg), steps)
    theirs = _run(SyncVectorEnv(env_thunks(cfg), autoreset_mode=GYM_MODES[mode]), steps)
    assert_rollouts_equal(ours, theirs)
    terms, truncs = _ends(ours)
    assert terms >= min_terms and truncs >= min_truncs, (terms, truncs)
    assert _has_final_obs(ours) == (mode == "same_step")
    assert any("episode_stats" in r["infos"] or "episode_stats" in r["infos"].get("final_info", {})
               for r in ours)  # fmt: skip
    if mode == "disabled":
        assert sum(r["call"] == "reset_mask" for r in ours) >= 2


# --------------------------------------------------------------------------------------
# 2. subproc / subproc-atari == dummy
# --------------------------------------------------------------------------------------
CROSS = list(itertools.product((1, 2, 3), ("fork", "forkserver", "spawn"), MODES, (True, False)))


@pytest.mark.parametrize(
    ("in_series", "context", "mode", "shm"),
    CROSS,
    ids=[f"in{i}-{c}-{m}-{'shm' if s else 'pipe'}" for i, c, m, s in CROSS],
)
def test_subproc_matches_dummy_cross_product(
    in_series: int, context: str, mode: str, shm: bool
) -> None:
    """5 envs: in_series 2 -> workers of (2, 2, 1), 3 -> (3, 2)."""
    env, steps = (*CARTPOLE, "num_envs=5"), 60
    envs = envfactory.make_vec(
        _compose(
            *env, "vectorizer=subproc", f"vectorizer.in_series={in_series}",
            f"vectorizer.context={context}", f"vectorizer.shared_memory={str(shm).lower()}",
            f"autoreset_mode={mode}",
        )
    )  # fmt: skip
    ours = _run(envs, steps)
    reference = dummy_rollout(env, mode, steps)
    assert_rollouts_equal(ours, reference)
    assert sum(_ends(reference)) >= 5


LONG = {
    # name: (env, vectorizer options, mode, steps)
    "cartpole-7envs-in3-fork-next": (
        (*CARTPOLE, "num_envs=7"), ("vectorizer.in_series=3", "vectorizer.context=fork"),
        "next_step", 500,
    ),
    "cartpole-7envs-in2-forkserver-same-pipe": (
        (*CARTPOLE, "num_envs=7"),
        ("vectorizer.in_series=2", "vectorizer.shared_memory=false"), "same_step", 500,
    ),
    "mountaincar-7envs-in2-forkserver-same": (
        (*MOUNTAINCAR, "num_envs=7"), ("vectorizer.in_series=2",), "same_step", 300,
    ),
    "mountaincar-5envs-in3-spawn-disabled-pipe": (
        (*MOUNTAINCAR, "num_envs=5"),
        ("vectorizer.in_series=3", "vectorizer.context=spawn", "vectorizer.shared_memory=false"),
        "disabled", 300,
    ),
    "mountaincar-box-actions-5envs-in2-next": (
        (*MOUNTAINCAR_BOX, "num_envs=5"), ("vectorizer.in_series=2",), "next_step", 200,
    ),
    "rich-5envs-in2-fork-same": (
        (*RICH, "num_envs=5"), ("vectorizer.in_series=2", "vectorizer.context=fork"),
        "same_step", 150,
    ),
    "rich-5envs-in3-forkserver-disabled-pipe": (
        (*RICH, "num_envs=5"),
        ("vectorizer.in_series=3", "vectorizer.shared_memory=false"), "disabled", 150,
    ),
    "rich-5envs-in2-spawn-next": (
        (*RICH, "num_envs=5"), ("vectorizer.in_series=2", "vectorizer.context=spawn"),
        "next_step", 150,
    ),
    "mountaincar-box-actions-5envs-in3-disabled": (
        (*MOUNTAINCAR_BOX, "num_envs=5"), ("vectorizer.in_series=3",), "disabled", 200,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(LONG))
def test_subproc_matches_dummy_long_runs(name: str) -> None:
    env, options, mode, steps = LONG[name]
    envs = envfactory.make_vec(
        _compose(*env, "vectorizer=subproc", *options, f"autoreset_mode={mode}")
    )
    ours = _run(envs, steps)
    reference = dummy_rollout(env, mode, steps)
    assert_rollouts_equal(ours, reference)
    assert sum(_ends(reference)) >= 20


ATARI_CASES = {
    # name: (vectorizer overrides, mode, extra env overrides)
    "subproc-atari-in1-fork-next": (
        ("vectorizer=subproc-atari", "vectorizer.in_series=1", "vectorizer.context=fork"),
        "next_step", (),
    ),
    "subproc-atari-in2-forkserver-same": (
        ("vectorizer=subproc-atari", "vectorizer.in_series=2"), "same_step", (),
    ),
    "subproc-atari-in2-spawn-disabled": (
        ("vectorizer=subproc-atari", "vectorizer.in_series=2", "vectorizer.context=spawn"),
        "disabled", (),
    ),
    "subproc-atari-default-split-next": (("vectorizer=subproc-atari",), "next_step", ()),
    # the parent's own envs write uint8 frames into the shared region too
    "subproc-atari-in-parent-same": (
        ("vectorizer=subproc-atari", "vectorizer.in_parent=1"), "same_step", (),
    ),
    "subproc-atari-chw-rgb-in2-fork-same": (
        ("vectorizer=subproc-atari", "vectorizer.in_series=2", "vectorizer.context=fork"),
        "same_step", ("env.layout=chw", "env.obs_type=rgb"),
    ),
    "subproc-pipe-in2-fork-same": (
        ("vectorizer=subproc", "vectorizer.in_series=2", "vectorizer.context=fork",
         "vectorizer.shared_memory=false"),
        "same_step", (),
    ),
}  # fmt: skip


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("name", list(ATARI_CASES))
def test_subproc_atari_matches_dummy(name: str) -> None:
    vectorizer, mode, extra = ATARI_CASES[name]
    env, steps = (*ATARI, *extra), 40
    envs = envfactory.make_vec(_compose(*env, *vectorizer, f"autoreset_mode={mode}"))
    assert envs.single_observation_space.dtype == np.uint8
    ours = _run(envs, steps)
    reference = dummy_rollout(env, mode, steps)
    assert_rollouts_equal(ours, reference)
    assert _ends(reference)[1] >= 6  # the 15-step time limit truncated episodes


@pytest.mark.parametrize(
    ("env", "space"),
    [
        (CARTPOLE, r"Box\(\[-4\.8 .*\(4,\), float32\)"),
        (MOUNTAINCAR, r"Box\(.*\(8,\), float32\)"),
        (("env=atari", "env.obs_type=ram", "env.num_stack=1"), None),
    ],
    ids=["cartpole", "mountaincar", "atari-ram"],
)
def test_subproc_atari_rejects_non_uint8_image_observations(
    env: tuple[str, ...], space: str | None
) -> None:
    before = {p.pid for p in _descendants()}
    cfg = _compose(*env, "vectorizer=subproc-atari", "num_envs=2", "vectorizer.in_series=1")
    if space is None:
        # RAM observations are uint8 Box vectors: subproc-atari takes them
        with envfactory.make_vec(cfg) as envs:
            assert envs.single_observation_space.dtype == np.uint8
            envs.reset(seed=0)
        return
    with pytest.raises(envfactory.ConfigError) as err:
        envfactory.make_vec(cfg)
    message = str(err.value)
    assert "vectorizer=subproc-atari needs uint8 Box (image) observations" in message
    assert "Use vectorizer=subproc instead" in message
    assert re.search(space, message), message
    leaked = [p for p in _descendants() if p.pid not in before]
    assert not leaked, f"processes left behind by the rejected build: {leaked}"


def _descendants() -> list[psutil.Process]:
    """Live or zombie descendants of this process, except multiprocessing's own helpers
    (the forkserver and the resource tracker, which outlive any one vectorized env)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            helper = p.ppid() == os.getpid() and any(
                "forkserver" in a or "resource_tracker" in a for a in p.cmdline()
            )
        except psutil.NoSuchProcess:
            continue
        if not helper:
            out.append(p)
    return out
