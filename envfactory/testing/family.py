"""The family conformance kit: one env of a family, as ``envfactory.make_env``
builds it ([`check_family`][envfactory.testing.family.check_family],
[`FamilyConformance`][envfactory.testing.family.FamilyConformance])."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np

from .. import _compat
from .rollouts import DEFAULT_IGNORE, assert_tree_equal

# --------------------------------------------------------------------------------------
# the family conformance kit (one env of a family, as ``envfactory.make_env`` builds it)
# --------------------------------------------------------------------------------------
#: A zero-argument factory of fresh single envs (e.g. ``lambda: envfactory.make_env(cfg)``).
MakeEnv = Callable[[], gym.Env]


@contextmanager
def _env_opened(make: MakeEnv) -> Iterator[gym.Env]:
    env = make()
    try:
        yield env
    finally:
        env.close()


def episode_stats_key_of(env: gym.Env, default: str | None = "episode") -> str | None:
    """The info key under which ``env`` reports episode statistics: that of envfactory's
    own ``EpisodeStatistics`` in its wrapper chain (the config's ``episode_stats_key``;
    None when turned off), else that of the outermost gymnasium
    ``RecordEpisodeStatistics``, else ``default``.

    Args:
        env: a single env.
        default: the key when neither wraps ``env``.
    """
    from ..episode_stats import EpisodeStatistics

    found: str | None = default
    recorded = False
    while True:
        if isinstance(env, EpisodeStatistics):
            return env.key
        if isinstance(env, gym.wrappers.RecordEpisodeStatistics) and not recorded:
            found, recorded = _compat.episode_statistics_key(env, default), True
        if not isinstance(env, gym.Wrapper):
            return found
        env = env.env


def _check_obs(space: gym.Space, obs: Any, where: str) -> None:
    if isinstance(space, gym.spaces.Box):
        assert isinstance(obs, np.ndarray), (
            f"{where}: observation must be a numpy array for a Box space, got {type(obs).__name__}"
        )
        assert obs.dtype == space.dtype, (
            f"{where}: observation dtype {obs.dtype} != observation_space dtype {space.dtype}"
        )
        assert obs.shape == space.shape, (
            f"{where}: observation shape {obs.shape} != observation_space shape {space.shape}"
        )
    assert space.contains(obs), f"{where}: observation is not in observation_space {space}"


def _env_rollout(env: gym.Env, seed: int, steps: int) -> list[Any]:
    """``reset(seed)`` then ``steps`` steps with actions sampled from the action space seeded
    with ``seed``, resetting (unseeded) after each episode end; everything returned."""
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    out: list[Any] = [("reset", copy.deepcopy(obs), copy.deepcopy(info))]
    for _ in range(steps):
        result = env.step(env.action_space.sample())
        out.append(("step", *copy.deepcopy(result)))
        if result[2] or result[3]:
            obs, info = env.reset()
            out.append(("reset", copy.deepcopy(obs), copy.deepcopy(info)))
    return out


def check_env_spaces(make: MakeEnv, *, steps: int = 50, seed: int = 0) -> None:
    """Every observation ``reset`` and ``step`` return lies in ``observation_space``, with its
    dtype and shape (Box spaces); rewards are real numbers, the flags bools, infos dicts;
    sampled actions are accepted.

    Args:
        make: returns a fresh single env.
        steps: steps to check (the env is reset after each episode end).
        seed: reset and action seed.
    """
    with _env_opened(make) as env:
        assert isinstance(env, gym.Env), f"{type(env).__name__} is not a gymnasium.Env"
        space = env.observation_space
        assert isinstance(env.action_space, gym.Space), "action_space must be a gymnasium Space"
        env.action_space.seed(seed)
        obs, info = env.reset(seed=seed)
        _check_obs(space, obs, "reset")
        assert isinstance(info, dict), f"reset: info must be a dict, got {type(info).__name__}"
        for t in range(steps):
            where = f"step {t}"
            action = env.action_space.sample()
            assert env.action_space.contains(action)
            result = env.step(action)
            assert isinstance(result, tuple) and len(result) == 5, (
                f"{where}: step() must return (obs, reward, terminated, truncated, info)"
            )
            obs, reward, terminated, truncated, info = result
            _check_obs(space, obs, where)
            assert isinstance(reward, (int, float, np.integer, np.floating)) and not isinstance(
                reward, (bool, np.bool_)
            ), f"{where}: reward must be a real number, got {type(reward).__name__} {reward!r}"
            assert np.isfinite(reward), f"{where}: reward {reward!r} is not finite"
            for name, flag in (("terminated", terminated), ("truncated", truncated)):
                assert isinstance(flag, (bool, np.bool_)), (
                    f"{where}: {name} must be a bool, got {type(flag).__name__}"
                )
            assert isinstance(info, dict), f"{where}: info must be a dict"
            if terminated or truncated:
                obs, _ = env.reset()
                _check_obs(space, obs, f"{where}: reset after the episode end")


def check_env_seeding(
    make: MakeEnv, *, steps: int = 50, seed: int = 0, seeds_differ: bool = True
) -> None:
    """Seeding determinism: two fresh envs reset with the same seed and given the same
    actions give bit-identical trajectories (observations, rewards, flags, infos but the
    episode wall-clock time); with ``seeds_differ``, another seed gives another trajectory.

    Args:
        make: returns a fresh single env.
        steps: trajectory length.
        seed: the seed.
        seeds_differ: check that ``seed`` and ``seed + 1`` give different trajectories
            (false for a family whose dynamics and start state use no randomness).
    """
    with _env_opened(make) as a, _env_opened(make) as b:
        stats_key = episode_stats_key_of(a)
        ignore = (*DEFAULT_IGNORE, f"{stats_key}.t") if stats_key else DEFAULT_IGNORE
        ta, tb = _env_rollout(a, seed, steps), _env_rollout(b, seed, steps)
        assert_tree_equal(ta, tb, ("same seed, fresh envs",), ignore)
        assert_tree_equal(_env_rollout(a, seed, steps), ta, ("same seed, same env",), ignore)
        if seeds_differ:
            other = _env_rollout(b, seed + 1, steps)
            try:
                assert_tree_equal(ta, other, (), ignore)
            except AssertionError:
                pass
            else:
                raise AssertionError(
                    f"seeds {seed} and {seed + 1} gave identical {steps}-step trajectories: the "
                    "env ignores its seed (pass seeds_differ=False if it uses no randomness)"
                )


def check_env_checker(make: MakeEnv) -> None:
    """gymnasium's own ``gymnasium.utils.env_checker.check_env`` on one env (render check
    skipped: families render only with ``render_mode`` set).

    Args:
        make: returns a fresh single env.
    """
    from gymnasium.utils.env_checker import check_env

    with _env_opened(make) as env, warnings.catch_warnings():
        # the env is checked as envfactory builds it, wrappers and all, on purpose
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version")
        check_env(env, skip_render_check=True)


def check_env_episode_stats(
    make: MakeEnv,
    *,
    max_steps: int = 1000,
    seed: int = 0,
    stats_key: str | None = None,
    strict: bool = True,
    exact_lengths: bool = True,
    returns_are_reward_sums: bool = True,
    min_episodes: int = 1,
) -> int:
    """Episode statistics (``info[stats_key] = {"r", "l", "t"}``, as gymnasium's
    ``RecordEpisodeStatistics``) appear only on a step that ends an episode, and at least
    ``min_episodes`` times within ``max_steps``.

    Args:
        make: returns a fresh single env.
        max_steps: steps to run (random actions; reset after each end).
        seed: reset and action seed.
        stats_key: the info key; None reads it from the env
            ([`episode_stats_key_of`][envfactory.testing.family.episode_stats_key_of]).
        strict: every episode end carries statistics (false: a family may end the
            learner's episode without them, e.g. Atari's lost lives with ``episodic_life``).
        exact_lengths: ``l`` equals the steps taken since the previous statistics (false:
            ``l >= `` them, for families that take steps inside ``reset``, e.g. FIRE).
        returns_are_reward_sums: ``r`` equals the sum of the rewards seen (false: the
            family reports the raw game score under clipped rewards, e.g. Atari).
        min_episodes: fail unless this many statistics were reported.

    Returns:
        The number of episode statistics reported.
    """
    with _env_opened(make) as env:
        key = stats_key or episode_stats_key_of(env)
        if key is None:  # the config turned envfactory's statistics off
            return 0
        env.action_space.seed(seed)
        _, info = env.reset(seed=seed)
        assert key not in info, f"reset: info has episode statistics {key!r}"
        count, length, total = 0, 0, 0.0
        for t in range(max_steps):
            where = f"step {t}"
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            length += 1
            total += float(reward)
            done = bool(terminated or truncated)
            if key in info:
                assert done, f"{where}: info[{key!r}] on a step that ended no episode"
                stats = info[key]
                for k in ("r", "l", "t"):
                    assert k in stats, f"{where}: info[{key!r}] has no {k!r}: {stats}"
                r, n = float(np.asarray(stats["r"])), int(np.asarray(stats["l"]))
                assert np.isfinite(r), f"{where}: info[{key!r}]['r'] = {r}"
                if exact_lengths:
                    assert n == length, (
                        f"{where}: info[{key!r}]['l'] = {n}, but {length} steps were taken"
                    )
                else:
                    assert n >= length, (
                        f"{where}: info[{key!r}]['l'] = {n} < the {length} steps taken"
                    )
                if returns_are_reward_sums:
                    assert np.isclose(r, total), (
                        f"{where}: info[{key!r}]['r'] = {r}, but the rewards sum to {total}"
                    )
                assert float(np.asarray(stats["t"])) >= 0.0
                count, length, total = count + 1, 0, 0.0
            elif done:
                assert not strict, (
                    f"{where}: the episode ended without info[{key!r}] statistics "
                    f"(info keys: {sorted(info)})"
                )
            if done:
                env.reset()
                if strict:
                    length, total = 0, 0.0
        assert count >= min_episodes, (
            f"only {count} episode statistics in {max_steps} steps; expected >= {min_episodes} "
            "(raise max_steps or make episodes shorter, e.g. max_episode_steps)"
        )
    return count


def check_env_close(make: MakeEnv) -> None:
    """``close()`` right after ``make()``, after a reset and a step, and twice, raises
    nothing.

    Args:
        make: returns a fresh single env.
    """
    make().close()
    env = make()
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()
    env.close()


def check_family(
    make: MakeEnv,
    *,
    steps: int = 50,
    seed: int = 0,
    seeds_differ: bool = True,
    env_checker: bool = True,
    stats_max_steps: int = 1000,
    strict_episode_stats: bool = True,
    exact_episode_lengths: bool = True,
    returns_are_reward_sums: bool = True,
) -> None:
    """Run the whole family kit against ``make`` (see
    [`FamilyConformance`][envfactory.testing.family.FamilyConformance]).

    Raises:
        AssertionError: naming the first rule broken.
    """
    check_env_spaces(make, steps=steps, seed=seed)
    check_env_seeding(make, steps=steps, seed=seed, seeds_differ=seeds_differ)
    if env_checker:
        check_env_checker(make)
    check_env_episode_stats(
        make,
        max_steps=stats_max_steps,
        seed=seed,
        strict=strict_episode_stats,
        exact_lengths=exact_episode_lengths,
        returns_are_reward_sums=returns_are_reward_sums,
    )
    check_env_close(make)


class FamilyConformance:
    """The family kit as pytest tests: subclass it under a ``Test*`` name and define a
    ``make_env`` fixture returning a zero-argument factory of fresh single envs:

        import pytest
        import envfactory
        from envfactory.testing import FamilyConformance

        class TestPendulum(FamilyConformance):
            @pytest.fixture
            def make_env(self):
                cfg = envfactory.compose(["env=pendulum", "env.max_episode_steps=50"])
                return lambda: envfactory.make_env(cfg)

    Class attributes tune the checks: ``steps``, ``seed``, ``seeds_differ``,
    ``env_checker``, ``stats_max_steps``, ``strict_episode_stats``,
    ``exact_episode_lengths``, ``returns_are_reward_sums`` (see
    [`check_family`][envfactory.testing.family.check_family]).
    """

    steps: int = 50
    seed: int = 0
    seeds_differ: bool = True
    env_checker: bool = True
    stats_max_steps: int = 1000
    strict_episode_stats: bool = True
    exact_episode_lengths: bool = True
    returns_are_reward_sums: bool = True

    def test_spaces(self, make_env: MakeEnv) -> None:
        """Observations in the space with its dtype and shape; reward and flag types."""
        check_env_spaces(make_env, steps=self.steps, seed=self.seed)

    def test_seeding(self, make_env: MakeEnv) -> None:
        """Same seed, same trajectory; different seeds differ."""
        check_env_seeding(
            make_env, steps=self.steps, seed=self.seed, seeds_differ=self.seeds_differ
        )

    def test_env_checker(self, make_env: MakeEnv) -> None:
        """gymnasium's ``check_env``."""
        if not self.env_checker:
            import pytest

            pytest.skip("env_checker = False")
        check_env_checker(make_env)

    def test_episode_stats(self, make_env: MakeEnv) -> None:
        """Episode statistics exactly at episode ends."""
        check_env_episode_stats(
            make_env,
            max_steps=self.stats_max_steps,
            seed=self.seed,
            strict=self.strict_episode_stats,
            exact_lengths=self.exact_episode_lengths,
            returns_are_reward_sums=self.returns_are_reward_sums,
        )

    def test_close(self, make_env: MakeEnv) -> None:
        """``close()`` works at any point and twice."""
        check_env_close(make_env)
