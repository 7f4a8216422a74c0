"""--event-process: the flag, and what build_components wires for each answer."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.app import build_components
from scheduler.cli.main import build_parser
from scheduler.cli.run import options_from_args
from scheduler.client.connection import ConnectionConfig, CredentialSource
from scheduler.client.event_process import RemoteEventRecorder
from scheduler.client.events import EventRecorder
from scheduler.config.defaults import default_config
from scheduler.metrics import SchedulerMetrics


@pytest.mark.parametrize(("flags", "expected"), [
    ([], "auto"), (["--event-process", "on"], "on"), (["--event-process", "off"], "off"),
])
def test_the_flag_reaches_the_options(flags: list[str], expected: str) -> None:
    args = build_parser().parse_args(["run", *flags])
    assert options_from_args(args).event_process == expected


def test_an_unknown_answer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--event-process", "yes"])
    assert "--event-process: invalid choice: 'yes'" in capsys.readouterr().err


class _InMemoryPlugin(CredentialSource):
    """A credential held in memory only (as an exec plugin's): it cannot cross to a child."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def authorization(self) -> str | None:
        return "Bearer x"


@pytest.mark.parametrize(("mode", "credentials", "remote"), [
    ("on", None, True),
    ("off", None, False),
    ("on", _InMemoryPlugin(), False),
])
def test_build_components_wires_the_recorders(mode: str, credentials: Any, remote: bool) -> None:
    conn = ConnectionConfig(host="http://127.0.0.1:9")
    if credentials is not None:
        conn.credentials = credentials
    with capture_logs() as logs:
        parts = build_components(default_config(), conn, metrics=SchedulerMetrics(),
                                 event_process=mode)
    assert parts.recorders
    assert all(isinstance(r, RemoteEventRecorder if remote else EventRecorder)
               for r in parts.recorders)
    assert (parts.event_process is not None) is remote
    warned = [e for e in logs if e["event"].startswith("the event process cannot use")]
    assert bool(warned) is (mode == "on" and not remote)
