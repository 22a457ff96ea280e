"""What one ``subproc`` step costs the parent (issue 26): CPU per step on a do-nothing env,
one env per worker, every env in a worker, against ``dummy``; and how many envfactory
functions (in how many modules) one ``step`` enters in the parent.

    python benchmarks/handoff.py                    # 1, 2, 4, 8 workers
    PYTHONPATH=/path/to/old/checkout python benchmarks/handoff.py --label old
    python benchmarks/handoff.py --workload CartPole --num-envs 64 vectorizer.spin_us=0

Run it from two checkouts in one shell command to compare old and new on the same machine
in the same minute (the numbers of one machine move by 20-30% between runs). The parent's
CPU includes what it spends spinning for the workers' answers: that is what it cannot give
the learner.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np

#: issue 26's targets: parent CPU per step <= FIXED + PER_WORKER * workers, and at one
#: worker no more than dummy's + AT_ONE; the async pool's parent per recv/send cycle <= POOL
FIXED, PER_WORKER, AT_ONE, POOL = 15.0, 2.0, 5.0, 50.0


class Nop(gym.Env):
    """A do-nothing env: what is left of a step is the vectorizer's own cost."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(4, np.float32), 0.0, False, False, {}


class Ender(Nop):
    """A do-nothing env whose episode ends every `ENDS` steps with its statistics in the
    infos (as every family's do, ``episode_stats``): the step of an episode end."""

    ENDS = 10

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        self.t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        self.t += 1
        if self.t % self.ENDS:
            return np.zeros(4, np.float32), 0.0, False, False, {}
        stats = {"r": float(self.ENDS), "l": self.ENDS, "t": 0.0}
        return np.zeros(4, np.float32), 0.0, True, False, {"episode_stats": stats}


def parent_cpu_us(envs: Any, steps: int, rounds: int) -> float:
    """The parent's CPU per step, in microseconds (the best of ``rounds``)."""
    envs.reset(seed=0)
    actions = np.zeros(envs.num_envs, np.int64)
    for _ in range(steps // 10):
        envs.step(actions)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(steps):
            envs.step(actions)
        best = min(best, (time.process_time() - t0) / steps * 1e6)
    return best


def pool_cpu_us(n: int, batch_size: int, in_series: int, cycles: int, rounds: int) -> float:
    """The async pool's parent CPU per ``recv``/``send`` cycle, in microseconds (the best of
    ``rounds``), on ``n`` do-nothing envs."""
    try:
        from envfactory.vectorizers.asyncpool.pool import SubprocPool
    except ImportError:  # (an older checkout, measured with PYTHONPATH: a flat vectorizers/)
        from envfactory.vectorizers.pool import SubprocPool  # type: ignore[no-redef]

    with SubprocPool([Nop] * n, batch_size, in_series=in_series) as envs:
        envs.async_reset(seed=0)
        actions = np.zeros(batch_size, np.int64)
        for _ in range(cycles // 10):
            envs.send(actions, envs.recv()[4]["env_id"])
        best = float("inf")
        for _ in range(rounds):
            t0 = time.process_time()
            for _ in range(cycles):
                envs.send(actions, envs.recv()[4]["env_id"])
            best = min(best, (time.process_time() - t0) / cycles * 1e6)
    return best


def workload_cpu_us(workload: str, n: int, overrides: list[str], rounds: int) -> float:
    """The parent's CPU per batch, in microseconds (the best of ``rounds`` x 1,280 steps),
    of ``n`` envs of a real workload under ``subproc`` with ``overrides``: what the parent
    spends on the batch (the copies, the infos: CartPole's episode statistics) besides the
    hand-off itself."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    from peers import WORKLOADS

    import envfactory

    over = [*WORKLOADS[workload], f"num_envs={n}", "vectorizer=subproc", *overrides]
    with envfactory.make_vec(overrides=over) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        bank = [envs.action_space.sample() for _ in range(64)]
        for a in bank:
            envs.step(a)
        best = float("inf")
        for _ in range(rounds):
            t0 = time.process_time()
            for _ in range(20):
                for a in bank:
                    envs.step(a)
            best = min(best, (time.process_time() - t0) / 1280 * 1e6)
    return best


def functions_in_one_step(envs: Any, before: int = 50) -> tuple[int, int]:
    """How many distinct envfactory functions, in how many modules, one ``step`` enters
    in the parent: the step after ``before`` steps from a reset (`Nop`: a steady step, no
    episode end, nothing by pipe; `Ender` with ``before`` = 9: every env ends its episode,
    with its statistics in the infos)."""
    envs.reset(seed=0)
    actions = np.zeros(envs.num_envs, np.int64)
    for _ in range(before):
        envs.step(actions)
    seen: set[tuple[str, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("envfactory"):
                seen.add((module, frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        envs.step(actions)
    finally:
        sys.setprofile(None)
    return len(seen), len({m for m, _ in seen})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="this checkout")
    p.add_argument("--no-pool", action="store_true", help="skip the async pool's cycle")
    p.add_argument("--workload", choices=("CartPole", "Pong"), default=None,
                   help="instead: the parent's CPU per batch of this real workload")  # fmt: skip
    p.add_argument("--num-envs", type=int, default=64, help="with --workload")
    p.add_argument("overrides", nargs="*", help="with --workload: vectorizer.* overrides")
    args = p.parse_args()
    if args.workload:
        us = workload_cpu_us(args.workload, args.num_envs, args.overrides, args.rounds)
        print(f"# {args.label}: {args.workload} x{args.num_envs} subproc "
              f"{' '.join(args.overrides)}: parent CPU {us:.1f} us per batch")  # fmt: skip
        return
    from envfactory.vectorizers.dummy import DummyVecEnv
    from envfactory.vectorizers.subproc import SubprocVecEnv

    print(f"# {args.label}: parent CPU per step (us), do-nothing env, one env per worker")
    rows = []
    for n in args.workers:
        with SubprocVecEnv([Nop] * n, in_series=1, in_parent=0) as envs:
            sub = parent_cpu_us(envs, args.steps, args.rounds)
            funcs, modules = functions_in_one_step(envs)
        with SubprocVecEnv([Ender] * n, in_series=1, in_parent=0) as envs:
            functions_in_one_step(envs, 9)  # (the schema of its infos learnt: as a long run)
            end_funcs, end_modules = functions_in_one_step(envs, 9)
        with DummyVecEnv([Nop] * n) as envs:
            dum = parent_cpu_us(envs, args.steps, args.rounds)
        bound = FIXED + PER_WORKER * n
        rows.append((n, sub, dum))
        print(
            f"{n} workers: subproc {sub:6.1f}  dummy {dum:5.1f}  target <= {bound:4.0f}"
            f" ({'met' if sub <= bound else 'not met'}); one step enters {funcs} envfactory"
            f" functions in {modules} modules ({end_funcs} in {end_modules} at an episode end)",
            flush=True,
        )
    if len(rows) >= 2:
        (n0, s0, _), (n1, s1, _) = rows[0], rows[-1]
        slope = (s1 - s0) / (n1 - n0)
        print(f"fit: {s0 - slope * n0:.1f} us + {slope:.1f} us per worker")
    one = [r for r in rows if r[0] == 1]
    if one:
        _, sub, dum = one[0]
        print(f"one worker: subproc - dummy = {sub - dum:.1f} us (target <= {AT_ONE:.0f})")
    if not args.no_pool:
        for n, size, series in ((8, 4, 2), (8, 4, 1)):
            us = pool_cpu_us(n, size, series, args.steps, args.rounds)
            print(
                f"pool of {n} (batch_size={size}, in_series={series}): parent CPU {us:.1f} us "
                f"per recv/send cycle (target <= {POOL:.0f}: {'met' if us <= POOL else 'not met'})",
                flush=True,
            )


if __name__ == "__main__":
    main()
