"""The per-env step/reset/autoreset logic, shared by the in-process vectorizer and the
worker processes, so every vectorizer produces the same trajectories as gymnasium's
``SyncVectorEnv`` by construction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

__all__ = ["EnvRunner", "InfoCalls"]

# (local env index, info dict) in the order SyncVectorEnv passes them to ``_add_info``.
InfoCalls = list[tuple[int, dict[str, Any]]]

NEXT_STEP, SAME_STEP = AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP


class EnvRunner:
    """Steps a list of envs with gymnasium's autoreset semantics.

    ``obs`` holds each env's latest observation; ``rewards``/``terminations``/
    ``truncations`` the latest step's values. Infos come back as ``InfoCalls`` to be
    merged with ``VectorEnv._add_info`` (empty infos are skipped: merging them is a no-op).
    """

    def __init__(self, envs: Sequence[gym.Env], autoreset_mode: AutoresetMode) -> None:
        n = len(envs)
        self.envs = list(envs)
        self.mode = autoreset_mode
        self.obs: list[Any] = [None] * n
        self.rewards = np.zeros(n, dtype=np.float64)
        self.terminations = np.zeros(n, dtype=np.bool_)
        self.truncations = np.zeros(n, dtype=np.bool_)
        self.autoreset = np.zeros(n, dtype=np.bool_)

    def reset(
        self,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
        mask: np.ndarray | None = None,
    ) -> InfoCalls:
        calls: InfoCalls = []
        if mask is None:
            self.terminations[:] = False
            self.truncations[:] = False
            self.autoreset[:] = False
        else:
            self.terminations[mask] = False
            self.truncations[mask] = False
            self.autoreset[mask] = False
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            self.obs[i], info = env.reset(seed=seeds[i], options=options)
            if info:
                calls.append((i, info))
        return calls

    def step(self, actions: Sequence[Any], only: Sequence[int] | None = None) -> InfoCalls:
        """Step every env (``actions[i]`` for env ``i``), or only the envs ``only`` (the
        async pool: ``actions[k]`` for env ``only[k]``; the others keep their state)."""
        calls: InfoCalls = []
        mode, obs, rewards = self.mode, self.obs, self.rewards
        terms, truncs, autoreset = self.terminations, self.truncations, self.autoreset
        if only is not None:
            envs = self.envs
            actions = _Scatter(only, actions)  # type: ignore[assignment]
            pairs: Any = ((i, envs[i]) for i in only)
        else:
            pairs = enumerate(self.envs)
        for i, env in pairs:
            if mode == NEXT_STEP:
                if autoreset[i]:
                    obs[i], info = env.reset()
                    rewards[i] = 0.0
                    terms[i] = False
                    truncs[i] = False
                else:
                    obs[i], rewards[i], terms[i], truncs[i], info = env.step(actions[i])
            elif mode == SAME_STEP:
                obs[i], rewards[i], terms[i], truncs[i], info = env.step(actions[i])
                if terms[i] or truncs[i]:
                    calls.append((i, {"final_obs": obs[i], "final_info": info}))
                    obs[i], info = env.reset()
            else:
                obs[i], rewards[i], terms[i], truncs[i], info = env.step(actions[i])
            if info:
                calls.append((i, info))
        np.logical_or(terms, truncs, out=autoreset)
        return calls

    def close(self) -> None:
        for env in self.envs:
            env.close()


class _Scatter:
    """``actions[k]`` of env ``only[k]``, indexed by env (what :meth:`EnvRunner.step` reads)."""

    def __init__(self, only: Sequence[int], actions: Sequence[Any]) -> None:
        self.pos = dict(zip(only, range(len(only))))
        self.actions = actions

    def __getitem__(self, i: int) -> Any:
        return self.actions[self.pos[i]]
