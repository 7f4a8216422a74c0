"""CONTRIBUTING.md's folder table matches the tree: every row exists, and every package or
module directly under ``scheduler/`` has a row."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)


def test_every_row_names_something_that_exists() -> None:
    for row in _rows():
        path = ROOT / row.replace("<area>/", "")
        assert path.exists(), row


def test_every_top_level_scheduler_entry_has_a_row() -> None:
    rows = set(_rows())
    skip = {"__init__.py", "__main__.py", "py.typed", "__pycache__"}
    for entry in sorted((ROOT / "scheduler").iterdir()):
        if entry.name in skip:
            continue
        name = f"scheduler/{entry.name}" + ("/" if entry.is_dir() else "")
        assert name in rows, f"{name} has no row in CONTRIBUTING.md's folder table"
