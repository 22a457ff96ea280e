"""``subproc`` and ``subproc-atari``: envs in worker processes, observations, actions and scalar
infos through one shared region: `SubprocGroup` the backend, `SubprocVecEnv` the front."""

from __future__ import annotations

import copy as _copy
import os
import time
from collections.abc import Callable, Sequence
from multiprocessing.reduction import send_handle
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array, iterate

from ..config.checks import check_choice, check_int
from ..errors import ConfigError
from .plan.launch import check_descriptors, context_of, payload, start_process, step_seconds
from .plan.options import START_METHODS, SubprocAtariConfig, SubprocConfig
from .remote import (
    STARTUP_TIMEOUT,
    Batch,
    Cmd,
    EnvInfo,
    RemoteVecEnv,
    Split,
    WorkerGroup,
    WorkerHandle,
    env_label,
    failure_of,
    plan_split,
    pop_faults,
)
from .shm import (
    Board,
    ColumnRows,
    InfoColumns,
    LocalHandle,
    PipeHandle,
    Schema,
    SharedBuffers,
    WorkerSpec,
    layout_for,
    supports_shared_memory,
    worker_main,
)

__all__ = ["SubprocAtariConfig", "SubprocConfig", "SubprocGroup", "SubprocVecEnv"]

#: the least a worker spins when the parent steps a share of the envs (16 CartPoles,
#: in_parent=8, 2 cores: 1.24x dummy with 1000 us, 0.92-1.34x with 200 us)
PARENT_SHARE_SPIN_US = 1000


class SubprocGroup(WorkerGroup):
    """Envs in worker processes (the last ``in_parent`` in this process) and one shared region,
    a step posted to all at once by its `Board`. Options: `SubprocConfig`'s; ``split``: the
    plan (None: planned here)."""

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], in_series: int | None = None,
        context: str = "forkserver", shared_memory: bool = True, uint8_images: bool = False,
        spin_us: int = 200, in_parent: int = 0, load: float | None = None,
        split: Split | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.env_fns, self.num_envs = list(env_fns), len(env_fns)
        self.uint8_images = uint8_images
        self.context, self.spin_us, self.shared_memory = context, spin_us, shared_memory
        check_choice(self, "context", START_METHODS)  # (the config's checks, for a direct build)
        check_int(self, "spin_us", 0)
        if split is None:
            asked = {"in_series": in_series, "in_parent": in_parent, "context": context}
            split = plan_for(env_fns, {**asked, "uint8_images": uint8_images, "load": load})
        #: the plan this group starts (`plan_split`): its workers' slices, this process's share
        self.split = split
        # a worker waits while the parent steps its share: it spins at least that long
        self._spin_s = (
            max(spin_us, PARENT_SHARE_SPIN_US) if split.in_parent and spin_us > 0 else spin_us
        ) * 1e-6
        self.env_id = env_label(env_fns[0])
        self._buffers: SharedBuffers | None = None
        self.workers: list[PipeHandle] = []
        self._local: LocalHandle | None = None  # the parent's own envs (in_parent)
        #: the board: a step posted to every worker at once (None: actions go by pipe)
        self.board: Board | None = None

    def start(self) -> None:
        env_fns, in_parent, env = self.env_fns, self.split.in_parent, self.env
        self._ctx: Any = context_of(self.context)
        split = self.num_envs - in_parent  # the parent's own envs are the last ones
        for k, (a, b) in enumerate(self.split.slices()):
            fns = env_fns[a:b]
            handle = PipeHandle(k, a, b, self.env_id, payload(self.context, fns, a), self.spin_us)
            handle.write_timeout = env.timeout  # a message is written within it too
            self.workers.append(handle)
        self.set_handles(self.workers)
        check_descriptors(len(self.workers))
        for w in self.workers:
            _spawn(self, w)
        if in_parent:  # built while the workers build theirs
            try:
                envs = [fn() for fn in env_fns[split:]]
            except Exception as exc:  # the workers' failure first, else the parent's own
                self.gather("start", self.workers, self.startup_budget())
                here = LocalHandle(split, [None] * in_parent, env.autoreset_mode, self.env_id)
                raise here.remote_error("start", failure_of(exc)) from exc
            self._local = LocalHandle(split, envs, env.autoreset_mode, self.env_id)
            self.set_handles([*self.workers, self._local])
        local = self._local
        self.wait_started(self.workers, local.infos() if local is not None else ())
        # the shared region for the spaces the envs reported, handed over to every worker
        obs_space, act_space = env.single_observation_space, env.single_action_space
        if self.uint8_images and not (
            isinstance(obs_space, gym.spaces.Box) and obs_space.dtype == np.uint8
        ):
            raise ConfigError(
                f"vectorizer=subproc-atari needs uint8 Box (image) observations; "
                f"{self.env_id!r} has {obs_space}. Use vectorizer=subproc instead"
            )
        self._shm_obs = use_shm = self.shared_memory and supports_shared_memory(obs_space)
        n = len(self.workers)
        self._buffers = shared = SharedBuffers(
            layout_for(obs_space if use_shm else None, self.num_envs, act_space, workers=n)
        )
        if local is not None:
            local.attach(shared, use_shm)
        for w in self.workers:
            w.attach(shared, send_handle)
        self.gather("attach", self.workers, STARTUP_TIMEOUT)
        if not use_shm:
            self._env_obs: list[Any] = [None] * self.num_envs
            self._obs = create_empty_array(obs_space, n=self.num_envs)
        self.env_fns = []  # (the workers have them)
        if shared.control is not None:  # (steps go by it; the pool waits on it)
            self.board = Board(self.workers, shared.control, shared.actions)

    # -- WorkerGroup's hooks ------------------------------------------------------------
    def collect(
        self, handles: Sequence[WorkerHandle], results: list[Any], mask: np.ndarray | None
    ) -> Batch:
        b = self._buffers
        assert b is not None
        if self._shm_obs:
            obs = b.obs
        else:
            for h, (_, per_env) in zip(handles, results):  # StepResults
                for i, o in enumerate(per_env):
                    if o is not None or (mask is None or mask[h.start + i]):
                        self._env_obs[h.start + i] = o
            self._obs = obs = self.batch_obs(self._env_obs, self._obs)
        # every worker's infos merged at once (as gymnasium's one by one): from the info
        # columns when all are there under one schema, else from the ``(env, info)`` pairs
        infos: dict | None = {}
        columns, rows = [], 0  # (loops, no comprehension: no call on the hot path)
        for calls, _ in results:
            if type(calls) is ColumnRows:
                columns.append(calls)
                rows += calls.n
                if calls.schema != columns[0].schema:
                    infos = None
            elif calls:
                infos = None  # (by pipe)
        if columns and infos is not None:
            first, n, have = columns[0], self.num_envs, None
            if rows < n:
                have = np.zeros(n, np.bool_)
                for c in columns:
                    have[c.start : c.start + c.n] = True
            infos = merge_columns(first.columns, first.schema, slice(0, n), have)
        if infos is None:
            infos = self.merge_answers(handles, [c for c, _ in results])
        return self.out(obs), b.rewards.copy(), b.terminations.copy(), b.truncations.copy(), infos

    def last_obs(self, handle: WorkerHandle) -> list[Any]:
        if not self._shm_obs:
            return list(self._env_obs[handle.start : handle.stop])
        assert self._buffers is not None
        per_env = list(iterate(self.env.observation_space, self._buffers.obs))
        return [_copy.deepcopy(per_env[i]) for i in range(handle.start, handle.stop)]

    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        w = self.workers[handle.index]
        if w.conn is not None:
            w.conn.close()
        _spawn(self, w)
        info = self.wait(w, time.monotonic() + budget, "restart", budget)
        w.attach(self._buffers, send_handle)
        self.wait(w, time.monotonic() + budget, "restart", budget)
        if self.board is not None:
            self.board.forget_fds()  # a new pipe
        return list(info)

    def forget(self) -> None:
        for w in self.workers:
            w.forget()
        if self._local is not None:
            self._local.forget()
        self.release(everything=True)

    def release(self, everything: bool) -> None:
        if self._buffers is not None and everything:
            self._buffers.close()
            self._buffers = None

    # -- one post and one wait per step for the workers (see .board) --------------------
    def post_step(self, actions: Any) -> None:
        g = self.board
        if g is None or not g.post(actions):
            return super().post_step(actions)
        local = self._local
        if local is not None:  # (the last envs: the rows past the workers')
            local.send(Cmd.STEP, actions[local.start :])

    def gather(
        self, call: str, handles: Sequence[WorkerHandle] | None = None,
        timeout: float | None = None, deadline: float | None = None,
    ) -> list[Any]:  # fmt: skip
        g = self.board
        if handles is not None or g is None or not g.posted or call != "step":
            return super().gather(call, handles, timeout, deadline)
        if deadline is None and timeout is not None and timeout < float("inf"):
            deadline = time.monotonic() + timeout  # (the one deadline of every wait below)
        local = self._local
        mine = [] if local is None else super().gather(call, [local], timeout, deadline)
        results = g.wait(deadline)
        if results is None:  # a timeout, a dead worker: each worker's own wait says which
            return super().gather(call, None, timeout, deadline)  # (by the same deadline)
        if None in results:  # (the answers by pipe)
            piped = [k for k, r in enumerate(results) if r is None]
            answers = super().gather(call, [self.workers[k] for k in piped], timeout, deadline)
            for k, answer in zip(piped, answers):
                results[k] = answer
        return results + mine


class SubprocVecEnv(RemoteVecEnv):
    """Envs in worker processes, same trajectories as ``dummy``: the front over a
    `SubprocGroup` (options `SubprocConfig`'s; ``split``: the plan, None: planned here)."""

    group: SubprocGroup

    def __init__(
        self, env_fns: Sequence[Callable[[], gym.Env]], autoreset_mode: Any = "next_step",
        in_parent: int | None = 0, load: float | None = None, split: Split | None = None,
        **options: Any,
    ) -> None:  # fmt: skip
        asked = {"in_parent": in_parent, "load": load}
        self.split, group, faults = group_of(env_fns, split, options, **asked)
        #: how many envs (the last ones) this process steps itself
        self.in_parent = self.split.in_parent
        super().__init__(group, autoreset_mode, **faults)


def group_of(
    env_fns: Sequence[Callable[[], gym.Env]], split: Split | None, options: dict, **asked: Any
) -> tuple[Split, SubprocGroup, dict]:
    """A build's plan (``split``, else planned here), its `SubprocGroup` and fault options."""
    if split is None:
        split = plan_for(env_fns, {**options, **asked})
    faults = pop_faults(options)
    options.pop("in_series", None)  # (the split's)
    return split, SubprocGroup(env_fns, split=split, **options), faults


def plan_for(
    env_fns: Sequence[Callable[[], gym.Env]], options: dict[str, Any], fallback: bool = False
) -> Split:
    """The plan (`plan_split`) of a build's options; pops ``in_series``, ``in_parent``, ``load``."""
    method = options.get("context", "forkserver")
    return plan_split(
        len(env_fns),
        in_series=options.pop("in_series", None),
        in_parent=options.pop("in_parent", 0),
        batch_size=options.get("batch_size"),
        timeout=options.get("timeout"),
        restart=bool(options.get("restart", False)),
        images=bool(options.get("uint8_images", False)),
        fallback=fallback,
        load=options.pop("load", None),
        probe=lambda: step_seconds(
            context_of(method), payload(method, list(env_fns[:1]), 0), start_process
        ),
    )


def merge_columns(
    columns: InfoColumns, schema: Schema, rows: Any, have: np.ndarray | None = None
) -> dict[str, Any] | None:
    """What `merge_infos` makes of the `InfoColumns.read` pairs of ``rows`` (a slice or env
    ids), one numpy operation per column (``have``: the rows held; None: all): a step's infos
    when every worker's are in the columns (`SubprocGroup.collect`). None for a ``np.bool_``
    value (gymnasium's merge keeps it in an object array)."""
    ints, floats = columns.ints, columns.floats
    n = len(ints[0, rows])
    found, c = [], 0
    for pos, (key, sparse, leaves) in enumerate(schema):
        for _, t, _ in leaves:
            if t is np.bool_:
                return None
        if not sparse and have is None:  # a scalar every row has: its column, cast
            sub, t, as_float = leaves[0]
            column = (floats if as_float else ints)[c, rows]
            found.append((0, pos, key, column.astype(t), np.ones(n, np.bool_)))
            c += 1
            continue
        if sparse:
            present = ints[c, rows] != 0
            if have is not None:
                present &= have
            c += 1
        else:
            present = have.copy()  # type: ignore[union-attr]  # (not None here)
        hits = present.nonzero()[0]
        if not len(hits):
            c += len(leaves)
            continue
        value: Any = {}
        for sub, t, as_float in leaves:
            column = (floats if as_float else ints)[c, rows]
            array: np.ndarray = np.zeros(n, dtype=t)
            array[hits] = column[hits]
            c += 1
            if sub is None:
                value = array
            else:
                value[sub], value[f"_{sub}"] = array, present.copy()
        found.append((int(hits[0]), pos, key, value, present))
    found.sort()  # (by first row, then schema order: gymnasium's merge adds a key at its
    # first row; no two entries share a position, so the values are never compared)
    infos: dict[str, Any] = {}
    for _, _, key, value, present in found:
        infos[key], infos[f"_{key}"] = value, present
    return infos


def _spawn(group: SubprocGroup, w: PipeHandle) -> None:
    """Start ``w``'s worker process and connect it."""
    parent_conn, child_conn = group._ctx.Pipe(duplex=True)
    close_fds = None
    if group.context == "fork":
        close_fds = [x.conn for x in group.workers if x.conn is not None and x is not w]
        close_fds.append(parent_conn)
    spec = WorkerSpec(
        env_fns=w.payload,
        start=w.start,
        autoreset_mode=group.env.autoreset_mode,
        shared_memory=group.shared_memory,
        main_pid=os.getpid(),
        close_fds=close_fds,
        spin_seconds=group._spin_s,
    )
    proc = group._ctx.Process(
        target=worker_main,
        args=(child_conn, spec),
        name=f"envfactory-worker-{w.index}",
        daemon=True,
    )
    w.process, w.conn = proc, parent_conn  # (closed if interrupted)
    try:
        start_process(proc)
    finally:
        child_conn.close()
    w.connect(proc, parent_conn, by_value=group.context != "fork")
