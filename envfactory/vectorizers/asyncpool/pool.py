"""``subproc`` with ``batch_size`` set: `SubprocPool`, `PoolVecEnv` over a `SubprocGroup`, and
`_PipeSite`, its `PoolBackend` (docs/concepts/async-pool.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array

from ...errors import ConfigError
from ..record import Split
from ..subproc import SubprocGroup, group_of
from ..transport.board import Waiter
from ..transport.handle import WorkerHandle
from ..transport.pipe import PipeHandle
from ..worker.protocol import Cmd
from ..worker.runner import InfoCalls
from .pool_env import PoolVecEnv, take_rows
from .scheduler import RemoteSite

__all__ = ["SPIN_WAIT", "PoolVecEnv", "SubprocPool", "take_rows"]

#: the parent spins through waits that average under this, even with every core busy (a
#: wake-up costs 25-300 us on a VM)
SPIN_WAIT = 150e-6


class SubprocPool(PoolVecEnv):
    """An async pool of envs in worker processes: `PoolVecEnv` over a `SubprocGroup`."""

    group: SubprocGroup

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        batch_size: int,
        split: Split | None = None,
        **options: Any,
    ) -> None:
        if batch_size is None:
            raise ConfigError(
                "SubprocPool needs a batch_size (an integer in [1, num_envs]); for a "
                "synchronous VecEnv use SubprocVecEnv (vectorizer.batch_size=null)"
            )
        autoreset_mode = options.pop("autoreset_mode", "next_step")
        self.split, group, faults = group_of(env_fns, split, options, batch_size=batch_size)
        super().__init__(group, batch_size, _PipeSite, autoreset_mode, **faults)


class _PipeSite(RemoteSite):
    """A ticket is its handle's seq; a worker's whole step goes by its control slot, anything
    else by pipe; the workers ready are the board's (`Board.ready`)."""

    group: SubprocGroup

    def __init__(self, group: SubprocGroup) -> None:
        super().__init__(group)
        self._cpus = os.cpu_count() or 1

    def post(self, handle: WorkerHandle, cmd: Cmd, data: Any) -> int:
        h: PipeHandle = handle  # type: ignore[assignment]  # (the group's: no check per call)
        # every env of the worker: posted on the board (when the actions fit its buffer)
        whole = cmd == Cmd.STEP_ENVS and len(data[0]) == h.stop - h.start
        if not (whole and self.group.board.post(data[1], [h])):  # type: ignore[union-attr]
            h.send(cmd, data)  # (a Ctrl-C goes through while it waits for a busy worker)
        return h.seq

    resumes_reads = True  # (PipeHandle keeps what a read took, and its answer, by seq)

    def answered(self, handle: WorkerHandle, ticket: int) -> bool:
        return handle.has_answer(ticket)  # type: ignore[attr-defined]

    def taken(self, handle: WorkerHandle) -> int | None:
        return handle.seq if handle.unsent else None  # type: ignore[attr-defined]

    def answer(
        self, handle: WorkerHandle, ticket: int, deadline: float | None, call: str, budget: float
    ) -> Any:
        h: PipeHandle = handle  # type: ignore[assignment]
        h.seq = ticket  # (a later post moved it on)
        if type(h) is PipeHandle and h.has_answer(ticket):  # there: no wait, nothing to time
            return h.recv(deadline, call)  # out (the failure policy is `group.wait`'s)
        return self.group.wait(h, deadline, call, budget)

    @property
    def waiter(self) -> Waiter:  # the pool's waiting policy (learnt from its waits)
        assert self.group.board is not None
        return self.group.board.waiter_ready

    def ready(self, handles: Collection[WorkerHandle], timeout: float | None) -> list[WorkerHandle]:
        spin = self._spins(len(handles))
        return self.group.board.ready(handles, timeout, spin)  # type: ignore[union-attr,arg-type]

    def _spins(self, owing: int) -> bool:
        """Whether to spin with ``owing`` workers in flight: a core is left to this process, or
        waits are short (`SPIN_WAIT`)."""
        return owing < self._cpus or self.waiter.avg < SPIN_WAIT

    def keep(self, handle: WorkerHandle, envs: list[int], answer: Any) -> InfoCalls:
        calls, obs = answer  # a StepResult: observations pickled unless in shared memory
        if obs is not None:
            per_env, start = self.group._env_obs, handle.start
            for i in envs:
                per_env[i] = obs[i - start]
        return calls

    def rows(self, ids: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        group = self.group
        b = group._buffers
        assert b is not None
        if group._shm_obs:
            obs = take_rows(b.obs, ids)
        else:
            out = create_empty_array(group.env.single_observation_space, n=len(ids))
            obs = group.batch_obs([group._env_obs[i] for i in ids], out)
        return obs, b.rewards[ids], b.terminations[ids], b.truncations[ids]
