"""Shared pieces of the conformance suites: comparing nested results bit for bit,
gymnasium's vector info layout, and recorded rollouts for differential testing."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, iterate

#: Info entries that legitimately differ between two identical runs: the wall-clock
#: episode time of envfactory's ``episode_stats`` and gymnasium's ``RecordEpisodeStatistics``.
#: Their ``_t`` masks are still compared.
DEFAULT_IGNORE: tuple[str, ...] = ("episode.t", "episode_stats.t")

#: A zero-argument factory of fresh vectorized envs.
MakeVecEnv = Callable[[], VectorEnv]
#: One entry of a [`rollout`][envfactory.testing.rollouts.rollout]:
#: ``{"call": "reset" | "step" | "reset_mask", ...}``.
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
        actions: the batched actions; default
            [`sample_actions`][envfactory.testing.rollouts.sample_actions] with ``action_seed``.
        action_seed: seed of the sampled actions.

    Returns:
        A list of records, dicts with the keys `call`, `obs` and `infos`, and for a step
            also `rewards`, `terminations`, `truncations` (`mask` for a masked reset); copies,
            safe against buffer reuse.
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
    """Assert two [`rollout`][envfactory.testing.rollouts.rollout] records are bit-identical (obs,
    rewards, flags, infos including ``final_obs``/``final_info`` and episode statistics), ignoring
    ``ignore``.

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
