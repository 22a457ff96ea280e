"""Throughput plots: steps/s against num_envs, one line per vectorizer (per env id when the
rows hold several, and per other override a sweep varied). The sweep summary
(`envfactory.cli.sweep`) and the benchmark (``benchmarks/bench.py --plot``) write them.

matplotlib is imported here only, when a plot is written; the figure is a plain
``matplotlib.figure.Figure`` saved by the Agg renderer (no display needed, pyplot and a
user's interactive backend are left alone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["PLOT_SIZE", "throughput_plot"]

PLOT_SIZE = (960, 600)  # pixels (width, height) of the PNG
_DPI = 100


def _series(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """``{label: [(num_envs, steps/s), ...]}``; rows without numbers (failed jobs) are
    skipped (NaN too); a sweep's rows that differ in other overrides than ``num_envs`` and
    seeds are other lines (named by them); rows at one point of a line (a seed varied) are
    averaged."""
    rows = [r for r in rows if r.get("status", "ok") == "ok"]
    ones = [set(r.get("overrides") or ()) for r in rows]
    varied = set().union(*ones) - set.intersection(*ones) if ones else set()
    points: dict[tuple[str, str, str], dict[int, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        n, sps = row.get("num_envs"), row.get("steps_per_second")
        if not isinstance(n, int) or not isinstance(sps, (int, float)) or not sps > 0:
            continue
        vec, env = str(row.get("vectorizer")), str(row.get("env"))
        other = [
            o for o in row.get("overrides") or () if o in varied and _names_a_line(o, vec, env)
        ]
        points[(vec, env, " ".join(sorted(other)))][n].append(float(sps))
    several_envs = len({env for _, env, _ in points}) > 1
    out: dict[str, list[tuple[int, float]]] = {}
    for (vec, env, named), by_n in sorted(points.items()):
        label = " ".join(filter(None, [vec, named, f"({env})" if several_envs else ""]))
        out[label] = [(n, sum(v) / len(v)) for n, v in sorted(by_n.items())]
    return out


def _names_a_line(override: str, vec: str, env: str) -> bool:
    """Whether a varied ``key=value`` tells lines apart: not num_envs (the x axis), not a seed
    (averaged), not the vectorizer or env the label already names."""
    key, _, value = override.lstrip("+~").partition("=")
    return key != "num_envs" and key.rsplit(".", 1)[-1] != "seed" and value not in (vec, env)


def throughput_plot(rows: Iterable[Mapping[str, Any]], path: Path, title: str = "") -> Path | None:
    """Write a PNG of steps/s against num_envs (one line per vectorizer, per env id when
    there are several, per other override a sweep varied) from rows with ``vectorizer``,
    ``env``, ``num_envs`` and ``steps_per_second``. Returns the path, or None when no row
    has numbers."""
    series = _series(rows)
    if not series:
        return None
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    w, h = PLOT_SIZE
    fig = Figure(figsize=(w / _DPI, h / _DPI), dpi=_DPI)
    ax = fig.add_subplot()
    all_n: set[int] = set()
    for label, pts in series.items():
        xs, ys = zip(*pts, strict=True)
        all_n.update(xs)
        ax.plot(xs, ys, marker="o", label=label)
    if max(all_n) >= 4 * min(all_n):
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(all_n), [str(n) for n in sorted(all_n)])
    ax.minorticks_off()
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("num_envs")
    ax.set_ylabel("env steps/s (summed over envs)")
    ax.set_title(title or "envfactory throughput")
    ax.grid(True, alpha=0.3)
    ax.legend(title="vectorizer", fontsize="small")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=_DPI)
    return path
