"""Checks of what a caller hands a vectorized env, done in the parent before anything
reaches an env, so a mistake leaves every vectorizer usable (a worker never sees it).

Actions: the batch's structure, shape and dtype for every space, and the values of
Discrete, MultiDiscrete and MultiBinary actions (vectorised numpy checks, a few
microseconds). Box actions are not bounds-checked: policies commonly send unclipped
actions and rely on the env or ``ClipAction`` to clip, as gymnasium's vector envs allow;
their shape and numeric dtype are checked. Any other space (Text, Graph, Sequence, OneOf,
custom) is checked per env with ``space.contains``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, iterate

from ..errors import InvalidActionError

__all__ = ["ActionCheck", "action_checker", "check_seeds"]

#: ``check(actions) -> actions`` (a list/scalar batch comes back as a numpy array).
ActionCheck = Callable[[Any], Any]

_NUMERIC = frozenset("biuf")


def _where(path: str) -> str:
    return f"actions{path}"


def _first_bad(bad: np.ndarray) -> int:
    """The env index of the first True entry of a per-env (or per-element) mask."""
    return int(np.argwhere(bad)[0][0])


def _array(
    path: str, actions: Any, shape: tuple[int, ...], single: gym.Space, kinds: frozenset[str]
) -> np.ndarray:
    a = actions if type(actions) is np.ndarray else np.asarray(actions)
    if a.shape != shape:
        raise InvalidActionError(
            f"{_where(path)} have shape {a.shape}, but this vectorized env expects {shape} "
            f"(num_envs={shape[0]}, single_action_space={single}); pass one action per env, "
            "e.g. envs.action_space.sample()"
        )
    if a.dtype.kind not in kinds:
        need = "integers" if kinds == frozenset("iu") else "numbers"
        raise InvalidActionError(
            f"{_where(path)} must be {need} for single_action_space {single}, got dtype "
            f"{a.dtype} (e.g. {a.reshape(-1)[:1].tolist()})"
        )
    return a


def _value_error(path: str, a: np.ndarray, bad: Any, single: gym.Space, valid: str) -> None:
    i = _first_bad(bad)
    raise InvalidActionError(
        f"{_where(path)}[{i}] = {a[i].tolist()!r} (env {i}) is not in single_action_space "
        f"{single}: valid values are {valid}"
    )


def _checker(space: gym.Space, n: int, path: str) -> ActionCheck:
    if isinstance(space, gym.spaces.Discrete):
        lo, hi = int(space.start), int(space.start + space.n)
        shape: tuple[int, ...] = (n,)
        ints = frozenset("iu")

        small = n <= 64  # a numpy reduction costs more than min/max of a short list

        def check_discrete(actions: Any) -> Any:
            a = _array(path, actions, shape, space, ints)
            if small:
                values = a.tolist()
                bad = min(values) < lo or max(values) >= hi
            else:
                bad = a.min() < lo or a.max() >= hi
            if bad:
                _value_error(path, a, (a < lo) | (a >= hi), space, f"{lo}..{hi - 1}")
            return a

        return check_discrete
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = space.start
        stop = space.start + space.nvec
        shape = (n, *space.shape)
        ints = frozenset("iu")

        def check_multidiscrete(actions: Any) -> Any:
            a = _array(path, actions, shape, space, ints)
            bad = (a < start) | (a >= stop)
            if bad.any():
                _value_error(path, a, bad.reshape(n, -1).any(axis=1), space,
                             f"start <= x < start + nvec, start={start.tolist()}, "
                             f"nvec={space.nvec.tolist()}")  # fmt: skip
            return a

        return check_multidiscrete
    if isinstance(space, gym.spaces.MultiBinary):
        shape = (n, *space.shape)

        def check_multibinary(actions: Any) -> Any:
            a = _array(path, actions, shape, space, _NUMERIC)
            bad = (a != 0) & (a != 1)
            if bad.any():
                _value_error(path, a, bad.reshape(n, -1).any(axis=1), space, "0 or 1")
            return a

        return check_multibinary
    if isinstance(space, gym.spaces.Box):
        shape = (n, *space.shape)

        def check_box(actions: Any) -> Any:
            return _array(path, actions, shape, space, _NUMERIC)

        return check_box
    if isinstance(space, gym.spaces.Dict):
        subs = {k: _checker(v, n, f"{path}[{k!r}]") for k, v in space.spaces.items()}

        def check_dict(actions: Any) -> Any:
            if not isinstance(actions, Mapping) or set(actions) != set(subs):
                got = sorted(actions) if isinstance(actions, Mapping) else type(actions).__name__
                raise InvalidActionError(
                    f"{_where(path)} must be a dict with keys {sorted(subs)} (one batch per "
                    f"key, for single_action_space {space}), got {got}"
                )
            return {k: c(actions[k]) for k, c in subs.items()}

        return check_dict
    if isinstance(space, gym.spaces.Tuple):
        parts = [_checker(v, n, f"{path}[{k}]") for k, v in enumerate(space.spaces)]

        def check_tuple(actions: Any) -> Any:
            if not isinstance(actions, (tuple, list)) or len(actions) != len(parts):
                got = len(actions) if isinstance(actions, (tuple, list)) else type(actions)
                raise InvalidActionError(
                    f"{_where(path)} must be a tuple of {len(parts)} batches (one per "
                    f"subspace of {space}), got {got}"
                )
            return tuple(c(x) for c, x in zip(parts, actions))

        return check_tuple
    batched = batch_space(space, n)

    def check_other(actions: Any) -> Any:
        try:
            items = list(iterate(batched, actions))
        except Exception as exc:
            raise InvalidActionError(
                f"{_where(path)} is not a batch of {n} actions of {space}: {exc}"
            ) from None
        if len(items) != n:
            raise InvalidActionError(
                f"got {len(items)} actions for num_envs={n}; pass one action per env"
            )
        for i, x in enumerate(items):
            if not space.contains(x):
                raise InvalidActionError(
                    f"{_where(path)}[{i}] = {x!r} (env {i}) is not in single_action_space {space}"
                )
        return actions

    return check_other


def action_checker(space: gym.Space, num_envs: int) -> ActionCheck:
    """``check(actions)`` for batches of the single action space ``space``: raises
    :class:`~envfactory.errors.InvalidActionError` (a ValueError and a TypeError) naming
    the env index and the value, and returns the batch (lists as numpy arrays)."""
    return _checker(space, num_envs, "")


def check_seeds(seeds: Sequence[Any]) -> None:
    """Every per-env seed is None or an int >= 0 (what ``numpy.random.SeedSequence`` and
    gymnasium's ``env.reset(seed=...)`` take)."""
    from ..errors import InvalidSeedError

    for i, s in enumerate(seeds):
        if s is None:
            continue
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise InvalidSeedError(
                f"seed for env {i} must be an int >= 0 or None, got {type(s).__name__} {s!r}"
            )
        if s < 0:
            raise InvalidSeedError(f"seed for env {i} must be an int >= 0 or None, got {s}")
