"""``dummy``: every env in the calling process, stepped in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from .base import MODE_NAMES, VecEnvBase, check_spaces
from .runner import EnvRunner

__all__ = ["DummyConfig", "DummyVecEnv", "build_dummy"]


@dataclass
class DummyConfig:
    """Schema of ``vectorizer=dummy``.

    Attributes:
        name: always ``dummy``.
        copy: return a copy of the observation batch (False: a buffer reused each step).
    """

    name: str = "dummy"
    copy: bool = True


class DummyVecEnv(VecEnvBase):
    """All envs in this process. Same trajectories as gymnasium's ``SyncVectorEnv``."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: Any = "next_step",
        copy: bool = True,
        seeding: str = "offset",
    ) -> None:
        super().__init__(len(env_fns), autoreset_mode, seeding)
        self.copy = copy
        envs = [fn() for fn in env_fns]
        self.envs = envs
        self.env_id = getattr(envs[0].spec, "id", "") or ""
        obs_space, act_space = check_spaces(
            [(e.observation_space, e.action_space) for e in envs], self.env_id
        )
        self._init_spaces(obs_space, act_space, envs[0].metadata)
        self.render_mode = envs[0].render_mode
        self._runner = EnvRunner(envs, MODE_NAMES[self.autoreset_mode])
        self._obs = create_empty_array(obs_space, n=self.num_envs)

    def _out(self) -> Any:
        self._obs = concatenate(self.single_observation_space, self._runner.obs, self._obs)
        return deepcopy(self._obs) if self.copy else self._obs

    def _start_reset(self, seeds: list, options: dict | None, mask: Any) -> None:
        self._pending_result = self._runner.reset(seeds, options, mask)

    def _finish_reset(self, timeout: float | None) -> tuple[Any, dict]:
        return self._out(), self._merge_infos(self._pending_result)

    def _start_step(self, actions: Any) -> None:
        self._pending_actions = list(iterate(self.action_space, actions))

    def _finish_step(self, timeout: float | None) -> tuple[Any, Any, Any, Any, dict]:
        r = self._runner
        calls = r.step(self._pending_actions)
        return (
            self._out(),
            r.rewards.copy(),
            r.terminations.copy(),
            r.truncations.copy(),
            self._merge_infos(calls),
        )

    def _do_call(self, name: str, args: Any, kwargs: Any, indices: list[int]) -> list[Any]:
        out = []
        for i in indices:
            attr = self.envs[i].get_wrapper_attr(name)
            out.append(attr(*args, **kwargs) if args is not None and callable(attr) else attr)
        return out

    def _do_set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        for i, v in zip(indices, values):
            self.envs[i].set_wrapper_attr(name, v)

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        self._runner.close()


def build_dummy(
    env_fns: Sequence[Callable[[], gym.Env]],
    *,
    autoreset_mode: Any = "next_step",
    copy: bool = True,
    seeding: str = "offset",
) -> DummyVecEnv:
    """The ``dummy`` vectorizer's build function."""
    return DummyVecEnv(env_fns, autoreset_mode=autoreset_mode, copy=copy, seeding=seeding)
