"""The shared-memory kit: the parts ``subproc`` is built of (with
[`remote`][envfactory.vectorizers.remote] alone; a test checks its imports), public for a
backend of the same kind (PufferLib's and envpool's design: workers that busy-wait on shared
memory, nothing on a pipe while stepping): one anonymous shared region over a
[`layout_for`][envfactory.vectorizers.shm.layout_for] the spaces
([`SharedBuffers`][envfactory.vectorizers.shm.SharedBuffers]), the
[`Board`][envfactory.vectorizers.shm.Board] that posts a step to every worker's control slot
and waits for them, the worker handles of a process and of the parent's own envs, the worker
process ([`worker_main`][envfactory.vectorizers.shm.worker_main]) and the info columns.
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
