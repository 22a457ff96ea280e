"""Timing vectorized envs on this machine: steps/s of a plain stepping loop and of an
envpool-style ``recv``/``send`` loop, CPU-bound stand-ins for a learner, and medians of
interleaved rounds.

Shared by ``envfactory tune`` (`envfactory.cli.tune`) and ``benchmarks/bench.py``.
The machine is assumed noisy (other programs, CPU frequency, a VM's neighbours): callers
measure every candidate once per round, round after round, and compare medians of the same
run; one measurement alone means little.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["busy", "load_line", "measure", "measure_pool", "medians", "rss_tree_mb"]

#: a CPU-bound loop that ends by itself once its parent is gone (even after a SIGKILL)
_BUSY_CODE = (
    "import os\n"
    "parent = os.getppid()\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(200000):\n"
    "        pass\n"
)


@contextlib.contextmanager
def busy(processes: int) -> Iterator[list[subprocess.Popen]]:
    """``processes`` CPU-bound processes (a stand-in for a learner) while the block runs.

    They are killed when the block ends, also on Ctrl-C or an exception; they run in their
    own session (a Ctrl-C at the terminal does not print their tracebacks) and end by
    themselves within milliseconds if this process dies without cleaning up."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(processes):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _BUSY_CODE],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        if procs:
            time.sleep(0.2)  # let them get going before anything is timed
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def rss_tree_mb() -> float:
    """Resident memory of this process and all its children, MiB (NaN without psutil)."""
    try:
        import psutil
    except ImportError:
        return float("nan")
    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def measure(make: Callable[[], Any], seconds: float) -> tuple[float, float]:
    """Build a vec env with ``make()``, reset it, step it with random actions for about
    ``seconds`` (after 8 warm-up steps) and close it. Returns ``(steps/s summed over envs,
    MiB resident in this process and its children at the end)``."""
    envs = make()
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        bank = [envs.action_space.sample() for _ in range(64)]
        for a in bank[:8]:  # warm-up
            envs.step(a)
        steps, t0 = 0, time.perf_counter()
        while True:
            for a in bank:
                envs.step(a)
            steps += len(bank)
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        mem = rss_tree_mb()
        return steps * envs.num_envs / elapsed, mem
    finally:
        envs.close()
        gc.collect()


def measure_pool(make: Callable[[], Any], seconds: float) -> float:
    """Steps/s of an envpool-style loop over a pool (``batch_size`` < ``num_envs``):
    ``recv`` the next ready batch, ``send`` its actions; built, timed and closed here."""
    import gymnasium as gym

    envs = make()
    try:
        envs.async_reset(seed=0)
        bs = envs.batch_size
        envs.single_action_space.seed(0)
        space = gym.vector.utils.batch_space(envs.single_action_space, bs)
        space.seed(0)
        bank = [space.sample() for _ in range(64)]
        for a in bank[:8]:  # warm-up
            envs.send(a, envs.recv()[4]["env_id"])
        steps, t0 = 0, time.perf_counter()
        while True:
            for a in bank:
                envs.send(a, envs.recv()[4]["env_id"])
            steps += len(bank) * bs
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                return steps / elapsed
    finally:
        envs.close()
        gc.collect()


def medians(samples: Mapping[Any, Sequence[float]]) -> dict[Any, float]:
    """The median of each key's samples (keys without samples are left out)."""
    return {k: statistics.median(v) for k, v in samples.items() if v}


def load_line() -> str:
    """``0.4, 0.8, 1.1 on 2 cpus``: the load averages, for a table's caption."""
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cpus"
    except OSError:
        return f"unknown load on {os.cpu_count()} cpus"
