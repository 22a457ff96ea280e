"""Throughput, start-up and memory of envfactory's vectorizers against gymnasium's.

Every variant steps the very same env constructors (``envfactory.factory.env_thunks``),
so the numbers differ only by vectorization. ``raw limit`` is the ceiling: one process
per core stepping its share of the envs in a plain loop, with no communication at all.
Variants are measured interleaved, round by round, and each cell is the median over
rounds, because the machine is shared and noisy: only ratios measured in one run mean anything.

    python benchmarks/bench.py                  # full table (about 5-8 minutes on 2 cores)
    python benchmarks/bench.py --quick          # fewer sizes and rounds (about 1-2 minutes)
    python benchmarks/bench.py --out results.json
    python benchmarks/bench.py --pool           # the async pool vs two processes and gym-async
    python benchmarks/bench.py --ray            # ray (envfactory-ray; plain and node-local)
                                                # vs subproc, 8 and 16 envs (--sizes 64 ...)
    python benchmarks/bench.py --load           # CartPole idle / one busy core / oversubscribed
    python benchmarks/bench.py --startup        # import + first reset of 8 envs, parent PSS;
                                                # 8 Pongs against gymnasium's own stack
    python benchmarks/bench.py --train          # a CleanRL-style PPO loop (torch), 8 envs
    python benchmarks/bench.py --sweep          # 4 parallel joblib jobs x CartPole 8 envs
    python benchmarks/bench.py --scale          # 16/32/64 envs vs the peers (many cores)
    python benchmarks/bench.py --plot bench.png  # also a PNG: steps/s against num_envs
    python benchmarks/bench.py --workloads CartPole --no-pool --no-load --rounds 2 \
        --out docs/bench_cartpole_readme.json    # the docs' results file (below)

The docs' results file, ``docs/bench_cartpole_readme.json`` (`DOCS_RESULTS`), is the one
source of the CartPole figures the README and the docs quote: the README's table is it, and
every figure between ``<!-- bench-results -->`` and ``<!-- /bench-results -->`` on a page is a
median in it or a ratio of two of them (tests/project/test_bench_numbers.py). Each JSON this
writes carries the `code_digest` of the code that built and timed the variants; a results file
whose digest is not today's was measured with other code and must be measured again.

Peers (rows appear when installed; ``pip install -e '.[bench]'``, see the README):
PufferLib's ``Multiprocessing`` backend (synchronous and ``batch_size = num_envs / 2``; one
worker per core less one at most, `puffer_workers`) and envpool's async mode (its own
C++ CartPole: a ceiling, not the same env). The
``under load`` table measures CartPole again with CPU-bound processes running beside it
(a stand-in for a learner): idle, one busy core, and the machine oversubscribed three
times (2 x cores busy processes beside the vec env's own).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import scale
from peers import (
    WORKLOADS,
    ale_native,
    measure_loop,
    peer_available,
    peer_variants,
    puffer_workers,  # noqa: F401 (named here by the docstring and tests/benchmarks/test_bench_scale.py)
    raw_limit,
    thunks,
)

import envfactory
from envfactory.cli.measure import busy, load_line, measure, measure_pool


def gymnasium_pong() -> gym.Env:
    """Pong the way a gymnasium user builds it: gymnasium's own DeepMind stack."""
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    return gym.wrappers.FrameStackObservation(env, 4)


#: the results file the docs quote (see the module docstring), relative to the repository
DOCS_RESULTS = "docs/bench_cartpole_readme.json"
#: the code that builds and times each variant, with `variants` (`code_digest`)
MEASURING_CODE = ("benchmarks/peers.py", "envfactory/cli/measure.py")


def code_digest() -> str:
    """A digest of the code that builds and times the variants (`MEASURING_CODE` and
    `variants`' source): written into each results JSON, compared by the docs test."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for rel in MEASURING_CODE:
        h.update((root / rel).read_bytes())
    h.update(inspect.getsource(variants).encode())
    return h.hexdigest()[:16]


def variants(workload: str, n: int) -> dict[str, Callable[[], gym.vector.VectorEnv]]:
    fns = thunks(workload, n)

    def ef(vec: str, **opts: Any) -> Callable[[], gym.vector.VectorEnv]:
        over = [*WORKLOADS[workload], f"num_envs={n}", f"vectorizer={vec}"]
        over += [f"vectorizer.{k}={'null' if v is None else v}" for k, v in opts.items()]
        return lambda: envfactory.make_vec(overrides=over)

    out: dict[str, Callable[[], gym.vector.VectorEnv]] = {
        "gym-sync": lambda: gym.vector.SyncVectorEnv(fns),
        "gym-async": lambda: gym.vector.AsyncVectorEnv(fns, shared_memory=True),
        "dummy": ef("dummy"),
        "subproc": ef("subproc"),
        "auto": ef("auto"),  # subproc trading isolation for speed (in_parent=null)
    }
    if n >= 4:
        out[f"subproc(in_series={n // 2})"] = ef("subproc", in_series=n // 2)
    if n >= 2:
        out["subproc(in_series=1)"] = ef("subproc", in_series=1)
    plugins = envfactory.get_registry().vectorizers  # rows of installed plugin packages
    if "gymnasium-async" in plugins:
        out["gymnasium-async"] = ef("gymnasium-async")
    if workload == "Pong":
        out["subproc-atari"] = ef("subproc-atari")
        if "ale-vector" in plugins:
            # same settings side by side: ALE's own layout (chw), life loss as the family's
            chw = [*WORKLOADS[workload], "env.layout=chw", f"num_envs={n}", "vectorizer=ale-vector"]
            out["ale-vector"] = lambda: envfactory.make_vec(overrides=chw)
            out["AtariVectorEnv (ale_py)"] = lambda: ale_native(n)
        out["gym-async, gymnasium's stack"] = lambda: gym.vector.AsyncVectorEnv(
            [gymnasium_pong] * n, shared_memory=True
        )
    return out


def startup(workload: str, n: int, rounds: int) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    fns = thunks(workload, n)
    for _ in range(rounds):
        cases: dict[str, Callable[[], Any]] = {
            f"subproc/{m}": (
                lambda m=m: envfactory.make_vec(
                    overrides=[
                        *WORKLOADS[workload],
                        f"num_envs={n}",
                        "vectorizer=subproc",
                        f"vectorizer.context={m}",
                    ]
                )
            )
            for m in ("fork", "forkserver", "spawn")
        }
        cases["gym-async/default"] = lambda: gym.vector.AsyncVectorEnv(fns, shared_memory=True)
        for name, make in cases.items():
            t0 = time.perf_counter()
            envs = make()
            envs.reset(seed=0)
            out.setdefault(name, []).append(time.perf_counter() - t0)
            envs.close()
    return {k: statistics.median(v) for k, v in out.items()}


# -- the async pool (vectorizer.batch_size) ---------------------------------------------
#: workload: the env counts measured by default (``batch_size = num_envs / 2``)
POOL_SIZES = {"Pong": (8,), "CartPole": (16,)}


def pool_variants(workload: str, n: int) -> dict[str, Callable[[], float]]:
    """Each returns steps/s: the ceiling (two plain processes, no communication: each
    stepping one Pong, or half the CartPoles), gymnasium's AsyncVectorEnv, the synchronous
    vectorizers and the pool (``batch_size = n / 2``), all over the same env
    constructors. For Pong both ``subproc`` and ``subproc-atari`` (the preset must pay)."""
    bs = n // 2
    vec = "subproc-atari" if workload == "Pong" else "subproc"
    base = [*WORKLOADS[workload], f"num_envs={n}"]
    fns = thunks(workload, n)
    pool = [*base, f"vectorizer={vec}", f"vectorizer.batch_size={bs}"]
    ceiling_envs = 2 if workload == "Pong" else n

    def sync(name: str) -> Callable[[], float]:
        over = [*base, f"vectorizer={name}"]
        return lambda: measure(lambda: envfactory.make_vec(overrides=over), _SECS[0])[0]

    out = {
        "two-process ceiling": lambda: raw_limit(workload, ceiling_envs, _SECS[0]),
        "gym-async": lambda: measure(
            lambda: gym.vector.AsyncVectorEnv(fns, shared_memory=True), _SECS[0]
        )[0],
        "subproc": sync("subproc"),
    }
    if vec != "subproc":
        out[vec] = sync(vec)
    out[f"{vec} pool (batch_size={bs})"] = lambda: measure_pool(
        lambda: envfactory.make_vec(overrides=pool), _SECS[0]
    )
    return out


_SECS = [1.0]
#: the pool table's medians per (workload, num_envs) (for the targets summary)
POOL_MEDIANS: dict[tuple[str, int], dict[str, float]] = {}


def pool_main(
    workloads: list[str], rounds: int, seconds: float, sizes: list[int] | None = None
) -> str:
    """``--pool``: the pool's rows, interleaved round by round; medians and ratios.
    ``sizes``: num_envs to measure (default `POOL_SIZES`)."""
    cases = [(wl, n) for wl in workloads for n in (sizes or POOL_SIZES[wl])]
    samples: dict[tuple[str, int, str], list[float]] = {}
    for r in range(rounds):
        for wl, n in cases:
            _SECS[0] = seconds * (2 if wl == "Pong" else 1)
            for name, run in pool_variants(wl, n).items():
                sps = run()
                samples.setdefault((wl, n, name), []).append(sps)
                print(f"round {r + 1}/{rounds} {wl:8s} n={n:<2d} {name:32s} {sps:10.0f} "
                      "steps/s", file=sys.stderr, flush=True)  # fmt: skip
    lines = [f"\n**Async pool** (steps/s, median of {rounds} rounds; load {load_line()})\n"]
    for wl, n in cases:
        names = [name for (w, m, name) in samples if (w, m) == (wl, n)]
        med = {name: statistics.median(samples[(wl, n, name)]) for name in names}
        POOL_MEDIANS[(wl, n)] = med
        pool, sync = names[-1], names[-2]
        head = [*names, "pool / ceiling", "pool / subproc", "pool / gym-async",
                f"{sync} / ceiling"]  # fmt: skip
        lines.append(f"{wl}, {n} envs\n")
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        row = [f"{med[x]:,.0f}" for x in names]
        row += [
            f"{med[pool] / med['two-process ceiling']:.2f}x",
            f"{med[pool] / med['subproc']:.2f}x",
            f"{med[pool] / med['gym-async']:.2f}x",
            f"{med[sync] / med['two-process ceiling']:.2f}x",
        ]
        lines.append("| " + " | ".join(row) + " |\n")
    return "\n".join(lines)


# -- the Ray vectorizer (plugins/envfactory-ray) -----------------------------------------
RAY_SIZES = (8, 16)
#: the ray variants: plain (each actor steps its envs in series, as many actors as CPUs),
#: node-local (one actor holding every CPU, its envs in a subproc of its own; a step is one
#: message per actor by its channel) and node-local over one compiled Ray graph
RAY_VARIANTS = {
    "ray": [],
    "ray node-local": ["vectorizer.in_actor=subproc"],
    "ray node graph": ["vectorizer.in_actor=subproc", "vectorizer.compiled_graph=true"],
}


def ray_main(
    workloads: list[str], sizes: list[int], rounds: int, seconds: float, nodes: int | None = None
) -> str:
    """``--ray`` (and the full run, when envfactory-ray is installed): ``ray`` (plain and
    node-local, `RAY_VARIANTS`) against ``subproc`` (and ``subproc-atari`` for Pong) in the
    same run, interleaved round by round; medians and ratios. One local Ray is started first
    (as a user running many envs would), in a Ray temp dir of its own (a Ray another program
    left running on this machine is not joined), so each cell measures the actors, not Ray's
    start; ``ray start`` is the median seconds to build the plain env and reset it (its
    actors' processes start then). ``nodes``: a local cluster of that many nodes instead
    (``ray.cluster_utils.Cluster``: a head of no cpus and ``nodes`` nodes sharing this
    machine's cpus), as Ray runs on several machines (node-local: one actor per node)."""
    if "ray" not in envfactory.get_registry().vectorizers:
        return "\n(envfactory-ray is not installed: no ray rows)\n"
    import shutil
    import tempfile

    import ray

    tmp, old_tmp, cluster = None, os.environ.get("RAY_TMPDIR"), None
    if not ray.is_initialized():
        os.environ["RAY_TMPDIR"] = tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        if nodes:
            from ray.cluster_utils import Cluster

            head = {"num_cpus": 0, "include_dashboard": False}
            cluster = Cluster(initialize_head=True, head_node_args=head)
            for _ in range(nodes):
                cpus = max(1, (os.cpu_count() or 1) // nodes)
                cluster.add_node(num_cpus=cpus, object_store_memory=512 * 1024**2)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, logging_level="WARNING")
        else:
            ray.init(include_dashboard=False, logging_level="WARNING")
    samples: dict[tuple[str, int, str], list[float]] = {}
    starts: dict[tuple[str, int], list[float]] = {}
    try:
        for r in range(rounds):
            for wl in workloads:
                for n in sizes:
                    base = [*WORKLOADS[wl], f"num_envs={n}"]
                    runs = {"subproc": [*base, "vectorizer=subproc"]}
                    if wl == "Pong":
                        runs["subproc-atari"] = [*base, "vectorizer=subproc-atari"]
                    for name, extra in RAY_VARIANTS.items():
                        runs[name] = [*base, "vectorizer=ray", *extra]
                    for name, over in runs.items():
                        if name == "ray":
                            t0 = time.perf_counter()
                            envfactory.make_vec(overrides=over).close()
                            starts.setdefault((wl, n), []).append(time.perf_counter() - t0)
                        secs = seconds * (2 if wl == "Pong" else 1)
                        make = lambda over=over: envfactory.make_vec(overrides=over)  # noqa: E731
                        sps, _ = measure(make, secs)
                        samples.setdefault((wl, n, name), []).append(sps)
                        print(f"round {r + 1}/{rounds} {wl:8s} n={n:<2d} {name:14s} {sps:10.0f} "
                              "steps/s", file=sys.stderr, flush=True)  # fmt: skip
        per_node = max(sizes) // (nodes or 1)
        floor = ray_floor(nodes or 1, per_node)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            if old_tmp is None:
                os.environ.pop("RAY_TMPDIR", None)
            else:
                os.environ["RAY_TMPDIR"] = old_tmp
    med = {k: statistics.median(v) for k, v in samples.items()}
    lines = [
        f"\n**Ray vectorizer** (steps/s summed over envs, median of {rounds} rounds; load "
        f"{load_line()}; {f'{nodes} local nodes' if nodes else 'one local Ray'}, "
        f"{os.cpu_count()} cpus); ratios in the same run; node-local: "
        "`vectorizer.in_actor=subproc` (a step is one message per actor by its channel); node "
        "graph: also `vectorizer.compiled_graph=true` (one execute of a compiled Ray graph); "
        "+us: the Ray path's cost per step, its time per step minus subproc's\n",
        "| workload | envs | subproc | subproc-atari | ray | ray node-local | ray node graph "
        "| ray / subproc | node-local / subproc | node graph / subproc | node-local +us "
        "| node graph +us | node-local / subproc-atari | ray start (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for wl in workloads:
        for n in sizes:
            sub, plain = med[(wl, n, "subproc")], med[(wl, n, "ray")]
            local = med[(wl, n, "ray node-local")]
            graph = med[(wl, n, "ray node graph")]
            atari = med.get((wl, n, "subproc-atari"))
            step_us = lambda sps, n=n: n / sps * 1e6  # noqa: E731 (a step of all n envs)
            cells = [wl, str(n), f"{sub:,.0f}", f"{atari:,.0f}" if atari else "",
                     f"{plain:,.0f}", f"{local:,.0f}", f"{graph:,.0f}", f"{plain / sub:.2f}x",
                     f"{local / sub:.2f}x", f"{graph / sub:.2f}x",
                     f"{step_us(local) - step_us(sub):+,.0f}",
                     f"{step_us(graph) - step_us(sub):+,.0f}",
                     f"{local / atari:.2f}x" if atari else "",
                     f"{statistics.median(starts[(wl, n)]):.1f}"]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        f"\nRay's own floor here: {nodes or 1} do-nothing actors answering {per_node} CartPoles' "
        f"results each, {floor[0]:,.0f} us a step as one task each, {floor[1]:,.0f} us through "
        "one compiled graph (a node graph step pays at least that; node-local's direct channel "
        "pays neither)"
    )
    return "\n".join(lines) + "\n"


class _Node:
    """A do-nothing node actor for `ray_floor`: every step answers the same pickled batch."""

    def __init__(self, n: int) -> None:
        import pickle

        f, b = np.zeros((n, 4), np.float32), np.zeros(n, bool)
        self.answer = pickle.dumps((f, np.ones(n), b, b, {}))

    def step(self, actions: Any) -> bytes:
        return self.answer


def ray_floor(actors: int, n: int, steps: int = 300) -> tuple[float, float]:
    """Ray's own cost of a node-local step (microseconds, best of 3 blocks of ``steps``): one
    ``ray.get`` of a task per actor, then one ``execute`` of a compiled graph over them, on the
    Ray running now (``actors`` spread over its nodes, each answering ``n`` envs' results)."""
    import pickle

    import ray
    from ray.dag import InputNode, MultiOutputNode

    spread = ray.remote(_Node).options(num_cpus=0, scheduling_strategy="SPREAD")
    nodes, acts = [spread.remote(n) for _ in range(actors)], np.zeros(n, np.int64)
    ray.get([a.step.remote(acts) for a in nodes])
    with InputNode() as inp:
        graph = MultiOutputNode([a.step.bind(inp[k]) for k, a in enumerate(nodes)])
    compiled = graph.experimental_compile()
    tasks = lambda: ray.get([a.step.remote(acts) for a in nodes])  # noqa: E731
    dag = lambda: [pickle.loads(ray.get(r)) for r in compiled.execute(*[acts] * actors)]  # noqa: E731
    best = []
    try:
        for step in (tasks, dag):
            blocks = []
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(steps):
                    step()
                blocks.append((time.perf_counter() - t0) / steps * 1e6)
            best.append(min(blocks))
    finally:
        compiled.teardown()
        for a in nodes:
            ray.kill(a)
    return best[0], best[1]


# -- under load: idle, one busy core, oversubscribed 3x -------------------------------
LOADS = {"idle": 0, "one busy core": 1, "oversubscribed 3x": 2 * (os.cpu_count() or 1)}


def load_variants(n: int) -> dict[str, Callable[[], gym.vector.VectorEnv]]:
    """The CartPole variants the load table compares."""
    allv = variants("CartPole", n)
    keep = ["gym-async", "dummy", "subproc", "auto"]
    out = {k: allv[k] for k in keep}
    over = ["env=gym", "env.id=CartPole-v1", f"num_envs={n}", "vectorizer=subproc"]
    for k in (0, n // 2):  # auto picks one of these by the load when it is built
        out[f"subproc(in_parent={k})"] = lambda k=k: envfactory.make_vec(
            overrides=[*over, f"vectorizer.in_parent={k}"]
        )
    out["subproc(spin_us=0)"] = lambda: envfactory.make_vec(
        overrides=[*over, "vectorizer.spin_us=0"]
    )
    return out


def under_load(sizes: list[int], rounds: int, seconds: float) -> list[dict]:
    """CartPole at ``sizes`` under every load of `LOADS`, interleaved by round."""
    samples: dict[tuple[int, str, str], list[float]] = {}
    for r in range(rounds):
        for load, k in LOADS.items():
            with busy(k):
                for n in sizes:
                    for name, make in load_variants(n).items():
                        sps, _ = measure(make, seconds)
                        samples.setdefault((n, name, load), []).append(sps)
                        print(
                            f"round {r + 1}/{rounds} load={load:18s} n={n:<2d} {name:22s} "
                            f"{sps:10.0f} steps/s",
                            file=sys.stderr,
                            flush=True,
                        )
    return [
        {"num_envs": n, "variant": name, "load": load, "steps_per_s": statistics.median(v),
         "samples": v}
        for (n, name, load), v in samples.items()
    ]  # fmt: skip


def render_load(rows: list[dict]) -> str:
    by = {(r["num_envs"], r["variant"], r["load"]): r["steps_per_s"] for r in rows}
    loads = list(LOADS)
    lines = [
        "\n**CartPole under load** — steps/s (median of rounds) with CPU-bound processes "
        f"beside the vec env: {', '.join(f'{k} = {v}' for k, v in LOADS.items())} busy "
        "processes; ratios in the same run\n"
    ]
    head = ["envs", "variant", *loads, "busy / idle", *[f"/ gym-async ({x})" for x in loads]]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for n in sorted({r["num_envs"] for r in rows}):
        for name in dict.fromkeys(r["variant"] for r in rows if r["num_envs"] == n):
            vals = [by.get((n, name, x), float("nan")) for x in loads]
            row = [str(n), name, *[f"{v:,.0f}" for v in vals], f"{vals[1] / vals[0]:.2f}x"]
            row += [f"{v / by[(n, 'gym-async', x)]:.2f}x" for v, x in zip(vals, loads)]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def render_peers(results: list[dict], missing: dict[str, str]) -> str:
    """Ratios of ``subproc`` to the peers and to the two-process ceiling, same run."""
    by = {(r["workload"], r["num_envs"], r["variant"]): r["steps_per_s"] for r in results}
    names = dict.fromkeys(r["variant"] for r in results)
    peers = [v for v in names if v.startswith(("puffer", "envpool"))]
    lines = ["\n**Ratios to peers and to the ceiling** (CartPole, same run)\n"]
    head = ["envs", "subproc / dummy", "subproc / gym-async", "subproc / raw limit"]
    head += [f"subproc / {p}" for p in peers]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for n in sorted({r["num_envs"] for r in results if r["workload"] == "CartPole"}):
        ours = by.get(("CartPole", n, "subproc"))
        if not ours:
            continue
        row = [str(n)]
        for other in ("dummy", "gym-async", "raw limit", *peers):
            theirs = by.get(("CartPole", n, other))
            row.append(f"{ours / theirs:.2f}x" if theirs else "")
        lines.append("| " + " | ".join(row) + " |")
    for name, why in missing.items():
        lines.append(f"\n{name} not measured: {why}")
    return "\n".join(lines)


# -- the training loop (--train; the loop itself is benchmarks/train.py) --------------
#: the training table's medians: (workload, variant) -> (steps/s, share of time in the env)
TRAIN_MEDIANS: dict[tuple[str, str], tuple[float, float]] = {}


def train_variants(workload: str, n: int) -> dict[str, Callable[[], Any]]:
    """Each makes a ``_Env`` (synchronous loop) or a pool (``async_loop``)."""
    from importlib.util import find_spec

    from train import gym_env, sb3_env

    fns = thunks(workload, n)
    base = [*WORKLOADS[workload], f"num_envs={n}"]

    def ef(vec: str, *opts: str) -> Callable[[], Any]:
        over = [*base, f"vectorizer={vec}", *opts]
        return lambda: gym_env(envfactory.make_vec(overrides=over))

    out: dict[str, Callable[[], Any]] = {"dummy": ef("dummy"), "subproc": ef("subproc")}
    pool_vec = "subproc"
    if workload == "Pong":
        out["subproc-atari"] = ef("subproc-atari")
        pool_vec = "subproc-atari"
    if n >= 2:
        over = [*base, f"vectorizer={pool_vec}", f"vectorizer.batch_size={n // 2}"]
        out[f"{pool_vec} pool (batch {n // 2}, async loop)"] = lambda: envfactory.make_vec(
            overrides=over
        )
    out["gym-sync"] = lambda: gym_env(gym.vector.SyncVectorEnv(fns))
    out["gym-async"] = lambda: gym_env(gym.vector.AsyncVectorEnv(fns, shared_memory=True))
    if find_spec("stable_baselines3") is not None:
        out["sb3-subproc"] = lambda: sb3_env(fns)
    return out


def train_main(workloads: list[str], n: int, rounds: int, seconds: float) -> tuple[str, dict]:
    """``--train`` (the loop: benchmarks/train.py): every variant once per round,
    interleaved; medians and ratios. Returns the table and the medians,
    ``{(workload, variant): (steps/s, share of time in the env)}``."""
    import torch
    from train import MODELS, STEPS_PER_UPDATE, measure_train

    torch.set_num_threads(1)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(rounds):
        for wl in workloads:
            secs = seconds * (3 if wl == "Pong" else 1)
            for name, make in train_variants(wl, n).items():
                sps, share = measure_train(wl, make, secs)
                samples.setdefault((wl, name), []).append((sps, share))
                print(f"round {r + 1}/{rounds} train {wl:8s} n={n:<2d} {name:36s} {sps:9.0f} "
                      f"steps/s, {share:4.0%} in env", file=sys.stderr, flush=True)  # fmt: skip
    med = {
        k: (statistics.median(s for s, _ in v), statistics.median(e for _, e in v))
        for k, v in samples.items()
    }
    lines = [
        f"\n**Training loop** (CleanRL-style PPO: a policy forward every step, an update "
        f"every {STEPS_PER_UPDATE} steps, torch on 1 thread; {n} envs; end-to-end env "
        f"steps/s, median of {rounds} rounds; load {load_line()}); ratios in the same run\n",
        "| workload | variant | steps/s | time in env | / dummy | / gym-async |",
        "|---|---|---|---|---|---|",
    ]
    for wl in workloads:
        dummy, ga = med[(wl, "dummy")][0], med[(wl, "gym-async")][0]
        for (w, name), (sps, share) in med.items():
            if w == wl:
                lines.append(f"| {wl} ({MODELS[wl]}) | {name} | {sps:,.0f} | {share:.0%} | "
                             f"{sps / dummy:.2f}x | {sps / ga:.2f}x |")  # fmt: skip
    TRAIN_MEDIANS.update(med)
    return "\n".join(lines) + "\n", med


# -- start-up and memory in a fresh process (torch installed or not) ---------------------
STARTUP_CODE = r"""
import json, sys, time
t0 = time.perf_counter()
kind = sys.argv[1]
if kind == "envfactory":
    import envfactory
    envs = envfactory.make_vec(overrides=["num_envs=8", "vectorizer=subproc",
                                          "vectorizer.context=forkserver"])
else:
    import gymnasium as gym
    ctx = None if kind == "gym-async/default" else "forkserver"
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 8, context=ctx)
envs.reset(seed=0)
elapsed = time.perf_counter() - t0
try:
    import psutil
    pss = psutil.Process().memory_full_info().pss / 2**20
except ImportError:
    pss = float("nan")
heavy = [m for m in ("torch", "jax") if m in sys.modules]
envs.close()
print(json.dumps({"seconds": elapsed, "pss_mb": pss, "imported": heavy}))
"""
STARTUP_KINDS = ("envfactory", "gym-async/forkserver", "gym-async/default")
NO_PSUTIL = "psutil is missing: pip install -e '.[bench]'"


def _fresh_run(code: str, kind: str) -> str:
    """The last line ``code`` prints, run with argument ``kind`` in a fresh interpreter,
    with Python's bytecode cache on (as for an installed package, which pip compiles: a
    source checkout under ``PYTHONDONTWRITEBYTECODE=1`` would compile envfactory's modules
    from source on every start, and gymnasium's not; the first run writes the cache)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(
        [sys.executable, "-c", code, kind], capture_output=True, text=True, timeout=300, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"start-up run {kind} failed:\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def startup_memory(rounds: int) -> dict[str, Any]:
    """Import + construct + first reset of 8 CartPoles, each in a fresh interpreter
    (envfactory ``subproc`` under forkserver vs gymnasium's ``AsyncVectorEnv``), and the
    parent's PSS afterwards; medians over ``rounds`` interleaved runs."""
    import importlib.util

    runs: dict[str, list[dict]] = {k: [] for k in STARTUP_KINDS}
    for _ in range(rounds):
        for kind in STARTUP_KINDS:
            runs[kind].append(json.loads(_fresh_run(STARTUP_CODE, kind)))
    out: dict[str, Any] = {"torch_installed": importlib.util.find_spec("torch") is not None}
    for kind, rs in runs.items():
        out[kind] = {
            "seconds": statistics.median(r["seconds"] for r in rs),
            "pss_mb": statistics.median(r["pss_mb"] for r in rs),
            "imported": sorted({m for r in rs for m in r["imported"]}),
        }
    return out


#: 8 Pongs in a fresh process, import + construct + first reset: envfactory ``subproc`` the
#: way its README builds them (composed from overrides, so Hydra's import and composition
#: count) against gymnasium's AsyncVectorEnv over gymnasium's own Atari stack (default
#: context: fork on Linux)
STARTUP_PONG_CODE = r"""
import sys, time
t0 = time.perf_counter()
kind = sys.argv[1]
if kind.startswith("envfactory"):
    import envfactory
    over = ["env=atari", "env.id=ALE/Pong-v5", "num_envs=8", "vectorizer=subproc"]
    if kind.endswith("(fork)"):
        over.append("vectorizer.context=fork")
    envs = envfactory.make_vec(overrides=over)
else:
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)

    def pong():
        env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
        env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
        return gym.wrappers.FrameStackObservation(env, 4)

    envs = gym.vector.AsyncVectorEnv([pong] * 8, shared_memory=True)
envs.reset(seed=0)
elapsed = time.perf_counter() - t0
envs.close()
print(elapsed)
"""
STARTUP_PONG_KINDS = (
    "envfactory subproc (forkserver, default)",
    "envfactory subproc (fork)",
    "gym-async, gymnasium's stack (default context)",
)
#: the Pong start-up medians (for the targets summary)
STARTUP_PONG: dict[str, float] = {}


def startup_pong(rounds: int) -> dict[str, float]:
    """Median seconds of `STARTUP_PONG_CODE` per kind, each run in a fresh
    interpreter, the kinds interleaved round by round."""
    runs: dict[str, list[float]] = {k: [] for k in STARTUP_PONG_KINDS}
    for kind in STARTUP_PONG_KINDS:  # a warm-up (the bytecode caches), not timed
        _fresh_run(STARTUP_PONG_CODE, kind)
    for r in range(rounds):
        for kind in STARTUP_PONG_KINDS:
            runs[kind].append(float(_fresh_run(STARTUP_PONG_CODE, kind)))
            print(f"round {r + 1}/{rounds} start-up 8 Pongs {kind:48s} {runs[kind][-1]:6.2f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    STARTUP_PONG.update({k: statistics.median(v) for k, v in runs.items()})
    return dict(STARTUP_PONG)


def render_startup_pong(res: dict[str, float]) -> str:
    gym_s = res[STARTUP_PONG_KINDS[-1]]
    lines = [
        "\nStart-up, 8 Pongs: import + construct + first reset in a fresh process (median "
        f"seconds; load {load_line()})",
        f"  {'variant':48s} {'seconds':>8s} {'/ gym-async':>12s}",
    ]
    for kind, secs in res.items():
        lines.append(f"  {kind:48s} {secs:8.2f} {secs / gym_s:11.2f}x")
    return "\n".join(lines) + "\n"


#: the parallel sweep's medians (--sweep; benchmarks/sweep.py): vectorizer -> total steps/s
SWEEP_MEDIANS: dict[str, float] = {}


def sweep_main(rounds: int, seconds: float) -> str:
    """``--sweep`` (benchmarks/sweep.py): 4 joblib jobs of CartPole 8 envs at once."""
    import sweep

    table = sweep.main(rounds, seconds)
    SWEEP_MEDIANS.update(sweep.MEDIANS)
    return table


def render_targets(results: list[dict], load_rows: list[dict], startup_mem: dict[str, Any]) -> str:
    """Issue 9's throughput targets, each with its ratio from this run and whether it is
    met (only those whose rows were measured)."""
    main = {(r["workload"], r["num_envs"], r["variant"]): r["steps_per_s"] for r in results}
    load = {(r["num_envs"], r["variant"], r["load"]): r["steps_per_s"] for r in load_rows}
    rows: list[tuple[str, float, str, float]] = []  # (what, ratio, op, bound)

    def add(what: str, num: float | None, den: float | None, op: str, bound: float) -> None:
        if num is not None and den:
            rows.append((what, num / den, op, bound))

    sub16, auto16 = main.get(("CartPole", 16, "subproc")), main.get(("CartPole", 16, "auto"))
    dummy16 = main.get(("CartPole", 16, "dummy"))
    add("CartPole 16 envs: auto (recommended for speed) / dummy", auto16, dummy16, ">=", 1.2)
    add("CartPole 16 envs: subproc (every env in a worker) / dummy", sub16, dummy16, ">=", 1.2)
    add("CartPole 16 envs: subproc / gym-async", sub16, main.get(("CartPole", 16, "gym-async")),
        ">=", 5.0)  # fmt: skip
    for (wl, n), med in POOL_MEDIANS.items():
        if wl != "Pong":
            continue
        pool = next((v for k, v in med.items() if "pool" in k), None)
        what = f"Pong {n} envs: pool(batch_size={n // 2})"
        add(f"{what} / two-process ceiling", pool, med.get("two-process ceiling"), ">=", 0.9)
        add(f"{what} / subproc", pool, med.get("subproc"), ">=", 1.0)
        add(f"Pong {n} envs: subproc-atari / subproc", med.get("subproc-atari"),
            med.get("subproc"), ">=", 1.0)  # fmt: skip
        if n == 8:
            add(f"{what} / gym-async", pool, med.get("gym-async"), ">=", 1.6)
    idle, busy1, over = list(LOADS)
    sub8 = load.get((8, "subproc", busy1))
    add("CartPole 8 envs, one busy core: auto / dummy (issues 19, 26)",
        load.get((8, "auto", busy1)), load.get((8, "dummy", busy1)), ">=", 0.9)  # fmt: skip
    add("CartPole 8 envs, one busy core: subproc (every env in a worker) / dummy (issue 26)",
        sub8, load.get((8, "dummy", busy1)), ">=", 0.6)  # fmt: skip
    if SWEEP_MEDIANS:
        add("parallel sweep, 4 jobs x CartPole 8: subproc / dummy (issue 19)",
            SWEEP_MEDIANS.get("subproc"), SWEEP_MEDIANS.get("dummy"), ">=", 0.9)  # fmt: skip
        add("parallel sweep, 4 jobs x CartPole 8: auto (recommended for speed) / dummy "
            "(issue 26)", SWEEP_MEDIANS.get("auto"), SWEEP_MEDIANS.get("dummy"),
            ">=", 0.9)  # fmt: skip
    add("CartPole 8 envs, one busy core: subproc / its idle rate", sub8,
        load.get((8, "subproc", idle)), ">=", 0.9)  # fmt: skip
    add("CartPole 8 envs, one busy core: subproc / gym-async", sub8,
        load.get((8, "gym-async", busy1)), ">=", 2.0)  # fmt: skip
    for n in sorted({r["num_envs"] for r in load_rows}):
        lowest = min(
            (v / load[(n, "gym-async", over)], name)
            for (m, name, x), v in load.items()
            if m == n and x == over and name.startswith("subproc")
        )
        rows.append((f"CartPole {n} envs, oversubscribed 3x: slowest subproc variant "
                     f"({lowest[1]}) / gym-async", lowest[0], ">=", 1.0))  # fmt: skip
    train = {k: v[0] for k, v in TRAIN_MEDIANS.items()}
    add("training loop, CartPole: subproc / dummy", train.get(("CartPole", "subproc")),
        train.get(("CartPole", "dummy")), ">=", 0.95)  # fmt: skip
    add("training loop, CartPole: subproc / gym-async", train.get(("CartPole", "subproc")),
        train.get(("CartPole", "gym-async")), ">=", 2.0)  # fmt: skip
    if STARTUP_PONG:
        add("start-up 8 Pongs: subproc / gym-async (gymnasium's stack, default context)",
            STARTUP_PONG[STARTUP_PONG_KINDS[0]], STARTUP_PONG[STARTUP_PONG_KINDS[-1]],
            "<=", 1.2)  # fmt: skip
    if startup_mem:
        ef, ga = startup_mem["envfactory"], startup_mem["gym-async/forkserver"]
        rows.append(("start-up with torch: envfactory / gym-async (forkserver)",
                     ef["seconds"] / ga["seconds"], "<=", 1.5))  # fmt: skip
        rows.append(("parent PSS with torch: envfactory / gym-async (forkserver)",
                     ef["pss_mb"] / ga["pss_mb"], "<=", 2.0))  # fmt: skip
    if not rows:
        return ""
    lines = ["\n**Targets** (issues 9, 19 and 26; ratios from this run)\n",
             "| target | ratio | met |", "|---|---|---|"]  # fmt: skip
    for what, ratio, op, bound in rows:
        if ratio != ratio:  # NaN: psutil missing (memory)
            lines.append(f"| {what} {op} {bound:g}x | not measured ({NO_PSUTIL}) | - |")
            continue
        met = ratio >= bound if op == ">=" else ratio <= bound
        lines.append(f"| {what} {op} {bound:g}x | {ratio:.2f}x | {'yes' if met else 'NO'} |")
    return "\n".join(lines) + "\n"


def render_startup(res: dict[str, Any]) -> str:
    torch = "installed" if res["torch_installed"] else "NOT installed"
    lines = [
        f"Start-up and memory: import + construct + first reset of 8 CartPoles in a fresh "
        f"process (torch {torch})",
        f"  {'variant':24s} {'seconds':>8s} {'parent PSS MiB':>15s}  imports torch/jax",
    ]
    for kind in STARTUP_KINDS:
        r = res[kind]
        lines.append(
            f"  {kind:24s} {r['seconds']:8.2f} {r['pss_mb']:15.0f}  "
            f"{', '.join(r['imported']) or 'neither'}"
        )
    ef, ga = res["envfactory"], res["gym-async/forkserver"]
    t_ratio, m_ratio = ef["seconds"] / ga["seconds"], ef["pss_mb"] / ga["pss_mb"]
    lines.append(
        f"  envfactory / gym-async (forkserver): time {t_ratio:.2f}x (target <= 1.5x), "
        f"parent PSS {m_ratio:.2f}x (target <= 2x); vs gym-async default context: time "
        f"{ef['seconds'] / res['gym-async/default']['seconds']:.2f}x, PSS "
        f"{ef['pss_mb'] / res['gym-async/default']['pss_mb']:.2f}x"
    )
    return "\n".join(lines) + "\n"


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, above 0 and finite (argparse prints the
    error)."""

    def parse(text: str) -> Any:
        value = kind(text)  # (a ValueError: argparse says "invalid ... value")
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be above 0 (and finite), got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="sizes 1, 8; 2 rounds; shorter runs")
    p.add_argument("--sizes", type=_positive(int), nargs="+", default=None)
    p.add_argument("--rounds", type=_positive(int), default=None)
    p.add_argument("--seconds", type=_positive(float), default=None, help="per measurement")
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--out", default=None, help="JSON file (default benchmarks/results/...)")
    p.add_argument("--no-pool", action="store_true", help="skip the async pool's rows")
    p.add_argument("--no-load", action="store_true", help="skip the under-load table")
    p.add_argument("--load-sizes", type=_positive(int), nargs="+", default=None)
    p.add_argument("--old", type=Path, default=None, metavar="CHECKOUT",
                   help="--scale: also our sync row from another checkout (a worktree of an\n"
                   "older commit), both trees in fresh interpreters, ratio new / old")  # fmt: skip
    p.add_argument("--cases", nargs="+", default=(), metavar="ROW", choices=scale.ROWS,
                   help="--scale: only these rows (their names before any ' ('):\n"
                   + ", ".join(repr(r) for r in scale.ROWS))  # fmt: skip
    p.add_argument("--ray-nodes", type=_positive(int), default=None, metavar="N",
                   help="--ray: a local cluster of N nodes sharing this machine's cpus\n"
                   "(ray.cluster_utils.Cluster, a head of 0 cpus), not one Ray")  # fmt: skip
    only = p.add_mutually_exclusive_group()  # the sections run alone (else: the full run)
    only.add_argument("--pool", action="store_true", help="only the async pool's rows")
    only.add_argument("--ray", action="store_true", help="only the ray rows (envfactory-ray)")
    only.add_argument("--load", action="store_true", help="only the CartPole under-load table")
    only.add_argument("--startup", action="store_true", help="only start-up and memory")
    only.add_argument("--train", action="store_true", help="only the training loop (PPO, torch)")
    only.add_argument("--sweep", action="store_true",
                      help="only a parallel sweep: 4 joblib jobs x CartPole 8 envs")  # fmt: skip
    only.add_argument("--scale", action="store_true",
                      help="only many cores: 16/32/64 envs against the peers")  # fmt: skip
    only.add_argument("--plot-from", default=None, metavar="JSON",
                      help="only plot an earlier run's JSON (needs --plot)")  # fmt: skip
    p.add_argument(
        "--plot",
        default=None,
        metavar="PATH",
        help="also write steps/s against num_envs as a PNG (one per workload; the full run\n"
        "and --scale)",
    )
    args = p.parse_args(argv)
    unplotted = ("pool", "ray", "load", "startup", "train", "sweep")  # sections with no plot
    if args.quick and (args.scale or args.plot_from or any(getattr(args, k) for k in unplotted)):
        p.error("--quick shortens the full run only; leave it out with a section flag")
    if args.plot and any(getattr(args, k) for k in unplotted):
        p.error("--plot draws the full run's or --scale's table; leave it out with this section")
    if (args.old or args.cases) and not args.scale:
        p.error("--old and --cases go with --scale")
    if args.ray_nodes and not args.ray:
        p.error("--ray-nodes goes with --ray")
    if args.old and not (args.old / "envfactory" / "__init__.py").is_file():
        p.error(f"--old {str(args.old)!r} is not an envfactory checkout (no envfactory/)")
    if args.plot_from:
        if not args.plot:
            p.error("--plot-from needs --plot PATH")
        try:
            with open(args.plot_from) as f:
                results = results_of(json.load(f))
        except (OSError, ValueError) as exc:
            p.error(f"--plot-from {args.plot_from}: not a JSON of bench.py: {exc}")
        plot_results(results, args.plot)
        return 0
    if args.train:
        from train import torch_missing

        why = torch_missing()
        if why:
            print(f"--train: {why}")
            return 0
        n = (args.sizes or [8])[0]
        table, _ = train_main(args.workloads, n, args.rounds or 2, args.seconds or 4.0)
        print(table + render_targets([], [], {}))
        return 0
    if args.scale:
        out = _out_path(args.out, "scale")
        sizes = args.sizes or list(scale.SIZES)
        old = args.old.resolve() if args.old else None
        rounds, seconds = args.rounds or 2, args.seconds or 1.5
        print(scale.main(args.workloads, sizes, rounds, seconds, out, old, args.cases))
        print(f"\nJSON: {out}", file=sys.stderr)
        if args.plot:
            with open(out) as f:
                plot_results(results_of(json.load(f)), args.plot)
        return 0
    if args.sweep:
        print(sweep_main(args.rounds or 3, args.seconds or 4.0) + render_targets([], [], {}))
        return 0
    if args.startup:
        table = render_startup(startup_memory(args.rounds or 3))
        if "Pong" in args.workloads:
            table += render_startup_pong(startup_pong(args.rounds or 3))
        print(table + render_targets([], [], {}))
        return 0
    if args.load:
        rows = under_load(args.load_sizes or [8, 16], args.rounds or 3, args.seconds or 1.5)
        print(render_load(rows) + "\n" + render_targets([], rows, {}))
        return 0
    if args.pool:
        print(pool_main(args.workloads, args.rounds or 3, args.seconds or 1.5, args.sizes))
        print(render_targets([], [], {}))
        return 0
    if args.ray:
        sizes = args.sizes or list(RAY_SIZES)
        rounds, seconds = args.rounds or 3, args.seconds or 1.5
        print(ray_main(args.workloads, sizes, rounds, seconds, args.ray_nodes))
        return 0
    sizes = args.sizes or ([1, 8] if args.quick else [1, 2, 4, 8, 16])
    rounds = args.rounds or (2 if args.quick else 3)
    seconds = args.seconds or (0.7 if args.quick else 1.5)

    samples: dict[tuple[str, int, str], list[float]] = {}
    peak: dict[tuple[str, int, str], float] = {}
    for r in range(rounds):  # interleaved: every variant once per round
        for wl in args.workloads:
            for n in sizes:
                secs = seconds * (2 if wl == "Pong" else 1)
                samples.setdefault((wl, n, "raw limit"), []).append(raw_limit(wl, n, secs))
                peak.setdefault((wl, n, "raw limit"), float("nan"))
                for name, make in variants(wl, n).items():
                    sps, mem = measure(make, secs)
                    samples.setdefault((wl, n, name), []).append(sps)
                    peak[(wl, n, name)] = max(peak.get((wl, n, name), 0.0), mem)
                    print(
                        f"round {r + 1}/{rounds} {wl:8s} n={n:<2d} {name:24s} "
                        f"{sps:10.0f} steps/s  {mem:7.0f} MB",
                        file=sys.stderr,
                        flush=True,
                    )
                for name, make_loop in peer_variants(wl, n).items():
                    sps = measure_loop(make_loop, secs)
                    samples.setdefault((wl, n, name), []).append(sps)
                    peak.setdefault((wl, n, name), float("nan"))
                    print(f"round {r + 1}/{rounds} {wl:8s} n={n:<2d} {name:24s} {sps:10.0f}",
                          file=sys.stderr, flush=True)  # fmt: skip
    starts = {wl: startup(wl, 8, rounds) for wl in args.workloads}
    load_rows: list[dict] = []
    if not args.no_load and "CartPole" in args.workloads:
        load_sizes = args.load_sizes or [n for n in sizes if n in (8, 16)] or sizes[-1:]
        load_rows = under_load(load_sizes, rounds, seconds)

    results = []
    for (wl, n, name), vals in samples.items():
        results.append(
            {
                "workload": wl,
                "num_envs": n,
                "variant": name,
                "steps_per_s": statistics.median(vals),
                "samples": vals,
                "peak_rss_mb": peak[(wl, n, name)],
            }
        )
    table = render(results, starts)
    ray_sizes = [n for n in sizes if n in RAY_SIZES]
    if ray_sizes and "ray" in envfactory.get_registry().vectorizers:
        table += ray_main(args.workloads, ray_sizes, rounds, seconds)
    if "CartPole" in args.workloads:
        table += "\n" + render_peers(results, peer_available())
    if not args.no_pool:
        table += "\n" + pool_main(args.workloads, rounds, seconds)
    if load_rows:
        table += "\n" + render_load(load_rows)
    startup_mem = startup_memory(rounds) if "CartPole" in args.workloads else {}
    if startup_mem:
        table += "\n" + render_startup(startup_mem)
    if "Pong" in args.workloads:
        table += render_startup_pong(startup_pong(rounds))
    table += render_targets(results, load_rows, startup_mem)
    print(table)
    out = _out_path(args.out, "bench")
    with open(out, "w") as f:
        json.dump(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "gymnasium": gym.__version__,
                    "envfactory": envfactory.__version__,
                },
                "command": "python benchmarks/bench.py " + " ".join(sys.argv[1:]),
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "code_digest": code_digest(),
                "rounds": rounds,
                "seconds": seconds,
                "results": results,
                "startup_8_envs_s": starts,
                "under_load": load_rows,
                "startup_memory": startup_mem,
                "startup_8_pongs_s": STARTUP_PONG,
                "table": table,
            },
            f,
            indent=1,
        )
    print(f"\nJSON: {out}", file=sys.stderr)
    if args.plot:
        plot_results(results, args.plot)
    return 0


def _out_path(given: str | None, kind: str) -> str:
    """``--out``, else ``benchmarks/results/<kind>-<time>.json``; its folder made."""
    out = given or os.path.join(
        os.path.dirname(__file__), "results", time.strftime(f"{kind}-%Y%m%d-%H%M%S.json")
    )
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    return out


def results_of(data: dict) -> list[dict]:
    """The rows to plot from a run's JSON: the full run's ``results``, or the medians of a
    ``--scale`` run's ``samples``. Raises ValueError for any other JSON."""
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return data["results"]
    if isinstance(data, dict) and isinstance(data.get("samples"), list):
        return [
            {"workload": r["workload"], "num_envs": r["num_envs"], "variant": r["variant"],
             "steps_per_s": statistics.median(r["samples"])}
            for r in data["samples"] if r["samples"]
        ]  # fmt: skip
    raise ValueError("not a JSON written by bench.py (no 'results' or 'samples' list)")


def plot_results(results: list[dict], path: str) -> list[str]:
    """The sweep summary's kind of plot (envfactory.cli.plot) of the main table: steps/s
    against num_envs, one line per variant; one PNG per workload (``PATH`` itself for one
    workload, else ``<stem>-<workload><suffix>``). Returns the paths written."""
    from pathlib import Path

    from envfactory.cli.plot import throughput_plot

    target = Path(path)
    workloads = sorted({r["workload"] for r in results})
    written = []
    for wl in workloads:
        rows = [
            {"env": wl, "vectorizer": r["variant"], "num_envs": r["num_envs"],
             "steps_per_second": r["steps_per_s"]}
            for r in results if r["workload"] == wl
        ]  # fmt: skip
        one = target if len(workloads) == 1 else target.with_name(
            f"{target.stem}-{wl}{target.suffix or '.png'}"
        )  # fmt: skip
        if throughput_plot(rows, one, title=f"envfactory benchmark: {wl}") is not None:
            written.append(str(one))
            print(f"plot: {one}", file=sys.stderr)
    return written


def render(results: list[dict], starts: dict[str, dict[str, float]]) -> str:
    by = {(r["workload"], r["num_envs"], r["variant"]): r for r in results}
    lines = []
    for wl in dict.fromkeys(r["workload"] for r in results):
        names = list(dict.fromkeys(r["variant"] for r in results if r["workload"] == wl))
        lines.append(
            f"\n**{wl}** — steps/s summed over envs (median of rounds); ratios vs "
            "gymnasium in the same run\n"
        )
        best = "subproc-atari" if wl == "Pong" else "subproc"
        head = ["envs", *names, f"{best} / gym-async", "dummy / gym-sync", f"{best} / raw limit"]
        if wl == "Pong":
            head.append(f"{best} / gym-async, gymnasium's stack")
        native = wl == "Pong" and "ale-vector" in names
        if native:
            head.append("ale-vector / AtariVectorEnv (ale_py)")
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for n in sorted({r["num_envs"] for r in results if r["workload"] == wl}):
            row = [str(n)]
            for name in names:
                r = by.get((wl, n, name))
                row.append(f"{r['steps_per_s']:,.0f}" if r else "")
            sp = by[(wl, n, best)]["steps_per_s"] / by[(wl, n, "gym-async")]["steps_per_s"]
            dm = by[(wl, n, "dummy")]["steps_per_s"] / by[(wl, n, "gym-sync")]["steps_per_s"]
            lim = by[(wl, n, best)]["steps_per_s"] / by[(wl, n, "raw limit")]["steps_per_s"]
            row += [f"{sp:.2f}x", f"{dm:.2f}x", f"{lim:.0%}"]
            if wl == "Pong":
                own = by[(wl, n, "gym-async, gymnasium's stack")]["steps_per_s"]
                row.append(f"{by[(wl, n, best)]['steps_per_s'] / own:.2f}x")
            if native:
                ale = by[(wl, n, "ale-vector")]["steps_per_s"]
                row.append(f"{ale / by[(wl, n, 'AtariVectorEnv (ale_py)')]['steps_per_s']:.2f}x")
            lines.append("| " + " | ".join(row) + " |")
        mem = max(
            (r["peak_rss_mb"] for r in results if r["workload"] == wl and r["peak_rss_mb"] > 0),
            default=0,
        )
        rss = f"{mem:,.0f} MB" if mem else f"not measured ({NO_PSUTIL})"
        lines.append(f"\nPeak RSS of parent + workers during {wl} runs: {rss}")
    lines.append("\n**Start-up, 8 envs** (construct + first reset, median seconds)\n")
    lines.append("| workload | " + " | ".join(next(iter(starts.values())).keys()) + " |")
    lines.append("|---|" + "---|" * len(next(iter(starts.values()))))
    for wl, d in starts.items():
        lines.append(f"| {wl} | " + " | ".join(f"{v:.2f}" for v in d.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
