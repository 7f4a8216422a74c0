"""CONTRIBUTING.md's folder table matches the tree: every row exists, no row is there twice,
and every package or module directly under ``scheduler/``, every top-level folder of the
repository and every folder and shared module directly under ``tests/`` has a row."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> list[str]:
    """Every path a row names in its first cell (a cell may name several)."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"^\| ([^|]+) \|", table, flags=re.MULTILINE)
    return [name for cell in cells for name in re.findall(r"`([^`]+)`", cell)]


def _tracked() -> list[str]:
    """The files git tracks (the tree as committed, without venvs, caches or builds)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.splitlines()


def test_every_row_names_something_that_exists() -> None:
    for row in _rows():
        path = ROOT / row.replace("<area>/", "")
        assert path.exists(), row


def test_no_row_is_there_twice() -> None:
    twice = [row for row, n in Counter(_rows()).items() if n > 1]
    assert twice == [], f"rows named more than once: {twice}"


def test_every_top_level_scheduler_entry_has_a_row() -> None:
    rows = set(_rows())
    skip = {"__init__.py", "__main__.py", "py.typed", "__pycache__"}
    for entry in sorted((ROOT / "scheduler").iterdir()):
        if entry.name in skip:
            continue
        name = f"scheduler/{entry.name}" + ("/" if entry.is_dir() else "")
        assert name in rows, f"{name} has no row in CONTRIBUTING.md's folder table"


def test_every_top_level_folder_and_tests_entry_has_a_row() -> None:
    rows = set(_rows())
    # a row for a folder inside one (deploy/helm/, tests/unit/<area>/) covers it
    covered = {row.split("/", 1)[0] + "/" for row in rows} | {
        "/".join(row.split("/", 2)[:2]) + "/" for row in rows if row.count("/") >= 2}
    wanted: set[str] = set()
    for path in _tracked():
        parts = path.split("/")
        if len(parts) > 1 and parts[0] != "scheduler":
            wanted.add(parts[0] + "/")
        if parts[0] == "tests" and len(parts) > 2:
            wanted.add(f"tests/{parts[1]}/")
        if parts[0] == "tests" and len(parts) == 2 and parts[1] != "__init__.py":
            wanted.add(path)
    missing = sorted(w for w in wanted if w not in rows and w not in covered)
    assert missing == [], f"no row in CONTRIBUTING.md's folder table for {missing}"
