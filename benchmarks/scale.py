"""The many-core section of the benchmark (``bench.py --scale``): 16, 32 and 64 envs.

Issue 19.6: on a machine with many cores (the 16-core device machine; the 2-core CI machine
can run it too, it is only slower), CartPole and Pong against the peers users compare us
with: gymnasium's ``AsyncVectorEnv``, PufferLib's ``Multiprocessing`` backend, envpool (its
own C++ CartPole: a ceiling, not the same env) and ale_py's ``AtariVectorEnv`` (C++ threads
over the same ROM). ``raw limit`` is one plain process per core stepping its share of the
envs, no communication at all. Every cell is steps/s summed over envs, the median of the
rounds; rounds are interleaved, and after each round the table so far is written to
``--out`` (a run cut short keeps what it measured).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import gymnasium as gym
from peers import (
    WORKLOADS,
    ale_native,
    envpool_loop,
    measure_loop,
    puffer_loop,
    raw_limit,
    thunks,
)

import envfactory
from envfactory.cli.measure import measure, measure_pool, medians

SIZES = (16, 32, 64)
#: the rows `cases` can measure, by `case_key` (``--cases`` picks from these)
ROWS = ("raw limit", "dummy", "subproc", "subproc-atari", "subproc pool", "subproc-atari pool",
        "gym-async", "pufferlib-mp", "envpool sync", "envpool async", "AtariVectorEnv")  # fmt: skip


def _ef(workload: str, n: int, vec: str, batch: int | None = None) -> Callable[[], Any]:
    over = [*WORKLOADS[workload], f"num_envs={n}", f"vectorizer={vec}"]
    if batch is not None:
        over.append(f"vectorizer.batch_size={batch}")
    return lambda: envfactory.make_vec(overrides=over)


def case_key(name: str) -> str:
    """What ``--cases`` names a row by: its name before any ``" ("`` (``envpool sync``,
    ``AtariVectorEnv``, ``subproc pool``...); an ``--old`` row goes with its new one."""
    return name.split(" (")[0]


def cases(
    workload: str,
    n: int,
    seconds: float,
    old: Path | None = None,
    only: Collection[str] = (),
) -> dict[str, Callable[[], float]]:
    """Each returns one sample of steps/s for ``workload`` at ``n`` envs. With ``old`` (another
    checkout), our synchronous row is measured for both trees, each in a fresh interpreter
    (``ab.measure_in``), as ``<ours>`` and ``<ours> (old)``; ``only``: the `case_key`s to keep."""
    fns = thunks(workload, n)
    ours = "subproc-atari" if workload == "Pong" else "subproc"
    out: dict[str, Callable[[], float]] = {
        "raw limit": lambda: raw_limit(workload, n, seconds),
    }
    if workload == "CartPole":  # one process stepping all: what "never lose to" means
        out["dummy"] = lambda: measure(_ef(workload, n, "dummy"), seconds)[0]
    out["subproc"] = lambda: measure(_ef(workload, n, "subproc"), seconds)[0]
    if ours != "subproc":
        out[ours] = lambda: measure(_ef(workload, n, ours), seconds)[0]
    halves = n >= 2 and n % 2 == 0  # a batch of n/2 (PufferLib wants it to divide n)
    if halves:
        out[f"{ours} pool (batch n/2)"] = lambda: measure_pool(
            _ef(workload, n, ours, n // 2), seconds
        )
    out["gym-async"] = lambda: measure(
        lambda: gym.vector.AsyncVectorEnv(fns, shared_memory=True), seconds
    )[0]
    if _has("pufferlib"):
        out["pufferlib-mp"] = lambda: measure_loop(lambda: puffer_loop(n, n, workload), seconds)
        if halves:
            out["pufferlib-mp (batch n/2)"] = lambda: measure_loop(
                lambda: puffer_loop(n, n // 2, workload), seconds
            )
    if workload == "CartPole" and _has("envpool"):
        out["envpool sync (C++ env)"] = lambda: measure_loop(lambda: envpool_loop(n, n), seconds)
        if halves:
            out["envpool async (batch n/2, C++ env)"] = lambda: measure_loop(
                lambda: envpool_loop(n, n // 2), seconds
            )
    if workload == "Pong" and _has("ale_py.vector_env"):
        out["AtariVectorEnv (ale_py, C++)"] = lambda: measure(
            functools.partial(ale_native, n), seconds
        )[0]
    if old is not None:
        from ab import HERE, measure_in

        over = [f"num_envs={n}", f"vectorizer={ours}"]
        for tree, name in ((HERE.parent, ours), (old, f"{ours} (old)")):
            out[name] = functools.partial(measure_in, tree, workload, "sync", seconds, n, over)
    return {k: v for k, v in out.items() if not only or case_key(k) in only}


def _has(module: str) -> bool:
    """``module`` can be imported (False also when its package is missing)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def render(samples: dict[tuple[str, int, str], list[float]], rounds_done: int) -> str:
    """Medians per workload and size, and ours against each peer (same run)."""
    med = medians(samples)
    cpus = os.cpu_count() or 1
    lines = [
        f"\n**Many cores** — steps/s summed over envs, median of {rounds_done} round(s), "
        f"{cpus} cpus, {time.strftime('%Y-%m-%d')}; ratios from the same run\n"
    ]
    if cpus < min(k[1] for k in med):
        lines.append(
            f"(fewer cpus than envs here: every process shares {cpus} cores, PufferLib's "
            "busy-waiting batch-of-n/2 rows most of all; the table is meant for many cores)\n"
        )
    for wl in dict.fromkeys(k[0] for k in med):
        names = list(dict.fromkeys(k[2] for k in med if k[0] == wl))
        ours = "subproc-atari" if wl == "Pong" else "subproc"
        peers = [x for x in names if x in ("dummy", "gym-async") or "(" in x or "puffer" in x]
        peers = [x for x in peers if not x.startswith(ours) or x == f"{ours} (old)"]
        head = ["envs", *names, *[f"{ours} / {p}" for p in ("raw limit", *peers)]]
        lines += [f"{wl}\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for n in sorted({k[1] for k in med if k[0] == wl}):
            row = [str(n)] + [f"{med[(wl, n, x)]:,.0f}" if (wl, n, x) in med else ""
                              for x in names]  # fmt: skip
            mine = med.get((wl, n, ours))
            for p in ("raw limit", *peers):
                theirs = med.get((wl, n, p))
                row.append(f"{mine / theirs:.2f}x" if mine and theirs else "")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def main(
    workloads: list[str],
    sizes: list[int],
    rounds: int,
    seconds: float,
    out: str,
    old: Path | None = None,
    only: Collection[str] = (),
) -> str:
    """Every case of `cases` (``old``, ``only``: as there), interleaved round by round; the
    table (also written, with the samples, to ``out`` after every round)."""
    samples: dict[tuple[str, int, str], list[float]] = {}
    table = ""
    for r in range(rounds):
        for wl in workloads:
            secs = seconds * (2 if wl == "Pong" else 1)
            for n in sizes:
                for name, run in cases(wl, n, secs, old, only).items():
                    t0 = time.perf_counter()
                    try:
                        sps = run()
                    except Exception as exc:  # a peer that breaks at this size: say so, go on
                        print(f"round {r + 1}/{rounds} {wl} n={n} {name}: {exc!r}",
                              file=sys.stderr, flush=True)  # fmt: skip
                        continue
                    samples.setdefault((wl, n, name), []).append(sps)
                    print(f"round {r + 1}/{rounds} {wl:8s} n={n:<3d} {name:36s} {sps:10.0f} "
                          f"steps/s ({time.perf_counter() - t0:.1f} s)",
                          file=sys.stderr, flush=True)  # fmt: skip
        table = render(samples, r + 1)
        with open(out, "w") as f:
            json.dump(
                {
                    "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                "platform": platform.platform()},
                    "rounds_done": r + 1,
                    "seconds": seconds,  # (Pong steps twice as long)
                    "samples": [{"workload": wl, "num_envs": n, "variant": name, "samples": v}
                                for (wl, n, name), v in samples.items()],
                    "table": table,
                },
                f,
                indent=1,
            )  # fmt: skip
    return table
