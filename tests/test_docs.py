"""The docs site (mkdocs.yml, docs/): `mkdocs build --strict` succeeds (mkdocs.yml's `validation`
makes a link to a missing page or anchor a warning, so strict fails on it), and every link of the
README into docs/ names a page that exists and an anchor that page has. The code blocks of both
run in tests/test_readme.py.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from processes import run_in_own_group
from test_readme import DOCS, README, ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built with `mkdocs build --strict` into a temporary folder."""
    for module, package in (("mkdocs", "mkdocs"), ("material", "mkdocs-material")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{package} is not installed (pip install '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    r = run_in_own_group(cmd, 300, cwd=ROOT, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
                         stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return out


def test_site_builds_strict(site):
    assert (site / "index.html").is_file()
    pages = {p.relative_to(ROOT / "docs").with_suffix("").as_posix() for p in DOCS}
    built = {p.parent.relative_to(site).as_posix() for p in site.rglob("index.html")}
    assert pages - {"index"} <= built, sorted(pages - built)


def test_nav_names_every_page():
    """Every page under docs/ is in mkdocs.yml's nav (mkdocs would only say so at INFO level)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [p for p in DOCS if f": {p.relative_to(ROOT / 'docs').as_posix()}" not in nav] == []


def test_readme_links_into_the_site(site):
    """A README link to docs/PAGE.md#anchor names a page that exists and an anchor it has."""
    links = [m.group(1) for m in LINK.finditer(README.read_text())]
    local = [link for link in links if not re.match(r"\w+://", link)]
    assert any(link.startswith("docs/") for link in local), local
    headings = re.findall(r"^#+\s+(.*)$", README.read_text(), re.M)   # GitHub's anchors for them
    own = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    bad = []
    for link in local:
        path, _, anchor = link.partition("#")
        if not path:
            if anchor not in own:
                bad.append(f"{link}: no README heading has that anchor")
            continue
        if not (ROOT / path).exists():
            bad.append(f"{link}: no file {path}")
            continue
        if path.startswith("docs/") and path.endswith(".md") and anchor:
            page = Path(path).relative_to("docs").with_suffix("")
            html = site / ("" if page.name == "index" and page.parent == Path(".") else page) / "index.html"
            if f'id="{anchor}"' not in html.read_text():
                bad.append(f"{link}: no anchor #{anchor} in {path}")
    assert bad == []
