"""The docs pages: their code blocks run as written (tests/mdblocks.py, as the README's),
the option tables are generated from the schemas, every error class is documented, and
docstring examples run. The built site itself: tests/project/test_site.py."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mdblocks import ROOT, Block, page_blocks, param, run_as_written

import envfactory.errors
from envfactory.config import docs

DOCS = ROOT / "docs"
PAGES = {p.relative_to(DOCS).as_posix(): page_blocks(p) for p in sorted(DOCS.rglob("*.md"))}
README_BLOCKS = page_blocks(ROOT / "README.md")
OPTIONS_PAGE = DOCS / "reference" / "options.md"
ERRORS_PAGE = DOCS / "reference" / "errors.md"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "_ext" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_options_tables_are_generated_from_the_schemas() -> None:
    """The option tables (once the README's) are filled in from the schemas when the site is
    built, so they cannot go stale: the page holds the markers, the hook the current tables."""
    text = OPTIONS_PAGE.read_text()
    assert docs.BEGIN in text and docs.END in text
    built = _hooks().on_page_markdown(text, None, None, None)
    a, b = built.index(docs.BEGIN) + len(docs.BEGIN), built.index(docs.END)
    assert built[a:b].strip() == docs.options_markdown().strip()
    assert "`frame_skip`" in built and "`batch_size`" in built


def test_readme_first_block_has_exactly_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    block = text.split("```", 2)[1].splitlines()[1:]
    lines = [ln for ln in block if ln.strip()]
    assert len(lines) == 2
    assert "envfactory" in lines[0] and "pytest" in lines[1]


def test_getting_started_shows_the_readme_commands() -> None:
    """Getting started repeats the README's two set-up commands, word for word."""
    first = next(b for b in PAGES["getting-started.md"] if b.lang == "bash")
    assert first.text == README_BLOCKS[0].text


def test_every_error_class_is_documented() -> None:
    """Every class of envfactory/errors.py has a row on the errors page saying what causes
    it and what to do, and every class importable from envfactory is one of them."""
    classes = {
        name
        for name, obj in vars(envfactory.errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, (envfactory.errors.EnvfactoryError, Warning))
        and obj.__module__ == "envfactory.errors"
    }
    assert {"WorkerTimeoutError", "ConflictingNameError", "PluginLoadWarning"} <= classes
    rows = {}
    for line in ERRORS_PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].split("`")[1]] = cells[1:]
    missing = sorted(classes - rows.keys())
    assert not missing, f"{ERRORS_PAGE.name} has no row for {missing}"
    for name in classes:
        cause, fix = rows[name]
        assert len(cause) > 20 and len(fix) > 20, (name, cause, fix)


def _docs_param(block: Block) -> object:
    return param(block, id_prefix=block.page.removeprefix("docs/") + ":")


DOCS_BLOCKS = [b for blocks in PAGES.values() for b in blocks]


def test_docs_blocks_were_found() -> None:
    langs = {b.lang for b in DOCS_BLOCKS}
    assert {"bash", "python", "yaml", "toml"} <= langs
    runnable = [b for b in DOCS_BLOCKS if b.lang in ("python", "bash") and not b.skip]
    assert len(runnable) >= 20


@pytest.mark.parametrize("block", [_docs_param(b) for b in DOCS_BLOCKS])
def test_docs_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    same = next((r for r in README_BLOCKS if (r.lang, r.text) == (block.lang, block.text)), None)
    if same is not None and block.lang in ("python", "bash") and not block.skip:
        pytest.skip(
            f"the same text as README.md's block at line {same.line}, which "
            "tests/project/test_readme.py runs"
        )
    run_as_written(block, PAGES[block.page.removeprefix("docs/")], tmp_path)


@pytest.mark.parametrize(
    "module",
    [
        "envfactory",
        "envfactory.config.compose",
        "envfactory.factory",
        "envfactory.vectorizers.front.base",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


def test_import_is_light() -> None:
    code = (
        "import sys, envfactory; envfactory.available(); "
        "print(sorted(m for m in ('ale_py', 'cv2', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("page", ["index.md", "getting-started.md"])
def test_first_pages_python_fits_the_code_box(page: str) -> None:
    """The Python a new reader meets first fits the site's code box at 1280 px (about 80
    characters) without a scroll bar hiding the end of a line."""
    long = [
        (b.line + i, line)
        for b in PAGES[page]
        if b.lang == "python"
        for i, line in enumerate(b.text.splitlines(), 1)
        if len(line) > 79
    ]
    assert not long, f"docs/{page}: lines wider than 79 characters: {long}"


def test_the_plugin_guide_shows_every_kind_of_plugin_running() -> None:
    """The plugin guide has a block that runs (not skipped) for each kind of record a plugin
    gives: a family, a wrapper and a vectorizer."""
    blocks = [
        b.text for b in PAGES["guides/write-a-plugin.md"] if b.lang == "python" and not b.skip
    ]
    for record, hook in (
        ("EnvFamilyPlugin", "envfactory_env_families"),
        ("WrapperPlugin", "envfactory_wrappers"),
        ("VectorizerPlugin", "build"),
    ):
        assert any(f"envfactory.{record}(" in t and hook in t for t in blocks), record


@pytest.mark.slow  # > 3 s: a sweep of whole CLI jobs
def test_getting_started_sweep_table_reads_as_typed(run: Any, tmp_path: Path) -> None:
    """Getting started's sweep: the table shows the overrides as they were typed (``false``,
    where Hydra's sweeper hands the jobs ``False``), and a failed row is the error's first
    line cut to a cell's length (a 550-character message filled the row), still pointing to
    the fix; ``sweep_summary.json`` keeps the whole message."""
    sweep = tmp_path / "sweep"
    proc = run(
        [
            "envfactory",
            "-m",
            "vectorizer=dummy,dumy",
            "run.progress=false,true",
            "num_envs=1",
            "run.total_steps=20",
            f"hydra.sweep.dir={sweep}",
        ],
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    rows = [ln for ln in (sweep / "sweep_summary.md").read_text().splitlines() if ln[:2] == "| "]
    overrides = [row.split(" | ")[1] for row in rows[1:]]
    assert overrides == [
        "vectorizer=dummy run.progress=false",
        "vectorizer=dummy run.progress=true",
        "vectorizer=dumy run.progress=false",
        "vectorizer=dumy run.progress=true",
    ]
    failed = [row.split(" | ")[2] for row in rows[1:] if "failed" in row]
    assert len(failed) == 2
    for cell in failed:
        assert cell.startswith("failed: unknown vectorizer 'dumy'")
        assert "Did you mean 'dummy'?" in cell and len(cell) <= 250, cell
    jobs = json.loads((sweep / "sweep_summary.json").read_text())["jobs"]
    assert "ENVFACTORY_CONFIG_DIR" in jobs[2]["error"]


def _collected(*args: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    return int(proc.stdout.strip().splitlines()[-1].split()[0].split("/")[0])


@pytest.mark.slow  # > 3 s: collects the whole suite twice
def test_getting_started_counts_the_tests_of_today() -> None:
    """Getting started's test counts (the whole suite, the quick loop) are within 15% of what
    pytest collects (it said 274 quick tests when there were 405)."""
    text = " ".join((DOCS / "getting-started.md").read_text().split())
    whole = re.search(r"whole test suite \((?:about )?([\d,]+) tests", text)
    quick = re.search(r'`-m "not slow"` \((?:about )?([\d,]+) (?:tests|of them)\)', text)
    assert whole and quick, "getting-started.md no longer states the counts this test checks"
    for stated, actual in (
        (whole, _collected()),
        (quick, _collected("-m", "not slow")),
    ):
        number = int(stated.group(1).replace(",", ""))
        assert abs(number - actual) <= 0.15 * actual, (stated.group(0), actual)


def test_the_rerun_docs_say_a_run_dir_is_code_to_trust() -> None:
    """``--rerun`` runs a run dir's saved Hydra settings, its ``hydra.callbacks`` included
    (issue 28, item 5): the guide and the CLI reference say so where they describe it."""
    for page in ("docs/guides/command-line.md", "docs/reference/cli.md"):
        text = (Path(__file__).resolve().parents[2] / page).read_text()
        rerun = text[text.index("--rerun") :]
        assert "hydra.callbacks" in rerun and "trust" in rerun, page
