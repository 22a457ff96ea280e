"""The docs' benchmark figures come from one results file written by ``benchmarks/bench.py``
(``docs/bench_cartpole_readme.json``): the README's CartPole table is that file, every figure a
page quotes between ``<!-- bench-results -->`` and ``<!-- /bench-results -->`` is a median in it
or a ratio of two of them, and the file was measured with today's measuring code (issue 39,
item 5: the choose-a-vectorizer page said ``subproc`` made "1.02x dummy at 16 envs, 6.8x
Async", the README's re-measured table 1.11x and 6.92x)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from mdblocks import ROOT

from envfactory.vectorizers.plan.options import AutoConfig

RESULTS = ROOT / "docs" / "bench_cartpole_readme.json"
#: the pages that quote the results file, each with at least one marked region
QUOTING_PAGES = (
    "README.md",
    "docs/guides/choose-a-vectorizer.md",
    "docs/concepts/vectorizers.md",
    "docs/benchmarks.md",
)
REGION = re.compile(r"<!-- bench-results -->(.*?)<!-- /bench-results -->", re.S)
STEPS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")  # 242,350
RATIOS = re.compile(r"(?<![\d.])(\d+\.\d+)(?:-(\d+\.\d+))?x\b")  # 1.39x, 0.56-0.91x
COLUMNS = ("gym-sync", "gym-async", "dummy", "subproc", "auto")
RATIO_COLUMNS = (("subproc", "gym-async"), ("subproc", "dummy"), ("auto", "dummy"))


def _results() -> dict[int, dict[str, float]]:
    data = json.loads(RESULTS.read_text())
    by: dict[int, dict[str, float]] = {}
    for r in data["results"]:
        by.setdefault(int(r["num_envs"]), {})[r["variant"]] = float(r["steps_per_s"])
    return by


def unheld_figures(text: str, by: dict[int, dict[str, float]]) -> list[str]:
    """The figures in ``text`` that the results ``by`` (num_envs -> variant -> steps/s) do not
    hold: a steps/s figure (``242,350``) that is no median rounded, a ratio (``1.39x``, each end
    of ``0.56-0.91x``) that is no ratio of two medians at one size with two decimals, as bench.py
    prints them (a ratio with fewer decimals is a figure of its own: ``6.8x`` is not held)."""
    medians = {f"{v:,.0f}" for row in by.values() for v in row.values()}
    ratios = [a / b for row in by.values() for a in row.values() for b in row.values() if a != b]
    out = [m for m in STEPS.findall(text) if m not in medians]
    for match in RATIOS.finditer(text):
        for figure in filter(None, match.groups()):
            if not any(f"{r:.2f}" == figure for r in ratios):
                out.append(f"{figure}x")
    return out


def test_the_results_file_is_of_todays_measuring_code() -> None:
    """The file's ``code_digest`` is the digest of the code that builds and times the variants
    now: a change there makes every quoted figure stale until the file is measured again."""
    data = json.loads(RESULTS.read_text())
    proc = subprocess.run(
        [sys.executable, "-c", "import bench; print(bench.code_digest(), bench.DOCS_RESULTS)"],
        capture_output=True, text=True, timeout=120, cwd=ROOT / "benchmarks",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    digest, path = proc.stdout.split()
    assert path == RESULTS.relative_to(ROOT).as_posix()
    assert data.get("code_digest") == digest, (
        f"{path} was measured with other code than benchmarks/bench.py measures with now "
        f"(digest {data.get('code_digest')}, now {digest}): run `{data.get('command')} --out "
        f"{path}` and update the figures the docs quote"
    )
    assert data["command"].startswith("python benchmarks/bench.py ")


def test_the_readme_table_is_the_results_file() -> None:
    """Every row of the README's CartPole table, each cell formatted from the file."""
    by = _results()
    readme = (ROOT / "README.md").read_text()
    for n, row in sorted(by.items()):
        cells = [str(n), *(f"{row[c]:,.0f}" for c in COLUMNS)]
        cells += [f"{row[a] / row[b]:.2f}x" for a, b in RATIO_COLUMNS]
        assert "| " + " | ".join(cells) + " |" in readme, (n, cells)


@pytest.mark.parametrize("page", QUOTING_PAGES)
def test_quoted_figures_are_in_the_results_file(page: str) -> None:
    text = (ROOT / page).read_text()
    regions = REGION.findall(text)
    assert regions, f"{page} quotes the results file in no <!-- bench-results --> region"
    by = _results()
    for region in regions:
        assert not unheld_figures(region, by), (page, region)
        assert RATIOS.search(region) or STEPS.search(region), (page, region)  # (not empty)


def test_autos_docstring_quotes_the_results_file() -> None:
    """``AutoConfig``'s docstring (the options page) quotes the idle figures at 16 envs."""
    idle = str(AutoConfig.__doc__).split("Measured on 2 cores, 16 CartPoles:", 1)[1]
    idle = idle.split("with a busy core", 1)[0]
    assert RATIOS.search(idle) and not unheld_figures(idle, _results()), idle


def test_a_figure_the_file_does_not_hold_is_found() -> None:
    """The issue's case: the old page's figures are caught, the file's pass."""
    by = _results()
    assert unheld_figures("1.02x `dummy` at 16 envs, 6.8x gymnasium's AsyncVectorEnv", by) == [
        "1.02x",
        "6.8x",
    ]
    assert unheld_figures("1.11x `dummy` at 16 envs, 6.92x; 0.56-0.91x; 242,350", by) == []
    assert unheld_figures("242,351 steps/s, 0.56-0.93x", by) == ["242,351", "0.93x"]
