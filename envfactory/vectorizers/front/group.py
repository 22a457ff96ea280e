"""``WorkerGroup``, the part every backend shares, and ``Backend``, the protocol it implements."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from gymnasium.vector.utils import iterate

from ...errors import (
    ClosedError,
    RemoteEnvError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    warn_restart,
)
from ..transport.ctrl_c import HOLD, held_ctrl_c
from ..transport.handle import CLOSE_TIMEOUT, STARTUP_TIMEOUT, WorkerHandle
from ..transport.shared import concatenate_checked
from ..worker.protocol import Cmd, EnvInfo, Restarted, RestartReset
from .checks import check_spaces, per_env_answer
from .infos import merge_infos
from .supervisor import cut, rebuild_failed, send_cut

if TYPE_CHECKING:
    from .remote_env import RemoteVecEnv

__all__ = ["Backend", "Batch", "WorkerGroup"]

#: ``(obs, rewards, terminations, truncations, infos)`` of every env
Batch = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]


@runtime_checkable
class Backend(Protocol):
    """What the front asks of a backend (`WorkerGroup` implements it)."""

    num_envs: int
    env_id: str

    def start(self) -> None: ...
    def post_step(self, actions: Any) -> None: ...
    def gather(
        self, call: str, handles: Sequence[WorkerHandle] | None = None,
        timeout: float | None = None, deadline: float | None = None,
    ) -> list[Any]: ...  # fmt: skip
    def collect(
        self, handles: Sequence[WorkerHandle], results: list[Any], mask: np.ndarray | None
    ) -> Batch: ...
    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]: ...
    def release(self, everything: bool) -> None: ...


class WorkerGroup:
    """The workers of one vectorized env, one
    [`WorkerHandle`][envfactory.vectorizers.remote.WorkerHandle] each. A subclass sets
    ``num_envs`` and ``env_id`` in an ``__init__`` that starts nothing, and implements ``start``
    (`set_handles` before starting them, then `wait_started`) and ``collect`` (the `Batch` from
    ``results[k]``, ``handles[k]``'s answer; ``mask``: the envs a masked reset reset); with
    ``restart=true`` also `respawn` and ``last_obs``. ``self.env``: the front, held weakly."""

    num_envs: int = 0
    env_id: str = ""
    env: RemoteVecEnv
    start: Callable[[], None]
    collect: Callable[[Sequence[WorkerHandle], list[Any], np.ndarray | None], Batch]
    #: with ``restart=true``: copies of the observations the caller last saw of a handle's envs
    last_obs: Callable[[WorkerHandle], list[Any]]
    #: optional: in a forked child, drop this copy's resources, touching no worker
    forget: Callable[[], None]
    #: set by `wait_started`: the batch the caller gets (a copy unless ``copy=False``), and
    #: per-env observations as one batch (into ``out``), naming an env that does not fit
    out: Callable[[Any], Any]
    batch_obs: Callable[[list[Any], Any], Any]

    def __init__(self) -> None:
        missing = [name for name in ("start", "collect") if not hasattr(self, name)]
        if missing:
            raise TypeError(f"{type(self).__name__} does not implement {', '.join(missing)}")
        self.handles: list[WorkerHandle] = []
        #: the handles in the order they are waited for (this process's own envs first)
        self.order: list[WorkerHandle] = []
        self._back: list[int] | None = None  # ``order``'s answers back in env order
        #: run by the front before a per-env call with the handles it asks (the pool's)
        self.before_calls: Callable[[list[WorkerHandle]], None] | None = None

    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        """A new worker behind ``handle`` (the old one killed): its envs' `EnvInfo`."""
        raise NotImplementedError

    def post_step(self, actions: Any) -> None:
        """Send each worker its rows of the (checked) action batch."""
        if not isinstance(actions, np.ndarray):
            actions = list(iterate(self.env.action_space, actions))
        self.send(Cmd.STEP, self.handles, lambda h: actions[h.start : h.stop])

    def release(self, everything: bool) -> None:
        """Free what is left once the workers are gone (``everything`` False: keep what
        another thread's call may still read)."""

    def startup_budget(self) -> float:
        """Seconds a worker may take to start or be rebuilt."""
        return max(self.env.timeout or 0.0, STARTUP_TIMEOUT)

    def set_handles(self, handles: Sequence[WorkerHandle]) -> None:
        """The handles, in env order; once `start` returns their slices cover the envs
        ``0..num_envs`` one after another (`check_started`)."""
        self.handles = list(handles)
        self.order = [h for h in handles if h.in_process] + [h for h in handles if not h.in_process]
        back = [self.order.index(h) for h in self.handles]
        self._back = None if back == list(range(len(back))) else back

    def wait_started(
        self, handles: Sequence[WorkerHandle], infos: Sequence[EnvInfo] = ()
    ) -> list[EnvInfo]:
        """Every env's EnvInfo: each worker's first answer and ``infos`` of envs built here,
        checked to share one set of spaces, which the front takes."""
        answers = self.gather("start", handles, self.startup_budget())
        per_env: list[EnvInfo] = [
            e
            for h, answer in zip(handles, answers)
            for e in per_env_answer(answer, h.stop - h.start, self, h.label, "start")
        ] + list(infos)
        env = self.env
        env._init_spaces(per_env)
        self.out = env._copy_obs if env.copy else lambda obs: obs
        self.batch_obs = functools.partial(concatenate_checked, env.single_observation_space)
        return per_env

    def merge_answers(self, handles: Sequence[WorkerHandle], calls: Sequence[Any]) -> dict:
        """The infos dict from each handle's info calls (``(local index, info)``)."""
        rows = [(h.start + i, info) for h, c in zip(handles, calls) if c for i, info in c]
        return merge_infos(rows, self.num_envs) if rows else {}

    def wait(self, h: WorkerHandle, deadline: float | None, call: str, budget: float) -> Any:
        """``h.recv``: a worker past ``deadline`` is killed (``WorkerTimeoutError`` naming
        ``budget``); one ended by a close from another thread is a ``ClosedError``."""
        try:
            if h.own_wait:
                return h.recv(deadline, call)
            return HOLD.waiting(lambda _: h.recv(deadline, call), None)  # (its recv is a wait)
        except TimeoutError as late:
            if isinstance(late, RemoteEnvError):
                raise  # the env's own TimeoutError (the error is also of its type): no timeout
            h.kill()
            what = str(late) or "did not answer"  # (or did not read what it was sent)
            raise h.error(
                WorkerTimeoutError, f"{what} within {budget:.3g} s and was killed", call
            ) from None
        except WorkerDiedError:
            closed_by, active = self.env._closed_by, self.env._guard.active
            if closed_by is not None:
                if active and not active[0].endswith("_wait"):  # the pool's recv, not its step
                    call = active[0]
                raise ClosedError(
                    f"{call}() did not finish: the {self.env.__class__.__name__} was closed from "
                    f"thread {closed_by!r} meanwhile"
                ) from None
            raise

    def send(
        self, cmd: Cmd, handles: Sequence[WorkerHandle], data_of: Callable[[Any], Any]
    ) -> None:
        """Send ``cmd`` with ``data_of(handle)`` to each handle, Ctrl-C held (`send_cut`)."""
        sent = 0
        h: Any = None
        try:
            with held_ctrl_c():  # (a worker that does not read: see `PipeHandle.flush`)
                for h in handles:
                    h.send(cmd, data_of(h))
                    sent += 1
        except BaseException as exc:
            self.env.apply(send_cut(cmd, exc, sent, h.label if sent else "", len(self.handles)))
            raise

    def gather(
        self, call: str, handles: Sequence[WorkerHandle] | None = None,
        timeout: float | None = None, deadline: float | None = None,
    ) -> list[Any]:  # fmt: skip
        """The answers of ``handles`` (None: all, in env order) to ``call`` by ``deadline``
        (None: ``timeout`` seconds from now; None or ``inf``: no limit). Failures go to
        `recover`, a wait cut otherwise to `cut`."""
        if handles is None:
            answers = self.gather(call, self.order, timeout, deadline)
            return answers if self._back is None else [answers[k] for k in self._back]
        limited = timeout is not None and timeout < float("inf")
        budget = timeout if timeout is not None and limited else 0.0
        if deadline is None and limited:
            deadline = time.monotonic() + budget
        results: list[Any] = [None] * len(handles)
        failures: list[tuple[WorkerHandle, WorkerError]] = []
        for k, h in enumerate(handles):
            try:
                results[k] = self.wait(h, deadline, call, budget)
            except WorkerError as err:
                failures.append((h, err))
            except BaseException as exc:  # KeyboardInterrupt: in a wait, asked again
                error = self.env.apply(cut(call, h, exc))
                if error is None or error is exc:
                    raise
                raise error from exc
        for h, answer in self.recover(call, failures) if failures else ():
            results[handles.index(h)] = answer
        return results

    def recover(
        self, call: str, failures: Sequence[tuple[WorkerHandle, WorkerError]],
        done: list[bool] | None = None,
    ) -> list[tuple[WorkerHandle, Any]]:  # fmt: skip
        """``failures`` in ``call``: the `Supervisor` decides, the front applies it, and each
        worker to restart is rebuilt (Ctrl-C held; ``done``: its envs' finished flags, default
        the front's) and answers: each with its answer, else the outcome's error is raised."""
        env = self.env
        outcome = env.supervisor.failed(call, failures, env._broken is not None)
        error = env.apply(outcome)
        answers = []
        for h, failure in outcome.restart:
            warn_restart(failure)
            last = self.last_obs(h)
            flags = env._done[h.start : h.stop].tolist() if done is None else done
            with held_ctrl_c():
                h.kill()
                try:
                    infos = self.respawn(h, self.startup_budget())
                    rebuilt = [(e.observation_space, e.action_space) for e in infos]
                    spaces = (env.single_observation_space, env.single_action_space)
                    check_spaces(rebuilt, self.env_id, spaces, h.start)
                    if call == "reset":
                        assert h.last_reset is not None
                        h.send(Cmd.RESTART_RESET, RestartReset(last, flags, reset=h.last_reset))
                    else:
                        h.send(Cmd.RESTARTED, Restarted(last, flags))
                    deadline = None if env.timeout is None else time.monotonic() + env.timeout
                    answers.append((h, self.wait(h, deadline, "restart", env.timeout or 0.0)))
                except BaseException as exc:
                    env.apply(rebuild_failed(h, exc))
                    raise
        if error is not None:
            raise error
        return answers

    def close(self, timeout: float | None, terminate: bool, locked: bool) -> None:
        """Ask every live worker to close its envs within ``timeout`` (unless ``terminate``),
        then kill every one and `release` (``locked``: no other thread reads the buffers)."""
        budget = CLOSE_TIMEOUT if timeout is None else timeout
        try:
            asked = []
            for h in [] if terminate else [h for h in self.handles if h.alive]:
                with contextlib.suppress(Exception):  # gone, or its transport shut down (killed
                    h.send(Cmd.CLOSE, None)  # after a timeout): it is killed below either way
                    asked.append(h)
            deadline = time.monotonic() + budget
            closed = []
            for h in asked:
                with contextlib.suppress(Exception):  # died, timed out (then killed), garbage
                    self.wait(h, deadline, "close", budget)
                    closed.append(h)
            exit_by = time.monotonic() + min(1.0, max(deadline - time.monotonic(), 0.1))
            for h in closed:  # the envs are closed: the workers are only exiting now
                h.join(max(exit_by - time.monotonic(), 0.0))
        finally:  # even if interrupted, even if one kill raises: no worker outlives close()
            errors = []
            for end in [f for h in self.handles for f in (h.kill, h.close)]:
                try:
                    end()
                except Exception as exc:
                    errors.append(exc)
            self.release(everything=locked)
            if errors:
                raise errors[0]
