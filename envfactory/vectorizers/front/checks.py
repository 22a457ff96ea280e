"""Checks at the front's two boundaries, each mistake one clear error: what a caller hands a
vectorized env (checked before anything reaches an env) and what a worker answers."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, iterate

from ...errors import (
    ConfigError,
    InvalidActionError,
    InvalidSeedError,
    ResetNeededError,
    SpaceMismatchError,
)
from ..transport.ctrl_c import not_seconds

__all__ = [
    "autoreset_mode", "check_env_ids", "check_recv_timeout", "check_spaces", "composite_checker",
    "per_env_answer", "reset_needed", "seeds_for", "show_ids", "split_reset_mask",
]  # fmt: skip


def composite_checker(
    space: gym.Space, n: int, path: str, leaf: Callable[[gym.Space, int, str], Callable]
) -> Callable[[Any], Any]:
    """``check(actions)`` for a Dict, Tuple or other space (``leaf``: a subspace's checker)."""
    if isinstance(space, gym.spaces.Dict):
        subs = {k: leaf(v, n, f"{path}[{k!r}]") for k, v in space.spaces.items()}

        def check_dict(actions: Any) -> Any:
            if not isinstance(actions, Mapping) or set(actions) != set(subs):
                got = sorted(actions) if isinstance(actions, Mapping) else type(actions).__name__
                raise InvalidActionError(
                    f"actions{path} must be a dict with keys {sorted(subs)} (one batch per "
                    f"key, for single_action_space {space}), got {got}"
                )
            return {k: c(actions[k]) for k, c in subs.items()}

        return check_dict
    if isinstance(space, gym.spaces.Tuple):
        parts = [leaf(v, n, f"{path}[{k}]") for k, v in enumerate(space.spaces)]

        def check_tuple(actions: Any) -> Any:
            if not isinstance(actions, (tuple, list)) or len(actions) != len(parts):
                got = len(actions) if isinstance(actions, (tuple, list)) else type(actions)
                raise InvalidActionError(
                    f"actions{path} must be a tuple of {len(parts)} batches (one per "
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
                f"actions{path} is not a batch of {n} actions of {space}: {exc}"
            ) from None
        if len(items) != n:
            raise InvalidActionError(
                f"got {len(items)} actions for num_envs={n}; pass one action per env"
            )
        for i, x in enumerate(items):
            if not space.contains(x):
                raise InvalidActionError(
                    f"actions{path}[{i}] = {x!r} (env {i}) is not in single_action_space {space}"
                )
        return actions

    return check_other


def autoreset_mode(value: Any) -> AutoresetMode:
    """gymnasium's AutoresetMode from its name, its value or itself."""
    v = str(getattr(value, "value", value))
    for m in AutoresetMode:
        if v in (m.value, m.name.lower()):
            return m
    names = ", ".join(m.name.lower() for m in AutoresetMode)
    raise ConfigError(f"autoreset_mode must be one of {names}; got {value!r}")


def seeds_for(seed: Any, n: int, seeding: str, call: str = "reset") -> list[int | None]:
    """Per-env seeds for ``reset(seed=...)`` (or ``call``'s) of ``n`` envs."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise InvalidSeedError(
                f"{call}(seed={seed}): the seed must be an int >= 0 (env i gets seed + i), "
                "a list with one such seed (or None) per env, or None"
            )
        if seeding == "spawn":
            children = np.random.SeedSequence(int(seed)).spawn(n)
            return [int(c.generate_state(1, dtype=np.uint64)[0]) for c in children]
        return [int(seed) + i for i in range(n)]
    if isinstance(seed, (str, bytes, Mapping)) or not isinstance(seed, Iterable):
        raise InvalidSeedError(
            f"{call}(seed={seed!r}): the seed must be an int >= 0 (env i gets seed + i), a "
            f"list of {n} seeds (int >= 0 or None), or None; got {type(seed).__name__}"
        )
    seeds = list(seed)
    if len(seeds) != n:
        raise InvalidSeedError(
            f"{call}(seed=[...]) needs one seed per env: got {len(seeds)} seeds for "
            f"num_envs={n}; pass an int (env i gets seed+i) or a list of {n}"
        )
    for i, s in enumerate(seeds):  # each None or an int >= 0
        not_int = s is not None and (isinstance(s, bool) or not isinstance(s, (int, np.integer)))
        if not_int or (s is not None and s < 0):
            got = f"{type(s).__name__} {s!r}" if not_int else s
            raise InvalidSeedError(f"seed for env {i} must be an int >= 0 or None, got {got}")
    return [None if s is None else int(s) for s in seeds]


def split_reset_mask(options: Any, n: int) -> tuple[dict | None, np.ndarray | None]:
    """``reset(options=...)``: the options without ``reset_mask``, and the checked mask."""
    if not options or "reset_mask" not in options:
        return options, None
    options = dict(options)
    mask = options.pop("reset_mask")
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
        raise TypeError(
            f"options['reset_mask'] must be a numpy bool array of shape ({n},), got "
            f"{type(mask).__name__} {getattr(mask, 'dtype', '')}"
        )
    if mask.shape != (n,):
        raise ValueError(f"options['reset_mask'] must have shape ({n},), got {mask.shape}")
    if not mask.any():
        raise ValueError("options['reset_mask'] must select at least one env (all False)")
    return options, mask


def reset_needed(ready: bool, done: np.ndarray) -> ResetNeededError:
    """Why a step needs a reset first: none yet, or envs done with autoreset ``disabled``."""
    if not ready:
        return ResetNeededError(
            "step() before reset(): the envs have not been reset yet; call "
            "envs.reset(seed=...) first"
        )
    idx = np.flatnonzero(done).tolist()  # (asked only when ready with autoreset disabled)
    return ResetNeededError(
        f"envs {idx} finished an episode and autoreset_mode is 'disabled': reset them with "
        "envs.reset(options={'reset_mask': mask}) before stepping them again"
    )


def check_recv_timeout(timeout: Any) -> float | None:
    """``recv(timeout=...)``: None or seconds >= 0 (``inf``: no limit, as None)."""
    if timeout is not None and not_seconds(timeout):
        raise ValueError(
            f"recv(timeout={timeout!r}): timeout must be None (the vectorizer's "
            "vectorizer.timeout) or a number of seconds >= 0"
        )
    return None if timeout is None or timeout == math.inf else float(timeout)


def show_ids(ids: Sequence[Any], limit: int = 8) -> str:
    """``[0, 1, 2]``; a long list cut after ``limit`` entries."""
    head = ", ".join(str(i) for i in list(ids)[:limit])
    more = f", ... ({len(ids)} in all)" if len(ids) > limit else ""
    return f"[{head}{more}]"


def check_env_ids(env_ids: Any, num_envs: int, head: str) -> list[int]:
    """``env_ids`` as a list, each in ``[0, num_envs)`` at most once."""
    arr = np.asarray(env_ids)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1 or not (arr.size == 0 or arr.dtype.kind in "iu"):
        raise ValueError(
            f"{head}): env_ids must be a 1-D array of ints (as infos['env_id']), got {env_ids!r}"
        )
    ids: list[int] = arr.tolist()
    if ids and min(ids) >= 0 and max(ids) < num_envs and len(set(ids)) == len(ids):
        return ids  # (the hot path)
    bad = [i for i in ids if not 0 <= i < num_envs]  # (else none, or one id twice)
    why = f"ids {show_ids(bad)} out of range" if bad else "no id" if not ids else "a repeated id"
    raise ValueError(
        f"{head}={show_ids(ids)}): {why}; pass each env id in [0, {num_envs}) at most once"
    )


# -- what a backend answers ---------------------------------------------------------


def per_env_answer(answer: Any, n: int, backend: Any, worker: str, call: str) -> list[Any]:
    """A worker's answer to a per-env command (``set_attr``: None) as a list of ``n``, else a
    RuntimeError naming the backend's bug."""
    if answer is None and call != "start":
        return [None] * n  # (set_attr)
    if isinstance(answer, list | tuple) and len(answer) == n:
        return list(answer)
    got = f"{len(answer)} results" if isinstance(answer, list | tuple) else repr(answer)[:80]
    raise RuntimeError(
        f"{type(backend).__name__}: {worker} answered {call} for {n} envs with {got}; a worker "
        f"handle must answer with a list of one result per env (a bug in the backend "
        f"{type(backend).__module__})"
    )


def check_spaces(
    spaces: Sequence[tuple[gym.Space, gym.Space]], env_id: str = "",
    want: tuple[gym.Space, gym.Space] | None = None, start: int = 0,
) -> tuple[gym.Space, gym.Space]:  # fmt: skip
    """All envs share one observation and one action space (``want``: the vectorized env's,
    for a rebuilt worker's envs ``start, start + 1, ...``), else a SpaceMismatchError."""
    first = spaces[0] if want is None else want
    for i, pair in enumerate(spaces):
        for kind, a, b in zip(("observation", "action"), first, pair):
            if a == b:
                continue
            if want is not None:
                raise SpaceMismatchError(
                    f"env {start + i} ({env_id}) was rebuilt after a worker fault with {kind} "
                    f"space {b}, but the vectorized env has {a}; an env constructor must "
                    "build the same spaces every time"
                )
            raise SpaceMismatchError(
                f"env {i}{f' ({env_id})' if env_id else ''} has {kind} space {b}, but env 0 "
                f"has {a}; every env of one vectorized env must have the same {kind} "
                f"space (check per-env options and wrappers)"
            )
    return first[0], first[1]
