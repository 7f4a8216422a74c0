"""Integration tests: quiet logs (the daemon's debug logs would drown pytest's output)."""

from __future__ import annotations

import pytest

from scheduler.logging import configure_logging


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> None:
    configure_logging(fmt="console", level="warning")
