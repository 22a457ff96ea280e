"""Observations of every space gymnasium ships, checked against ``SyncVectorEnv``:
[`check_space`][envfactory.testing.spaces.check_space],
[`check_spaces`][envfactory.testing.spaces.check_spaces] and
[`SpacesConformance`][envfactory.testing.spaces.SpacesConformance]."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy as _deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from .rollouts import (
    Record,
    _reset,
    assert_rollouts_equal,
    assert_tree_equal,
    rollout,
    sample_actions,
)


# --------------------------------------------------------------------------------------
# every space gymnasium ships
# --------------------------------------------------------------------------------------
def gymnasium_spaces() -> dict[str, gym.Space]:
    """One observation space of every kind gymnasium ships, plus nestings of them.

    Returns:
        ``{name: space}``: Box, Discrete, MultiDiscrete, MultiBinary, Text, Graph (with
        and without an edge space), Sequence (``stack=False`` and ``stack=True``),
        OneOf, Dict, Tuple, and a Dict/Tuple nesting that mixes array and non-array
        leaves.
    """
    S = gym.spaces
    box = S.Box(-1.0, 1.0, (2, 3), np.float32)
    graph = S.Graph(node_space=S.Box(-1.0, 1.0, (3,), np.float32), edge_space=S.Discrete(3))
    return {
        "box": box,
        "discrete": S.Discrete(5, start=-2),
        "multidiscrete": S.MultiDiscrete([3, 4]),
        "multibinary": S.MultiBinary(4),
        "text": S.Text(6),
        "graph": graph,
        "graph_no_edges": S.Graph(node_space=S.Discrete(4), edge_space=None),
        "sequence": S.Sequence(S.Box(-1.0, 1.0, (2,), np.float32), stack=False),
        "sequence_stacked": S.Sequence(S.Discrete(3), stack=True),
        "oneof": S.OneOf([S.Discrete(3), S.Box(-1.0, 1.0, (2,), np.float32)]),
        "dict": S.Dict({"pos": box, "k": S.Discrete(7), "bits": S.MultiBinary(3)}),
        "tuple": S.Tuple((S.Discrete(2), S.Box(0, 255, (2, 2), np.uint8))),
        "nested": S.Dict(
            {
                "img": S.Box(0, 255, (2, 2), np.uint8),
                "t": S.Tuple((S.Text(4), S.MultiDiscrete([2, 2]))),
                "g": graph,
                "seq": S.Sequence(S.Discrete(4), stack=False),
            }
        ),
    }


class SpaceEnv(gym.Env):
    """An env whose observations are seeded samples of ``observation_space`` (any space),
    for checking how a vectorizer batches, copies and ships observations.

    Episodes terminate by chance (seeded) and are truncated after ``max_steps``; the
    reward is the action; infos carry the step count. Picklable (module level), so it can
    be sent to worker processes.

    Args:
        observation_space: the space to sample observations from.
        max_steps: truncate after this many steps.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, observation_space: gym.Space, max_steps: int = 5) -> None:
        self.observation_space = _deepcopy(observation_space)  # its own sampling generator
        self.action_space = gym.spaces.Discrete(3)
        self.max_steps = max_steps
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self.observation_space.sample(), {"t": 0}

    def step(self, action: Any) -> Any:
        self.t += 1
        terminated = bool(self.np_random.random() < 0.2)
        return (
            self.observation_space.sample(),
            float(action),
            terminated,
            self.t >= self.max_steps,
            {"t": self.t},
        )


#: Builds a vectorized env from env constructors: ``build(env_fns, autoreset_mode=...,
#: copy=...)``, the signature of a vectorizer plugin's ``build`` (bind other options with
#: ``functools.partial``).
BuildVecEnv = Callable[..., VectorEnv]


def check_space(
    build: BuildVecEnv,
    space: gym.Space,
    *,
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
    copy: bool = True,
    num_envs: int = 3,
    steps: int = 12,
    seed: int = 0,
) -> None:
    """``build`` handles observations of ``space`` exactly as gymnasium's
    ``SyncVectorEnv`` does: the same observations (types included: tuples, strings,
    ``GraphInstance``), rewards, flags and infos over a rollout with resets, and the
    batched observation lies in ``observation_space``. With ``copy=True`` the returned
    observations are never overwritten by later calls.

    Args:
        build: ``build(env_fns, autoreset_mode=..., copy=...)`` returning a vectorized env.
        space: the single observation space.
        autoreset_mode: the autoreset mode to build with.
        copy: the ``copy`` option to build with.
        num_envs: how many envs.
        steps: how many steps.
        seed: reset and action seed.
    """
    import functools

    fns = [functools.partial(SpaceEnv, space) for _ in range(num_envs)]
    where = f"{space} ({autoreset_mode.value}, copy={copy})"
    actions = sample_actions(gym.spaces.Discrete(3), num_envs, steps, seed)
    ref = gym.vector.SyncVectorEnv(fns, copy=True, autoreset_mode=autoreset_mode)
    try:
        expected = rollout(ref, steps=steps, seed=seed, actions=actions)
    finally:
        ref.close()
    envs = build(fns, autoreset_mode=autoreset_mode, copy=copy)
    try:
        assert envs.single_observation_space == space, (
            f"{where}: single_observation_space is {envs.single_observation_space}"
        )
        kept: list[tuple[Any, Any]] = []  # (as returned, deep copy at the time)
        disabled = autoreset_mode is AutoresetMode.DISABLED
        obs, infos = _reset(envs, seed=seed)
        records: list[Record] = [{"call": "reset", "obs": _deepcopy(obs), "infos": infos}]
        kept.append((obs, _deepcopy(obs)))
        for t in range(steps):
            obs, rew, term, trunc, infos = envs.step(actions[t])
            assert envs.observation_space.contains(obs), (
                f"{where}: step {t} observations are not in observation_space"
            )
            records.append(
                {
                    "call": "step",
                    "obs": _deepcopy(obs),
                    "rewards": np.array(rew, copy=True),
                    "terminations": np.array(term, copy=True),
                    "truncations": np.array(trunc, copy=True),
                    "infos": infos,
                }
            )
            kept.append((obs, _deepcopy(obs)))
            done = np.logical_or(term, trunc)
            if disabled and done.any():
                obs, infos = envs.reset(options={"reset_mask": done.copy()})
                records.append(
                    {"call": "reset_mask", "mask": done, "obs": _deepcopy(obs),
                     "infos": infos}
                )  # fmt: skip
                kept.append((obs, _deepcopy(obs)))
        try:
            assert_rollouts_equal(records, expected)
        except AssertionError as exc:
            raise AssertionError(
                f"{where}: differs from gymnasium's SyncVectorEnv: {exc}"
            ) from None
        if copy:
            for k, (returned, snapshot) in enumerate(kept):
                try:
                    assert_tree_equal(returned, snapshot, (f"observation {k}",))
                except AssertionError as exc:
                    raise AssertionError(
                        f"{where}: copy=True, but an observation returned earlier was changed "
                        f"by a later call: {exc}"
                    ) from None
    finally:
        envs.close()


def check_spaces(
    build: BuildVecEnv,
    *,
    spaces: Mapping[str, gym.Space] | None = None,
    modes: Iterable[AutoresetMode] = tuple(AutoresetMode),
    copies: Iterable[bool] = (True, False),
    num_envs: int = 3,
    steps: int = 12,
    seed: int = 0,
) -> None:
    """[`check_space`][envfactory.testing.spaces.check_space] for every space of
    [`gymnasium_spaces`][envfactory.testing.spaces.gymnasium_spaces] (or ``spaces``), every
    autoreset mode and both ``copy`` settings.

    Args:
        build: ``build(env_fns, autoreset_mode=..., copy=...)`` returning a vectorized env.
        spaces: ``{name: space}`` to check (default: every space gymnasium ships).
        modes: autoreset modes to check.
        copies: ``copy`` settings to check.
        num_envs: how many envs.
        steps: how many steps per rollout.
        seed: reset and action seed.
    """
    spaces = gymnasium_spaces() if spaces is None else spaces
    for mode in tuple(modes):
        for copy_ in tuple(copies):
            for name, space in spaces.items():
                try:
                    check_space(build, space, autoreset_mode=mode, copy=copy_,
                                num_envs=num_envs, steps=steps, seed=seed)  # fmt: skip
                except Exception as exc:
                    raise AssertionError(f"space {name!r}: {type(exc).__name__}: {exc}") from exc


class SpacesConformance:
    """[`check_spaces`][envfactory.testing.spaces.check_spaces] as pytest tests (one per autoreset
    mode): subclass it under a ``Test*`` name and override
    [`build_vecenv`][envfactory.testing.spaces.SpacesConformance.build_vecenv]:

        from envfactory.testing import SpacesConformance

        class TestMyVectorizerSpaces(SpacesConformance):
            def build_vecenv(self, env_fns, **options):
                return my_build(env_fns, **options)  # options: autoreset_mode, copy

    Class attributes narrow the matrix: ``spaces`` (``{name: space}``, default every
    space gymnasium ships), ``copies`` (``copy`` settings), ``num_envs``, ``steps``.
    """

    spaces: Mapping[str, gym.Space] | None = None
    copies: tuple[bool, ...] = (True, False)
    num_envs: int = 3
    steps: int = 8

    def build_vecenv(self, env_fns: Sequence[Callable[[], gym.Env]], **options: Any) -> VectorEnv:
        """Build the vectorized env under test from ``env_fns`` with ``options``
        (``autoreset_mode``: a gymnasium ``AutoresetMode``; ``copy``: bool)."""
        raise NotImplementedError("override build_vecenv(env_fns, **options)")

    def _check(self, mode: AutoresetMode) -> None:
        check_spaces(
            self.build_vecenv,
            spaces=self.spaces,
            modes=(mode,),
            copies=self.copies,
            num_envs=self.num_envs,
            steps=self.steps,
        )

    def test_spaces_next_step(self) -> None:
        """Every space, ``next_step`` autoreset, as SyncVectorEnv."""
        self._check(AutoresetMode.NEXT_STEP)

    def test_spaces_same_step(self) -> None:
        """Every space, ``same_step`` autoreset (``final_obs`` of every space type)."""
        self._check(AutoresetMode.SAME_STEP)

    def test_spaces_disabled(self) -> None:
        """Every space, ``disabled`` autoreset with ``reset_mask``."""
        self._check(AutoresetMode.DISABLED)
