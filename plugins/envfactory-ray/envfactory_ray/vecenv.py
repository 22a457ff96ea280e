"""``RayVecEnv``: the core's front (`RemoteVecEnv`) over a `RayGroup` (one `ActorHandle` per
actor): the Ray session, placing the actors and the batch from one batch per actor.
"""

from __future__ import annotations

import contextlib
import copy as _copy
import difflib
import json
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from envfactory import ConfigError, WorkerDiedError
from envfactory.errors import restart_message
from envfactory.vectorizers.remote import (
    EnvInfo,
    RemoteVecEnv,
    WorkerGroup,
    WorkerHandle,
    count_restart,
    env_label,
    merge_block,
    plan_split,
)
from envfactory.vectorizers.shm import supports_shared_memory

from .actor import ActorHandle, EnvActor, nodes_text
from .causes import first_line
from .graph import StepGraph
from .node import NodeActor

__all__ = ["LOST_NODE_SECONDS", "PLACEMENT_KEYS", "RayGroup", "RayVecEnv", "connect"]

#: the options passed through to Ray's ``actor.options(...)`` (``num_cpus`` has its own)
PLACEMENT_KEYS = ("num_gpus", "resources", "scheduling_strategy", "label_selector", "runtime_env")

#: how long a node Ray said was lost is kept out of the placement of rebuilt actors (Ray marks
#: a lost node dead within about 15 s; a new node comes with a new id)
LOST_NODE_SECONDS = 60.0

# -- the Ray session: a Ray initialized in this process is joined, never shut down; one that
# envfactory initialized is shut down by the last close() (the Ray guide) -----------------
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
        if address is not None and address.startswith("ray://"):
            import ray._private.utils as utils  # (Ray Client needs ray[client]: Ray's check)

            why = getattr(utils, "get_ray_client_dependency_error", lambda: None)()
            if why is not None:
                raise _client_error(address, str(why))
        try:
            ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                     configure_logging=True)  # fmt: skip
        except Exception as exc:
            if address is not None and "ray[client]" in str(exc):
                raise _client_error(address, first_line(exc)) from exc
            where = "a local Ray" if address is None else f"the Ray cluster at {address!r}"
            auth = ("; a cluster started with token auth also needs RAY_AUTH_MODE=token and its "
                    "token (RAY_AUTH_TOKEN) in this process" if isinstance(exc, ConnectionError)
                    else "")  # fmt: skip
            raise ConfigError(
                f"vectorizer=ray: cannot start or join {where}: {type(exc).__name__}: "
                f"{first_line(exc) if str(exc).strip() else ''} (set "
                "vectorizer.address=null for a local Ray, or the address of a running cluster "
                f"such as 'ray://head:10001' or 'head:6379'{auth})"
            ) from exc
        _session["owned"], _session["users"] = True, 1
        return True


def _client_error(address: str, why: str) -> ConfigError:
    return ConfigError(
        f"vectorizer=ray: vectorizer.address={address!r} is a Ray Client address, which needs "
        f"ray[client] ({why}); install it with pip install 'envfactory-ray[client]' (or "
        "'ray[client]'), or run on a cluster node with an address such as 'head:6379'"
    )


def _disconnect(owned: bool) -> None:
    """Shut Ray down if envfactory started it and this was its last user."""
    import ray

    with _session_lock:
        if owned and _session["owned"]:
            _session["users"] -= 1
            if _session["users"] <= 0:
                _session["owned"], _session["users"] = False, 0
                ray.shutdown()


class RayGroup(WorkerGroup):
    """The Ray actors of one `RayVecEnv`: joining Ray, placing the actors, the batch from
    one batch per actor, rebuilding an actor away from lost nodes."""

    handles: list[ActorHandle]  # type: ignore[assignment]

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], options: dict[str, Any]) -> None:
        """Its keys of a vectorized env's ``options`` are popped (the front's are left) and
        checked by the schema, for a caller that did not compose."""
        super().__init__()
        self._owned = False  # (close() may run before Ray is joined)
        from .config import RayConfig

        keys = ("address", "in_series", "num_cpus", "start_timeout", "in_actor", "compiled_graph")
        mine = RayConfig(**{k: options.pop(k) for k in keys if k in options})
        self.address, self.num_cpus, self.in_actor = mine.address, mine.num_cpus, mine.in_actor
        self.start_timeout = mine.start_timeout  # (inf: null)
        self.compiled_graph = bool(mine.compiled_graph)  # (False once Ray refused to compile it)
        self._graph: StepGraph | None = None
        #: the actors a compile failed over because one of them was gone (its node lost): no
        #: graph until one of them is rebuilt (the channels report its death meanwhile)
        self._graph_lost_over: list[str] = []
        #: node actors are talked to by a direct channel each (False: by Ray calls, the pool's)
        self.channels = True
        self.in_series = mine.in_series
        #: Ray's actor options beyond ``num_cpus`` (`PLACEMENT_KEYS`), those given
        self.placement = {k: v for k in PLACEMENT_KEYS if (v := options.pop(k, None))}
        if self.placement.get("runtime_env"):
            _check_runtime_env(self.placement["runtime_env"])
        self._lost: dict[str, float] = {}  # node id -> when Ray said it was lost
        self.env_fns, self.num_envs = list(env_fns), len(env_fns)
        self.env_id = env_label(env_fns[0])

    def start(self) -> None:
        """Join Ray, place the actors (``in_series`` envs each; null: as many actors as the
        cluster's CPUs hold at ``num_cpus`` each) and start them."""
        import ray

        self._owned = connect(self.address)
        env_fns, self.env_fns = self.env_fns, []
        total = float(ray.cluster_resources().get("CPU", 0.0))
        if self.in_actor and self.num_cpus is None:  # the smallest live node's: one actor a node
            cpus = [n.get("Resources", {}).get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
            if not any(cpus):
                raise ConfigError(
                    "vectorizer=ray: vectorizer.in_actor needs a node with CPUs, and the Ray "
                    "cluster has none (see `ray status`); add a node with CPUs"
                )
            self.num_cpus = min(float(c) for c in cpus if c > 0)
        per_actor = self.num_cpus or 0.0
        slots = int(total // per_actor) if per_actor > 0 else int(total)
        plan = plan_split(self.num_envs, in_series=self.in_series, cpus=max(1, slots), load=0.0)
        split, self.in_series = plan.slices(), plan.workers[0]  # (the core's plan: one per slot)
        if self.address is None:  # (a local Ray cannot grow; a cluster may add nodes)
            if len(split) * per_actor > total + 1e-9:
                raise ConfigError(_too_many_cpus(len(split), per_actor, total, self.in_series))
            _check_local_resources(self.placement, ray.cluster_resources())
        self._cls = ray.remote(NodeActor if self.in_actor else EnvActor)
        args = (per_actor, self.env.timeout, self.env.restart) if self.in_actor else ()
        self.set_handles([ActorHandle(k, a, b, self.env_id, env_fns[a:b], self.num_cpus, args,
                                      self.placement)
                          for k, (a, b) in enumerate(split)])  # fmt: skip
        self._batch: list[ActorHandle] = []  # (the handles' step answers fetched together)
        for h in self.handles:
            h.channels = self.channels
            h.spawn(self._cls, self.env.autoreset_mode)
            h.batch = self._batch
        self.wait_started(self.handles)
        space = self.env.single_observation_space
        self._arrays = supports_shared_memory(space)
        self._obs = create_empty_array(space, n=self.num_envs)
        self._env_obs: list[Any] = [None] * self.num_envs
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terms = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncs = np.zeros(self.num_envs, dtype=np.bool_)

    # -- WorkerGroup's hooks ------------------------------------------------------------
    def collect(
        self, handles: Sequence[WorkerHandle], results: list[Any], mask: np.ndarray | None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        listed = []
        for h, (obs, rew, term, trunc, _) in zip(handles, results):
            a, b = h.start, h.stop
            self._rewards[a:b], self._terms[a:b], self._truncs[a:b] = rew, term, trunc
            if isinstance(obs, list):
                listed.append((h, obs))
            elif obs is not None:  # (None: a masked reset reset none of its envs: they keep theirs)
                _put(self._obs, obs, a, b)
        if listed:  # other spaces; or observations an actor could not batch
            if self._arrays:  # (the batching below names the env)
                self._env_obs = list(iterate(self.env.observation_space, self._obs))
            for h, obs in listed:
                self._env_obs[h.start : h.stop] = obs
            self._obs = self.batch_obs(self._env_obs, self._obs)
        if self.in_actor:  # each node actor's infos: a dict of its rows
            infos: dict = {}
            for h, answer in zip(handles, results):
                if answer[4]:
                    infos = merge_block(infos, answer[4], h.start, self.num_envs)
        else:
            infos = self.merge_answers(handles, [answer[4] for answer in results])
        obs, rewards, terms = self.out(self._obs), self._rewards.copy(), self._terms.copy()
        return obs, rewards, terms, self._truncs.copy(), infos

    def post_step(self, actions: Any) -> None:
        graph = self._step_graph() if self.compiled_graph else None
        super().post_step(actions)
        if graph is None and len(self.handles) > 1:
            self._batch[:] = [h for h in self.handles if h.channel is None]  # (those by Ray)

    def _step_graph(self) -> StepGraph | None:
        """The graph over the node actors: the last one, or a new one; None while an actor
        is not started, was gone at the last compile, or once Ray refused to compile."""
        handles = self.handles
        graph, ids = self._graph, [h.actor_id for h in handles]
        if graph is not None and (graph.broken or ids != graph.actor_ids):  # (other actors now)
            graph.teardown()
            graph = self._graph = None
        ready = all(h.alive and not h.describing for h in handles)
        if graph is None and ready and ids != self._graph_lost_over:
            import ray

            try:
                graph = self._graph = StepGraph(handles)
            except ray.exceptions.RayActorError:  # an actor gone, not Ray refusing the graph
                self._graph_lost_over = ids
            except Exception as exc:
                self.compiled_graph = False
                _warn(f"vectorizer.compiled_graph: Ray could not compile the step graph ("
                      f"{type(exc).__name__}: {first_line(exc)}); every step goes by the actors' "
                      "channels")  # fmt: skip
        for h in handles:
            h.graph = graph
        return graph

    def close(self, timeout: float | None, terminate: bool, locked: bool) -> None:
        """Tear the compiled graph down first (while its actors live), then close."""
        if not terminate and self._graph is not None:
            self._graph.teardown()
        super().close(timeout, terminate, locked)

    def last_obs(self, handle: WorkerHandle) -> list[Any]:
        per_env = list(iterate(self.env.observation_space, self._obs))
        return [_copy.deepcopy(per_env[i]) for i in range(handle.start, handle.stop)]

    def startup_budget(self) -> float:
        """Seconds an actor may take to start (placed, envs built, first answer), at each
        rebuild too: ``start_timeout``, else the core's (120 s, or ``timeout`` when larger)."""
        return self.start_timeout or super().startup_budget()

    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        """A new actor for ``handle``'s envs within ``budget`` seconds, placed away from the nodes
        Ray said were lost; one that dies before it starts (on a lost node Ray still lists) is
        tried again elsewhere, each try counted against ``max_restarts``."""
        assert isinstance(handle, ActorHandle)
        deadline = time.monotonic() + budget
        pause = 0.25
        while True:
            handle.spawn(self._cls, self.env.autoreset_mode, self._lost_nodes(handle))
            try:
                return list(self.wait(handle, deadline, "restart", budget))
            except WorkerDiedError as err:
                if handle.init_failed or not handle.describing:
                    raise  # its creation failed (would fail again), or it died after starting
                sup = self.env.supervisor  # (the core's budget; past it, raises ``err``)
                count_restart(handle.restarts, err, handle.label, sup.max_restarts,
                              sup.restart_window)  # fmt: skip
                left = deadline - time.monotonic()
                if left <= pause:
                    raise
                lost = self._lost_nodes(handle)
                away = f" away from {nodes_text(lost)}" if lost else ""
                _warn(f"{restart_message(err)}; trying again{away}")
                time.sleep(pause)
                pause = min(2 * pause, 2.0)

    def _lost_nodes(self, handle: ActorHandle) -> list[str]:
        """The nodes Ray said were lost in the last `LOST_NODE_SECONDS` (``handle``'s too)."""
        now = time.monotonic()
        if handle.lost_node:
            self._lost[handle.lost_node] = now
        return sorted(n for n, t in self._lost.items() if now - t < LOST_NODE_SECONDS)

    def release(self, everything: bool) -> None:
        """Wait (5 s at most) for the killed actors' processes on this node to exit, then let go
        of the Ray session (`_disconnect`)."""
        import ray

        try:
            if self._graph is not None:
                self._graph.teardown()
            here = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
            mine = [h for h in self.handles if here and h.node_id == here]
            import psutil

            procs = []
            for pid in {p for h in mine for p in [h.pid, *h.children] if p is not None}:
                with contextlib.suppress(psutil.Error):
                    procs.append(psutil.Process(pid))
            psutil.wait_procs(procs, timeout=5.0)
        finally:
            owned, self._owned = self._owned, False
            _disconnect(owned)


class RayVecEnv(RemoteVecEnv):
    """Envs in Ray actors (``in_series`` per actor); same trajectories as ``dummy``. The
    fault options are `RemoteVecEnv`'s, the others `RayGroup`'s."""

    group: RayGroup

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], autoreset_mode: Any = "next_step",
                 **options: Any) -> None:  # fmt: skip
        super().__init__(RayGroup(env_fns, options), autoreset_mode, **options)

    @property
    def num_cpus(self) -> float | None:
        """CPUs each actor reserves (null with ``in_actor``: the smallest node's)."""
        return self.group.num_cpus

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles, one per ``in_series`` envs."""
        return [h.actor for h in self.group.handles]

    def __repr__(self) -> str:
        return (f"RayVecEnv({self.env_id}, num_envs={self.num_envs}, "
                f"actors={len(self.group.handles)}, pid={os.getpid()})")  # fmt: skip


def _check_runtime_env(value: dict[str, Any]) -> None:
    """``runtime_env`` as Ray reads it (its own ``RuntimeEnv`` check: unknown fields, wrong
    types), as one line naming the option instead of Ray's error when the actors start."""
    try:
        from ray.runtime_env import RuntimeEnv

        known = sorted(getattr(RuntimeEnv, "known_fields", ()))
        for key in value:  # (an unknown field is a runtime_env plugin's, unless it is a typo)
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            if key not in known and close:
                raise ValueError(f"unknown field {key!r}: did you mean {close[0]!r}?")
        RuntimeEnv(**value)
    except ImportError:  # (Ray's own check is missing: it raises when the actors start)
        return
    except Exception as exc:
        raise ConfigError(
            f"vectorizer.runtime_env={value!r}: Ray refuses it: {first_line(exc)} (see Ray's "
            "runtime_env fields: env_vars, pip, uv, conda, working_dir, py_modules, ...)"
        ) from None


def _check_local_resources(placement: dict[str, Any], have: dict[str, float]) -> None:
    """On a local Ray, a resource no node has would leave every actor waiting for
    ``start_timeout``: one clear error instead (a cluster may add nodes, so none there)."""
    need = dict(placement.get("resources") or {})
    if placement.get("num_gpus"):
        need["GPU"] = placement["num_gpus"]
    missing = sorted(k for k, v in need.items() if v and have.get(k, 0.0) < v)
    if missing:
        key = "num_gpus" if missing == ["GPU"] else "resources"
        listed = ", ".join(f"{k}={have[k]:g}" for k in sorted(have) if k in ("CPU", "GPU") or
                           not k.startswith(("node:", "memory", "object_store")))  # fmt: skip
        how = (
            f"ray start --num-gpus={need['GPU']:g}"
            if key == "num_gpus"
            else "ray start --resources '"
            + json.dumps({k: need[k] for k in missing if k != "GPU"})
            + "'"
        )
        raise ConfigError(
            f"vectorizer.{key}: the local Ray has no {', '.join(missing)} for an actor (it has "
            f"{listed or 'none'}); start a Ray that has it ({how}, then vectorizer.address="
            f"auto), join a cluster that has it (vectorizer.address), or remove "
            f"vectorizer.{key}"
        )


def _too_many_cpus(actors: int, per_actor: float, total: float, in_series: int) -> str:
    """The error for actors that need more CPUs than the local Ray has, with the fixes that can
    work: fewer actors (a larger ``in_series``) only where there are several, and a smaller
    ``num_cpus`` where one actor alone needs more than the local Ray has."""
    s = "s" if actors > 1 else ""
    head = (
        f"vectorizer=ray: {actors} actor{s} x num_cpus={per_actor:g} need{'' if s else 's'} "
        f"{actors * per_actor:g} CPUs, but the local Ray has {total:g}; "
    )
    series = f"vectorizer.in_series (envs per actor, now {in_series})"
    if actors > 1 and per_actor <= total + 1e-9:
        return head + (
            f"raise {series}, lower vectorizer.num_cpus (fractions such as 0.5 are allowed), or "
            "set vectorizer.in_series=null"
        )
    cluster = f"or join a Ray cluster with a node of {per_actor:g} CPUs (vectorizer.address)"
    if total <= 0:
        return head + f"start Ray with CPUs (ray.init(num_cpus=...)) {cluster}"
    lower = f"lower vectorizer.num_cpus to {total:g} or less (fractions such as 0.5 are allowed)"
    if actors > 1:
        return head + f"{lower} and raise {series} or set it to null; {cluster}"
    return head + f"{lower}: one actor cannot take more CPUs than the local Ray has; {cluster}"


def _warn(message: str) -> None:
    """A ``RuntimeWarning`` at the user's line (the first frame outside envfactory)."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("envfactory"):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, RuntimeWarning, stacklevel=level)


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
