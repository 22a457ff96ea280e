"""What envfactory's vectorizers are measured against, shared by ``bench.py`` and its
many-core section ``scale.py`` (both import this module, not each other): the workloads and
their env constructors, the raw limit (one plain process per core, no communication at
all), and the peers' own vectorizers as steppable loops (PufferLib's ``Multiprocessing``,
envpool) or vector envs (ale_py's ``AtariVectorEnv``), each imported only when used.
"""

from __future__ import annotations

import gc
import os
import queue as queue_module
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import envfactory
from envfactory.factory import env_thunks

__all__ = [
    "WORKLOADS",
    "Loop",
    "ale_native",
    "envpool_loop",
    "measure_loop",
    "peer_available",
    "peer_variants",
    "puffer_env",
    "puffer_loop",
    "puffer_workers",
    "raw_limit",
    "thunks",
]

WORKLOADS = {
    "CartPole": ["env=gym", "env.id=CartPole-v1"],
    "Pong": ["env=atari", "env.id=ALE/Pong-v5"],
}


def thunks(workload: str, n: int) -> list:
    """``n`` env constructors of ``workload``, as every variant steps them."""
    return env_thunks(envfactory.compose([*WORKLOADS[workload], f"num_envs={n}"]))


def ale_native(n: int) -> gym.vector.VectorEnv:
    """ale_py's own C++ ``AtariVectorEnv`` of ``n`` Pongs (threads over the same ROM)."""
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv("pong", n, episodic_life=False, life_loss_info=True)


def _raw_worker(fns: list, seconds: float, queue: Any) -> None:
    envs = [fn() for fn in fns]
    for i, e in enumerate(envs):
        e.reset(seed=i)
        e.action_space.seed(i)
    bank = [[e.action_space.sample() for e in envs] for _ in range(64)]
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for acts in bank:
            for e, a in zip(envs, acts):
                _, _, term, trunc, _ = e.step(a)
                if term or trunc:
                    e.reset()
            steps += len(envs)
    queue.put(steps / (time.perf_counter() - t0))


def raw_limit(workload: str, n: int, seconds: float) -> float:
    """The ceiling: one process per core stepping its share of the envs, no IPC at all."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    fns = thunks(workload, n)
    k = min(n, os.cpu_count() or 1)
    shares = [fns[i::k] for i in range(k)]
    queue = ctx.Queue()
    procs = [ctx.Process(target=_raw_worker, args=(s, seconds, queue)) for s in shares]
    for p in procs:
        p.start()
    got: list[float] = []
    try:
        while len(got) < len(procs):  # (a process that dies before it answers: say so, no hang)
            try:
                got.append(queue.get(timeout=1.0))
            except queue_module.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"raw_limit({workload!r}, {n}): a process stepping a "
                                       f"share of the envs ended with exit code {dead[0]} "
                                       "(its traceback is above)") from None  # fmt: skip
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    return sum(got)


# -- peers: PufferLib's Multiprocessing backend, envpool --------------------------------
class Loop:
    """A peer's stepping loop in the shape ``measure_loop`` wants: ``step()`` steps one
    batch and returns how many env steps it made."""

    def __init__(self, step: Callable[[], int], close: Callable[[], Any]) -> None:
        self.step, self.close = step, close


def puffer_env(workload: str, buf: Any = None, seed: int = 0) -> Any:
    """The creator PufferLib wants: a ``GymnasiumPufferEnv`` over the same env."""
    import pufferlib.emulation

    return pufferlib.emulation.GymnasiumPufferEnv(env=thunks(workload, 1)[0](), buf=buf, seed=seed)


def puffer_workers(n: int, batch: int, cpus: int) -> int:
    """PufferLib's ``num_workers``: as many as divide ``n`` (and whole workers make a
    ``batch``), at most one per core less one. Its workers and its main process busy-wait
    on shared flags, so a worker on every core leaves the main process none: on 2 cores 8
    CartPoles ran 10x slower in 2 workers than in 1 (our ``subproc`` leaves the parent a
    core the same way).

    Example:
        >>> puffer_workers(16, 16, 16), puffer_workers(16, 8, 16), puffer_workers(8, 8, 2)
        (8, 8, 1)
        >>> puffer_workers(8, 4, 2), puffer_workers(64, 32, 16)
        (2, 8)
    """
    cap = max(1, min(n, cpus - 1))
    fits = [w for w in range(1, n + 1) if n % w == 0 and batch % (n // w) == 0]
    below = [w for w in fits if w <= cap]
    return max(below) if below else min(fits)  # (n itself always fits a batch of >= 1)


def puffer_loop(n: int, batch: int, workload: str = "CartPole") -> Loop:
    """PufferLib's ``Multiprocessing`` over ``n`` envs of ``workload``, ``batch`` a recv."""
    import functools

    import numpy as np
    import pufferlib.vector

    workers = puffer_workers(n, batch, os.cpu_count() or 1)
    vec = pufferlib.vector.make(
        functools.partial(puffer_env, workload),
        backend=pufferlib.vector.Multiprocessing,
        num_envs=n,
        num_workers=workers,
        batch_size=batch,
        overwork=True,  # (it counts physical cores: one on some VMs)
    )
    rng = np.random.default_rng(0)
    actions = vec.single_action_space.n
    bank = [rng.integers(0, actions, batch) for _ in range(64)]
    k = [0]
    if batch == n:
        vec.reset(seed=0)

        def step() -> int:
            k[0] += 1
            vec.step(bank[k[0] % 64])
            return n

    else:
        vec.async_reset(seed=0)

        def step() -> int:
            vec.recv()
            k[0] += 1
            vec.send(bank[k[0] % 64])
            return batch

    return Loop(step, vec.close)


def envpool_loop(n: int, batch: int) -> Loop:
    """envpool's own C++ CartPole (a ceiling, not the same env), ``batch`` envs a recv."""
    import envpool
    import numpy as np

    env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=n, batch_size=batch)
    rng = np.random.default_rng(0)
    bank = [rng.integers(0, 2, batch) for _ in range(64)]
    k = [0]
    env.async_reset()

    def step() -> int:
        *_, info = env.recv()
        k[0] += 1
        env.send(bank[k[0] % 64], info["env_id"])
        return batch

    return Loop(step, env.close)


def peer_variants(workload: str, n: int) -> dict[str, Callable[[], Loop]]:
    """PufferLib and envpool rows, when installed (CartPole only)."""
    out: dict[str, Callable[[], Loop]] = {}
    if workload != "CartPole":
        return out
    import importlib.util

    if importlib.util.find_spec("pufferlib") is not None:
        out["pufferlib-mp"] = lambda: puffer_loop(n, n)
        if n >= 2 and n % 2 == 0:
            out["pufferlib-mp(batch=n/2)"] = lambda: puffer_loop(n, n // 2)
    if importlib.util.find_spec("envpool") is not None and n >= 2:
        out["envpool-async(batch=n/2, C++ env)"] = lambda: envpool_loop(n, n // 2)
    return out


def measure_loop(make: Callable[[], Loop], seconds: float) -> float:
    loop = make()
    try:
        for _ in range(8):
            loop.step()
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(64):
                steps += loop.step()
        return steps / (time.perf_counter() - t0)
    finally:
        loop.close()
        gc.collect()


def peer_available() -> dict[str, str]:
    """Which peers could not be imported, and why (printed under the tables)."""
    why = {}
    for mod in ("pufferlib.vector", "envpool"):
        try:
            __import__(mod)
        except Exception as exc:
            why[mod.split(".")[0]] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return why
