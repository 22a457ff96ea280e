"""envfactory tune: measure the configured env on this machine over the vectorizers and
their options, print the table, plot it, and write the fastest as a preset that composes.

    envfactory tune                                         # CartPole, 4 envs (the default)
    envfactory tune env=atari env.id=ALE/Pong-v5 num_envs=8 --busy-cores 1
    envfactory tune env=gym num_envs=16 --budget 300 --async --name tuned16
    envfactory vectorizer=tuned env=gym num_envs=16         # then use the preset

Every Hydra override of envfactory is taken (env, id, wrappers, num_envs, plugins'
families). Candidates: dummy (the baseline), subproc with in_series (one env per worker,
one worker per core, half as many workers...), in_parent (0, a worker's share), auto (as it
is: it decides at each build from the cores free then; when it wins, the preset is auto),
subproc-atari and ale-vector for an Atari env, and with --async the pool (batch_size =
num_envs/2, timed with envpool's recv/send loop). vectorizer=X tunes only X's options
(dummy stays as the baseline); vectorizer.K=V fixes an option for every candidate that has
it; --vectorizers a,b names the vectorizers to try.

Every candidate is measured once per round (built, reset, stepped with random actions for
--seconds, closed), round after round, and the table holds medians: the machine is noisy,
and only ratios from one run mean anything. --busy-cores K runs K CPU-bound processes
beside it, standing in for the learner.

Where it writes: the preset goes to your config folder, in vectorizer/<name>.yaml, with
the table in a comment at its top; the plot and the raw samples go to tune/<name>.png and
tune/<name>.json in the same folder. Your config folder is $ENVFACTORY_CONFIG_DIR if set,
else $XDG_CONFIG_HOME/envfactory, else ~/.config/envfactory (so the preset is
~/.config/envfactory/vectorizer/<name>.yaml by default); --config-dir DIR writes to DIR
instead. The destination is checked before anything is measured: its folders are made
if missing and a file is written and removed there.

Ctrl-C stops measuring and keeps what was measured (table and preset), then exits with 130.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import did_you_mean
from .arguments import usage_line
from .tune_paths import check_destination, folder_of, plot_path, usage_lines

__all__ = ["Candidate", "TuneResult", "candidates", "main", "pick", "render_table"]

PROG = "envfactory tune"
DEFAULT_BUDGET = 120.0  # seconds, all candidates and rounds together
DEFAULT_ROUNDS = 3
MIN_SECONDS = 0.2  # per measurement
ATARI_VECTORIZERS = ("subproc-atari", "ale-vector")


class UsageError(Exception):
    """A bad ``envfactory tune`` option: one line, exit status 2."""


@dataclass(frozen=True)
class Candidate:
    """One vectorizer with some of its options; ``pool``: timed with ``recv``/``send``."""

    vectorizer: str
    options: tuple[tuple[str, Any], ...] = ()
    pool: bool = False
    fixed: tuple[str, ...] = ()  # the user's vectorizer.K=V that this vectorizer has

    @property
    def label(self) -> str:
        opts = ", ".join(f"{k}={_yaml(v)}" for k, v in self.options)
        return f"{self.vectorizer}({opts})" if opts else self.vectorizer

    def overrides(self, base: Sequence[str]) -> list[str]:
        """``base`` (the env's overrides), ``vectorizer=<name>``, the user's fixed options
        and this candidate's."""
        own = [f"vectorizer.{k}={_yaml(v)}" for k, v in self.options]
        return [*base, f"vectorizer={self.vectorizer}", *self.fixed, *own]


@dataclass
class TuneResult:
    """What was measured: steps/s samples and build seconds per label, failures (label: one
    line), rounds completed, seconds per measurement, and whether Ctrl-C stopped it."""

    candidates: list[Candidate]
    samples: dict[str, list[float]] = field(default_factory=dict)
    builds: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    def medians(self) -> dict[str, float]:
        from .measure import medians

        return medians(self.samples)


def _yaml(value: Any) -> str:
    return (
        "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


# -- options --------------------------------------------------------------------------
def _positive(
    kind: type, name: str, minimum: float, maximum: tuple[float, str] | None = None
) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, finite, at least ``minimum`` and at most
    ``maximum`` (the bound and why)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            what = "an integer" if kind is int else "a finite number"
            raise argparse.ArgumentTypeError(f"{name} {text!r}: expected {what}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} {text!r}: expected a value >= {minimum}")
        if maximum is not None and value > maximum[0]:
            raise argparse.ArgumentTypeError(
                f"{name} {text!r}: expected a value <= {maximum[0]:g} ({maximum[1]})"
            )
        return value

    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, no usage block
        raise UsageError(usage_line(self, message))  # a misspelled option: the closest one


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = _Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for `envfactory`")
    p.add_argument(
        "--seconds",
        type=_positive(float, "--seconds", 0.05),
        default=None,
        help="seconds each candidate steps per round (default: from --budget)",
    )
    p.add_argument(
        "--budget",
        type=_positive(float, "--budget", 1.0),
        default=None,
        help=f"seconds for the whole run (default {DEFAULT_BUDGET:g}; at least one "
        "round always runs)",
    )
    p.add_argument(
        "--rounds",
        type=_positive(int, "--rounds", 1),
        default=DEFAULT_ROUNDS,
        help=f"interleaved rounds; the table holds medians (default {DEFAULT_ROUNDS})",
    )
    p.add_argument(
        "--busy-cores",
        type=_positive(
            int,
            "--busy-cores",
            0,
            (os.cpu_count() or 1, "one busy process per core of this machine at most"),
        ),
        default=0,
        metavar="K",
        help="CPU-bound processes beside it (a stand-in for the learner)",
    )
    p.add_argument(
        "--vectorizers",
        default=None,
        metavar="A,B",
        help="vectorizers to try (default: dummy, subproc, + Atari ones)",
    )
    p.add_argument(
        "--async",
        dest="async_loop",
        action="store_true",
        help="also pools (batch_size), timed with recv/send: your loop must use them",
    )
    p.add_argument("--name", default="tuned", help="preset name: vectorizer=<name> (default tuned)")
    p.add_argument("--config-dir", metavar="DIR", help="where the preset goes (default: yours)")
    p.add_argument("--plot", default=None, metavar="PATH", help="PNG path (default: in DIR/tune)")
    p.add_argument("--no-plot", action="store_true", help="write no plot")
    try:
        args = p.parse_intermixed_args(list(argv))
    except SystemExit as exc:  # --help
        raise SystemExit(exc.code) from None
    bad = [o for o in args.overrides if o.startswith("-")]
    if bad:
        raise UsageError(usage_line(p, f"unrecognized arguments: {bad[0]}"))
    return args


@dataclass
class Plan:
    base: list[str]  # the env's overrides (no vectorizer ones)
    fixed: list[str]  # the user's vectorizer.K=V
    num_envs: int
    env: str  # e.g. "ALE/Pong-v5 (family atari)"
    family: str
    names: list[str]  # vectorizers to try


def make_plan(args: argparse.Namespace) -> Plan:
    import envfactory

    base, fixed, picked = [], [], []
    for o in args.overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key == "vectorizer":
            picked.append(o.split("=", 1)[1] if "=" in o else "")
        elif key.startswith("vectorizer."):
            fixed.append(o)
        else:
            base.append(o)
    cfg = envfactory.compose(base)
    registered = sorted(envfactory.available()["vectorizers"])
    if picked and args.vectorizers:
        raise UsageError("give vectorizer=X or --vectorizers A,B, not both")
    family = str(cfg.env.family)
    if args.vectorizers or picked:
        names = list(dict.fromkeys(["dummy", *(args.vectorizers or picked[-1]).split(",")]))
    else:
        names = ["dummy", "subproc"]
        if family == "atari":
            names += [v for v in ATARI_VECTORIZERS if v in registered]
        names.append("auto")  # (the docs recommend it for cheap envs: measured too)
    for name in names:
        if name not in registered:
            raise UsageError(
                f"vectorizer {name!r} is not registered.{did_you_mean(name, registered)} "
                f"Valid: {', '.join(registered)}"
            )
    env = cfg.env.get("id") or family
    return Plan(base, fixed, int(cfg.num_envs), f"{env} (family {family})", family, names)


def candidates(plan: Plan, include_pools: bool) -> tuple[list[Candidate], dict[str, str]]:
    """The grid: for each vectorizer its defaults, then ``in_series``
    (`series_ladder`: one env per worker, one worker per core, half as many...),
    ``in_parent`` (0, a worker's share) and with ``include_pools`` a pool of ``batch_size``
    = num_envs/2, each where its schema has the option and the user did not fix it; ``auto``
    with its defaults only (its options are ``subproc``'s: any other setting of them is a
    ``subproc`` candidate, while ``auto`` itself decides from the cores free at each build).
    Returns the candidates and ``{vectorizer: why}`` for those that do not compose."""
    import envfactory

    n, cpus = plan.num_envs, os.cpu_count() or 1
    user = {_fixed_key(o): o for o in plan.fixed}
    out: list[Candidate] = []
    skipped: dict[str, str] = {}
    used: set[str] = set()
    known: set[str] = set()  # every option of the vectorizers tried: a "did you mean"
    for name in plan.names:
        try:
            node = envfactory.compose([*plan.base, f"vectorizer={name}"]).vectorizer
        except envfactory.ConfigError as exc:  # e.g. a vectorizer that refuses this env
            skipped[name] = str(exc)
            continue
        keys = {str(k) for k in node}
        known |= keys
        fixed = tuple(o for k, o in user.items() if k in keys)
        envfactory.compose(Candidate(name, fixed=fixed).overrides(plan.base))  # the user's
        used.update(k for k in user if k in keys)
        keys -= set(user)
        if name == "auto":  # its defaults only: auto with any other option is a subproc
            out.append(Candidate(name, fixed=fixed))
            continue
        own: list[tuple[tuple[str, Any], ...]] = [()]
        if n >= 2 and "in_series" in keys:
            own += [(("in_series", k),) for k in series_ladder(n, cpus)]
        if n >= 2 and "in_parent" in keys:
            own += [(("in_parent", k),) for k in sorted({0, max(1, n // cpus)})]
        out += [Candidate(name, o, fixed=fixed) for o in dict.fromkeys(own)]
        if include_pools and n >= 2 and "batch_size" in keys:
            out.append(Candidate(name, (("batch_size", n // 2),), pool=True, fixed=fixed))
    unused = [o for k, o in user.items() if k not in used]
    if unused:
        key = _fixed_key(unused[0])
        raise UsageError(
            f"{unused[0]}: none of the vectorizers tried ({', '.join(plan.names)}) has option "
            f"{key!r}.{did_you_mean(key, sorted(known))} Fix the spelling, or pick the "
            "vectorizer that has it with vectorizer=X"
        )
    return out, skipped


def series_ladder(num_envs: int, cpus: int) -> list[int]:
    """The ``in_series`` values tried: one env per worker, then one worker per core, half
    as many workers, a quarter... down to two workers. Cheap envs on many cores can be
    fastest with few workers (the parent pays for every worker every step: on 16 cores 16
    CartPoles stepped 1.7x faster in 4 workers than in 15 with one env each, the default
    before it put cheap envs two to a worker),
    expensive ones with a worker per core (64 Pongs: 1.8x faster in 16 workers than in 8);
    which holds for an env only a measurement says.

    Example:
        >>> series_ladder(16, 16), series_ladder(64, 16), series_ladder(8, 2)
        ([1, 2, 4, 8], [1, 4, 8, 16, 32], [1, 4])
        >>> series_ladder(16, 12), series_ladder(1, 16)
        ([1, 2, 3, 6, 8], [])
    """
    out, workers = {1, math.ceil(num_envs / 2)}, cpus
    while workers >= 2:
        out.add(math.ceil(num_envs / workers))
        workers //= 2
    return sorted(k for k in out if k < num_envs)


def _fixed_key(override: str) -> str:
    """``in_series`` of ``vectorizer.in_series=2``."""
    return override.split("=", 1)[0].lstrip("+~").split(".", 1)[1]


# -- measuring ------------------------------------------------------------------------
def run_rounds(
    plan: Plan, cands: list[Candidate], args: argparse.Namespace, progress: Any = None
) -> TuneResult:
    """Interleaved rounds (the order reverses every other round, so drift spreads evenly)
    until ``--rounds``, or until the next round would end past the budget (by 10%; one round
    always runs). Every measurement steps for the same seconds: ``--seconds``, else half the
    budget shared out over every candidate and round. Ctrl-C ends it with what was measured.
    ``progress``: a tqdm bar; when it is off (stderr is no terminal), one line per
    measurement goes to stderr instead."""
    import envfactory

    from .measure import measure, measure_pool
    from .report import error_line

    res = TuneResult(cands)
    budget = args.budget or (None if args.seconds else DEFAULT_BUDGET)
    share = 0.5 * (budget or 0) / max(1, args.rounds * len(cands))
    res.seconds = secs = args.seconds or max(MIN_SECONDS, min(5.0, share))
    start = time.perf_counter()
    try:
        for r in range(args.rounds):
            elapsed = time.perf_counter() - start
            if r and budget and elapsed + elapsed / r > 1.1 * budget:
                break
            order = cands if r % 2 == 0 else cands[::-1]
            for c in order:
                if c.label in res.failures:
                    continue
                if progress is not None:
                    progress.set_postfix_str(c.label, refresh=False)
                over = c.overrides(plan.base)
                built: list[float] = []

                def make(over: list[str] = over, built: list[float] = built) -> Any:
                    t0 = time.perf_counter()
                    envs = envfactory.make_vec(overrides=over)
                    built.append(time.perf_counter() - t0)
                    return envs

                try:
                    sps = measure_pool(make, secs) if c.pool else measure(make, secs)[0]
                except Exception as exc:  # this candidate fails here: say why, go on
                    res.failures[c.label] = error_line(exc)
                    continue
                finally:
                    if progress is not None:
                        progress.update(1)
                res.samples.setdefault(c.label, []).append(sps)
                res.builds.setdefault(c.label, []).extend(built)
                if progress is not None and progress.disable:  # no bar (not a terminal): a line
                    print(f"{PROG}: round {r + 1}/{args.rounds} {c.label}: {sps:,.0f} steps/s",
                          file=sys.stderr, flush=True)  # fmt: skip
            res.rounds = r + 1
    except KeyboardInterrupt:
        res.interrupted = True
    return res


def pick(res: TuneResult, include_pools: bool) -> Candidate | None:
    """The candidate with the highest median (pools only with ``include_pools``)."""
    med = res.medians()
    ok = [c for c in res.candidates if c.label in med and (include_pools or not c.pool)]
    return max(ok, key=lambda c: med[c.label], default=None)


def render_table(res: TuneResult, best: Candidate | None) -> list[str]:
    """Rows sorted by median steps/s: steps/s, ratio to dummy, samples, build seconds."""
    from statistics import median

    med = res.medians()
    dummy = med.get("dummy")
    width = max([9, *(len(c.label) for c in res.candidates)])
    lines = [f"{'candidate':<{width}}  {'steps/s':>10}  {'/ dummy':>7}  {'runs':>4}  build s"]
    for c in sorted((c for c in res.candidates if c.label in med), key=lambda c: -med[c.label]):
        ratio = f"{med[c.label] / dummy:.2f}x" if dummy else "n/a"
        mark = "  <- picked" if best is not None and c == best else ""
        mark += "  (recv/send loop)" if c.pool else ""
        build = median(res.builds[c.label]) if res.builds.get(c.label) else float("nan")
        lines.append(
            f"{c.label:<{width}}  {med[c.label]:>10,.0f}  {ratio:>7}  "
            f"{len(res.samples[c.label]):>4}  {build:7.2f}{mark}"
        )
    for label, why in res.failures.items():
        lines.append(f"{label:<{width}}  failed: {why}")
    return lines


# -- output ---------------------------------------------------------------------------
def plot_bars(res: TuneResult, best: Candidate | None, path: Path, title: str) -> Path | None:
    """A horizontal bar per candidate (median steps/s, whiskers from the slowest to the
    fastest round), the picked one highlighted, a line at dummy's median."""
    med = res.medians()
    rows = sorted((c for c in res.candidates if c.label in med), key=lambda c: med[c.label])
    if not rows:
        return None
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from .plot import PLOT_SIZE

    dpi = 100
    w, h = PLOT_SIZE
    fig = Figure(figsize=(w / dpi, max(h / dpi, 0.4 * len(rows) + 1.5)), dpi=dpi)
    ax = fig.add_subplot()
    ys = range(len(rows))
    vals = [med[c.label] for c in rows]
    lo = [v - min(res.samples[c.label]) for c, v in zip(rows, vals, strict=True)]
    hi = [max(res.samples[c.label]) - v for c, v in zip(rows, vals, strict=True)]
    colors = ["tab:orange" if c == best else "tab:blue" for c in rows]
    ax.barh(list(ys), vals, xerr=[lo, hi], color=colors, capsize=3)
    ax.set_yticks(list(ys), [c.label + (" (recv/send)" if c.pool else "") for c in rows])
    if "dummy" in med:
        ax.axvline(med["dummy"], color="gray", linestyle="--", linewidth=1, label="dummy")
        ax.legend(fontsize="small", loc="lower right")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("env steps/s (summed over envs; median of rounds, whiskers: min-max)")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=dpi)
    return path


def header(plan: Plan, args: argparse.Namespace, res: TuneResult) -> str:
    from .measure import load_line

    state = "; INTERRUPTED (Ctrl-C): partial" if res.interrupted else ""
    return (
        f"{PROG}: {plan.env}, num_envs={plan.num_envs}, busy cores {args.busy_cores}, "
        f"{res.rounds} round(s) x {res.seconds:.2f} s per candidate (medians), load "
        f"{load_line()}{state}"
    )


def preset_options(plan: Plan, best: Candidate) -> dict[str, Any]:
    """The preset's options: the user's fixed ones and the winner's, as composed."""
    from omegaconf import OmegaConf

    import envfactory

    node = envfactory.compose(best.overrides(plan.base)).vectorizer
    keys = [_fixed_key(o) for o in best.fixed] + [k for k, _ in best.options]
    plain = cast(dict, OmegaConf.to_container(node, resolve=True))
    return {k: plain[k] for k in dict.fromkeys(keys)}


def write_outputs(
    plan: Plan, args: argparse.Namespace, res: TuneResult, best: Candidate, table: list[str]
) -> Path:
    """Write the preset and the raw samples (``tune/<name>.json``); the preset's path."""
    from .presets import write_preset

    folder = folder_of(args)
    path = folder / "vectorizer" / f"{args.name}.yaml"
    med = res.medians()
    ratio = ""
    if "dummy" in med and best.label != "dummy":
        ratio = f", {med[best.label] / med['dummy']:.2f}x dummy"
    comment = [
        f"vectorizer={args.name}: written by `{PROG}` on {time.strftime('%Y-%m-%d %H:%M')}, "
        f"host {platform.node()} ({os.cpu_count()} cpus)",
        header(plan, args, res),
        f"command: {PROG} {' '.join(sys.argv[2:] if sys.argv[1:2] == ['tune'] else [])}".rstrip(),
        f"picked: {best.label}{ratio}" + (" (needs a recv/send loop)" if best.pool else ""),
        "",
        *table,
        "",
        *(line.strip() for line in usage_lines(args, path)),  # as printed: with its folder
    ]
    write_preset(path, best.vectorizer, preset_options(plan, best), comment)
    data = {
        "env": plan.env,
        "num_envs": plan.num_envs,
        "overrides": [*plan.base, *plan.fixed],
        "busy_cores": args.busy_cores,
        "rounds": res.rounds,
        "seconds": res.seconds,
        "interrupted": res.interrupted,
        "picked": best.label,
        "preset": str(path),
        "candidates": [
            {"label": c.label, "vectorizer": c.vectorizer, "options": dict(c.options),
             "pool": c.pool, "steps_per_s": med.get(c.label),
             "samples": res.samples.get(c.label, []), "build_s": res.builds.get(c.label, []),
             "error": res.failures.get(c.label)}
            for c in res.candidates
        ],
    }  # fmt: skip
    (folder / "tune").mkdir(parents=True, exist_ok=True)
    (folder / "tune" / f"{args.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``envfactory tune [options] [overrides]``: 0 when done, 2 for a bad option or config
    (one line), 1 when no candidate could be measured, 130 after Ctrl-C (what was measured
    is kept)."""
    from tqdm import tqdm

    from ..errors import ConfigError
    from .measure import busy
    from .presets import check_preset_name, taken_names
    from .report import error_line
    from .run_record import one_line_warnings
    from .startup import load_registry

    argv = sys.argv[2:] if argv is None else list(argv)
    try:
        load_registry()
        args = parse_args(argv)

        bad = check_preset_name(args.name, taken_names("vectorizer", args.config_dir))
        if bad:
            raise UsageError(bad)
        plan = make_plan(args)
        cands, skipped = candidates(plan, args.async_loop)
        bad = check_destination(args)
        if bad:
            raise UsageError(bad)
    except (UsageError, ConfigError) as exc:
        print(f"{PROG}: error: {error_line(exc) if isinstance(exc, ConfigError) else exc}",
              file=sys.stderr)  # fmt: skip
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted before anything was measured", file=sys.stderr)
        return 130
    for name, why in skipped.items():
        print(f"{PROG}: warning: {name} left out: {why}", file=sys.stderr)
    if not args.async_loop and plan.num_envs >= 2:
        print(f"{PROG}: pools (batch_size) not measured: pass --async if your loop uses "
              "recv/send", file=sys.stderr)  # fmt: skip
    bar = tqdm(total=args.rounds * len(cands), unit="run", desc=PROG, file=sys.stderr,
               disable=None, dynamic_ncols=True)  # fmt: skip
    try:
        with busy(args.busy_cores), one_line_warnings():  # envfactory's: one line each
            res = run_rounds(plan, cands, args, bar)
    except KeyboardInterrupt:  # while the busy processes started or stopped
        res = TuneResult(cands, interrupted=True)
    finally:
        bar.close()
    best = pick(res, args.async_loop)
    table = render_table(res, best)
    print(header(plan, args, res))
    print("\n".join(f"  {line}" for line in table))
    if best is None:
        print(f"{PROG}: error: no candidate was measured; no preset written", file=sys.stderr)
        return 130 if res.interrupted else 1
    if res.rounds < args.rounds and not res.interrupted:
        print(f"{PROG}: the budget ran out after {res.rounds} round(s) of {args.rounds}: raise "
              "--budget for steadier medians", file=sys.stderr)  # fmt: skip
    status = 130 if res.interrupted else 0
    try:
        path = write_outputs(plan, args, res, best, table)
    except OSError as exc:
        print(f"{PROG}: error: cannot write the preset: {exc}", file=sys.stderr)
        return 1
    print(f"preset: {path} ({best.label})")
    print("\n".join(usage_lines(args, path)))
    if args.no_plot:
        return status
    try:
        plot = plot_bars(res, best, plot_path(args), f"{PROG}: {plan.env} x{plan.num_envs}")
    except Exception as exc:  # OSError, or matplotlib's: the preset is written already
        line = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG}: error: the plot was not written: {line}; the preset was written: "
              f"{path}", file=sys.stderr)  # fmt: skip
        return status or 1
    if plot is not None:
        print(f"plot: {plot}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
