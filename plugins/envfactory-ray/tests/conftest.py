"""One real local Ray per test module (``num_cpus=2``, or the module's ``RAY_CPUS``; no
dashboard; its files in a Ray temp dir of its own), shut down at the end with a check that
none of its processes is left; and every test hermetic (a fresh envfactory plugin registry, no
user presets: [`envfactory.testing.pytest_plugin`][envfactory.testing.pytest_plugin])."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from envfactory.testing.pytest_plugin import hermetic_envfactory  # noqa: F401 (autouse)


def ray_processes(since: set[int]) -> set[int]:
    """Descendants of this process that did not exist before (Ray's daemons, workers)."""
    return {p.pid for p in psutil.Process().children(recursive=True)} - since


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    end = time.monotonic() + seconds
    left = set(pids)
    while left and time.monotonic() < end:
        left = {p for p in left if psutil.pid_exists(p) and _running(p)}
        time.sleep(0.1)
    return left


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@contextmanager
def own_ray_tmpdir() -> Iterator[str]:
    """``RAY_TMPDIR`` set to a new directory for the block (short: Ray puts sockets there),
    then restored and the directory removed. A Ray writes its address to
    ``<temp dir>/ray_current_cluster``, which every ``ray.init()`` without an address on the
    machine (another test run's, another user's benchmark) would otherwise join."""
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old


@pytest.fixture(scope="module")
def ray_session(request: pytest.FixtureRequest) -> Iterator[object]:
    """``ray.init(num_cpus=2, include_dashboard=False)`` for the module (``num_cpus``: the
    module's ``RAY_CPUS`` if it has one), in a Ray temp dir of its own; after
    ``ray.shutdown()`` no process Ray started is left (checked with psutil)."""
    import ray

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with own_ray_tmpdir():
        ray.init(
            num_cpus=getattr(request.module, "RAY_CPUS", 2),
            include_dashboard=False,
            object_store_memory=256 * 1024**2,
            logging_level="WARNING",
        )
        try:
            yield ray
        finally:
            started = ray_processes(before)
            ray.shutdown()
            left = wait_gone(started, 30.0)
            assert not left, f"Ray left processes behind: {sorted(left)}"
