"""``dummy``: every env in the calling process, stepped in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from ..config.checks import check_bool
from .front.base import VecEnvBase
from .front.env_calls import EnvCall
from .front.infos import merge_infos
from .transport.ctrl_c import HOLD, PendingCall
from .transport.shared import concatenate_checked
from .worker.runner import EnvRunner, call_env

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

    def __post_init__(self) -> None:
        check_bool(self, "copy")


class DummyVecEnv(VecEnvBase):
    """All envs in this process. Same trajectories as gymnasium's ``SyncVectorEnv``."""

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], autoreset_mode: Any = "next_step",
        copy: bool = True, seeding: str = "offset",
    ) -> None:  # fmt: skip
        super().__init__(len(env_fns), autoreset_mode, seeding)
        self.copy = copy
        self.envs = envs = [fn() for fn in env_fns]
        self.env_id = getattr(envs[0].spec, "id", "") or ""
        self._init_spaces(envs)
        self._runner = EnvRunner(envs, self.autoreset_mode)
        self._obs = create_empty_array(self.single_observation_space, n=self.num_envs)
        # a Ctrl-C during a step or reset is held until every env is done (see _stepped)
        self._holds = HOLD.use()

    def _out(self) -> Any:
        self._obs = concatenate_checked(self.single_observation_space, self._runner.obs, self._obs)
        return self._copy_obs(self._obs) if self.copy else self._obs

    def _start_reset(self, seeds: list, options: dict | None, mask: Any) -> None:
        self._resumes = False  # (True once the reset ran: a Ctrl-C held until it was done
        with HOLD:  # leaves it to reset_wait())
            self._pending_result = self._runner.reset(seeds, options, mask)
            self._resumes = True

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Same as ``step_async`` + ``step_wait``, minus their bookkeeping (the hot path)."""
        if (
            self.closed
            or self._pending is not PendingCall.NONE
            or not self._ready
            or (self._disabled and self._done.any())
        ):
            return super().step(actions)  # raises the right error
        actions = self.check_actions(actions)
        with HOLD:
            batch = self._stepped(self._per_env(actions))
            np.logical_or(batch[2], batch[3], out=self._done)
        return batch

    def _stepped(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Step every env inside ``with HOLD``; a Ctrl-C meanwhile is raised after, the batch
        kept for ``step_wait()``."""
        r = self._runner
        calls = r.step(actions)
        batch = (
            self._out(),
            r.rewards.copy(),
            r.terminations.copy(),
            r.truncations.copy(),
            merge_infos(calls, self.num_envs) if calls else {},
        )
        if HOLD.pending is not None:
            self._held, self._pending, self._interrupted = batch, PendingCall.STEP, True
        return batch

    def _per_env(self, actions: Any) -> Any:
        if isinstance(actions, np.ndarray):  # (checked: actions[i] is what iterate() would give)
            return actions
        return list(iterate(self.action_space, actions))

    def _start_step(self, actions: Any) -> None:
        self._pending_actions = self._per_env(actions)

    def _finish_step(self, timeout: float | None) -> tuple[Any, Any, Any, Any, dict]:
        if self._pending is PendingCall.RESET:
            self._resumes = False  # (a later interrupted step cannot be finished so)
            return self._out(), None, None, None, merge_infos(self._pending_result, self.num_envs)
        with HOLD:
            return self._stepped(self._pending_actions)

    def _start_call(self, request: EnvCall) -> None:
        self._request = request  # (run by _finish_call, in the caller's wait, as gymnasium's)

    def _finish_call(self, timeout: float | None) -> list[Any]:
        r = self._request
        if r.values is None:
            return [call_env(self.envs[i], r.name, r.args, r.kwargs) for i in r.indices]
        for i, v in zip(r.indices, r.values):
            self.envs[i].set_wrapper_attr(r.name, v)
        return [None] * len(r.indices)

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        self._runner.close()


#: the ``dummy`` vectorizer's build function
build_dummy = DummyVecEnv
