"""The README's generated option tables are current, and docstring examples run."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from envfactory.config import docs

ROOT = Path(__file__).resolve().parent.parent


def test_readme_options_table_is_current() -> None:
    text = (ROOT / "README.md").read_text()
    a, b = text.index(docs.BEGIN) + len(docs.BEGIN), text.index(docs.END)
    assert text[a:b].strip() == docs.options_markdown().strip(), (
        "README option tables are stale: run python -m envfactory.config.docs --write README.md"
    )


def test_readme_first_block_has_exactly_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    block = text.split("```", 2)[1].splitlines()[1:]
    lines = [ln for ln in block if ln.strip()]
    assert len(lines) == 2
    assert "envfactory" in lines[0] and "pytest" in lines[1]


@pytest.mark.parametrize(
    "module",
    [
        "envfactory",
        "envfactory.config.compose",
        "envfactory.factory",
        "envfactory.vectorizers.base",
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
