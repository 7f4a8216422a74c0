"""Logging: every line goes through structlog in the chosen format, stdlib loggers included."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from scheduler.logging import DEBUG, configure_logging, parse_level
from tests.builders import PodBuilder
from tests.unit.queue.helpers import make_queue


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    gate = DEBUG.enabled
    yield
    structlog.reset_defaults()
    DEBUG.enabled = gate
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_json_format_renders_stdlib_records_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(fmt="json", level="info")
    logging.getLogger("kopf.objects").warning("patched %s", "default/pg")
    structlog.get_logger("scheduler.test").info("bound", pod="default/p", node="n1")
    lines = _lines(capsys.readouterr().err)
    records = [json.loads(line) for line in lines]  # each line is one JSON object
    assert records[0]["event"] == "patched default/pg"
    assert records[0]["logger"] == "kopf.objects"
    assert records[0]["level"] == "warning"
    assert records[1] == {**records[1], "event": "bound", "pod": "default/p", "node": "n1"}


def test_library_info_lines_are_dropped_unless_debug(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(fmt="json", level="info")
    logging.getLogger("aiohttp.access").info("GET /metrics 200")
    assert _lines(capsys.readouterr().err) == []
    configure_logging(fmt="json", level="debug")
    logging.getLogger("aiohttp.access").info("GET /metrics 200")
    assert json.loads(_lines(capsys.readouterr().err)[0])["event"] == "GET /metrics 200"


def test_exceptions_from_stdlib_loggers_stay_in_one_json_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(fmt="json", level="info")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("kopf").exception("handler failed")
    (line,) = _lines(capsys.readouterr().err)
    record = json.loads(line)
    assert "RuntimeError: boom" in record["exception"]


@pytest.mark.parametrize(("text", "level"), [
    ("debug", logging.DEBUG), ("INFO", logging.INFO), ("Warning", logging.WARNING),
    ("error", logging.ERROR)])
def test_log_level_accepts_any_case(text: str, level: int) -> None:
    assert parse_level(text) == level


@pytest.mark.parametrize("bad", ["verbose", "", "trace"])
def test_unknown_log_level_names_the_flag(bad: str) -> None:
    with pytest.raises(ValueError, match="--log-level"):
        parse_level(bad)


@pytest.mark.parametrize(("level", "written"), [
    ("debug", True), ("info", False), ("warning", False), ("error", False)])
def test_debug_gate_follows_the_configured_level(
        capsys: pytest.CaptureFixture[str], level: str, written: bool) -> None:
    """The hot paths' ``if DEBUG.enabled:`` drops exactly the lines the level drops, and a
    gated line is written as before when the level is debug."""
    configure_logging(fmt="json", level=level)
    assert DEBUG.enabled is written
    structlog.get_logger("scheduler.test").debug("probe", pod="default/p")
    make_queue().add(PodBuilder("p", "ns1").obj())  # the gated "pod moved to activeQ"
    records = [json.loads(line) for line in _lines(capsys.readouterr().err)]
    events = [(r["event"], r.get("pod")) for r in records]
    if written:
        assert events == [("probe", "default/p"), ("pod moved to activeQ", "ns1/p")]
        assert records[1]["trigger"] == "PodAdd" and records[1]["level"] == "debug"
    else:
        assert events == []
