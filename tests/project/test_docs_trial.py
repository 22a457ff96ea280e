"""What a new-user trial found the docs saying that the code does not (the docs10 items): the
many-core default split, the record of removed behaviour, one source for the busy-core figures,
the ``--rerun`` error as printed, and the commands that need something installed first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mdblocks import ROOT, page_blocks

from envfactory.cli.rerun import rerun_arguments
from envfactory.errors import ConfigError
from envfactory.vectorizers.plan.plan import plan_split

DOCS = ROOT / "docs"
BENCH = DOCS / "benchmarks.md"
NEWER_LOAD = "#under-load-after-issue-26"  # benchmarks.md's newest under-load table


def _text(page: str) -> str:
    return " ".join((ROOT / page).read_text().split())  # line breaks as spaces


def test_the_many_core_default_is_described_as_plan_split_makes_it() -> None:
    """On 8+ cpus a cheap env (a probe under 50 us) goes two or more to a worker: 16 CartPoles on
    16 cpus are 8 workers of 2. The pages that said the default is one env per worker there
    (choose-a-vectorizer, tune, benchmarks' "what limits the rest") say so no more."""
    assert plan_split(16, cpus=16, load=0.0, probe=lambda: 20e-6).workers == (2,) * 8
    stale = ("default puts one env per worker", "with the default one env per worker",
             "the default of one env per worker runs")  # fmt: skip
    for page in ("docs/guides/choose-a-vectorizer.md", "docs/guides/tune.md", "docs/benchmarks.md"):
        text = _text(page)
        assert not [s for s in stale if s in text], page
        assert "two or more to a worker" in text, page
    row = next(ln for ln in _text("docs/guides/choose-a-vectorizer.md").split("| cheap envs")[1:]
               if ln.startswith(" on many cores"))  # fmt: skip
    assert "`subproc` (default options)" in row and "199,158" in row


def test_the_old_under_load_table_is_marked_as_removed_behaviour() -> None:
    """The "Under load" table was measured when ``subproc`` moved envs at run time; it says so
    (the code it measured) and points to the table of today's code."""
    text = BENCH.read_text()
    old = text.split("\n## Under load\n", 1)[1].split("\n## ", 1)[0]
    assert "1535bf2" in old and f"]({NEWER_LOAD})" in old
    assert "moves its envs into the parent" not in old
    assert "\n### Under load, after issue 26\n" in text


def _newest_busy_core_ratios() -> dict[str, str]:
    """``variant -> "/ dummy, one busy core"`` at 8 envs in the newest under-load table."""
    table = BENCH.read_text().split("\n### Under load, after issue 26\n", 1)[1].split("\n\n")[1]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in table.splitlines()]
    col = rows[0].index("/ dummy, one busy core")
    return {r[1]: r[col] for r in rows[2:] if r[0] == "8"}


@pytest.mark.parametrize("page", ["README.md", "docs/concepts/vectorizers.md"])
def test_busy_core_figures_quote_the_newest_table(page: str) -> None:
    """README said 0.65x, vectorizers.md 0.62x, the table 0.61x: both quote the table, by name."""
    ratios = _newest_busy_core_ratios()
    text = _text(page)
    assert NEWER_LOAD in text, page
    assert f"{ratios['subproc']}" in text and f"{ratios['auto']}" in text, (page, ratios)
    assert "makes 0.65x" not in text and "made 0.62x" not in text, page


def test_the_rerun_error_sample_is_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """command-line.md's sample of ``--rerun runs/sweep`` is the line the command prints."""
    hydra = tmp_path / "runs" / "sweep" / "0" / ".hydra"
    hydra.mkdir(parents=True)
    for name in ("overrides.yaml", "hydra.yaml"):
        (hydra / name).write_text("[]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        rerun_arguments(["--rerun", "runs/sweep"])
    page = (DOCS / "guides" / "command-line.md").read_text()
    assert f"\nenvfactory: error: {err.value}\n" in page


def _shell_lines(page: Path) -> list[str]:
    return [
        line
        for b in page_blocks(page)
        if b.lang in ("bash", "sh", "shell", "console")
        for line in b.text.splitlines()
    ]


def test_the_render_example_names_the_extra_it_needs() -> None:
    """``envfactory job=render`` on CartPole needs pygame (``envfactory[render]``): the block's
    line says so, as the page's failures section does."""
    lines = [ln for ln in _shell_lines(DOCS / "guides" / "command-line.md") if "job=render" in ln]
    assert lines
    for line in lines:
        assert "env=pong" in line or "envfactory[render]" in line, line


def test_the_publish_commands_install_their_tools_first() -> None:
    """A page that runs ``python -m build`` or twine installs build and twine before it."""
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        installed: set[str] = set()
        for line in _shell_lines(page):
            command = line.split("  #", 1)[0]
            if re.search(r"pip install\b", command):
                installed |= set(command.split())
            for tool in ("build", "twine"):
                if re.search(rf"python -m {tool}\b", command):
                    assert tool in installed, (page.relative_to(ROOT).as_posix(), line)


def test_the_readme_benchmark_commands_run_in_its_venv_with_the_bench_extra() -> None:
    """The README sets up ``.venv``: its benchmark commands use ``.venv/bin/python``, and it
    says the benchmarks need the ``bench`` extra (pyproject.toml)."""
    text = _text("README.md")
    commands = re.findall(r"`([^`]*benchmarks/\w+\.py[^`]*)`", text)
    assert commands
    assert all(c.startswith(".venv/bin/python benchmarks/") for c in commands), commands
    assert ".venv/bin/pip install -e '.[bench]'" in text
