"""A conformance suite for vectorized environments, for built-in and third-party
vectorizers and env families alike.

Two ways to use it:

* :func:`check_vecenv` runs every check against a factory of fresh vectorized envs and
  raises ``AssertionError`` naming the first broken rule::

      from envfactory.testing import check_vecenv
      check_vecenv(lambda: envfactory.make_vec(overrides=["vectorizer=my-vec"]), steps=200)

* :class:`VecEnvConformance` holds the same checks as pytest test methods (in the spirit
  of Hydra's ``LauncherTestSuite``): subclass it in a ``test_*.py`` file under a
  ``Test*`` name and provide a ``make_vecenv`` fixture that returns the factory::

      import pytest
      import envfactory
      from envfactory.testing import VecEnvConformance

      class TestMyVectorizer(VecEnvConformance):
          steps = 100

          @pytest.fixture(params=["next_step", "same_step", "disabled"])
          def make_vecenv(self, request):
              ov = ["vectorizer=my-vec", f"autoreset_mode={request.param}"]
              return lambda: envfactory.make_vec(overrides=ov)

* :class:`SpacesConformance` (and :func:`check_spaces`) checks observations of every
  space gymnasium ships (Text, Graph, Sequence, OneOf, nested Dict/Tuple, ...) against
  ``SyncVectorEnv`` in every autoreset mode, ``copy`` on and off; it builds the
  vectorized env from env constructors, so override its ``build_vecenv(env_fns,
  **options)``.

The rules are gymnasium 1.x's (as :class:`gymnasium.vector.SyncVectorEnv` implements
them) plus envfactory's contract: batched spaces are ``batch_space`` of the single
spaces; ``metadata["autoreset_mode"]`` is an ``AutoresetMode``; ``reset(seed=int)`` is
reproducible and gives env *i* the seed ``seed + i``; rewards are float64 and the flags
bool arrays of shape ``(num_envs,)``; infos are dicts of arrays with ``_key`` masks;
episode statistics (``infos["episode_stats"]`` / ``_episode_stats``) appear exactly when an episode
ends; each autoreset mode behaves as gymnasium's; ``reset_mask`` resets only the masked
envs; ``close()`` is idempotent.

The **family kit** checks one env of a family (as ``envfactory.make_env`` builds it):
:func:`check_family` runs :func:`check_env_spaces` (observations in the space, with its
dtype and shape), :func:`check_env_seeding` (same seed, same trajectory; different seeds
differ), :func:`check_env_checker` (gymnasium's ``check_env``),
:func:`check_env_episode_stats` (statistics exactly at episode ends, under the env's own
statistics key) and :func:`check_env_close`; :class:`FamilyConformance` holds them as
pytest tests with a ``make_env`` fixture::

    class TestMyFamily(FamilyConformance):
        @pytest.fixture
        def make_env(self):
            cfg = envfactory.compose(["env=my-family"])
            return lambda: envfactory.make_env(cfg)

The helpers :func:`rollout`, :func:`sample_actions` and :func:`assert_rollouts_equal`
drive two vectorized envs with the same seed and actions and compare everything they
return bit for bit (differential testing against ``dummy`` or ``SyncVectorEnv``).

This module needs neither pytest nor anything beyond gymnasium and numpy, and
``import envfactory`` does not import it.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from copy import deepcopy as _deepcopy
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, iterate

__all__ = [
    "DEFAULT_IGNORE",
    "BuildVecEnv",
    "FamilyConformance",
    "MakeEnv",
    "MakeVecEnv",
    "Record",
    "SpaceEnv",
    "SpacesConformance",
    "VecEnvConformance",
    "assert_infos_layout",
    "assert_rollouts_equal",
    "assert_tree_equal",
    "autoreset_mode_of",
    "check_close",
    "check_env_checker",
    "check_env_close",
    "check_env_episode_stats",
    "check_env_seeding",
    "check_env_spaces",
    "check_errors",
    "check_family",
    "check_interface",
    "check_reset_mask",
    "check_reset_seeding",
    "check_restarts",
    "check_rollout",
    "check_space",
    "check_spaces",
    "check_vecenv",
    "episode_stats_key_of",
    "gymnasium_spaces",
    "rollout",
    "sample_actions",
]

#: Info entries that legitimately differ between two identical runs: the wall-clock
#: episode time of envfactory's ``episode_stats`` and gymnasium's ``RecordEpisodeStatistics``.
#: Their ``_t`` masks are still compared.
DEFAULT_IGNORE: tuple[str, ...] = ("episode.t", "episode_stats.t")

#: A zero-argument factory of fresh vectorized envs.
MakeVecEnv = Callable[[], VectorEnv]
#: One entry of a :func:`rollout`: ``{"call": "reset" | "step" | "reset_mask", ...}``.
Record = dict[str, Any]


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------
@contextmanager
def _opened(make: MakeVecEnv) -> Iterator[VectorEnv]:
    envs = make()
    try:
        yield envs
    finally:
        envs.close()


def autoreset_mode_of(envs: VectorEnv) -> AutoresetMode:
    """The ``AutoresetMode`` a vectorized env declares in its metadata.

    Args:
        envs: the vectorized env.

    Returns:
        ``metadata["autoreset_mode"]`` (gymnasium's default ``NEXT_STEP`` when absent).
    """
    mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


def sample_actions(space: gym.Space, num_envs: int, steps: int, seed: int) -> list[Any]:
    """``steps`` batched actions sampled from ``batch_space(space, num_envs)`` seeded with
    ``seed``: the same list for every vectorizer given the same single action space.

    Args:
        space: the single action space.
        num_envs: batch size.
        steps: how many batches.
        seed: seed of the sampling space.

    Returns:
        A list of ``steps`` batched actions.
    """
    batched = batch_space(space, num_envs)
    batched.seed(seed)
    return [batched.sample() for _ in range(steps)]


def _reset(envs: VectorEnv, seed: Any = None, options: Any = None) -> tuple[Any, dict]:
    # gymnasium types ``seed`` as ``int | None``; a list of seeds is part of its API too
    return cast(Any, envs).reset(seed=seed, options=options)


def _split(envs: VectorEnv, obs: Any) -> list[Any]:
    return list(iterate(envs.observation_space, obs))


def _fmt_path(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path) or "<root>"


def _ignored(path: Sequence[Any], ignore: Iterable[str]) -> bool:
    dotted = _fmt_path(path)
    return any(dotted == ig or dotted.endswith("." + ig) for ig in ignore)


def assert_tree_equal(
    a: Any, b: Any, path: Sequence[Any] = (), ignore: Iterable[str] = DEFAULT_IGNORE
) -> None:
    """Assert two nested structures (dicts, tuples, lists, numpy arrays, scalars) are
    bit-identical: same keys, types, dtypes, shapes and bytes; object arrays compared
    element by element.

    Args:
        a: first structure.
        b: second structure.
        path: where ``a`` and ``b`` sit, for the error message.
        ignore: dotted path suffixes to skip (e.g. ``"episode.t"``).

    Raises:
        AssertionError: naming the first path that differs.
    """
    ignore = tuple(ignore)
    where = _fmt_path(path)
    if _ignored(path, ignore):
        return
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        assert isinstance(a, Mapping) and isinstance(b, Mapping), (
            f"{where}: {type(a).__name__} vs {type(b).__name__}"
        )
        assert set(a) == set(b), (
            f"{where}: keys differ: only in first {sorted(set(a) - set(b), key=str)}, "
            f"only in second {sorted(set(b) - set(a), key=str)}"
        )
        for k in a:
            assert_tree_equal(a[k], b[k], (*path, k), ignore)
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), (
            f"{where}: {type(a).__name__} vs {type(b).__name__}"
        )
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} vs {b.dtype}"
        assert a.shape == b.shape, f"{where}: shape {a.shape} vs {b.shape}"
        if a.dtype == object:
            for idx in np.ndindex(a.shape):
                assert_tree_equal(a[idx], b[idx], (*path, *idx), ignore)
            return
        if a.tobytes() != b.tobytes():
            try:
                same = (a == b) | ((a != a) & (b != b))  # NaN == NaN here
                at: Any = np.argwhere(~same).tolist()[:5] or "(sign of zero)"
            except Exception:  # structured dtypes and the like
                at = "?"
            raise AssertionError(f"{where}: arrays differ at {at}:\n{a}\nvs\n{b}")
        return
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for k, (x, y) in enumerate(zip(a, b)):
            assert_tree_equal(x, y, (*path, k), ignore)
        return
    assert type(a) is type(b), f"{where}: {type(a).__name__} {a!r} vs {type(b).__name__} {b!r}"
    if isinstance(a, (float, np.floating)) and np.isnan(a) and np.isnan(b):
        return
    assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_infos_layout(infos: Any, num_envs: int, path: str = "infos") -> None:
    """Assert gymnasium's vector info layout: a dict whose every key ``k`` (not starting
    with ``_``) holds a dict (recursively the same layout) or an array of ``num_envs``
    entries, next to a ``_k`` bool mask of shape ``(num_envs,)``.

    Args:
        infos: the infos returned by ``reset`` or ``step``.
        num_envs: the batch size.
        path: name of ``infos`` in error messages.
    """
    assert isinstance(infos, dict), f"{path} must be a dict, got {type(infos).__name__}"
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_"):
            assert key[1:] in infos, f"{path}[{key!r}] is a mask without a {key[1:]!r} entry"
            assert isinstance(value, np.ndarray) and value.dtype == np.bool_, (
                f"{path}[{key!r}] must be a numpy bool array, got {type(value).__name__} "
                f"{getattr(value, 'dtype', '')}"
            )
            assert value.shape == (num_envs,), (
                f"{path}[{key!r}] must have shape ({num_envs},), got {value.shape}"
            )
            continue
        mask_key = f"_{key}"
        assert mask_key in infos, f"{path}[{key!r}] has no {mask_key!r} mask"
        if isinstance(value, dict):
            assert_infos_layout(value, num_envs, f"{path}[{key!r}]")
        else:
            assert isinstance(value, np.ndarray), (
                f"{path}[{key!r}] must be a numpy array (one entry per env), got "
                f"{type(value).__name__}"
            )
            assert value.shape[:1] == (num_envs,), (
                f"{path}[{key!r}] must have {num_envs} entries, got shape {value.shape}"
            )


def _masks(infos: dict) -> Iterator[tuple[str, np.ndarray]]:
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_") and isinstance(value, np.ndarray):
            yield key, value
        elif isinstance(value, dict):
            for sub, mask in _masks(value):
                yield f"{key}.{sub}", mask


def _check_step_types(envs: VectorEnv, result: tuple, where: str) -> None:
    assert isinstance(result, tuple) and len(result) == 5, (
        f"{where}: step() must return (obs, rewards, terminations, truncations, infos)"
    )
    obs, rewards, terms, truncs, infos = result
    n = envs.num_envs
    assert envs.observation_space.contains(obs), (
        f"{where}: observations are not in observation_space {envs.observation_space}"
    )
    assert isinstance(rewards, np.ndarray) and rewards.dtype == np.float64, (
        f"{where}: rewards must be a float64 numpy array (as SyncVectorEnv), got "
        f"{type(rewards).__name__} {getattr(rewards, 'dtype', '')}"
    )
    assert rewards.shape == (n,), f"{where}: rewards shape {rewards.shape} != ({n},)"
    for name, flags in (("terminations", terms), ("truncations", truncs)):
        assert isinstance(flags, np.ndarray) and flags.dtype == np.bool_, (
            f"{where}: {name} must be a bool numpy array, got {type(flags).__name__} "
            f"{getattr(flags, 'dtype', '')}"
        )
        assert flags.shape == (n,), f"{where}: {name} shape {flags.shape} != ({n},)"
    assert_infos_layout(infos, n, f"{where}: infos")


# --------------------------------------------------------------------------------------
# rollouts and differential comparison
# --------------------------------------------------------------------------------------
def rollout(
    envs: VectorEnv,
    *,
    steps: int,
    seed: int | Sequence[int] | None = 0,
    actions: Sequence[Any] | None = None,
    action_seed: int = 0,
) -> list[Record]:
    """Reset with ``seed`` and step ``steps`` times, recording everything returned.

    In ``disabled`` autoreset mode, envs that finished are reset right after the step
    with ``options={"reset_mask": finished}`` (recorded as a ``"reset_mask"`` record),
    as a gymnasium training loop must.

    Args:
        envs: the vectorized env (left open).
        steps: number of ``step`` calls.
        seed: the seed of the first ``reset``.
        actions: the batched actions; default :func:`sample_actions` with ``action_seed``.
        action_seed: seed of the sampled actions.

    Returns:
        A list of records ``{"call", "obs", "infos"[, "rewards", "terminations",
        "truncations", "mask"]}`` (copies, safe against buffer reuse).
    """
    if actions is None:
        actions = sample_actions(envs.single_action_space, envs.num_envs, steps, action_seed)
    disabled = autoreset_mode_of(envs) is AutoresetMode.DISABLED
    obs, infos = _reset(envs, seed=seed)
    records: list[Record] = [{"call": "reset", "obs": copy.deepcopy(obs), "infos": infos}]
    for t in range(steps):
        obs, rew, term, trunc, infos = envs.step(actions[t])
        records.append(
            {
                "call": "step",
                "obs": copy.deepcopy(obs),
                "rewards": np.array(rew, copy=True),
                "terminations": np.array(term, copy=True),
                "truncations": np.array(trunc, copy=True),
                "infos": infos,
            }
        )
        done = np.logical_or(term, trunc)
        if disabled and done.any():
            obs, infos = envs.reset(options={"reset_mask": done.copy()})
            records.append(
                {"call": "reset_mask", "mask": done, "obs": copy.deepcopy(obs), "infos": infos}
            )
    return records


def assert_rollouts_equal(
    a: Sequence[Record], b: Sequence[Record], ignore: Iterable[str] = DEFAULT_IGNORE
) -> None:
    """Assert two :func:`rollout` records are bit-identical (obs, rewards, flags, infos
    including ``final_obs``/``final_info`` and episode statistics), ignoring ``ignore``.

    Args:
        a: first rollout.
        b: second rollout.
        ignore: dotted info path suffixes to skip (default: the episode wall-clock time).
    """
    ignore = tuple(ignore)
    for k, (ra, rb) in enumerate(zip(a, b)):
        where = f"record {k} ({ra['call']})"
        assert ra["call"] == rb["call"], f"{where}: call {ra['call']} vs {rb['call']}"
        assert_tree_equal(ra, rb, (where,), ignore)
    assert len(a) == len(b), f"rollouts have {len(a)} vs {len(b)} records"


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
    rule of :func:`check_rollout` still holds in its autoreset mode (a lost episode ends
    ``truncated``; only its episode statistics may be missing), and so does
    :func:`check_reset_mask`.

    Args:
        make: returns a fresh vectorized env whose workers fail during ``steps``.
        steps: length of the checked rollout.
        seed: reset and action seed.

    Returns:
        The number of restarts seen (each warns ``RuntimeWarning("restarting after: ...")``);
        at least one, or the check tested nothing.
    """
    import warnings

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


def check_vecenv(
    make: MakeVecEnv,
    *,
    steps: int = 200,
    seed: int = 0,
    seed_offsets: bool = True,
    strict_episode_stats: bool = True,
    min_episodes: int = 0,
    error_classes: bool = True,
) -> None:
    """Run the whole conformance suite against ``make``.

    Args:
        make: a zero-argument callable returning a fresh, unreset vectorized env; called
            several times, and every env it returns is closed.
        steps: length of the checked rollout.
        seed: seed of resets and sampled actions.
        seed_offsets: check that ``seed=s`` gives env *i* seed ``s + i``.
        strict_episode_stats: see :func:`check_rollout`.
        min_episodes: see :func:`check_rollout`.
        error_classes: run :func:`check_errors` (gymnasium's ``SyncVectorEnv`` neither
            checks actions nor refuses calls after ``close()``).

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
    """:func:`check_space` for every space of :func:`gymnasium_spaces` (or ``spaces``),
    every autoreset mode and both ``copy`` settings.

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


class VecEnvConformance:
    """The conformance suite as pytest tests: subclass it under a ``Test*`` name and
    define a ``make_vecenv`` fixture returning a zero-argument factory of fresh vectorized
    envs (parametrize the fixture to cover several configs).

    Class attributes tune the checks: ``steps``, ``seed``, ``seed_offsets``,
    ``strict_episode_stats``, ``min_episodes``, ``error_classes`` (see
    :func:`check_vecenv`).
    """

    steps: int = 200
    seed: int = 0
    seed_offsets: bool = True
    strict_episode_stats: bool = True
    min_episodes: int = 0
    error_classes: bool = True

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
    from .episode_stats import EpisodeStatistics

    found: str | None = default
    recorded = False
    while True:
        if isinstance(env, EpisodeStatistics):
            return env.key
        if isinstance(env, gym.wrappers.RecordEpisodeStatistics) and not recorded:
            found, recorded = str(getattr(env, "_stats_key", default)), True
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
        stats_key: the info key; None reads it from the env (:func:`episode_stats_key_of`).
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
    """Run the whole family kit against ``make`` (see :class:`FamilyConformance`).

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
    ``make_env`` fixture returning a zero-argument factory of fresh single envs::

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
    ``exact_episode_lengths``, ``returns_are_reward_sums`` (see :func:`check_family`).
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


class SpacesConformance:
    """:func:`check_spaces` as pytest tests (one per autoreset mode): subclass it under a
    ``Test*`` name and override :meth:`build_vecenv`::

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
