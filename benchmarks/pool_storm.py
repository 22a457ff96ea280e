"""A storm of real Ctrl-Cs over an envpool-style async pool loop (issue 37): how many envs
survive it.

A thread sends this process SIGINT every 1-15 ms (Python's own handler: a KeyboardInterrupt
wherever the main thread is, the loop's own lines included) while the loop runs
``recv``/``send`` rounds over CartPole, catching each KeyboardInterrupt and going on. With
``--loop recv`` a round is ``envs.recv()`` then ``envs.send(actions, infos["env_id"])``
(async-pool.md's loop before 2026-11-28); with ``--loop unsent`` it starts with
``envs.unsent() or envs.recv()`` (its loop since). ``--kill-every S`` SIGKILLs a random worker
every S seconds (with ``--restart``, it is rebuilt). After the storm, the envs still in the
pool are counted by sending and receiving each once more.

    python benchmarks/pool_storm.py --seconds 20 --in-series 2 --batch 4 --loop unsent

Prints one line: seconds, interrupts caught, batches ``recv`` returned, rows ``unsent``
handed back, each env's results, and the envs left in the pool (lost: the others).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
import warnings
from typing import Any

import numpy as np

import envfactory
from envfactory.errors import NoPendingCallError


def _storm(stop: threading.Event, seed: int) -> None:
    rng = np.random.default_rng(seed)
    while not stop.wait(rng.uniform(0.001, 0.015)):
        os.kill(os.getpid(), signal.SIGINT)


def _killer(stop: threading.Event, envs: object, every: float, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    while not stop.wait(every):
        pids = [p for p in envs.pids if p]  # type: ignore[attr-defined]
        try:
            os.kill(int(rng.choice(pids)), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


class _Loop:
    """The loop under the storm: rounds until ``seconds`` passed, counting what it got."""

    def __init__(
        self, envs: Any, unsent: bool, seconds: float, stop: threading.Event, threads: list
    ) -> None:
        self.envs, self.unsent, self.seconds, self.stop, self.threads = (
            envs, unsent, seconds, stop, threads
        )  # fmt: skip
        self.results = np.zeros(envs.num_envs, np.int64)
        self.caught = self.batches = self.again = 0
        self.elapsed, self.ended, self.t0 = 0.0, "", time.monotonic()

    def rounds(self) -> None:
        envs = self.envs
        while True:
            try:
                if self.elapsed or time.monotonic() - self.t0 >= self.seconds:
                    self.elapsed = self.elapsed or time.monotonic() - self.t0
                    self.stop.set()
                    for t in self.threads:
                        t.join()
                    for _ in range(5):  # (a SIGINT on its way lands here, caught)
                        time.sleep(0.01)
                    return
                out = envs.unsent() if self.unsent else None
                if out is not None:
                    self.again += len(out[0])
                else:
                    out = envs.recv()
                    self.batches += 1
                    self.results[out[4]["env_id"]] += 1
                obs, ids = out[0], out[4]["env_id"]
                envs.send((obs[:, 2] > 0).astype(np.int64), ids)
            except KeyboardInterrupt:
                self.caught += 1
            except NoPendingCallError as err:
                self.ended = f"; ended early: NoPendingCallError: {err}"
                self.elapsed = time.monotonic() - self.t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--in-series", type=int, default=1)
    p.add_argument("--context", default="forkserver", choices=["fork", "forkserver", "spawn"])
    p.add_argument("--restart", action="store_true")
    p.add_argument("--kill-every", type=float, default=0.0, help="seconds; 0: no worker killed")
    p.add_argument("--loop", default="unsent", choices=["recv", "unsent"])
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)  # (restarting after ...)
    envs = envfactory.make_vec(
        overrides=[
            "env.id=CartPole-v1",
            f"num_envs={a.num_envs}",
            "vectorizer=subproc",
            f"vectorizer.batch_size={a.batch}",
            f"vectorizer.in_series={a.in_series}",
            f"vectorizer.context={a.context}",
            f"vectorizer.restart={str(a.restart).lower()}",
            "vectorizer.max_restarts=100000",
        ]
    )
    envs.async_reset(seed=a.seed)
    stop = threading.Event()
    threads = [threading.Thread(target=_storm, args=(stop, a.seed))]
    if a.kill_every:
        threads.append(threading.Thread(target=_killer, args=(stop, envs, a.kill_every, a.seed)))
    for t in threads:
        t.start()
    loop = _Loop(envs, a.loop == "unsent", a.seconds, stop, threads)
    while loop.elapsed == 0.0:  # (a second Ctrl-C as one is caught lands outside the try)
        try:
            loop.rounds()
        except KeyboardInterrupt:
            loop.caught += 1
    elapsed, caught, batches, again, results, ended = (
        loop.elapsed,
        loop.caught,
        loop.batches,
        loop.again,
        loop.results,
        loop.ended,
    )
    left: set[int] = set()
    try:
        out = envs.unsent() if a.loop == "unsent" else None
        if out is not None:
            envs.send(np.zeros(len(out[0]), np.int64), out[4]["env_id"])
        for _ in range(2 * a.num_envs):
            ids = envs.recv(timeout=10)[4]["env_id"]
            left |= set(ids.tolist())
            envs.send(np.zeros(len(ids), np.int64), ids)
    except NoPendingCallError:
        pass
    restarts = sum(envs.restarts)
    envs.close()
    print(
        f"{a.loop} loop, in_series={a.in_series} batch={a.batch} {a.context} "
        f"restart={a.restart} kill_every={a.kill_every}: {elapsed:.1f} s, {restarts} rebuilds, "
        f"{caught} interrupts caught, {batches} batches, {again} rows handed back by unsent(), "
        f"results per env {results.tolist()}, envs left {len(left)}/{a.num_envs}{ended}"
    )


if __name__ == "__main__":
    main()
