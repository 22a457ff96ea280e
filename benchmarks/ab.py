"""Old code against new in one run: the pool and synchronous rows of ``bench.py --pool``, each
tree's row in a fresh process, the trees interleaved round by round (the machine is shared
and its speed drifts, so only ratios within one run compare).

    git worktree add --detach /tmp/old <commit>
    python benchmarks/ab.py --old /tmp/old --workload Pong --rounds 5

Prints, per row, the median steps/s of each tree and its ratio to the two-process ceiling
(measured in the same rounds, with the new tree's code).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: one measurement in a fresh interpreter, with the envfactory of the tree on PYTHONPATH (argv:
#: this benchmarks folder, whose ``peers`` names the workloads, so a tree older than peers.py
#: runs too; workload, kind, seconds, the ceiling's env count, overrides); prints steps/s
_CHILD = r"""
import json, sys
here, workload, kind, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
sys.path.insert(0, here)
import envfactory, peers
from envfactory.cli.measure import measure, measure_pool
over = [*peers.WORKLOADS[workload], *sys.argv[6:]]
make = lambda: envfactory.make_vec(overrides=over)
if kind == "ceiling":
    print(json.dumps(peers.raw_limit(workload, int(sys.argv[5]), seconds)))
elif kind == "pool":
    print(json.dumps(measure_pool(make, seconds)))
else:
    print(json.dumps(measure(make, seconds)[0]))
"""


def measure_in(
    tree: Path, workload: str, kind: str, seconds: float, count: int, over: list[str]
) -> float:
    """Steps/s of one row (``kind``: ``sync``, ``pool`` or ``ceiling``) measured in a fresh
    interpreter that imports envfactory from ``tree``; RuntimeError (with the end of its
    stderr) if it fails."""
    path = os.environ.get("PYTHONPATH")  # (the tree first: a site of packages may follow)
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{path}" if path else str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(HERE), workload, kind, str(seconds), str(count), *over],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the {kind} row failed in {tree}:\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--old", type=Path, required=True, help="the old checkout (a worktree)")
    p.add_argument("--new", type=Path, default=HERE.parent, help="the new checkout (this one)")
    p.add_argument("--workload", choices=("Pong", "CartPole"), default="Pong")
    p.add_argument("--num-envs", type=int, default=None, help="default: Pong 8, CartPole 16")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args(argv)
    args.old, args.new = args.old.resolve(), args.new.resolve()
    for tree in (args.old, args.new):
        if not (tree / "envfactory" / "__init__.py").is_file():
            p.error(f"--old/--new {str(tree)!r} is not an envfactory checkout (no envfactory/)")
    n = args.num_envs or (8 if args.workload == "Pong" else 16)
    vec = "subproc-atari" if args.workload == "Pong" else "subproc"
    sync = [f"num_envs={n}", f"vectorizer={vec}"]
    pool = [*sync, f"vectorizer.batch_size={n // 2}"]
    # the synchronous step of the pool's split on 2 cores (2 workers of n / 2; the plain row's
    # split follows the load at build time)
    split = [*sync, f"vectorizer.in_series={n // 2}"]
    cases = [("ceiling", args.new, "ceiling", [f"num_envs={n}"])]
    count = 2 if args.workload == "Pong" else n  # (as bench.py's ceiling: one process per core)
    rows = ((f"{vec} pool (batch_size={n // 2})", pool), (vec, sync),
            (f"{vec} (in_series={n // 2})", split))  # fmt: skip
    for name, over in rows:
        kind = "pool" if "batch_size" in over[-1] else "sync"
        cases += [(f"{name}, old", args.old, kind, over), (f"{name}, new", args.new, kind, over)]
    got: dict[str, list[float]] = {name: [] for name, *_ in cases}
    for _ in range(args.rounds):
        for name, tree, kind, over in cases:
            try:
                got[name].append(measure_in(tree, args.workload, kind, args.seconds, count, over))
            except RuntimeError as exc:
                sys.exit(f"ab.py: {exc}")
    ceiling = statistics.median(got["ceiling"])
    lines = [
        f"**{args.workload} {n}: old ({args.old}) and new ({args.new}), {args.rounds} rounds "
        "interleaved** (steps/s, median)\n",
        "| row | steps/s | / ceiling |",
        "|---|---|---|",
    ]
    for name, values in got.items():
        m = statistics.median(values)
        lines.append(f"| {name} | {m:,.0f} | {m / ceiling:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
