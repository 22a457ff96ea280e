"""Where one synchronous ``subproc`` step's time goes: the anatomy of the lockstep cycle.

Each env is wrapped in `Timed`, which stamps the start and end of its steps into a
file-backed array every process maps (``time.perf_counter`` is the same monotonic clock in
every process); the parent stamps each post and the end of each wait (`Board.post`
and `Board.wait`, wrapped in this process only). Per step it prints the median, p10,
p90 and mean of:

- ``start k``: from the post until worker k's first env starts stepping;
- ``work k``: worker k stepping its envs (its first env's start to its last env's end);
- ``notice``: from the last worker's end until the parent's wait returns;
- ``turnaround``: from the parent's wait returning until its next post (the batch goes to
  the caller, the caller's next ``step``: the workers idle meanwhile);
- ``cycle``: post to post.

    python benchmarks/cycle.py                          # 16 CartPoles, subproc's default split
    python benchmarks/cycle.py --num-envs 64 vectorizer.in_series=8

The env stepping itself is the same as ``dummy``'s; what a cycle adds to ``work`` is the
hand-off. A 2-core machine has three processes (the parent and two workers) on two cores, so
the parent's turnaround and the hand-off latencies are time both workers idle.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import gymnasium as gym
import numpy as np
from peers import WORKLOADS, thunks

import envfactory
from envfactory.vectorizers.transport import board

#: steps a `Timed` env keeps (a ring): more than a run makes
RING = 1 << 15


class Timed(gym.Wrapper):
    """Stamps the start and end of each of its cycles (a step, or an autoreset: a reset
    with no seed) into row ``index`` of the array in ``path`` (``(num_envs, RING, 2)``
    float64), at its own count of cycles."""

    def __init__(self, env: gym.Env, path: str, index: int, num_envs: int) -> None:
        super().__init__(env)
        whole = np.memmap(path, np.float64, "r+", shape=(num_envs, RING * 2))
        self.stamps = np.asarray(whole[index])  # (a plain array: memmap's indexing is slower)
        self.k = 0

    def step(self, action: Any) -> Any:
        at = 2 * (self.k % RING)
        self.k += 1
        stamps, clock = self.stamps, time.perf_counter
        stamps[at] = clock()
        out = self.env.step(action)
        stamps[at + 1] = clock()
        return out

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        if seed is not None:  # the caller's reset: not a cycle
            return self.env.reset(seed=seed, options=options)
        return self._stamped(lambda _: self.env.reset(options=options), None)  # an autoreset

    def _stamped(self, call: Any, arg: Any) -> Any:
        at = 2 * (self.k % RING)
        self.k += 1
        stamps, clock = self.stamps, time.perf_counter
        stamps[at] = clock()
        out = call(arg)
        stamps[at + 1] = clock()
        return out


class _TimedThunk:
    def __init__(self, fn: Any, path: str, index: int, num_envs: int) -> None:
        self.fn, self.path, self.index, self.num_envs = fn, path, index, num_envs

    def __call__(self) -> gym.Env:
        return Timed(self.fn(), self.path, self.index, self.num_envs)


def anatomy(workload: str, n: int, overrides: list[str], seconds: float) -> dict[str, list[float]]:
    """Step ``n`` envs of ``workload`` in ``subproc`` for ``seconds`` and time each cycle."""
    from envfactory.vectorizers.builtin import build_subproc

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # (memory, not disk, if it can)
    fd, path = tempfile.mkstemp(prefix="envfactory-cycle-", dir=shm)
    os.close(fd)
    np.memmap(path, np.float64, "w+", shape=(n, RING * 2)).flush()
    posts: list[float] = []
    waits: list[float] = []
    post, wait = board.Board.post, board.Board.wait

    def timed_post(self: Any, actions: Any) -> bool:
        posts.append(time.perf_counter())
        return post(self, actions)

    def timed_wait(self: Any, deadline: float | None) -> Any:
        out = wait(self, deadline)
        waits.append(time.perf_counter())
        return out

    cfg = envfactory.compose([*WORKLOADS[workload], f"num_envs={n}", "vectorizer=subproc",
                              *overrides])  # fmt: skip
    opts = {k: v for k, v in dict(cfg.vectorizer).items() if k != "name"}
    fns = [_TimedThunk(f, path, i, n) for i, f in enumerate(thunks(workload, n))]
    board.Board.post, board.Board.wait = timed_post, timed_wait  # type: ignore
    try:
        with build_subproc(fns, **opts) as envs:
            envs.reset(seed=0)
            envs.action_space.seed(0)
            bank = [envs.action_space.sample() for _ in range(64)]
            for a in bank:
                envs.step(a)
            starts = [h.start for h in envs.group.workers]
            stops = [h.stop for h in envs.group.workers]
            first = len(posts)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds and len(posts) - first < RING - 128:
                for a in bank:
                    envs.step(a)
            base = 64  # the env steps of the warm-up (each env steps once per cycle)
        stamps = np.memmap(path, np.float64, "r", shape=(n, RING, 2))  # (the same bytes)
        out: dict[str, list[float]] = {}
        for c in range(first, len(posts) - 1):
            k = c - first + base  # each env's step count at this cycle
            p = posts[c]
            ends = []
            for w, (s, e) in enumerate(zip(starts, stops)):
                begin, end = stamps[s, k % RING, 0], stamps[e - 1, k % RING, 1]
                out.setdefault(f"start {w}", []).append(begin - p)
                out.setdefault(f"work {w}", []).append(end - begin)
                ends.append(end)
            out.setdefault("notice", []).append(waits[c] - max(ends))
            out.setdefault("turnaround", []).append(posts[c + 1] - waits[c])
            out.setdefault("cycle", []).append(posts[c + 1] - p)
        return out
    finally:
        board.Board.post, board.Board.wait = post, wait  # type: ignore
        os.unlink(path)


def render(res: dict[str, list[float]]) -> str:
    lines = [f"{'':12s} {'median':>8s} {'p10':>8s} {'p90':>8s} {'mean':>8s}  (us)"]
    for name, values in res.items():
        us = np.array(values) * 1e6
        lines.append(
            f"{name:12s} {np.median(us):8.1f} {np.percentile(us, 10):8.1f} "
            f"{np.percentile(us, 90):8.1f} {us.mean():8.1f}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("overrides", nargs="*", help="vectorizer.* overrides (subproc's options)")
    p.add_argument("--workload", choices=list(WORKLOADS), default="CartPole")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args()
    res = anatomy(args.workload, args.num_envs, args.overrides, args.seconds)
    cycles = len(res["cycle"])
    mean = statistics.fmean(res["cycle"])
    print(f"# {args.workload} x{args.num_envs}, subproc {' '.join(args.overrides)}: "
          f"{cycles} cycles, {args.num_envs / mean:,.0f} steps/s at the mean cycle")  # fmt: skip
    print(render(res))


if __name__ == "__main__":
    main()
