"""``RayVecEnv``: envfactory's VecEnv contract over envs hosted in Ray actors.

The front half (argument checks, seeding, ``reset_mask``, async halves, ``indices=``,
render, close) is envfactory's public :class:`envfactory.VecEnvBase`; this module sends
one Ray call per actor per ``step``/``reset`` and turns Ray's failures into envfactory's
worker errors (the classes ``subproc`` raises), naming the actor, its node, pid and env
indices.
"""

from __future__ import annotations

import copy as _copy
import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from envfactory import (
    ClosedError,
    ConfigError,
    RemoteEnvError,
    SpaceMismatchError,
    VecEnvBase,
    VecEnvBrokenError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
)
from envfactory.errors import remote_env_error
from envfactory.vectorizers.base import check_spaces, count_restart
from envfactory.vectorizers.shared import concatenate_checked

from .actor import ERROR, EnvActor, array_batched

__all__ = ["CLOSE_TIMEOUT", "STARTUP_TIMEOUT", "RayVecEnv", "connect", "split_envs"]

STARTUP_TIMEOUT = 120.0
CLOSE_TIMEOUT = 10.0

# -- the Ray session -----------------------------------------------------------------------
# envfactory joins a Ray that is already initialized in this process (``ray.init(...)`` of
# the user's own), and then never shuts it down. Otherwise it calls ``ray.init(address)``
# itself (null: join the local Ray that ``ray start`` left running, or start one) and shuts
# that Ray down when the last RayVecEnv using it closes, so that nothing envfactory started
# outlives close(). To keep one Ray across many vectorized envs (a sweep in one process),
# call ray.init() yourself first.
_session_lock = threading.Lock()
_session: dict[str, Any] = {"owned": False, "users": 0}


def connect(address: str | None) -> bool:
    """Initialize Ray if needed; True if envfactory initialized it (and so owns it)."""
    import ray

    with _session_lock:
        if ray.is_initialized():
            if not _session["owned"]:
                return False
            _session["users"] += 1
            return True
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                logging_level=logging.WARNING,
                configure_logging=True,
            )
        except Exception as exc:
            where = "a local Ray" if address is None else f"the Ray cluster at {address!r}"
            raise ConfigError(
                f"vectorizer=ray: cannot start or join {where}: {type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''} (set "
                "vectorizer.address=null for a local Ray, or the address of a running cluster "
                "such as 'ray://head:10001' or 'head:6379')"
            ) from exc
        _session["owned"], _session["users"] = True, 1
        return True


def _release(owned: bool) -> None:
    import ray

    if not owned:
        return
    with _session_lock:
        if not _session["owned"]:
            return
        _session["users"] -= 1
        if _session["users"] <= 0:
            _session["owned"], _session["users"] = False, 0
            ray.shutdown()


def split_envs(num_envs: int, in_series: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` per actor: ceil(num_envs / in_series) actors with as even a
    share as possible, none above ``in_series`` (the split of ``subproc``)."""
    actors = math.ceil(num_envs / in_series)
    base, extra = divmod(num_envs, actors)
    out, start = [], 0
    for k in range(actors):
        size = base + (1 if k < extra else 0)
        out.append((start, start + size))
        start += size
    return out


class _Actor:
    def __init__(self, index: int, start: int, stop: int, fns: list) -> None:
        self.index, self.start, self.stop, self.fns = index, start, stop, fns
        self.handle: Any = None
        self.ref: Any = None  # the call in flight
        self.pid: int | None = None
        self.node_id = self.node_ip = self.actor_id = ""
        self.restarts: list[float] = []
        self.last_reset: Any = None

    @property
    def indices(self) -> list[int]:
        return list(range(self.start, self.stop))


def _label(fn: Any) -> str:
    return str(getattr(fn, "label", "") or getattr(fn, "__name__", "") or type(fn).__name__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


class RayVecEnv(VecEnvBase):
    """Envs in Ray actors (``in_series`` per actor); same trajectories as ``dummy``.

    Each ``step``/``reset`` is one Ray call per actor; its observations come back as one
    batch of numpy arrays per actor (through Ray's object store, read without copying
    and then written once into the returned batch). ``close()`` kills every actor; the Ray
    that envfactory started itself (none was initialized) is shut down with the last
    RayVecEnv that uses it.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: Any = "next_step",
        address: str | None = None,
        in_series: int | None = None,
        num_cpus: float | None = None,
        timeout: float | None = None,
        restart: bool = False,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        copy: bool = True,
        seeding: str = "offset",
    ) -> None:
        super().__init__(len(env_fns), autoreset_mode, seeding)
        self._actors: list[_Actor] = []
        self._broken: BaseException | None = None
        self._owned = False
        if timeout is not None and (not timeout > 0):
            raise ConfigError(f"vectorizer.timeout must be > 0 seconds or null, got {timeout!r}")
        self.timeout = None if timeout is None or timeout == math.inf else float(timeout)
        self.restart, self.max_restarts, self.restart_window = restart, max_restarts, restart_window
        self.copy, self.num_cpus, self.address = copy, num_cpus, address
        self.env_id = _label(env_fns[0])
        import ray

        self._ray = ray
        self._owned = connect(address)
        try:
            self._start(list(env_fns), in_series)
        except BaseException:
            self.close(terminate=True)
            raise

    # -- start ------------------------------------------------------------------------
    def _start(self, env_fns: list, in_series: int | None) -> None:
        ray = self._ray
        total = float(ray.cluster_resources().get("CPU", 0.0))
        per_actor = self.num_cpus or 0.0
        if in_series is None:
            slots = int(total // per_actor) if per_actor > 0 else int(total)
            in_series = math.ceil(self.num_envs / max(1, slots))
        split = split_envs(self.num_envs, in_series)
        need = len(split) * per_actor
        if need > total + 1e-9 and self.address is None:
            raise ConfigError(
                f"vectorizer=ray: {len(split)} actors x num_cpus={per_actor:g} need "
                f"{need:g} CPUs, but the local Ray has {total:g}; raise vectorizer.in_series "
                f"(envs per actor, now {in_series}), lower vectorizer.num_cpus (fractions such "
                "as 0.5 are allowed), or set vectorizer.in_series=null"
            )
        self.in_series = in_series
        cls = ray.remote(EnvActor).options(num_cpus=self.num_cpus, max_restarts=0)
        self._cls = cls
        for k, (a, b) in enumerate(split):
            self._actors.append(_Actor(k, a, b, env_fns[a:b]))
        for act in self._actors:
            self._spawn(act)
        budget = STARTUP_TIMEOUT if self.timeout is None else max(self.timeout, STARTUP_TIMEOUT)
        infos = self._gather("start", self._actors, budget, restartable=False)
        per_env = [e for act in self._actors for e in infos[act.index]]
        obs_space, act_space = check_spaces([(e[0], e[1]) for e in per_env], self.env_id)
        self._init_spaces(obs_space, act_space, per_env[0][2])
        self.render_mode = per_env[0][3]
        self._arrays = array_batched(obs_space)
        self._obs = create_empty_array(obs_space, n=self.num_envs)
        self._env_obs: list[Any] = [None] * self.num_envs
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terms = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncs = np.zeros(self.num_envs, dtype=np.bool_)

    def _spawn(self, act: _Actor) -> None:
        act.handle = self._cls.remote(act.fns, act.start, self.autoreset_mode)
        act.ref = act.handle.describe.remote()
        act.pid = None

    def _described(self, act: _Actor, info: dict) -> list:
        act.pid, act.node_id, act.node_ip = info["pid"], info["node_id"], info["node_ip"]
        act.actor_id = info["actor_id"] or ""
        return info["envs"]

    # -- errors -------------------------------------------------------------------------
    def _where(self, act: _Actor) -> str:
        node = f"node {act.node_ip or '?'} ({act.node_id[:12] or '?'})"
        return f"Ray actor {act.actor_id[:12] or '?'} on {node}"

    def _error(self, cls: type[WorkerError], what: str, act: _Actor, call: str) -> WorkerError:
        err = cls(
            f"[{self._where(act)}] {what}",
            worker=act.index,
            pid=act.pid,
            env_indices=act.indices,
            env_id=self.env_id,
            call=call,
        )
        self._tag(err, act)
        return err

    def _tag(self, err: WorkerError, act: _Actor) -> None:
        err.actor_id, err.node_id, err.node_ip = act.actor_id, act.node_id, act.node_ip  # type: ignore[attr-defined]

    def _remote_error(self, act: _Actor, call: str, failure: tuple) -> RemoteEnvError:
        exc_type, exc, tb = failure
        err = remote_env_error(
            f"[{self._where(act)}] raised {exc_type}",
            exc_type=exc_type,
            original=exc,
            worker=act.index,
            pid=act.pid,
            env_indices=act.indices,
            env_id=self.env_id,
            remote_traceback=tb,
            call=call,
        )
        self._tag(err, act)
        return err

    def _check_usable(self, what: str) -> None:
        if self._broken is not None:
            raise VecEnvBrokenError(
                f"{what}() on a {type(self).__name__} that is unusable since: {self._broken}\n"
                "Close it and make a new one, or set vectorizer.restart=true to rebuild failed "
                "actors automatically"
            )

    # -- waiting ----------------------------------------------------------------------
    def _get(self, act: _Actor, deadline: float | None, call: str, budget: float) -> Any:
        ray = self._ray
        ref, act.ref = act.ref, None
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            status, payload = ray.get(ref, timeout=remaining)
        except ray.exceptions.GetTimeoutError:
            self._kill(act)
            pending = ""
            if call in ("start", "restart"):
                pending = (
                    " (not started: is the Ray cluster short of the CPUs asked for, "
                    f"vectorizer.num_cpus={self.num_cpus} per actor, held by other actors "
                    "too? see `ray status`)"
                )
            raise self._error(
                WorkerTimeoutError,
                f"did not answer within {budget:.3g} s and was killed{pending}",
                act,
                call,
            ) from None
        except ray.exceptions.RayActorError as exc:
            if self.closed or self._closing:
                raise ClosedError(
                    f"{call}() did not finish: the {type(self).__name__} was closed meanwhile"
                ) from None
            raise self._error(WorkerDiedError, f"died ({_first_line(exc)})", act, call) from exc
        except ray.exceptions.RayTaskError as exc:  # the answer could not be sent back
            cause = getattr(exc, "cause", None)
            failure = (
                f"{type(cause).__module__}.{type(cause).__qualname__}" if cause else "RayTaskError",
                cause,
                str(exc),
            )
            raise self._remote_error(act, call, failure) from None
        except ray.exceptions.RayError as exc:  # object lost, node died, ...
            raise self._error(
                WorkerDiedError, f"failed ({type(exc).__name__}: {_first_line(exc)})", act, call
            ) from exc
        if status == ERROR:
            raise self._remote_error(act, call, payload)
        if call in ("start", "restart-start"):
            return self._described(act, payload)
        return payload

    _closing = False

    def _get_all(self, actors: Sequence[_Actor], deadline: float | None) -> dict[int, Any]:
        """The hot path: one ``ray.get`` for every actor's answer. Anything unusual (a
        timeout, a dead actor, an env's error) is left to the per-actor path, which names
        the actor; the refs stay valid for it."""
        ray = self._ray
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            answers = ray.get([act.ref for act in actors], timeout=remaining)
        except Exception:
            return {}
        out = {}
        for act, (status, payload) in zip(actors, answers):
            if status != ERROR:
                out[act.index] = payload
                act.ref = None
        return out

    def _gather(
        self,
        call: str,
        actors: Sequence[_Actor],
        timeout: float | None,
        restartable: bool = True,
    ) -> dict[int, Any]:
        if timeout == math.inf:
            timeout = None
        budget = timeout or 0.0
        deadline = None if timeout is None else time.monotonic() + timeout
        results: dict[int, Any] = {}
        failures: list[tuple[_Actor, WorkerError]] = []
        if call in ("step", "reset") and len(actors) > 1:
            results = self._get_all(actors, deadline)
        for act in actors:
            if act.index in results:
                continue
            try:
                results[act.index] = self._get(act, deadline, call, budget)
            except WorkerError as err:
                failures.append((act, err))
        if failures:
            if restartable and self.restart and call in ("step", "reset") and not self._broken:
                for act, failure in failures:
                    self._count_restart(act, failure)
                    warnings.warn(f"restarting after: {failure}", RuntimeWarning, stacklevel=4)
                    results[act.index] = self._restart(act, call)
            else:
                recoverable = call in ("call", "set_attr") and all(
                    isinstance(err, RemoteEnvError) for _, err in failures
                )  # the actor caught it and is still in step, as dummy would be
                if not recoverable:
                    self._broken = failures[0][1]
                raise failures[0][1]
        return results

    # -- restarts -----------------------------------------------------------------------
    def _count_restart(self, act: _Actor, failure: WorkerError) -> None:
        try:
            count_restart(
                act.restarts, failure, f"actor {act.index}", self.max_restarts, self.restart_window
            )
        except WorkerError:
            self._broken = failure
            raise

    @property
    def restarts(self) -> list[int]:
        """How many times each actor was rebuilt (``vectorizer.restart=true``)."""
        return [len(a.restarts) for a in self._actors]

    def _last_obs(self, act: _Actor) -> list[Any]:
        per_env = list(iterate(self.observation_space, self._obs))
        return [_copy.deepcopy(per_env[i]) for i in range(act.start, act.stop)]

    def _restart(self, act: _Actor, call: str) -> Any:
        """Rebuild ``act``'s envs in a new actor and finish ``call`` on them; if the rebuild
        fails, the env is unusable and that failure is raised."""
        last = self._last_obs(act)
        done = self._done[act.start : act.stop].tolist()
        self._kill(act)
        try:
            self._spawn(act)
            budget = STARTUP_TIMEOUT if self.timeout is None else max(self.timeout, STARTUP_TIMEOUT)
            info = self._get(act, time.monotonic() + budget, "restart-start", budget)
            for i, (obs_space, act_space, *_rest) in enumerate(info):
                for kind, new, old in (
                    ("observation", obs_space, self.single_observation_space),
                    ("action", act_space, self.single_action_space),
                ):
                    if new != old:
                        raise SpaceMismatchError(
                            f"env {act.start + i} ({self.env_id}) was rebuilt after an actor "
                            f"fault with {kind} space {new}, but the vectorized env has {old}; "
                            "an env constructor must build the same spaces every time"
                        )
            if call == "reset":
                act.ref = act.handle.restart_reset.remote(act.last_reset, last, done)
            else:
                act.ref = act.handle.restarted.remote(last, done)
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            return self._get(act, deadline, "restart", self.timeout or 0.0)
        except BaseException as exc:
            self._broken = exc
            raise

    def _kill(self, act: _Actor) -> None:
        if act.handle is not None:
            try:
                self._ray.kill(act.handle, no_restart=True)
            except Exception:
                pass

    # -- backend ------------------------------------------------------------------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self._check_usable("reset")
        self._reset_mask_now = mask
        for act in self._actors:
            act.last_reset = (
                seeds[act.start : act.stop],
                options,
                None if mask is None else mask[act.start : act.stop],
            )
            act.ref = act.handle.reset.remote(*act.last_reset)

    def _finish_reset(self, timeout: float | None) -> tuple[Any, dict]:
        results = self._gather("reset", self._actors, self.timeout if timeout is None else timeout)
        return self._collect(results)[0], self._infos(results)

    def _start_step(self, actions: Any) -> None:
        self._check_usable("step")
        batch = (
            actions
            if isinstance(actions, np.ndarray)
            else list(iterate(self.action_space, actions))
        )
        for act in self._actors:
            act.ref = act.handle.step.remote(batch[act.start : act.stop])

    def _finish_step(self, timeout: float | None) -> tuple[Any, Any, Any, Any, dict]:
        results = self._gather("step", self._actors, self.timeout if timeout is None else timeout)
        obs, rew, term, trunc = self._collect(results)
        return obs, rew, term, trunc, self._infos(results)

    def _collect(self, results: dict[int, Any]) -> tuple[Any, Any, Any, Any]:
        for act in self._actors:
            obs, rew, term, trunc, _ = results[act.index]
            a, b = act.start, act.stop
            self._rewards[a:b] = rew
            self._terms[a:b] = term
            self._truncs[a:b] = trunc
            if self._arrays:
                _put(self._obs, obs, a, b)
            else:
                self._env_obs[a:b] = obs
        if not self._arrays:
            self._obs = concatenate_checked(self.single_observation_space, self._env_obs, self._obs)
        obs = self._copy_obs(self._obs) if self.copy else self._obs
        return obs, self._rewards.copy(), self._terms.copy(), self._truncs.copy()

    def _infos(self, results: dict[int, Any]) -> dict:
        infos: dict = {}
        for act in self._actors:
            calls = results[act.index][4]
            if calls:
                infos = self._merge_infos(calls, act.start, infos)
        return infos

    def _do_call(self, name: str, args: Any, kwargs: Any, indices: list[int]) -> list[Any]:
        what = "get_attr" if args is None else "call"
        self._check_usable(what)
        return self._per_index(
            "call", indices, lambda act, loc: act.handle.call.remote(name, args, kwargs, loc)
        )

    def _do_set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        self._check_usable("set_attr")
        value_of = dict(zip(indices, values))
        self._per_index(
            "set_attr",
            indices,
            lambda act, loc: act.handle.set_attr.remote(
                name, [value_of[act.start + i] for i in loc], loc
            ),
        )

    def _per_index(
        self, call: str, indices: list[int], send: Callable[[_Actor, list], Any]
    ) -> list:
        groups = []
        for act in self._actors:
            local = [i - act.start for i in indices if act.start <= i < act.stop]
            if local:
                groups.append((act, local))
        for act, local in groups:
            act.ref = send(act, local)
        results = self._gather(call, [act for act, _ in groups], self.timeout)
        by_index: dict[int, Any] = {}
        for act, local in groups:
            for i, r in zip(local, results[act.index] or [None] * len(local)):
                by_index[act.start + i] = r
        return [by_index[i] for i in indices]

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        self._closing = True
        try:
            if not terminate and self._broken is None:
                self._close_actors(CLOSE_TIMEOUT if timeout is None else timeout)
        finally:
            for act in self._actors:
                self._kill(act)
            self._wait_gone(5.0)
            for act in self._actors:
                act.handle = act.ref = None
            owned, self._owned = self._owned, False
            _release(owned)

    def _close_actors(self, budget: float) -> None:
        """Ask every actor to close its envs, within ``budget`` seconds in all (then the
        caller kills them all)."""
        ray = self._ray
        refs = [act.handle.close.remote() for act in self._actors if act.handle is not None]
        if refs:
            try:
                ray.wait(refs, num_returns=len(refs), timeout=budget)
            except Exception:
                pass

    def _wait_gone(self, seconds: float) -> None:
        """Wait (bounded) until the killed actors' processes on this node have exited."""
        if not self._ray.is_initialized():
            return
        here = self._ray.get_runtime_context().get_node_id()
        pids = {a.pid for a in self._actors if a.pid is not None and a.node_id == here}
        end = time.monotonic() + seconds
        while pids and time.monotonic() < end:
            for pid in list(pids):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    pids.discard(pid)
                except PermissionError:
                    pass
            if pids:
                time.sleep(0.02)

    @property
    def pids(self) -> list[int]:
        """Process ids of the actors (on their nodes)."""
        return [a.pid for a in self._actors if a.pid is not None]

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles, one per ``in_series`` envs."""
        return [a.handle for a in self._actors]

    def __repr__(self) -> str:
        return (
            f"RayVecEnv({self.env_id}, num_envs={self.num_envs}, actors={len(self._actors)}, "
            f"pid={os.getpid()})"
        )


def _put(dst: Any, src: Any, a: int, b: int) -> None:
    """Write one actor's batch ``src`` into rows ``a:b`` of the whole batch ``dst``."""
    if isinstance(dst, dict):
        for k in dst:
            _put(dst[k], src[k], a, b)
    elif isinstance(dst, tuple):
        for d, s in zip(dst, src):
            _put(d, s, a, b)
    else:
        dst[a:b] = src
