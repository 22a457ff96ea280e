"""The rollout the ``envfactory`` command runs (``run.job=rollout``), and the helpers the
render job shares with it (`envfactory.cli.render`).

Two loops, one per way of stepping:

* gymnasium's ``reset`` / ``step`` of every env together (every vectorizer;
  ``vectorizer.batch_size`` null);
* ``pool=True``: envpool's ``async_reset`` / ``recv`` / ``send`` loop of the async pool
  (``vectorizer.batch_size`` set), so a sweep over ``batch_size`` measures the pool.

Decisions:
    * ``total_steps`` counts env steps summed over envs. gymnasium's loop runs
      ``ceil(total_steps / num_envs)`` vector steps; the pool's sends ``batch_size`` envs
      at a time until ``total_steps`` steps came back. Both report the steps
      actually taken. Timing covers the step loop only (not env construction, nor the
      first reset; in the pool, from the first ``recv``, whose envs are the first to
      finish their reset).
    * ``random`` samples the action space seeded with ``seed``; ``noop`` is the zero action
      (clipped into a Box's bounds, a Discrete's ``start``).
    * Episodes and returns come from envfactory's statistics, ``infos[stats_key]`` with its
      mask (and ``infos["final_info"]`` under ``same_step`` autoreset). With
      ``stats_key=None`` (``episode_stats_key=null``) gymnasium's ``infos["episode"]`` is
      read (a ``RecordEpisodeStatistics`` vector wrapper writes it); when nothing records
      returns, episodes are counted from the termination and truncation flags and
      ``mean_return`` is None with ``returns_recorded`` False.
    * Under ``disabled`` autoreset `rollout` resets the finished envs with
      ``options={"reset_mask": done}``; the pool's loop needs an autoreset mode.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "RolloutStats",
    "episode_returns",
    "is_disabled_autoreset",
    "noop_action",
    "rollout",
]


@dataclass(frozen=True)
class RolloutStats:
    """What a rollout measured.

    Attributes:
        steps: env steps taken, summed over envs.
        seconds: wall time of the step loop.
        episodes: episodes that finished during the rollout.
        mean_return: mean return of those episodes (None when none finished, or when no
            return was recorded).
        interrupted: Ctrl-C stopped the rollout; the numbers cover the steps taken.
        returns_recorded: episode returns were read from the infos (False: no statistics
            key, ``episode_stats_key=null``; episodes were counted from the flags).
    """

    steps: int
    seconds: float
    episodes: int
    mean_return: float | None
    interrupted: bool = False
    returns_recorded: bool = True

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")


def noop_action(space: Any) -> Any:
    """The "do nothing" action of a (batched) gymnasium space: zeros, clipped into a Box's
    bounds; a Discrete/MultiDiscrete's ``start``."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return np.array(space.start, dtype=space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    if isinstance(space, spaces.Tuple):
        return tuple(noop_action(s) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return {k: noop_action(s) for k, s in space.spaces.items()}
    raise TypeError(f"run.policy=noop has no zero action for {space}; use run.policy=random")


def episode_returns(infos: Mapping[str, Any], key: str = "episode_stats") -> list[float]:
    """Returns of the episodes that ended in one step, from ``infos[key]["r"]`` and its
    ``_<key>`` mask (``infos["final_info"]`` too, for ``same_step`` autoreset: gymnasium
    1.x's batched dict, or gymnasium 0.29's object array of one dict or None per env that
    the ``legacy_final_info`` vector wrapper gives)."""
    out: list[float] = []
    final = infos.get("final_info")
    if isinstance(final, np.ndarray) and final.dtype == object:  # legacy_final_info's
        for info in final:
            if isinstance(info, Mapping) and isinstance(info.get(key), Mapping):
                out.append(float(np.asarray(info[key]["r"]).reshape(-1)[0]))
        final = None
    for source in (infos, final):
        if not isinstance(source, Mapping) or key not in source:
            continue
        r = np.asarray(source[key]["r"], dtype=np.float64).reshape(-1)
        mask = np.asarray(source.get(f"_{key}", np.ones(r.shape, dtype=bool)), dtype=bool)
        out.extend(float(x) for x in r[mask.reshape(-1)])
    return out


def is_disabled_autoreset(envs: Any) -> bool:
    """Whether ``envs`` runs with ``autoreset_mode=disabled`` (finished envs wait for a
    masked reset)."""
    from gymnasium.vector import AutoresetMode

    mode = str(getattr(envs, "metadata", {}).get("autoreset_mode"))
    return mode in (str(AutoresetMode.DISABLED), "disabled")


class _Tally:
    """Episodes of a rollout: returns from the statistics key, or ends from the flags."""

    def __init__(self, stats_key: str | None) -> None:
        self.key = stats_key or "episode"  # null: gymnasium's RecordEpisodeStatistics key
        self.count_flags = stats_key is None
        self.returns: list[float] = []
        self.ends = 0

    def add(self, terminations: Any, truncations: Any, infos: Mapping[str, Any]) -> None:
        self.returns.extend(episode_returns(infos, self.key))
        if self.count_flags:
            self.ends += int(np.count_nonzero(np.logical_or(terminations, truncations)))

    def stats(self, steps: int, seconds: float, interrupted: bool) -> RolloutStats:
        mean = float(np.mean(self.returns)) if self.returns else None
        if self.count_flags and not self.returns:  # nothing records returns: count the flags
            return RolloutStats(steps, seconds, self.ends, None, interrupted, False)
        return RolloutStats(steps, seconds, len(self.returns), mean, interrupted)


@contextmanager
def _progress(total: int, progress: bool) -> Iterator[Any]:
    """tqdm on stderr; off with ``progress=False`` and when stderr is not a terminal."""
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        unit="step",
        desc="envfactory",
        disable=None if progress else True,  # None: off when stderr is not a TTY
        file=sys.stderr,
        dynamic_ncols=True,
    )
    try:
        yield bar
    finally:
        bar.close()


def rollout(
    envs: Any,
    total_steps: int,
    *,
    policy: str = "random",
    seed: int | None = None,
    progress: bool = False,
    stats_key: str | None = "episode_stats",
    pool: bool = False,
) -> RolloutStats:
    """Reset ``envs`` with ``seed`` and step it for ``total_steps`` env steps (summed over
    envs) with the ``random`` or ``noop`` policy.

    Args:
        stats_key: the info key of envfactory's episode statistics (``episode_stats_key``);
            None: gymnasium's ``infos["episode"]`` if a wrapper records it, else episodes
            counted from the flags and no returns.
        pool: envpool's ``async_reset``/``recv``/``send`` loop of the async pool
            (``vectorizer.batch_size`` set) instead of gymnasium's ``reset``/``step``.

    Ctrl-C (KeyboardInterrupt) while stepping ends the loop: the stats of the steps taken,
    ``interrupted`` set. One before the first step (in the first reset) is raised.

    Raises:
        ConfigError: ``pool`` with envs that are not a pool, or with ``disabled``
            autoreset (a finished env would wait for a reset of every env).
    """
    if policy not in ("random", "noop"):
        raise ValueError(f"run.policy must be 'random' or 'noop', got {policy!r}")
    tally = _Tally(stats_key)
    loop = _pool_loop if pool else _step_loop
    steps, seconds, interrupted = loop(envs, int(total_steps), policy, seed, progress, tally)
    return tally.stats(steps, seconds, interrupted)


def _step_loop(
    envs: Any, total_steps: int, policy: str, seed: int | None, progress: bool, tally: _Tally
) -> tuple[int, float, bool]:
    """gymnasium's loop: ``ceil(total_steps / num_envs)`` steps of every env."""
    n = int(envs.num_envs)
    iterations = max(1, math.ceil(total_steps / n))
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    noop = noop_action(envs.action_space) if policy == "noop" else None
    disabled = is_disabled_autoreset(envs)
    done_iterations, interrupted = 0, False
    with _progress(iterations * n, progress) as bar:
        start = time.perf_counter()
        try:
            for _ in range(iterations):
                actions = envs.action_space.sample() if noop is None else noop
                _, _, terminations, truncations, infos = envs.step(actions)
                tally.add(terminations, truncations, infos)
                done_iterations += 1
                if disabled:
                    done = np.logical_or(terminations, truncations)
                    if done.any():
                        envs.reset(options={"reset_mask": done})
                bar.update(n)
        except KeyboardInterrupt:  # Ctrl-C: stop here and report what was measured
            interrupted = True
        return done_iterations * n, time.perf_counter() - start, interrupted


def _vector_wrapper_over_a_pool(envs: Any) -> str:
    """The snake_case name of the outermost vector wrapper over an async pool (``""``: the
    envs are no wrapped pool)."""
    from gymnasium.vector import VectorWrapper

    from envfactory.wrappers import snake_case

    inner = envs
    while isinstance(inner, VectorWrapper):
        inner = inner.env
    if inner is envs or not hasattr(inner, "recv"):
        return ""
    return snake_case(type(envs).__name__)


def _pool_loop(
    envs: Any, total_steps: int, policy: str, seed: int | None, progress: bool, tally: _Tally
) -> tuple[int, float, bool]:
    """envpool's loop over the async pool: ``async_reset(seed)``, then ``recv()`` the next
    ``batch_size`` ready envs and ``send()`` their actions, until ``total_steps`` env steps
    are received. An env's first answer after ``async_reset`` is its reset, not a step:
    only the answers after it count as steps (and episodes)."""
    from gymnasium.vector.utils import batch_space

    from envfactory.errors import ConfigError

    batch = int(getattr(envs, "batch_size", 0) or 0)
    if batch < 1 or not all(hasattr(envs, m) for m in ("async_reset", "recv", "send")):
        wrapper = _vector_wrapper_over_a_pool(envs)
        if wrapper:
            raise ConfigError(
                f"vectorizer.batch_size is set (the async pool, stepped with envpool's "
                f"recv/send loop) but the vector wrapper {wrapper} over the pool has no "
                "async_reset/recv/send: drop it (vector_wrappers=[]) or set "
                "vectorizer.batch_size=null"
            )
        raise ConfigError(
            f"vectorizer.batch_size is set but {type(envs).__name__} has no async_reset/recv/"
            "send (the async pool): use vectorizer=subproc or subproc-atari, or "
            "vectorizer.batch_size=null"
        )
    if is_disabled_autoreset(envs):
        raise ConfigError(
            "autoreset_mode=disabled with vectorizer.batch_size set: the rollout's "
            "recv/send loop needs the envs to reset themselves; use autoreset_mode=next_step "
            "or same_step, or vectorizer.batch_size=null"
        )
    space = batch_space(envs.single_action_space, batch)
    space.seed(seed)
    noop = noop_action(space) if policy == "noop" else None
    envs.async_reset(seed=seed)
    reset_seen = np.zeros(int(envs.num_envs), dtype=bool)
    steps, interrupted = 0, False
    with _progress(max(1, math.ceil(total_steps / batch)) * batch, progress) as bar:
        _, _, _, _, infos = envs.recv()
        reset_seen[np.asarray(infos["env_id"])] = True
        start = time.perf_counter()
        try:
            while steps < total_steps:
                envs.send(space.sample() if noop is None else noop, infos["env_id"])
                _, _, terminations, truncations, infos = envs.recv()
                ids = np.asarray(infos["env_id"])
                stepped = reset_seen[ids]  # the others answer their first reset
                reset_seen[ids] = True
                taken = int(np.count_nonzero(stepped))
                if taken:
                    tally.add(terminations, truncations, infos)
                    steps += taken
                    bar.update(taken)
        except KeyboardInterrupt:  # Ctrl-C: stop here and report what was measured
            interrupted = True
        return steps, time.perf_counter() - start, interrupted
