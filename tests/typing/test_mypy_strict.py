"""`mypy --strict` on scheduler/ is part of the test run (configured in pyproject.toml); the
process starts when collection ends (tests/typing/conftest.py)."""

from __future__ import annotations

import subprocess


def test_scheduler_package_passes_mypy_strict(mypy_run: subprocess.Popen[str]) -> None:
    output, _ = mypy_run.communicate(timeout=600)
    assert mypy_run.returncode == 0, output
