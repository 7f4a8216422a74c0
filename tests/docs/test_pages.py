"""Every page of the docs (README.md and docs/**/*.md) is checked with no test code of its own:

- every fenced block is output (no language), executed by a named test (a
  ``<!-- test: path::function -->`` marker above it; the test must exist and read that page's
  section), or executed here as it is (runner.py), in page order;
- the site builds with ``mkdocs build --strict`` (broken links and anchors fail), and every
  page under docs/ is in mkdocs.yml's nav; the README's own links resolve too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs.markdown import DOCS, OUTPUT_LANGS, README, REPO, Block, blocks, pages
from tests.docs.runner import RUNNABLE, PageRun

PAGES = [p.relative_to(REPO).as_posix() for p in pages()]


def _function(path: Path, name: str) -> ast.AST | None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _named_test_problem(block: Block) -> str | None:
    assert block.tested_by is not None
    file, _, name = block.tested_by.partition("::")
    path = REPO / file
    if not path.is_file():
        return f"{block.where}: marker names {file}, which does not exist"
    if _function(path, name) is None:
        return f"{block.where}: no test {name} in {file}"
    source = path.read_text()
    # The test reads the block from the page (so it runs what the page says).
    if "section_blocks" not in source:
        return f"{block.where}: {file} does not read docs blocks (section_blocks)"
    if f'"{block.section}"' not in source:
        return f"{block.where}: {file} never names the section {block.section!r}"
    if block.page != "README.md" and f'"{block.page}"' not in source:
        return f"{block.where}: {file} never names the page {block.page!r}"
    return None


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_output_executed_here_or_by_a_named_test(page: str) -> None:
    problems = []
    for block in blocks(REPO / page):
        if block.tested_by is not None:
            if block.lang in OUTPUT_LANGS:
                problems.append(f"{block.where}: a test marker on an output block")
            elif (problem := _named_test_problem(block)) is not None:
                problems.append(problem)
        elif block.lang not in OUTPUT_LANGS and block.lang not in RUNNABLE:
            problems.append(f"{block.where}: no runner for {block.lang!r} and no test marker")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", [p for p in PAGES if any(
    b.tested_by is None and b.lang not in OUTPUT_LANGS for b in blocks(REPO / p))])
def test_page_blocks_run_as_written(page: str, tmp_path: Path) -> None:
    run = PageRun(page, tmp_path)
    try:
        for block in blocks(REPO / page):
            if block.tested_by is None and block.lang not in OUTPUT_LANGS:
                run.run(block)
        run.finish()
    finally:
        run.close()


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav] if nav.endswith(".md") else []
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


class _MkDocsLoader(yaml.SafeLoader):
    """mkdocs.yml with its tags (``!relative``, ``!ENV``) read as plain values."""


_MkDocsLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def test_every_docs_page_is_in_the_nav() -> None:
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=_MkDocsLoader)
    nav = _nav_pages(config["nav"])
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == on_disk, "every page of docs/ in mkdocs.yml's nav, and only those"
    assert len(nav) == len(set(nav)), "a page twice in the nav"


def test_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(REPO / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").exists()



_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _github_anchor(heading: str) -> str:
    """The anchor GitHub (and mkdocs' toc) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_github_anchor(line.lstrip("#")) for line in path.read_text().splitlines()
            if re.match(r"#{1,6} ", line)}


def test_readme_links_resolve() -> None:
    """The README is read on GitHub, outside the site's strict build: its relative links
    (the docs pages it hands the reader to) must name files, and anchors, that exist."""
    broken = []
    for target in _LINK.findall(README.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        path = REPO / file if file else README
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, f"README links to nothing: {broken}"
