"""Every code block of the README runs as written, so the README cannot drift.

How a block is used is tests/mdblocks.py's (shared with the docs pages' test,
tests/project/test_docs.py): files named by a leading comment are saved, ``python`` blocks run as
scripts, ``bash`` blocks line by line, ``<!-- readme-test: skip: <reason> -->`` skips one.
The first block (the two set-up commands) is CI's own job and is not re-run here.

Each block must exit 0 and print no traceback.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mdblocks import ROOT, Block, check, page_blocks, param, run_as_written

README = ROOT / "README.md"
BLOCKS = page_blocks(README)


def test_readme_blocks_were_found() -> None:
    langs = {b.lang for b in BLOCKS}
    assert {"bash", "python", "yaml"} <= langs
    assert BLOCKS[0].lang == "bash" and "pytest" in BLOCKS[0].text


@pytest.mark.parametrize("block", [param(b) for b in BLOCKS[1:]])
def test_readme_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    run_as_written(block, BLOCKS, tmp_path)


@pytest.mark.slow
def test_benchmark_runs(tmp_path: Path) -> None:
    """The README's benchmark command runs (tiny sizes; the numbers are not checked here)."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench.py"),
            "--sizes",
            "2",
            "--rounds",
            "1",
            "--seconds",
            "0.2",
            "--workloads",
            "CartPole",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    check(proc, "benchmarks/bench.py")
    assert out.exists() and "CartPole" in proc.stdout


def test_the_docs_command_keeps_the_editable_install() -> None:
    """The documentation command, run after the README's editable test set-up, must not
    replace it with a copy (``pip install '.[docs]'`` did, silently): it installs editable
    (``-e``) wherever the README, the docs pages or mkdocs.yml give it."""
    plain = re.compile(r"pip install (?!-e )['\"]?\.\[docs\]")
    pages = [README, ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [str(p.relative_to(ROOT)) for p in pages if plain.search(p.read_text())]
    assert not found, f"a non-editable docs install in {found}"
    assert "pip install -e '.[docs]'" in README.read_text()
