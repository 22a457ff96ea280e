"""Run the fenced code blocks of a Markdown page as a reader would (README.md, docs/**/*.md).

Shared by tests/project/test_readme.py and tests/project/test_docs.py. How a page's blocks
are used (one scratch folder per test, blocks taken in page order):

- a block whose leading comment lines name a file (``# my_configs/experiment/x.yaml``,
  ``# conf/train.yaml``, ``# train.py``) is written at that path, as a reader would save it;
  the files of the page's earlier blocks are there too;
- a ``python`` block is then run as a script (``python <file>``) in the scratch folder;
- a ``bash`` block runs line by line (``bash -c``) in the scratch folder, with the test
  interpreter's ``bin/`` first on ``PATH`` (so ``envfactory`` and ``python`` are ours) and
  ``.venv`` linked to the interpreter's prefix (so ``.venv/bin/...`` lines work too);
  whatever a block pip-installs is uninstalled afterwards;
- a block preceded by ``<!-- docs-test: skip: <reason> -->`` (or the README's older spelling
  ``<!-- readme-test: skip: <reason> -->``) is skipped, with the reason;
- ``<!-- docs-test: slow -->`` marks a block slow (bash blocks are slow anyway: they run whole
  jobs of the envfactory command).

Each block must exit 0 and print no traceback. A block without a language (or ``text``) is
not run.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"<!--\s*(?:readme|docs)-test:\s*skip:\s*(?P<why>.*?)\s*-->")
SLOW = re.compile(r"<!--\s*docs-test:\s*slow\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
# a leading comment line that is a relative file path: "# conf/train.yaml", "# train.py"
PATH_COMMENT = re.compile(r"^#\s*(?P<path>[\w./-]+\.(?:py|ya?ml|toml|cfg|txt))\s*$")
SHELLS = ("bash", "sh", "shell", "console")
RUN = ("python", *SHELLS)


@dataclass
class Block:
    page: str  # the page's path relative to the repository root
    index: int
    line: int
    lang: str
    text: str
    skip: str | None
    slow: bool = False

    @property
    def path(self) -> str | None:
        for raw in self.text.splitlines():
            line = raw.strip()
            if not line.startswith("#"):
                return None
            m = PATH_COMMENT.match(line)
            if m:
                return m.group("path")
        return None

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.path or self.lang}"

    @property
    def where(self) -> str:
        return f"{self.page} block at line {self.line}"


def parse_blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks of a page that have a language, with their skip and slow markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    pending_skip: str | None = None
    pending_slow = False
    while i < len(lines):
        m = FENCE.match(lines[i])
        s = SKIP.search(lines[i])
        if s:
            pending_skip = s.group("why")
        if SLOW.search(lines[i]):
            pending_slow = True
        if m and m.group("lang"):
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            text_ = "\n".join(body) + "\n"
            blocks.append(
                Block(
                    page, len(blocks), start + 1, m.group("lang"), text_, pending_skip, pending_slow
                )
            )
            pending_skip, pending_slow = None, False
        elif m:  # a fence without a language: skip its body
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            pending_skip, pending_slow = None, False
        elif lines[i].strip() and not lines[i].startswith("<!--"):
            # a marker applies to the next block only if nothing but blank lines and
            # comments stand between them
            pending_skip, pending_slow = None, False
        i += 1
    return blocks


def page_blocks(path: Path) -> list[Block]:
    return parse_blocks(path.read_text(), path.relative_to(ROOT).as_posix())


def param(block: Block, *, id_prefix: str = "") -> object:
    """A pytest param of one block: slow when it runs shell lines (whole jobs of the
    envfactory command: seconds to tens of seconds each) or is marked slow."""
    slow = block.slow or block.lang in SHELLS
    return pytest.param(block, id=id_prefix + block.id, marks=[pytest.mark.slow] if slow else [])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{out[-4000:]}"
    assert "Traceback (most recent call last)" not in out, f"{what} printed a traceback:\n{out}"


def _write(block: Block, workdir: Path) -> Path | None:
    if block.path is None:
        return None
    target = workdir / block.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.text)
    return target


def _installed() -> set[str]:
    return {d.metadata["Name"] for d in importlib.metadata.distributions()}


def _run(cmd: list[str], workdir: Path, what: str) -> None:
    proc = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True, timeout=300)
    check(proc, what)


def _run_block(block: Block, workdir: Path) -> None:
    if block.lang == "python":
        script = _write(block, workdir) or workdir / f"block_{block.index}.py"
        script.write_text(block.text)
        _run([sys.executable, str(script)], workdir, f"python {block.where}")
    elif block.lang in SHELLS:
        venv = workdir / ".venv"
        if not venv.exists():
            venv.symlink_to(Path(sys.executable).parent.parent)
        before = _installed()
        try:
            for raw in block.text.splitlines():
                line = raw.split("  #", 1)[0].strip()
                if not line or line.startswith("#"):
                    continue
                _run(["bash", "-c", line], workdir, f"line {line!r} ({block.where})")
        finally:
            # a block that installs a package (a plugin) must not leave it in the test
            # environment, also when it fails before its own uninstall line
            extra = sorted(_installed() - before)
            if extra:
                subprocess.run(
                    [sys.executable, "-m", "pip", "uninstall", "-y", "-q", *extra],
                    capture_output=True,
                    check=False,
                )
    else:
        _write(block, workdir)


def run_as_written(block: Block, page: list[Block], workdir: Path) -> None:
    """Run ``block`` in ``workdir`` with the files of the page's earlier blocks saved there,
    as on the reader's disk."""
    if block.skip:
        pytest.skip(block.skip)
    for earlier in page[: block.index]:
        if earlier.path and earlier.lang not in SHELLS:
            _write(earlier, workdir)
    _run_block(block, workdir)
