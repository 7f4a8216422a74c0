"""The fenced blocks of the documentation (README.md and every page under docs/), as tests
read them: every command and config block is executed by a test, so the docs cannot drift
from the code.

A block is one of three things, and test_pages.py checks that each is exactly one:

- **output** (a sample, a diagram): a fence with no language (or ``text``); never executed;
- **executed by a named test**: an HTML comment on the line(s) just above the fence,
  ``<!-- test: tests/docs/test_x.py::test_name -->``; that test must exist and read the
  block by its page and section (``section_blocks``), so it runs what the page says;
- **executed as it is** by test_pages.py (``runner.py``), with no test code of its own:
  ``bash`` (a script, against a sandbox API server), ``python`` (a script), ``yaml`` (a
  KubeSchedulerConfiguration is loaded and validated like the daemon's; other Kubernetes
  objects are applied to the sandbox with ``--dry-run=server``), ``toml`` and ``json``
  (parsed). ``title="name"`` on the fence also writes the block to that file in the page's
  working directory, for the page's later blocks (mkdocs-material shows it as the title); a
  titled YAML block that a later block uses is executed by it, else it is checked as above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)(?P<attrs>[^`]*)$")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_MARKER = re.compile(r"^\s*<!--\s*test:\s*(?P<where>\S+::\w+)\s*-->\s*$")
OUTPUT_LANGS = frozenset({"", "text"})


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    section: str  # the nearest heading above it
    page: str = "README.md"  # the file, relative to the repository root
    tested_by: str | None = None  # "path::function" from a <!-- test: ... --> marker
    title: str | None = None  # title="..." on the fence: the file the block is written to

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.section!r}, {self.lang or 'output'})"

    def commands(self) -> list[str]:
        """Shell commands of a bash block: comments and blank lines dropped, ``\\``
        continuations joined, a trailing ``# comment`` removed."""
        out: list[str] = []
        pending = ""
        for raw in self.text.splitlines():
            line = raw.strip()
            if not pending and (not line or line.startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line = pending + line
            pending = ""
            out.append(re.sub(r"\s+#\s.*$", "", line).strip())
        return out


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


def blocks(path: Path = README) -> list[Block]:
    found: list[Block] = []
    section = ""
    fence: re.Match[str] | None = None
    marker: str | None = None
    start = 0
    body: list[str] = []
    page = _relative(path)
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if fence is None:
            m = _FENCE.match(line)
            if m:
                fence, start, body = m, i, []
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
                marker = None
            elif (mm := _MARKER.match(line)) is not None:
                marker = mm.group("where")
            elif line.strip():
                marker = None  # a marker names the fence right below it, blank lines aside
            continue
        indent = fence.group("indent")
        if line.strip() == "```" and line.startswith(indent):
            attrs = dict(_ATTR.findall(fence.group("attrs")))
            found.append(Block(fence.group("lang"), "\n".join(body) + "\n", start, section,
                               page=page, tested_by=marker, title=attrs.get("title")))
            fence, marker = None, None
        else:
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
    return found


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def section_blocks(heading: str, *, lang: str | None = None,
                   page: str = "README.md") -> list[Block]:
    """The blocks under ``heading`` of ``page`` (a path from the repository root, e.g.
    ``"docs/gangs.md"``), optionally of one language."""
    return [b for b in blocks(REPO / page)
            if b.section == heading and (lang is None or b.lang == lang)]
