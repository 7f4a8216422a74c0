"""The README's fenced blocks, as tests read them: every command and config block it shows
is executed by a test (see test_readme.py), so the README cannot drift from the code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    section: str  # the nearest heading above it

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


def blocks(path: Path = README) -> list[Block]:
    found: list[Block] = []
    section = ""
    lang: str | None = None
    start = 0
    body: list[str] = []
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        m = _FENCE.match(line)
        if lang is None:
            if line.startswith("#"):
                section = line.lstrip("#").strip()
            elif m:
                lang, start, body = m.group(1), i, []
        elif line.strip() == "```":
            found.append(Block(lang, "\n".join(body) + "\n", start, section))
            lang = None
        else:
            body.append(line)
    return found


def section_blocks(heading: str, *, lang: str | None = None) -> list[Block]:
    return [b for b in blocks() if b.section == heading and (lang is None or b.lang == lang)]
