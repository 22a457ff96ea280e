"""What a backend answers, checked once at its boundary, so a backend's mistake is one
clear error naming it rather than a failure later in a wrapper or a learner: a worker's
per-env answers, a step's or reset's batch (`check_batch`), the spaces every env reports
([`check_spaces`][envfactory.vectorizers.remote.check_spaces]) and those of a rebuilt worker
(`check_rebuilt_spaces`), and a group's start (`check_started`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import SpaceMismatchError

__all__ = [
    "check_batch",
    "check_rebuilt_spaces",
    "check_spaces",
    "check_started",
    "per_env_answer",
]


def per_env_answer(answer: Any, n: int, backend: Any, worker: str, call: str) -> list[Any]:
    """A worker's answer to a per-env command (``start``: its envs' EnvInfo; ``call``: one
    result per env; ``set_attr``: None) as a list of ``n``, checked once at the boundary
    between a backend and the vectorized env.

    Raises:
        RuntimeError: the backend answered with another count or a non-list (a bug in the
            backend: named with the worker and the call).
    """
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


def check_batch(batch: Any, num_envs: int, obs_space: gym.Space, backend: Any, call: str) -> None:
    """A backend's first batch of a step or reset ``(obs, rewards, terminations,
    truncations, infos)``, checked once at the boundary: a tuple of five, one reward and
    one bool flag per env, an infos dict, a Box observation with ``num_envs`` rows.

    Raises:
        RuntimeError: naming the backend, the call and what is wrong (a bug in the backend).
    """
    what = ""
    if not isinstance(batch, tuple) or len(batch) != 5:
        what = (
            f"a tuple of {len(batch)}"
            if isinstance(batch, tuple)
            else f"a {type(batch).__name__} (not a tuple of 5)"
        )
    else:
        obs, rewards, terms, truncs, infos = batch
        for name, arr, kinds in (
            ("rewards", rewards, "biuf"),
            ("terminations", terms, "b"),
            ("truncations", truncs, "b"),
        ):
            kind = "number" if kinds != "b" else "bool"
            if (
                not isinstance(arr, np.ndarray)
                or arr.shape != (num_envs,)
                or arr.dtype.kind not in kinds
            ):
                got = (
                    f"{arr.dtype} {arr.shape}"
                    if isinstance(arr, np.ndarray)
                    else type(arr).__name__
                )
                what = f"{name} {got} (expected a {kind} numpy array of shape ({num_envs},))"
                break
        else:
            if not isinstance(infos, dict):
                what = f"infos of type {type(infos).__name__} (expected a dict)"
            elif isinstance(obs_space, gym.spaces.Box) and (
                not isinstance(obs, np.ndarray) or obs.shape != (num_envs, *obs_space.shape)
            ):
                got = obs.shape if isinstance(obs, np.ndarray) else type(obs).__name__
                what = (
                    f"observations {got} (expected shape {(num_envs, *obs_space.shape)}: "
                    f"{num_envs} rows of the observation space {obs_space})"
                )
    if what:
        raise RuntimeError(
            f"{type(backend).__name__}: its {call} batch has {what}; a backend's collect must "
            f"return (obs, rewards, terminations, truncations, infos) for every env (a bug in "
            f"the backend {type(backend).__module__})"
        )


def check_rebuilt_spaces(
    infos: Sequence[Any], start: int, spaces: tuple[gym.Space, gym.Space], env_id: str
) -> None:
    """The envs ``start``, ``start + 1``, ... of a rebuilt worker (their
    :class:`~envfactory.vectorizers.worker.protocol.EnvInfo`) have the vectorized env's
    ``spaces`` (observation, action).

    Raises:
        SpaceMismatchError: naming the env, the space it was rebuilt with and the one
            expected.
    """
    for i, env in enumerate(infos):
        for kind, new, old in (
            ("observation", env.observation_space, spaces[0]),
            ("action", env.action_space, spaces[1]),
        ):
            if new != old:
                raise SpaceMismatchError(
                    f"env {start + i} ({env_id}) was rebuilt after a worker fault with {kind} "
                    f"space {new}, but the vectorized env has {old}; an env constructor must "
                    "build the same spaces every time"
                )


def check_spaces(
    spaces: Sequence[tuple[gym.Space, gym.Space]], env_id: str = ""
) -> tuple[gym.Space, gym.Space]:
    """All envs must share one observation and one action space; name the first that
    differs and both spaces."""
    obs0, act0 = spaces[0]
    for i, (obs, act) in enumerate(spaces[1:], start=1):
        for kind, a, b in (("observation", obs0, obs), ("action", act0, act)):
            if a != b:
                raise SpaceMismatchError(
                    f"env {i}{f' ({env_id})' if env_id else ''} has {kind} space {b}, but env 0 "
                    f"has {a}; every env of one vectorized env must have the same {kind} "
                    f"space (check per-env options and wrappers)"
                )
    return obs0, act0


def check_started(group: Any) -> None:
    """After a group's ``start``: its handles' slices cover the envs ``0..num_envs`` one
    after another, and the spaces are set (``wait_started`` ran).

    Raises:
        RuntimeError: naming the group and what its ``start`` missed (a bug in the
            backend).
    """
    at = 0
    for h in group.handles:
        if h.start != at or h.stop <= h.start:
            break
        at = h.stop
    name = type(group).__name__
    if not group.handles:
        missed = "set_handles"
    elif at != group.num_envs:
        slices = ", ".join(f"{h.label} {h.start}:{h.stop}" for h in group.handles)
        raise RuntimeError(
            f"{name}.start(): the workers' env slices ({slices}) must cover envs "
            f"0:{group.num_envs} one after another, in env order (see split_envs; a bug in "
            "the backend)"
        )
    elif not hasattr(group.env, "single_observation_space"):
        missed = "wait_started"
    else:
        return
    raise RuntimeError(
        f"{name}.start() returned without {missed}: a group's start hands its workers to "
        "set_handles, then waits for them with wait_started (which sets the spaces)"
    )
