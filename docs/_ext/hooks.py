"""MkDocs hooks of envfactory's documentation site (``hooks:`` in mkdocs.yml).

- Every nav entry ``reference/api/<module>.md`` that has no file under docs/ gets a generated
  page that renders ``::: <module>`` and its submodules (mkdocstrings): a new module's API
  reference is one nav line.
- The config-option tables of the page holding the ``<!-- options:begin -->`` and
  ``<!-- options:end -->`` markers are generated from the schemas at build time
  (``envfactory.config.docs.options_markdown``), so they are never stale.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

API_DIR = "reference/api/"


def _nav_paths(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_paths(value)
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_paths(item)


def api_page(module: str) -> str:
    """The generated API page of one module: its docstrings and those of its submodules."""
    return f"# `{module}`\n\n::: {module}\n    options:\n      show_submodules: true\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path in _nav_paths(config.nav or []):
        missing = files.get_file_from_path(path) is None
        if path.startswith(API_DIR) and path.endswith(".md") and missing:
            module = path[len(API_DIR) : -len(".md")]
            files.append(File.generated(config, path, content=api_page(module)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    from envfactory.config import docs

    if docs.BEGIN not in markdown:
        return markdown
    a, b = markdown.index(docs.BEGIN) + len(docs.BEGIN), markdown.index(docs.END)
    return markdown[:a] + "\n" + docs.options_markdown() + markdown[b:]
