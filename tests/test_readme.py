"""Every code block of the README runs as written, so the README cannot drift.

How a block is used (one shared scratch folder per test, blocks taken in README order):

- a block whose leading comment lines name a file (``# my_configs/experiment/x.yaml``,
  ``# conf/train.yaml``, ``# train.py``) is written at that path, as a reader would save it;
- a ``python`` block is then run as a script (``python <file>``) in the scratch folder;
- a ``bash`` block runs line by line (``bash -c``) in the scratch folder, with the test
  interpreter's ``bin/`` first on ``PATH`` (so ``envfactory`` and ``python`` are ours) and
  ``.venv`` linked to the interpreter's prefix (so ``.venv/bin/...`` lines work too);
- the first block (the two set-up commands) is CI's own job and is not re-run here;
- a block preceded by ``<!-- readme-test: skip: <reason> -->`` is skipped, with the reason.

Each block must exit 0 and print no traceback.
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
README = ROOT / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip:\s*(?P<why>.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
# a leading comment line that is a relative file path: "# conf/train.yaml", "# train.py"
PATH_COMMENT = re.compile(r"^#\s*(?P<path>[\w./-]+\.(?:py|ya?ml|toml|cfg|txt))\s*$")


@dataclass
class Block:
    index: int
    line: int
    lang: str
    text: str
    skip: str | None

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
        name = self.path or self.lang
        return f"L{self.line}-{name}"


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    pending_skip: str | None = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        s = SKIP.search(lines[i])
        if s:
            pending_skip = s.group("why")
        if m and m.group("lang"):
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append(
                Block(len(blocks), start + 1, m.group("lang"), "\n".join(body) + "\n", pending_skip)
            )
            pending_skip = None
        elif lines[i].strip() and not s and not lines[i].startswith("<!--"):
            # a skip marker applies to the next block only if nothing but blank lines and
            # comments stand between them
            pending_skip = None
        i += 1
    return blocks


BLOCKS = readme_blocks(README.read_text())


def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
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


def _run_block(block: Block, workdir: Path) -> None:
    env = _env(workdir)
    if block.lang == "python":
        script = _write(block, workdir) or workdir / f"readme_block_{block.index}.py"
        script.write_text(block.text)
        proc = subprocess.run(
            [sys.executable, str(script)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        _check(proc, f"README python block at line {block.line}")
    elif block.lang in ("bash", "sh", "shell", "console"):
        venv = workdir / ".venv"
        if not venv.exists():
            venv.symlink_to(Path(sys.executable).parent.parent)
        before = _installed()
        try:
            for raw in block.text.splitlines():
                line = raw.split("  #", 1)[0].strip()
                if not line or line.startswith("#"):
                    continue
                proc = subprocess.run(
                    ["bash", "-c", line],
                    cwd=workdir,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                _check(proc, f"README line {line!r} (block at line {block.line})")
        finally:
            # a block that installs a package (the README's plugin) must not leave it in the
            # test environment, also when it fails before its own uninstall line
            extra = sorted(_installed() - before)
            if extra:
                subprocess.run(
                    [sys.executable, "-m", "pip", "uninstall", "-y", "-q", *extra],
                    capture_output=True,
                    check=False,
                )
    else:
        _write(block, workdir)


def test_readme_blocks_were_found() -> None:
    langs = {b.lang for b in BLOCKS}
    assert {"bash", "python", "yaml"} <= langs
    assert BLOCKS[0].lang == "bash" and "pytest" in BLOCKS[0].text


def _param(block: Block) -> object:
    # shell blocks run whole jobs of the envfactory command (Pong, sweeps, a plugin install):
    # seconds to tens of seconds each, so they belong to the slow set; Python blocks stay quick
    slow = block.lang in ("bash", "sh", "shell", "console")
    return pytest.param(block, id=block.id, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS[1:]])
def test_readme_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip(block.skip)
    # every file a reader saved from earlier blocks is there, as on the reader's disk
    for earlier in BLOCKS[1 : block.index]:
        if earlier.path and earlier.lang != "bash":
            _write(earlier, tmp_path)
    _run_block(block, tmp_path)


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
    _check(proc, "benchmarks/bench.py")
    assert out.exists() and "CartPole" in proc.stdout
