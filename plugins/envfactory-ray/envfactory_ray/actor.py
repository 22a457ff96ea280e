"""The two ends of one Ray actor: `EnvActor` (hosts a slice of envs with the core's `EnvHost`)
and `ActorHandle` (the vectorized env's `WorkerHandle` for it). Every answer is ``(OK, payload)``
or ``(ERROR, Failure)``, so the caller raises the same ``RemoteEnvError`` as ``subproc``.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array

from envfactory import WorkerDiedError, WorkerError, WorkerTimeoutError
from envfactory.vectorizers.remote import (
    HOLD,
    Cmd,
    EnvHost,
    EnvInfo,
    Failure,
    WorkerHandle,
    failure_of,
)
from envfactory.vectorizers.shm import supports_shared_memory

from .causes import IP, KILLED, START_CAUSES, first_line, lost_node_of, ray_cause
from .graph import KEPT, GraphBroke, StepGraph
from .wire import Wire

__all__ = ["ERROR", "INNER", "OK", "ActorHandle", "EnvActor", "fetch_together", "pickles"]

#: an actor's answer: ``(OK, payload)``, ``(ERROR, Failure)``, or a node actor's
#: ``(INNER, (kind, what, where, placed))`` for a fault of its inner vectorized env (see `node`)
OK, ERROR, INNER = "ok", "error", "inner"


def pickles(obj: Any) -> bytes:
    """``obj`` pickled as Ray will send it (raises if it cannot be)."""
    import ray.cloudpickle

    return ray.cloudpickle.dumps(obj)


#: seconds to open a node actor's channel, or to hear from Ray why it closed
CHANNEL_TIMEOUT = 10.0
#: seconds past a step's deadline for a node's kept answer once the graph broke (it cannot say)
KEPT_GRACE = 0.05


class Channel(Connection):
    """A ``Connection`` whose waits poll one ``select.poll`` registered once (``Connection.poll``
    builds a selector at every wait)."""

    def __init__(self, handle: int) -> None:
        super().__init__(handle)
        self._poller = select.poll()
        self._poller.register(handle, select.POLLIN)

    def _poll(self, timeout: float | None) -> bool:
        return bool(self._poller.poll(None if timeout is None else max(0.0, timeout) * 1000))


def connect(address: Any, key: bytes) -> Any:
    """``multiprocessing.connection.Client(address, authkey=key)`` as a `Channel`, its TCP
    connect bounded by `CHANNEL_TIMEOUT` (a firewalled port would take the OS's minutes)."""
    import socket
    from multiprocessing.connection import answer_challenge, deliver_challenge

    sock = socket.create_connection(tuple(address), timeout=CHANNEL_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (a message over 16 KiB: 2 writes)
    sock.settimeout(None)  # (a Connection reads a blocking descriptor)
    conn = Channel(sock.detach())
    try:
        answer_challenge(conn, key)
        deliver_challenge(conn, key)
    except BaseException:
        conn.close()
        raise
    return conn


def placed() -> dict[str, Any]:
    """Where this actor runs: ``{"pid", "actor_id", "node_id", "node_ip"}``."""
    import ray

    ctx = ray.get_runtime_context()
    return {
        "pid": os.getpid(),
        "actor_id": ctx.get_actor_id(),
        "node_id": ctx.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
    }


class EnvActor:
    """Hosts envs ``start .. start + len(env_fns)`` of a vectorized env (made a Ray actor
    with ``ray.remote(EnvActor)`` by
    [`envfactory_ray.vecenv.RayVecEnv`][envfactory_ray.vecenv.RayVecEnv])."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], start: int,
                 mode: AutoresetMode) -> None:  # fmt: skip
        self.start = start
        self.init_failure: Failure | None = None
        try:
            envs = [fn() for fn in env_fns]
        except Exception as exc:  # reported by describe(): the caller raises it
            self.init_failure = failure_of(exc, pickles)
            return
        self.host = EnvHost(envs, mode, self._answer)
        self.space = envs[0].observation_space
        self.arrays = supports_shared_memory(self.space)
        self._buf: Any = create_empty_array(self.space, n=len(envs)) if self.arrays else None

    def _answer(self, calls: list, mask: Any) -> tuple:
        """``(obs, rewards, terminations, truncations, info calls)``; obs one batch or a list."""
        r = self.host.runner
        obs: Any = list(r.obs)
        if self.arrays:
            with contextlib.suppress(Exception):
                obs = concatenate(self.space, r.obs, self._buf)
        return obs, r.rewards, r.terminations, r.truncations, calls

    def describe(self) -> tuple[str, Any]:
        """Where the actor runs (`placed`) and its ``envs`` (`EnvInfo` s)."""
        if self.init_failure is not None:
            return ERROR, self.init_failure
        return OK, {**placed(), "envs": [EnvInfo.of(e) for e in self.host.envs]}

    def step(self, actions: Any) -> tuple[str, Any]:
        return self.handle(Cmd.STEP, actions)

    def handle(self, cmd: str, data: Any) -> tuple[str, Any]:
        try:
            out = self.host.handle(cmd, data)
            if cmd == Cmd.CALL:
                pickles(out)  # an unpicklable result is the env's error, not a dead actor
            return OK, out
        except Exception as exc:
            return ERROR, failure_of(exc, pickles)


def fetch_together(batch: list[ActorHandle], deadline: float | None) -> None:
    """One ``ray.get`` for the answers by Ray of a step's ``batch`` of handles (emptied); anything
    unusual (a timeout, a dead actor) is left to each handle's own ``ray.get``, which names it."""
    import ray

    handles = [h for h in batch if not isinstance(h.ref, tuple)]
    batch.clear()
    try:
        refs = [h.ref for h in handles]
        answers = HOLD.waiting(lambda limit: ray.get(refs, timeout=limit), _left(deadline))
    except Exception:
        return
    for h, answer in zip(handles, answers):
        h.fetched = answer


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


NODE_LABEL = "ray.io/node-id"  # (Ray's label of a node's id, for ``label_selector``)


def nodes_text(ids: Sequence[str]) -> str:
    """``node 2dd997b28020`` or ``nodes 2dd997b28020, 8f40acf3a1b2`` (ids cut to 12)."""
    cut = ", ".join(i[:12] for i in ids)
    return f"node{'s' if len(ids) > 1 else ''} {cut}"


class ActorHandle(WorkerHandle):
    """The vectorized env's end of one actor: ``send`` is a Ray call (or a message by the node
    actor's channel, or a post to the compiled graph), ``recv`` its answer by the deadline,
    ``kill`` ``ray.kill``; errors name the actor, its node and pid, with Ray's cause.
    ``args``: what a node actor takes after its envs."""

    resumable = True  # (recv asked again after a Ctrl-C gives the same answer)
    own_wait = True  # (a Ctrl-C goes through only in its waits: never part-way in a read)
    # the current actor's state (`spawn` sets it anew)
    # the call in flight: a Ray ref (the actor's describe: `describing`), ``()`` for a message by
    # the channel, ``(seq, actions)`` for a step posted to the compiled graph
    ref: Any = None
    describing = killed = init_failed = False
    pid: int | None = None
    actor_id = node_id = node_ip = lost_node = ""  # (lost_node: the one Ray said was lost)
    avoid: tuple[str, ...] = ()  # the nodes it was placed away from
    fetched: tuple[str, Any] | None = None  # this handle's answer, once `fetch_together` got it
    _answer: tuple[Any, tuple[str, Any]] | None = None  # (its ref, raw answer) once read
    graph: StepGraph | None = None  # the compiled graph that steps it, if any
    graph_steps = 0  # steps posted to that graph

    def __init__(self, index: int, start: int, stop: int, env_id: str, fns: list, num_cpus: Any,
                 args: tuple = (), placement: dict[str, Any] | None = None) -> None:  # fmt: skip
        super().__init__(index, start, stop, env_id)
        self.fns, self.num_cpus, self.args = fns, num_cpus, args
        self.placement = dict(placement or {})  # Ray's actor options (`PLACEMENT_KEYS`)
        self.inner = ""  # the inner worker an error being raised names (see recv)
        self.actor: Any = None
        self.channel: Any = None  # the direct connection to a node actor, once open
        self.batch: list[ActorHandle] = []  # the handles whose step answers are fetched together
        self.channels = True  # a node actor is talked to by a direct channel once started
        self.wire = Wire(pickles)
        self.children: list[int] = []  # the processes the actor started

    def spawn(self, cls: Any, mode: AutoresetMode, avoid: Sequence[str] = ()) -> None:
        """Start a new actor of ``cls`` for these envs on a node not in ``avoid`` (the lost
        nodes); its first answer is its `EnvInfo` s."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": 0}
        options.update(self.placement)
        self.avoid = tuple(sorted(set(avoid)))
        if self.avoid:  # (the user's own selector on the node id gives way to it)
            ids = self.avoid
            options["label_selector"] = {
                **self.placement.get("label_selector", {}),
                NODE_LABEL: f"!{ids[0]}" if len(ids) == 1 else f"!in({', '.join(ids)})",
            }
        try:
            made = cls.options(**options)
        except ValueError as exc:  # a Ray without label selectors: placed anywhere
            if "label_selector" not in str(exc) or "label_selector" in self.placement:
                raise
            self.avoid = ()
            del options["label_selector"]
            made = cls.options(**options)
        self._close_channel()
        self.actor = made.remote(self.fns, self.start, mode, *self.args)
        self.ref, self.describing = self.actor.describe.remote(), True
        self.fetched = self._answer = self.pid = self.graph = None
        self.killed = self.init_failed = False
        self.lost_node = self.node_id = self.node_ip = ""
        self.graph_steps, self.children = 0, []
        actor_id = getattr(self.actor, "_actor_id", None)  # (errors name the new actor)
        self.actor_id = actor_id.hex() if actor_id is not None else ""

    @property
    def label(self) -> str:
        return f"actor {self.index}"

    @property
    def where(self) -> str:
        actor = f"Ray actor {self.actor_id[:12] or '?'}"
        if self.describing and not self.node_id:  # Ray did not say where it went
            away = f", placed away from {nodes_text(self.avoid)}" if self.avoid else ""
            return f"{actor}, not started{away}"
        inner = f", in its {self.inner}" if self.inner else ""
        return f"{actor} on node {self.node_ip or '?'} ({self.node_id[:12] or '?'}){inner}"

    @property
    def alive(self) -> bool:
        return self.actor is not None and not self.killed

    # -- messages (a call's send runs with Ctrl-C held; recv lets one through only in its
    # waits, `HOLD.waiting`, and answers again with the same answer after it) --------------
    def send(self, cmd: str, data: Any) -> None:
        self._answer = None
        self._submit(cmd, data)

    def _submit(self, cmd: str, data: Any) -> None:
        graph = self.graph
        if cmd == Cmd.STEP and graph is not None and not graph.broken:
            self.graph_steps += 1
            self.ref = (self.graph_steps, data)
            graph.post(self, data)
            return
        if self.channel is not None:
            # (the hot path's arrays raw, else as Ray pickles: what was registered by value)
            message = self.wire.dumps((cmd, data)) if cmd == Cmd.STEP else pickles((cmd, data))
            try:
                self.channel.send_bytes(message)
            except OSError:  # the actor is gone: recv says how
                pass
            self.ref = ()
            return
        self.ref = (self.actor.step.remote(data) if cmd == Cmd.STEP
                    else self.actor.handle.remote(cmd, data))  # fmt: skip

    def recv(self, deadline: float | None, call: str) -> Any:
        import ray

        ref, answer = self.ref, self._answer
        if answer is not None and answer[0] is ref:  # asked again after an interrupt
            return self._answered(*answer[1], call)
        by_ray = not isinstance(ref, tuple)
        if by_ray and self in self.batch:
            fetch_together(self.batch, deadline)
        fetched, self.fetched = self.fetched, None
        remaining = _left(deadline)
        raw: Any = None
        try:
            if by_ray:
                raw = fetched or HOLD.waiting(lambda t: ray.get(ref, timeout=t), remaining)
            elif ref:  # a step posted to the compiled graph
                raw = self.graph.answer(self, remaining)  # type: ignore[union-attr]
            # (a blocking poll: a spin was no faster on 2 cores, where it takes the actor's core;
            # a read is never cut: Ctrl-C held)
            elif HOLD.waiting(self.channel.poll, remaining):
                raw = self.wire.loads(self.channel.recv_bytes())
        except GraphBroke:  # (not this actor's death): the answer it kept, by its channel
            self.graph.teardown()  # type: ignore[union-attr]
            self.graph = None
            self._submit(KEPT, ref)
            if deadline is not None:  # (a node that answered in time answers in a round trip)
                deadline = max(deadline, time.monotonic() + KEPT_GRACE)
            return self.recv(deadline, call)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError from None
        except ray.exceptions.RayActorError as exc:
            raise self._died(exc, call) from exc
        except ray.exceptions.RayTaskError as exc:  # the answer could not be sent back
            cause = getattr(exc, "cause", None)
            kind = f"{type(cause).__module__}.{type(cause).__qualname__}" if cause else "RayTaskError"  # noqa: E501
            raise self.remote_error(call, Failure(kind, cause, str(exc))) from None
        except ray.exceptions.RayError as exc:  # object lost, node died, ...
            what = f"failed ({type(exc).__name__}: {first_line(exc)})"
            raise self.error(WorkerDiedError, what, call) from exc
        except (EOFError, OSError) as exc:  # a node actor (or its node) went: Ray says how, in time
            self._close_channel()
            try:
                ray.get(self.actor.describe.remote(), timeout=CHANNEL_TIMEOUT)
            except ray.exceptions.RayActorError as died:
                raise self._died(died, call) from exc
            except Exception:
                pass
            what = "lost its connection (the actor did not answer)"
            raise self.error(WorkerDiedError, what, call) from exc
        if raw is None:  # (the caller kills the actor: WorkerTimeoutError)
            raise TimeoutError
        self._answer = (ref, raw)  # (the ref is kept until then: asked again, the same)
        status, payload = raw
        return self._answered(status, payload, call)

    def _answered(self, status: str, payload: Any, call: str) -> Any:
        """The payload of an ``(OK, payload)`` answer, else its error raised as ``subproc``
        would; after ``describe``, a node actor's channel is opened (`NodeActor.open_channel`;
        a node that cannot be reached, behind a firewall, is called through Ray)."""
        import ray

        if status == ERROR:
            raise self.remote_error(call, payload)
        if status == INNER:  # a node actor's inner fault, naming the inner worker too
            kind, what, where, placed = payload
            if placed is not None:
                self._placed_at(placed)
            if kind == "timeout":
                raise TimeoutError(f"its {where} {what}")
            if kind != "env":
                raise self.error(WorkerDiedError, f"lost its {where}, which {what}", call)
            self.inner = where
            try:
                raise self.remote_error(call, what)
            finally:
                self.inner = ""
        if not self.describing:
            return payload
        self.describing = False
        self._placed_at(payload)
        if self.args and self.channels:  # a node actor: its hot path goes by a channel
            key = os.urandom(32)
            try:
                address = ray.get(self.actor.open_channel.remote(key), timeout=CHANNEL_TIMEOUT)
                self.channel = connect(address, key)
                self.wire = Wire(pickles)  # (a new stream, new layouts)
            except Exception as exc:  # (its own death shows at the next call, through Ray)
                self.channel = None
                warnings.warn(f"vectorizer=ray: {self.label} [{self.where}]: no direct connection "
                              f"to the node actor ({type(exc).__name__}: {first_line(exc)}); its "
                              "calls go through Ray (about 1 ms each)", RuntimeWarning,
                              stacklevel=2)  # fmt: skip
        return payload["envs"]

    def _close_channel(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            with contextlib.suppress(OSError):
                channel.close()

    def _placed_at(self, where: dict[str, Any]) -> None:
        self.pid, self.node_id, self.node_ip = where["pid"], where["node_id"], where["node_ip"]
        self.actor_id = where["actor_id"] or self.actor_id
        self.children = list(where.get("children", ()))

    def _died(self, exc: Exception, call: str) -> WorkerError:
        """The ``WorkerDiedError`` for Ray's actor error ``exc`` with its cause (`ray_cause`);
        notes the node Ray said was lost."""
        import ray

        self.killed = True
        self.lost_node = lost_node_of(exc, self.node_id)
        self.init_failed = bool(getattr(exc, "_actor_init_failed", False))
        cause = ray_cause(exc)
        if self.describing and not self.node_id and self.lost_node:
            self.node_id = self.lost_node  # where it had been placed
            ip = IP.search(str(exc))
            self.node_ip = ip.group(1) if ip else ""
        unreachable = isinstance(exc, ray.exceptions.ActorUnavailableError)
        verb = "became unreachable" if unreachable else "died"
        if self.describing:
            verb += " before it started"
            explained = self.init_failed or self.lost_node or cause.startswith(KILLED)
            if not explained:  # Ray's reason explains little
                cause += f"; {START_CAUSES}"
        return self.error(WorkerDiedError, f"{verb} ({cause})", call)

    def kill(self) -> None:
        import ray

        self._close_channel()
        if self.actor is not None and not self.killed:
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:
                pass
            self.killed = True  # (after: a Ctrl-C before the kill leaves it to kill again)

    def close(self) -> None:
        self._close_channel()
        self.actor = self.ref = None

    def error(self, cls: type[WorkerError], what: str, call: str, tb: str = "") -> WorkerError:
        if cls is WorkerTimeoutError and self.describing:
            other = f" other than the lost {nodes_text(self.avoid)}" if self.avoid else ""
            cpus = "null" if self.num_cpus is None else f"{self.num_cpus:g}"
            asked = "".join(f", {key}={self.placement[key]!r}" for key in
                            ("num_gpus", "resources", "label_selector") if self.placement.get(key))
            env = ("; or its runtime_env could not be set up there (see Ray's runtime_env logs)"
                   if self.placement.get("runtime_env") else "")  # fmt: skip
            what += (
                f" (not started: no live node{other} had room for an actor of "
                f"vectorizer.num_cpus={cpus}{asked}, with what other actors hold (see `ray "
                f"status`), or it could not start there{env}; add a node, lower what an "
                "actor asks for, or raise vectorizer.start_timeout)"
            )
        return self._tag(super().error(cls, what, call, tb))

    def remote_error(self, call: str, failure: Failure) -> Any:
        return self._tag(super().remote_error(call, failure))

    def _tag(self, err: Any) -> Any:  # (the errors name the actor and its node)
        err.actor_id, err.node_id, err.node_ip = self.actor_id, self.node_id, self.node_ip
        return err
