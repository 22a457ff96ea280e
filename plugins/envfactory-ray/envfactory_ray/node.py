"""``vectorizer.in_actor=subproc``: `NodeActor`, an actor that hosts its envs in a node-local
vectorizer (the contract: the Ray guide, docs/guides/sweeps-and-ray.md).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate

from envfactory import RemoteEnvError, WorkerError, WorkerTimeoutError
from envfactory.vectorizers.remote import (
    Cmd,
    EnvInfo,
    Failure,
    Recover,
    Recoverable,
    RecoverableFn,
    Reset,
    Restarted,
    RestartReset,
    after_reset,
    after_step,
    failure_of,
    keep_rows,
)

from .actor import ERROR, INNER, OK, pickles, placed
from .graph import KEPT
from .wire import Wire, dumps

#: what ``vectorizer.in_actor`` may name: the vectorizer an actor hosts its envs in
IN_ACTOR = ("subproc",)

__all__ = ["IN_ACTOR", "NodeActor", "actor_share"]


def actor_share(num_envs: int, workers: int, timeout: float | None) -> tuple[int, int]:
    """``(in_series, in_parent)`` of the inner ``subproc``: the actor steps a worker's share
    itself (64 CartPoles on 2 cores: 0.60x ``subproc``, 0.50x all in inner workers); with
    ``timeout`` every env is in an inner worker, which the inner ``subproc`` can time out."""
    in_series = math.ceil(num_envs / workers)
    if timeout is not None or workers < 2:
        return in_series, 0
    return in_series, num_envs - in_series * (workers - 1)


class NodeActor:
    """Hosts envs ``start ..`` of a vectorized env in a node-local vectorized env of one worker
    process per CPU it reserves, at most one per env (``dummy`` in the actor itself for one,
    without ``timeout``)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], start: int, mode: AutoresetMode,
                 num_cpus: float, timeout: float | None, restart: bool) -> None:  # fmt: skip
        import envfactory

        self.start, self.mode, self.n = start, AutoresetMode(mode), len(env_fns)
        workers = max(1, min(self.n, math.ceil(num_cpus - 1e-9)))
        #: the compiled graph's steps so far and the answer to the last (see `graph_step`)
        self.graph_steps = 0
        self._kept_answer: tuple[str, Any] | None = None
        self._graph_lock = threading.Lock()
        self.init_failure: tuple[str, Any] | None = None
        self.inner: Any = None
        fns = [RecoverableFn(fn, self.mode) for fn in env_fns] if restart else list(env_fns)
        try:
            registry = envfactory.get_registry()
            if workers < 2 and timeout is None:  # one CPU: every env in the actor itself
                self.inner = registry.vectorizer("dummy").build(fns, self.mode, copy=False)
            else:
                in_series, own = actor_share(self.n, workers, timeout)
                self.inner = registry.vectorizer("subproc").build(
                    fns, autoreset_mode=self.mode, in_series=in_series, in_parent=own,
                    timeout=timeout, copy=False,  # (the answer is copied once, as it is sent)
                )  # fmt: skip
            self.envs: list[EnvInfo] = list(self.inner.call(EnvInfo.of))
        except Exception as exc:  # reported by describe(): the caller raises it
            self.init_failure = self._fault(exc)
            self.close()

    def describe(self) -> tuple[str, Any]:
        """As ``EnvActor.describe``, and ``children``: the processes it started."""
        if self.init_failure is not None:
            status, payload = self.init_failure
            if status == INNER:  # (says where it runs: the error names the node)
                return status, (*payload[:3], placed())
            return status, payload
        import psutil

        children = [p.pid for p in psutil.Process().children(recursive=True)]
        return OK, {**placed(), "envs": self.envs, "children": children}

    def step(self, actions: Any) -> tuple[str, Any]:
        try:
            return OK, self.inner.step(actions)
        except Exception as exc:
            return self._fault(exc)

    def graph_step(self, actions: Any) -> bytes:
        """A step of the compiled graph, its answer kept (`kept`) and sent pickled (the graph's
        buffer is reused at the next step)."""
        with self._graph_lock:
            answer = self.step(actions)
            self.graph_steps, self._kept_answer = self.graph_steps + 1, answer
        return dumps(answer)

    def kept(self, seq: int, actions: Any) -> tuple[str, Any]:
        """The answer to graph step ``seq`` (`KEPT`, by the channel once the graph broke): the
        kept one, or, if the graph never gave this actor that step's actions, a step now."""
        with self._graph_lock:
            if self.graph_steps >= seq:
                return self._kept_answer  # type: ignore[return-value]
            self.graph_steps = seq
            return self.step(actions)

    def handle(self, cmd: str, data: Any) -> tuple[str, Any]:
        """Any env command of `Cmd` (and the plugin's own `KEPT`)."""
        if cmd in (Cmd.STEP, Cmd.STEP_ENVS):  # (the pool's STEP_ENVS: every env, RayPool.send)
            return self.step(data if cmd == Cmd.STEP else data[1])
        if cmd == KEPT:
            return self.kept(*data)
        if cmd == Cmd.CLOSE:
            return self.close()
        try:
            if cmd == Cmd.RESET:
                out: Any = self._reset(data)
            elif cmd == Cmd.CALL:
                if data.args is None:
                    out = list(self.inner.get_attr(data.name, indices=data.local))
                else:
                    out = self.inner.env_method(
                        data.name, *data.args, indices=data.local, **data.kwargs
                    )
                pickles(out)  # an unpicklable result is the env's error, not a dead actor
            elif cmd == Cmd.SET_ATTR:
                out = self.inner.set_attr(data.name, list(data.values), indices=data.local)
            elif cmd == Cmd.RESTARTED:
                out = self._restarted(data)
            elif cmd == Cmd.RESTART_RESET:
                out = self._restart_reset(data)
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as exc:
            return self._fault(exc)
        return OK, out

    def open_channel(self, authkey: bytes) -> tuple[str, int]:
        """Listen on this node's address for one client that proves ``authkey`` (the vectorized
        env) and serve its later commands from a thread (`_serve`); returns the address."""
        from multiprocessing.connection import Listener

        import ray

        listener = Listener((ray.util.get_node_ip_address(), 0), authkey=authkey)
        threading.Thread(target=self._serve, args=(listener,), name="envfactory-channel",
                         daemon=True).start()  # fmt: skip
        return listener.address

    def _serve(self, listener: Any) -> None:
        """Answer each ``(cmd, data)`` as `handle` (``close`` last), both ways by `Wire`."""
        try:
            with listener:
                conn = listener.accept()  # (one client, the vectorized env; else it ends)
        except Exception:
            return
        # (no Nagle delay: a message over 16 KiB is two writes)
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(conn.fileno())) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wire, cmd = Wire(), None
        with conn:
            while cmd != Cmd.CLOSE:
                try:
                    cmd, data = wire.loads(conn.recv_bytes())
                    try:
                        message = wire.dumps(self.handle(cmd, data))
                    except Exception as exc:
                        message = pickles((ERROR, failure_of(exc, pickles)))
                    conn.send_bytes(message)
                except (EOFError, OSError):
                    return  # the vectorized env went: Ray kills this actor

    def close(self) -> tuple[str, Any]:
        if self.inner is not None:
            inner, self.inner = self.inner, None
            inner.close()
        return OK, None

    # -- the env commands -----------------------------------------------------------------
    def _answer(self, obs: Any, infos: dict) -> tuple:
        flags = np.zeros(self.n, dtype=np.bool_)
        return obs, np.zeros(self.n, dtype=np.float64), flags, flags, infos

    def _reset(self, r: Reset) -> tuple:
        if r.mask is not None and not np.any(r.mask):
            return self._answer(None, {})  # none of these envs: the caller keeps their obs
        options = r.options
        if r.mask is not None:
            options = {**(options or {}), "reset_mask": np.asarray(r.mask, dtype=np.bool_)}
        obs, infos = self.inner.reset(seed=list(r.seeds), options=options)
        return self._answer(obs, infos)

    def _restarted(self, rs: Restarted) -> tuple:
        """This actor replaces one that failed during a step: the core's `after_step` rule."""
        self.inner.reset()  # (a fresh inner env steps only after a reset)
        rule = after_step(rs.done, self.mode)
        armed = [(r, obs) if r is Recover.LOST else r for r, obs in zip(rule, rs.last_obs)]
        self.inner.set_attr(Recoverable.ATTR, armed)
        return self.inner.step(self.inner.action_space.sample())  # (actions unused)

    def _restart_reset(self, rr: RestartReset) -> tuple:
        """This actor replaces one that failed during a reset: the core's `after_reset` rule."""
        r, mask = rr.reset, rr.reset.mask
        seeds = list(r.seeds) if mask is None else [s if m else None for s, m in zip(r.seeds, mask)]
        obs, infos = self.inner.reset(seed=seeds, options=r.options)  # (every env: a fresh one)
        keep = np.ones(self.n, dtype=np.bool_) if mask is None else np.asarray(mask, np.bool_)
        infos = keep_rows(infos, keep)
        infos["restarted"], infos["_restarted"] = keep.copy(), keep.copy()
        if mask is None:
            return self._answer(obs, infos)
        rule = after_reset(mask, rr.done, self.mode)
        armed = [(r, last) if r is Recover.LOST else r for r, last in zip(rule, rr.last_obs)]
        per_env = list(iterate(self.inner.observation_space, obs))
        for i in np.flatnonzero(~keep):
            per_env[i] = rr.last_obs[i]
        self.inner.set_attr(Recoverable.ATTR, armed)
        return self._answer(per_env, infos)  # (a list: the caller batches it)

    def _fault(self, exc: BaseException) -> tuple[str, Any]:
        """An exception of the inner env as an answer: an env's own ``(ERROR, Failure)``, or
        ``(INNER, (kind, what, where, placed))`` for an inner worker's fault (``kind``: ``env``,
        ``died`` or ``timeout``; ``placed``: set by `describe`)."""
        if not isinstance(exc, WorkerError):
            return ERROR, failure_of(exc, pickles)
        envs = [self.start + i for i in exc.env_indices]
        where = f"subproc worker {exc.worker} (pid {exc.pid}, envs {envs})"
        if isinstance(exc, RemoteEnvError):  # (with the env's own exception if it pickles)
            original = failure_of(exc.__cause__, pickles).exc if exc.__cause__ else None
            failure = Failure(exc.exc_type, original, exc.remote_traceback)
            return INNER, ("env", failure, where, None)
        if isinstance(exc, WorkerTimeoutError):
            return INNER, ("timeout", "did not answer", where, None)
        how = exc.signal or (f"exit code {exc.exitcode}" if exc.exitcode is not None else "")
        return INNER, ("died", f"died ({how})" if how else "died", where, None)

