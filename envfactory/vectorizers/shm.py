"""The shared-memory kit: the parts ``subproc`` is built of, public for a backend of the same
kind (PufferLib's and envpool's design: workers that busy-wait on shared memory, nothing on a
pipe while stepping).

``subproc`` (`SubprocGroup`) is a [`WorkerGroup`][envfactory.vectorizers.remote.WorkerGroup] built
from these and [`remote`][envfactory.vectorizers.remote] alone (a test checks its imports):

- [`SharedBuffers`][envfactory.vectorizers.shm.SharedBuffers] over a
  [`layout_for`][envfactory.vectorizers.shm.layout_for] the spaces: one anonymous shared region
  with every env's observation, reward and flags, the action batch, and one control slot per
  worker; [`supports_shared_memory`][envfactory.vectorizers.shm.supports_shared_memory] says which
  observation spaces fit;
- [`Board`][envfactory.vectorizers.shm.Board]: the parent's side of every worker's control slot,
  one step for every worker (one copy of the actions, one write of the step number to every
  slot, one wake-up only for a worker that sleeps, one poll over all of them), waiting by
  [`Waiter`][envfactory.vectorizers.shm.Waiter]'s policy (spin while a core is free, else sleep);
- [`PipeHandle`][envfactory.vectorizers.shm.PipeHandle]: the worker handle of a process, its pipe
  (start, calls, infos) and its control slot;
  [`LocalHandle`][envfactory.vectorizers.shm.LocalHandle]: envs stepped in the parent behind the
  same interface;
- [`worker_main`][envfactory.vectorizers.shm.worker_main] with its
  [`WorkerSpec`][envfactory.vectorizers.shm.WorkerSpec]: the worker process, which steps its envs
  with envfactory's one autoreset implementation and writes the results into the shared region
  ([`WorkerWake`][envfactory.vectorizers.shm.WorkerWake] is its side of the control slot);
- [`ColumnRows`][envfactory.vectorizers.shm.ColumnRows]: a step answer's infos left in the
  region's info columns, merged for the whole batch at once.
"""

from __future__ import annotations

from .transport.board import NO_INFOS, Board, Waiter
from .transport.infocols import ColumnRows
from .transport.local import LocalHandle
from .transport.pipe import PipeHandle
from .transport.shared import Layout, SharedBuffers, layout_for, supports_shared_memory
from .worker.protocol import WorkerSpec
from .worker.worker import WorkerWake, worker_main

__all__ = [
    "NO_INFOS",
    "Board",
    "ColumnRows",
    "Layout",
    "LocalHandle",
    "PipeHandle",
    "SharedBuffers",
    "Waiter",
    "WorkerSpec",
    "WorkerWake",
    "layout_for",
    "supports_shared_memory",
    "worker_main",
]
