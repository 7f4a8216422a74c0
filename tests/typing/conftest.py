"""``mypy --strict`` starts as soon as the session knows it will run the mypy test, so that
its cold run (~90 s on 2 cores, nothing cached in CI) goes on beside the tests collected
before it instead of after them; the test then waits for its result. The process runs at a
lower priority (nice 5) so the tests beside it keep theirs, and is killed if the session
ends without waiting for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MYPY = pytest.StashKey[subprocess.Popen[str]]()


def start_mypy() -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: os.nice(5))


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any(item.path.name == "test_mypy_strict.py" for item in session.items):
        session.config.stash[MYPY] = start_mypy()


def pytest_sessionfinish(session: pytest.Session) -> None:
    proc = session.config.stash.get(MYPY, None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture
def mypy_run(request: pytest.FixtureRequest) -> subprocess.Popen[str]:
    """The session's mypy process (started now if collection did not start it)."""
    proc = request.config.stash.get(MYPY, None)
    if proc is None:
        proc = request.config.stash[MYPY] = start_mypy()
    return proc
