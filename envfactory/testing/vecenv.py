"""The vectorized-env conformance checks ([`check_vecenv`][envfactory.testing.vecenv.check_vecenv])
and [`VecEnvConformance`][envfactory.testing.vecenv.VecEnvConformance], the same checks as pytest
tests."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .rollouts import (
    MakeVecEnv,
    _check_step_types,
    _masks,
    _opened,
    _reset,
    _split,
    assert_infos_layout,
    assert_rollouts_equal,
    assert_tree_equal,
    autoreset_mode_of,
    rollout,
    sample_actions,
)


# --------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------
def check_interface(envs: VectorEnv) -> None:
    """``envs`` is a gymnasium ``VectorEnv`` with consistent spaces and an autoreset mode.

    Args:
        envs: an open vectorized env.
    """
    assert isinstance(envs, VectorEnv), f"{type(envs).__name__} is not a gymnasium.vector.VectorEnv"
    n = envs.num_envs
    assert isinstance(n, (int, np.integer)) and n >= 1, f"num_envs must be an int >= 1: {n!r}"
    for kind in ("observation", "action"):
        single = getattr(envs, f"single_{kind}_space")
        batched = getattr(envs, f"{kind}_space")
        assert isinstance(single, gym.Space), f"single_{kind}_space is not a gymnasium Space"
        assert batched == batch_space(single, n), (
            f"{kind}_space {batched} != batch_space(single_{kind}_space, {n}) "
            f"{batch_space(single, n)}"
        )
    assert isinstance(envs.metadata, dict), "metadata must be a dict"
    assert "autoreset_mode" in envs.metadata, 'metadata["autoreset_mode"] is missing'
    mode = envs.metadata["autoreset_mode"]
    assert isinstance(mode, AutoresetMode), (
        f'metadata["autoreset_mode"] must be a gymnasium AutoresetMode, got {mode!r}'
    )


def check_reset_seeding(make: MakeVecEnv, *, seed: int = 0, seed_offsets: bool = True) -> None:
    """``reset(seed=int)`` and ``reset(seed=list)`` are reproducible (same instance and a
    fresh one), observations lie in the observation space, a seed list of the wrong
    length raises ``ValueError``, and (``seed_offsets``) ``seed=s`` equals
    ``seed=[s, s+1, ...]``.

    Args:
        make: returns a fresh vectorized env.
        seed: the seed to use.
        seed_offsets: check gymnasium's ``seed + i`` convention (False for
            ``seeding=spawn``).
    """
    with _opened(make) as envs:
        n = envs.num_envs
        obs1, infos1 = envs.reset(seed=seed)
        assert envs.observation_space.contains(obs1), (
            f"reset observations are not in observation_space {envs.observation_space}"
        )
        assert_infos_layout(infos1, n, "reset infos")
        obs2, infos2 = envs.reset(seed=seed)
        assert_tree_equal(obs1, obs2, ("reset(seed=int) twice: obs",))
        assert_tree_equal(infos1, infos2, ("reset(seed=int) twice: infos",))
        seeds = [seed + 1000 + 7 * i for i in range(n)]
        obs3, _ = _reset(envs, seed=seeds)
        assert envs.observation_space.contains(obs3), "reset(seed=list) obs not in space"
        obs4, _ = _reset(envs, seed=list(seeds))
        assert_tree_equal(obs3, obs4, ("reset(seed=list) twice: obs",))
        if seed_offsets:
            obs5, infos5 = _reset(envs, seed=[seed + i for i in range(n)])
            assert_tree_equal(obs1, obs5, ("reset(seed=s) vs reset(seed=[s, s+1, ...])",))
            assert_tree_equal(infos1, infos5, ("reset(seed=s) vs seed list: infos",))
        try:
            _reset(envs, seed=[seed] * (n + 1))
        except ValueError:
            pass
        else:
            raise AssertionError(f"reset(seed=<list of {n + 1}>) with num_envs={n} must raise")
    with _opened(make) as fresh:
        obs6, _ = fresh.reset(seed=seed)
        assert_tree_equal(obs1, obs6, ("reset(seed=int) on a fresh instance: obs",))


def check_rollout(
    make: MakeVecEnv,
    *,
    steps: int = 200,
    seed: int = 0,
    strict_episode_stats: bool = True,
    min_episodes: int = 0,
    reproducible: bool = True,
    stats_key: str = "episode_stats",
) -> int:
    """Step ``steps`` times with sampled actions and check every step's types, the info
    layout, episode statistics and the autoreset mode's semantics; then (``reproducible``)
    that a fresh instance with the same seed and actions gives a bit-identical rollout.

    Autoreset rules checked: ``next_step``: the step after an episode ends is a reset
    (reward 0, flags False); ``same_step``: ``final_obs``/``final_info`` are set exactly
    for the envs that ended, ``final_obs`` lies in the single observation space;
    ``disabled``: the loop resets finished envs with ``reset_mask`` and the other envs'
    observations stay untouched.

    Args:
        make: returns a fresh vectorized env.
        steps: steps to run.
        seed: reset and action seed.
        strict_episode_stats: every finished episode carries ``stats_key`` statistics whose
            length ``l`` matches the steps counted here (False: only check that
            statistics never appear for an env that did not just finish, e.g. for
            Atari's episodic life, where stats come at game over only).
        min_episodes: fail unless at least this many episodes ended.
        reproducible: compare against a second fresh instance.
        stats_key: the info key of the episode statistics (envfactory's
            ``episode_stats_key``; ``"episode"`` for gymnasium's RecordEpisodeStatistics).

    Returns:
        The number of episodes that ended.
    """
    with _opened(make) as envs:
        n = envs.num_envs
        mode = autoreset_mode_of(envs)
        actions = sample_actions(envs.single_action_space, n, steps, seed)
        envs.reset(seed=seed)
        prev_done = np.zeros(n, dtype=np.bool_)
        ep_len = np.zeros(n, dtype=np.int64)
        episodes = 0
        for t in range(steps):
            where = f"step {t}"
            result = envs.step(actions[t])
            _check_step_types(envs, result, where)
            obs, rew, term, trunc, infos = result
            done = term | trunc
            if mode is AutoresetMode.NEXT_STEP:
                auto = prev_done
                assert not (rew[auto] != 0).any(), (
                    f"{where}: next_step autoreset step must have reward 0 for envs "
                    f"{np.flatnonzero(auto).tolist()}, got {rew[auto]}"
                )
                assert not done[auto].any(), (
                    f"{where}: next_step autoreset step must not terminate/truncate envs "
                    f"{np.flatnonzero(auto & done).tolist()}"
                )
                ep_len[auto] = 0
                ep_len[~auto] += 1
            else:
                ep_len += 1
            if mode is AutoresetMode.SAME_STEP:
                for key in ("final_obs", "final_info"):
                    mask = infos.get(f"_{key}", np.zeros(n, dtype=np.bool_))
                    assert np.array_equal(mask, done), (
                        f"{where}: same_step infos['_{key}'] {mask} must equal "
                        f"terminations|truncations {done}"
                    )
                for i in np.flatnonzero(done):
                    final = infos["final_obs"][i]
                    assert envs.single_observation_space.contains(final), (
                        f"{where}: infos['final_obs'][{i}] is not in single_observation_space"
                    )
                stats_root = infos.get("final_info", {})
            else:
                assert "final_obs" not in infos, (
                    f"{where}: 'final_obs' in infos outside same_step mode ({mode})"
                )
                stats_root = infos
            stats_mask = stats_root.get(f"_{stats_key}", np.zeros(n, dtype=np.bool_))
            stray = stats_mask & ~done
            assert not stray.any(), (
                f"{where}: episode statistics for envs {np.flatnonzero(stray).tolist()} "
                "that did not finish an episode"
            )
            if strict_episode_stats and done.any():
                assert np.array_equal(stats_mask, done), (
                    f"{where}: envs {np.flatnonzero(done & ~stats_mask).tolist()} finished "
                    f"an episode without infos[{stats_key!r}] statistics (mask "
                    f"'_{stats_key}'={stats_mask})"
                )
                stats = stats_root[stats_key]
                for key in ("r", "l", "t"):
                    assert key in stats, f"{where}: infos[{stats_key!r}] has no {key!r}"
                returns = np.asarray(stats["r"], dtype=np.float64)[done]
                assert np.isfinite(returns).all(), f"{where}: episode returns {returns}"
                lengths = np.asarray(stats["l"])[done]
                assert np.array_equal(lengths, ep_len[done]), (
                    f"{where}: infos[{stats_key!r}]['l'] {lengths} != steps counted since reset "
                    f"{ep_len[done]} for envs {np.flatnonzero(done).tolist()}"
                )
            episodes += int(done.sum())
            if mode is AutoresetMode.SAME_STEP:
                ep_len[done] = 0
            if mode is AutoresetMode.DISABLED and done.any():
                before = _split(envs, obs)
                mask = done.copy()
                obs, rinfos = envs.reset(options={"reset_mask": mask})
                assert envs.observation_space.contains(obs), (
                    f"{where}: observations after reset_mask not in observation_space"
                )
                assert_infos_layout(rinfos, n, f"{where}: reset_mask infos")
                for key, m in _masks(rinfos):
                    assert not (m & ~mask).any(), (
                        f"{where}: reset_mask infos mask {key!r}={m} set for envs not reset"
                    )
                after = _split(envs, obs)
                for i in np.flatnonzero(~mask):
                    assert_tree_equal(after[i], before[i], (f"{where}: obs of unmasked env {i}",))
                ep_len[mask] = 0
            prev_done = done
        assert episodes >= min_episodes, (
            f"only {episodes} episodes ended in {steps} steps; expected >= {min_episodes}"
        )
    if reproducible:
        with _opened(make) as a, _opened(make) as b:
            ra = rollout(a, steps=min(steps, 100), seed=seed, actions=actions)
            rb = rollout(b, steps=min(steps, 100), seed=seed, actions=actions)
        assert_rollouts_equal(ra, rb)
    return episodes


def check_reset_mask(make: MakeVecEnv, *, seed: int = 0, warmup: int = 3) -> None:
    """``reset(options={"reset_mask": m})`` resets exactly the masked envs: the others keep
    their observation bit for bit, the masked ones get what a full reset with the same
    seeds gives, and every info mask is False for unmasked envs.

    Args:
        make: returns a fresh vectorized env.
        seed: the seed.
        warmup: steps taken before the masked reset (finished envs are handled per the
            autoreset mode).
    """
    with _opened(make) as envs:
        n = envs.num_envs
        disabled = autoreset_mode_of(envs) is AutoresetMode.DISABLED
        obs, _ = envs.reset(seed=seed)
        for a in sample_actions(envs.single_action_space, n, warmup, seed):
            obs, _, term, trunc, _ = envs.step(a)
            done = term | trunc
            if disabled and done.any():
                obs, _ = envs.reset(options={"reset_mask": done})
        before = _split(envs, obs)
        mask = np.arange(n) % 2 == 0
        seeds = [seed + 500 + i for i in range(n)]
        obs, infos = _reset(envs, seed=seeds, options={"reset_mask": mask.copy()})
        assert envs.observation_space.contains(obs), "obs after reset_mask not in space"
        assert_infos_layout(infos, n, "reset_mask infos")
        for key, m in _masks(infos):
            assert not (m & ~mask).any(), (
                f"reset_mask infos mask {key!r}={m} is set for envs that were not reset "
                f"(reset_mask={mask})"
            )
        after = _split(envs, obs)
        for i in np.flatnonzero(~mask):
            assert_tree_equal(after[i], before[i], (f"reset_mask: obs of unmasked env {i}",))
        full, _ = _reset(envs, seed=seeds)
        full_obs = _split(envs, full)
        for i in np.flatnonzero(mask):
            assert_tree_equal(
                after[i], full_obs[i], (f"reset_mask: obs of masked env {i} vs full reset",)
            )
        # the masked reset leaves every env steppable
        envs.step(sample_actions(envs.single_action_space, n, 1, seed + 1)[0])


def check_close(make: MakeVecEnv) -> None:
    """``close()`` twice is fine, ``closed`` becomes True, and (when the env is a context
    manager) leaving the ``with`` block closes it.

    Args:
        make: returns a fresh vectorized env.
    """
    envs = make()
    envs.reset(seed=0)
    envs.close()
    assert envs.closed, "closed must be True after close()"
    envs.close()
    assert envs.closed
    envs = make()
    if hasattr(envs, "__enter__"):
        with cast(Any, envs) as inside:
            assert inside is envs, "__enter__ must return the vectorized env itself"
            inside.reset(seed=0)
        assert envs.closed, "leaving the with block must close the vectorized env"
    envs.close()


def check_restarts(make: MakeVecEnv, *, steps: int = 200, seed: int = 0) -> int:
    """For a vectorized env whose workers fail now and then and are rebuilt (``subproc``
    with ``restart=true`` over an env that dies, hangs or raises from time to time): every
    rule of [`check_rollout`][envfactory.testing.vecenv.check_rollout] still holds in its autoreset
    mode (a lost episode ends ``truncated``; only its episode statistics may be missing), and so
    does [`check_reset_mask`][envfactory.testing.vecenv.check_reset_mask].

    Args:
        make: returns a fresh vectorized env whose workers fail during ``steps``.
        steps: length of the checked rollout.
        seed: reset and action seed.

    Returns:
        The number of restarts seen (each warns ``RuntimeWarning("restarting after: ...")``);
        at least one, or the check tested nothing.
    """

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_rollout(make, steps=steps, seed=seed, strict_episode_stats=False, reproducible=False)
        check_reset_mask(make, seed=seed)
    restarts = sum("restarting after" in str(w.message) for w in seen)
    assert restarts >= 1, f"no worker was restarted in {steps} steps: nothing was checked"
    return restarts


def _expect(
    exc: type[BaseException] | tuple[type[BaseException], ...], what: str, fn: Callable[[], Any]
) -> BaseException:
    try:
        fn()
    except exc as err:
        return err
    except Exception as err:
        raise AssertionError(f"{what} must raise {exc}, got {type(err).__name__}: {err}") from err
    raise AssertionError(f"{what} must raise {exc}, but nothing was raised")


def check_errors(make: MakeVecEnv, *, seed: int = 0) -> None:
    """Errors are gymnasium's classes (envfactory's own classes may subclass them), and a
    mistake the caller can see leaves the env usable:

    * ``step()`` before ``reset()``: ``gymnasium.error.ResetNeeded``;
    * out-of-order async halves (when the env has them): ``NoAsyncCallError`` /
      ``AlreadyPendingCallError``;
    * a batch of ``num_envs + 1`` actions: ``TypeError``; an out-of-range ``Discrete``
      action: ``ValueError``; a negative seed: ``ValueError``; a float seed: ``TypeError``;
      each followed by a normal step;
    * any call after ``close()``: ``ClosedEnvironmentError``.

    Args:
        make: returns a fresh vectorized env.
        seed: the seed.
    """
    from gymnasium import error as gym_error

    with _opened(make) as envs:
        n = envs.num_envs
        space = envs.single_action_space
        acts = sample_actions(space, n, 3, seed)
        _expect(gym_error.ResetNeeded, "step() before reset()", lambda: envs.step(acts[0]))
        _expect(ValueError, "reset(seed=-1)", lambda: _reset(envs, seed=-1))
        _expect(TypeError, "reset(seed=1.5)", lambda: _reset(envs, seed=1.5))
        envs.reset(seed=seed)
        if hasattr(envs, "step_async"):
            e = cast(Any, envs)
            _expect(gym_error.NoAsyncCallError, "step_wait() with nothing pending", e.step_wait)
            _expect(gym_error.NoAsyncCallError, "reset_wait() with nothing pending", e.reset_wait)
            e.step_async(acts[0])
            _expect(gym_error.AlreadyPendingCallError, "step_async() while a step is pending",
                    lambda: e.step_async(acts[0]))  # fmt: skip
            _expect(gym_error.AlreadyPendingCallError, "reset_async() while a step is pending",
                    e.reset_async)  # fmt: skip
            _expect(gym_error.NoAsyncCallError, "reset_wait() while a step is pending",
                    e.reset_wait)  # fmt: skip
            e.step_wait()
        else:
            envs.step(acts[0])
        too_many = sample_actions(space, n + 1, 1, seed)[0]
        _expect(TypeError, f"step() with {n + 1} actions for num_envs={n}",
                lambda: envs.step(too_many))  # fmt: skip
        if isinstance(space, gym.spaces.Discrete):
            bad = np.full(n, space.start, dtype=np.int64)
            bad[-1] = space.start + space.n
            _expect(ValueError, f"step() with action {bad[-1]} for {space}",
                    lambda: envs.step(bad))  # fmt: skip
        envs.step(acts[1])  # every mistake above left the env usable
    envs = make()
    envs.reset(seed=seed)
    envs.close()
    closed = gym_error.ClosedEnvironmentError
    _expect(closed, "step() after close()", lambda: envs.step(acts[0]))
    _expect(closed, "reset() after close()", lambda: envs.reset(seed=seed))


def _space_of(env: gym.Env) -> gym.Space:
    return env.observation_space


def _args_of(env: gym.Env, first: Any, *rest: Any, **kwargs: Any) -> tuple[Any, ...]:
    return isinstance(env, gym.Env), first, rest, dict(sorted(kwargs.items()))


def _seed_of(env: gym.Env) -> Any:
    return env.np_random_seed


def check_call(make: MakeVecEnv, *, seed: int = 0, seed_offsets: bool = True) -> None:
    """``envs.call(fn, *args, **kwargs)`` runs ``fn(env, *args, **kwargs)`` next to each env
    (in its worker, actor or process) and returns one result per env, in env order; the env
    stays usable. The functions are module-level, so they pickle by reference.

    Args:
        make: returns a fresh vectorized env.
        seed: the reset seed.
        seed_offsets: also check that ``fn`` sees env *i* reset with ``seed + i`` (which
            env ``fn`` ran next to); False for ``seeding=spawn``.
    """
    with _opened(make) as envs:
        n = envs.num_envs
        envs.reset(seed=seed)
        call = cast(Any, envs).call
        spaces = call(_space_of)
        assert len(spaces) == n, f"call(fn) returned {len(spaces)} results for num_envs={n}"
        for i, space in enumerate(spaces):
            assert space == envs.single_observation_space, (
                f"call(fn) env {i}: fn(env) saw observation_space {space}, expected "
                f"{envs.single_observation_space}"
            )
        got = list(call(_args_of, 3, "x", scale=2, shift=None))
        want = [(True, 3, ("x",), {"scale": 2, "shift": None})] * n
        assert got == want, f"call(fn, 3, 'x', scale=2, shift=None) returned {got}, expected {want}"
        if seed_offsets:
            seeds = [int(s) for s in call(_seed_of)]
            assert seeds == [seed + i for i in range(n)], (
                f"call(fn) after reset(seed={seed}): fn saw seeds {seeds}, expected seed + i "
                "(one result per env, in env order)"
            )
        envs.step(sample_actions(envs.single_action_space, n, 1, seed)[0])


def check_vecenv(
    make: MakeVecEnv,
    *,
    steps: int = 200,
    seed: int = 0,
    seed_offsets: bool = True,
    strict_episode_stats: bool = True,
    min_episodes: int = 0,
    error_classes: bool = True,
    call_fn: bool = True,
) -> None:
    """Run the whole conformance suite against ``make``.

    Args:
        make: a zero-argument callable returning a fresh, unreset vectorized env; called
            several times, and every env it returns is closed.
        steps: length of the checked rollout.
        seed: seed of resets and sampled actions.
        seed_offsets: check that ``seed=s`` gives env *i* seed ``s + i``.
        strict_episode_stats: see [`check_rollout`][envfactory.testing.vecenv.check_rollout].
        min_episodes: see [`check_rollout`][envfactory.testing.vecenv.check_rollout].
        error_classes: run [`check_errors`][envfactory.testing.vecenv.check_errors] (gymnasium's
            ``SyncVectorEnv`` neither checks actions nor refuses calls after ``close()``).
        call_fn: run [`check_call`][envfactory.testing.vecenv.check_call] (``envs.call(fn)``,
            envfactory's VecEnvBase promise; gymnasium's own vector envs take only attribute names,
            and a vectorizer whose envs are not Python objects has no env to pass to ``fn``).

    Raises:
        AssertionError: naming the first rule broken.
    """
    with _opened(make) as envs:
        check_interface(envs)
    check_reset_seeding(make, seed=seed, seed_offsets=seed_offsets)
    check_rollout(
        make,
        steps=steps,
        seed=seed,
        strict_episode_stats=strict_episode_stats,
        min_episodes=min_episodes,
    )
    check_reset_mask(make, seed=seed)
    check_close(make)
    if error_classes:
        check_errors(make, seed=seed)
    if call_fn:
        check_call(make, seed=seed, seed_offsets=seed_offsets)


class VecEnvConformance:
    """The conformance suite as pytest tests: subclass it under a ``Test*`` name and
    define a ``make_vecenv`` fixture returning a zero-argument factory of fresh vectorized
    envs (parametrize the fixture to cover several configs).

    Class attributes tune the checks: ``steps``, ``seed``, ``seed_offsets``,
    ``strict_episode_stats``, ``min_episodes``, ``error_classes``, ``call_fn`` (see
    [`check_vecenv`][envfactory.testing.vecenv.check_vecenv]).
    """

    steps: int = 200
    seed: int = 0
    seed_offsets: bool = True
    strict_episode_stats: bool = True
    min_episodes: int = 0
    error_classes: bool = True
    call_fn: bool = True

    def test_interface(self, make_vecenv: MakeVecEnv) -> None:
        """VectorEnv subclass, batched spaces, ``metadata["autoreset_mode"]``."""
        with _opened(make_vecenv) as envs:
            check_interface(envs)

    def test_reset_seeding(self, make_vecenv: MakeVecEnv) -> None:
        """``reset(seed=int|list)`` reproducible, ``seed + i`` convention."""
        check_reset_seeding(make_vecenv, seed=self.seed, seed_offsets=self.seed_offsets)

    def test_rollout(self, make_vecenv: MakeVecEnv) -> None:
        """Step types, info layout, episode statistics, autoreset semantics,
        reproducibility."""
        check_rollout(
            make_vecenv,
            steps=self.steps,
            seed=self.seed,
            strict_episode_stats=self.strict_episode_stats,
            min_episodes=self.min_episodes,
        )

    def test_reset_mask(self, make_vecenv: MakeVecEnv) -> None:
        """``reset_mask`` resets only the masked envs."""
        check_reset_mask(make_vecenv, seed=self.seed)

    def test_close(self, make_vecenv: MakeVecEnv) -> None:
        """``close()`` is idempotent; the context manager closes."""
        check_close(make_vecenv)

    def test_error_classes(self, make_vecenv: MakeVecEnv) -> None:
        """gymnasium's error classes; mistakes leave the env usable."""
        if self.error_classes:
            check_errors(make_vecenv, seed=self.seed)

    def test_call(self, make_vecenv: MakeVecEnv) -> None:
        """``call(fn, *args, **kwargs)`` runs ``fn(env, ...)`` next to each env."""
        if not self.call_fn:
            import pytest

            pytest.skip("call_fn = False")
        check_call(make_vecenv, seed=self.seed, seed_offsets=self.seed_offsets)
