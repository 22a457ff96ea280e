"""The documentation site builds with warnings as errors (``mkdocs build --strict``, as CI and
the docs say) and documents every public name: of ``envfactory``, ``envfactory.testing`` and the
shipped plugins (from their docstrings), and every config option of the schemas."""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mdblocks import ROOT

import envfactory
from envfactory.config.schema import EnvfactoryConfig, RunConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}"
    return out


def _anchors(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text()))


def test_every_public_name_of_envfactory_is_documented(site: Path) -> None:
    anchors = _anchors(site / "reference" / "api" / "envfactory" / "index.html")
    missing = [n for n in envfactory.__all__ if f"envfactory.{n}" not in anchors]
    assert not missing, f"not in the built API reference: {missing}"
    # and each appears as text somewhere in the site, as a reader searches for it
    text = "".join(p.read_text() for p in site.rglob("*.html"))
    assert all(n in text for n in envfactory.__all__)


@pytest.mark.parametrize(
    "module, page",
    [
        ("envfactory.testing", "envfactory.testing"),
        ("envfactory_sb3", "envfactory_sb3"),
        ("envfactory_tianshou", "envfactory_tianshou"),
        ("envfactory.envpool", "envfactory.envpool"),
        ("envfactory.vectorizers.remote", "envfactory.vectorizers.remote"),
    ],
)
def test_every_public_name_of_a_module_is_documented(site: Path, module: str, page: str) -> None:
    names = importlib.import_module(module).__all__
    anchors = _anchors(site / "reference" / "api" / page / "index.html")
    missing = [n for n in names if f"{module}.{n}" not in anchors]
    assert not missing, f"not in the built API reference of {module}: {missing}"


@pytest.mark.parametrize(
    "plugin, names",
    [
        ("envfactory_ray", ["RayVecEnv"]),
        ("envfactory_threads", ["ThreadVecEnv"]),
        ("envfactory_gymnasium", ["plugin"]),
        ("envfactory_ale", ["vector"]),
        ("envfactory_example", ["plugin"]),
    ],
)
def test_every_shipped_plugin_has_an_api_page(site: Path, plugin: str, names: list[str]) -> None:
    html = (site / "reference" / "api" / plugin / "index.html").read_text()
    assert f'id="{plugin}"' in html
    for name in names:
        assert re.search(rf'id="{plugin}\.[\w.]*{name}"', html), (plugin, name)


def test_every_config_option_is_in_the_options_page(site: Path) -> None:
    html = (site / "reference" / "options" / "index.html").read_text()
    reg = envfactory.get_registry()
    # (schema, the fields that select rather than configure: the groups, the name key)
    schemas: list[tuple[type, set[str]]] = [
        (EnvfactoryConfig, {"env", "vectorizer"}),
        (RunConfig, set()),
    ]
    for items, key in ((reg.families, "family"), (reg.vectorizers, "name")):
        schemas += [
            (item.record.config, {key})
            for item in items.values()
            if item.record.config is not None and item.provider.distribution == "envfactory"
        ]
    assert len(schemas) >= 8
    for schema, skip in schemas:
        for field in dataclasses.fields(schema):
            if field.name not in skip:
                assert f"<code>{field.name}</code>" in html, (schema.__name__, field.name)


def test_every_page_is_built(site: Path) -> None:
    pages = [
        p.relative_to(ROOT / "docs").with_suffix("")
        for p in (ROOT / "docs").rglob("*.md")
        if "_ext" not in p.parts
    ]
    for page in pages:
        built = site / ("index.html" if page.name == "index" else page / "index.html")
        assert built.exists(), f"docs/{page}.md was not built into the site"


def test_the_options_page_reads_as_the_overrides_are_typed(site: Path) -> None:
    """No Markdown escape shows (``infos[key]["r"|"l"|"t"]``, not ``\\|``), boolean defaults
    are spelled as an override is typed (``true``/``false``, beside ``null``), and option
    names and defaults never break mid-word (``autoreset_m`` / ``ode``): the generated tables
    sit in ``div.options``, whose code cells the site's stylesheet keeps on one line."""
    html = (site / "reference" / "options" / "index.html").read_text()
    assert "\\|" not in html
    assert '<code>infos[key]["r"|"l"|"t"]</code>' in html.replace("&quot;", '"')
    assert "<code>True</code>" not in html and "<code>False</code>" not in html
    assert "<code>true</code>" in html and "<code>false</code>" in html
    assert html.count('<div class="options">') >= 8
    assert 'href="../../stylesheets/extra.css"' in html
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"\.options td:first-child code[^{]*\{[^}]*white-space: nowrap", css)


def test_docstrings_render_as_markdown_not_sphinx(site: Path) -> None:
    """The API pages show the docstrings' cross-references as links (mkdocs-autorefs'
    ``[`make`][envfactory.make]``, the markup docs/concepts/architecture.md tells contributors
    to use), not as the Sphinx roles, RST links and RST ``::`` markers they showed raw (made by
    :func: make, envpool <https://...>_, a literal block::)."""
    pages = [*(site / "reference" / "api").rglob("index.html")]
    pages += [site / "reference" / p / "index.html" for p in ("errors", "options")]
    role = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj):(?:<code>|`)")
    rst_link = re.compile(r"&gt;</code>_|&gt;`_")
    left = {
        str(page.relative_to(site)): found
        for page in pages
        if (
            found := [
                m.group(0)
                for pattern in (role, rst_link, re.compile(r"\S::</p>"))
                for m in pattern.finditer(page.read_text())
            ]
        )
    }
    assert not left, f"Sphinx/RST markup on the built pages: {left}"
    envpool = (site / "reference" / "api" / "envfactory.envpool" / "index.html").read_text()
    assert 'href="https://github.com/sail-sg/envpool"' in envpool
    # "made by make": a link to make's own entry
    assert re.search(r'made by <a[^>]+href="#envfactory\.envpool\.make"', envpool)
