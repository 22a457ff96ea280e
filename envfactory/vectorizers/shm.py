"""The shared-memory kit ``subproc`` is built of (with [`remote`][envfactory.vectorizers.remote]
alone), for a backend whose workers busy-wait on shared memory: the region, the board, the
handles, the worker process and the info columns."""

from __future__ import annotations

from .transport.board import NO_INFOS, Board, Waiter
from .transport.infocols import ColumnRows, InfoColumns, Schema
from .transport.local import LocalHandle
from .transport.pipe import PipeHandle
from .transport.shared import Layout, SharedBuffers, layout_for, supports_shared_memory
from .worker.protocol import WorkerSpec
from .worker.worker import WorkerWake, worker_main

__all__ = [
    "NO_INFOS",
    "Board",
    "ColumnRows",
    "InfoColumns",
    "Layout",
    "LocalHandle",
    "PipeHandle",
    "Schema",
    "SharedBuffers",
    "Waiter",
    "WorkerSpec",
    "WorkerWake",
    "layout_for",
    "supports_shared_memory",
    "worker_main",
]
