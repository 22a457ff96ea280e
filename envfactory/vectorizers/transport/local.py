"""The parent's own envs (``vectorizer.in_parent``) behind a worker handle: stepped in
this process while the worker processes step theirs."""

from __future__ import annotations

import os
from typing import Any

from ..worker.protocol import Cmd, EnvInfo, failure_of
from ..worker.runner import EnvHost
from .handle import WorkerHandle
from .shared import ResultWriter

__all__ = ["LocalHandle"]


class LocalHandle(WorkerHandle):
    """Envs ``start:stop`` hosted in this process: `send` keeps the command, `recv` runs it
    (held, `ctrl_c`; waited for first, while the workers step). An env's exception is a
    ``RemoteEnvError`` naming the parent; these envs are neither timed out nor rebuilt."""

    restartable = False
    in_process = True
    own_wait = True  # (no wait: its recv runs the envs)
    label = "the parent's own envs (vectorizer.in_parent)"

    def __init__(self, start: int, envs: list, mode: Any, env_id: str) -> None:
        # worker -1 is how errors name the parent process (WorkerError.worker)
        super().__init__(-1, start, start + len(envs), env_id)
        self.out = ResultWriter(start)
        self.host = EnvHost(envs, mode, self.out)
        self.out.runner = self.host.runner
        self._pending: tuple[Cmd, Any] | None = None
        self._answer: tuple[Any] | None = None  # its answer, kept for recv

    @property
    def pid(self) -> int:
        return os.getpid()

    @property
    def alive(self) -> bool:
        return bool(self.host.envs)

    def infos(self) -> list[EnvInfo]:
        return [EnvInfo.of(e) for e in self.host.envs]

    def attach(self, buffers: Any, shared_obs: bool) -> None:
        self.out.attach(buffers, shared_obs)

    def send(self, cmd: Cmd, data: Any) -> None:
        self._answer, self._pending = None, (cmd, data)

    def recv(self, deadline: float | None, call: str) -> Any:
        if self._answer is not None:
            return self._answer[0]  # (asked again after an interrupt)
        if self._pending is None:
            return None
        (cmd, data), self._pending = self._pending, None
        try:
            result = self.host.handle(cmd, data)
        except KeyboardInterrupt:
            raise  # (raised by an env itself)
        except BaseException as exc:  # SystemExit too: an env never ends the program
            err = self.remote_error(call, failure_of(exc))  # (raised below, exc its cause)
        else:
            self._answer = (result,)
            return result
        raise err

    def kill(self) -> None:
        """Nothing to kill (`close` closes the envs)."""

    def close(self) -> None:
        self.host.close()

    def forget(self) -> None:
        """In a forked child: these envs are the parent's copies, not this child's to close."""
        self.host.envs.clear()
