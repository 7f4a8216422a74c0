"""structlog setup: JSON lines for production, a readable console format for people.

Everything logs through ``structlog.get_logger(__name__)`` with pod/node context bound as
keys, so a log pipeline can filter one pod's life across the queue, the cycle and binding.
Libraries that log through the standard library (kopf, aiohttp, asyncio) are routed through
the same processors and renderer, so a JSON log holds only JSON lines: a log pipeline must
never meet a line it cannot parse.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")

# Set to "0" to keep structlog from caching configured loggers (the test suite does: a test
# that configures logging in-process must not freeze every module's logger for later tests,
# which then capture logs with ``structlog.testing.capture_logs``). Caching is on by default:
# it saves a lookup per log call in the daemon.
CACHE_ENV = "KUBE_PY_SCHEDULER_LOG_CACHE"

# Third-party loggers stay at WARNING unless the user asks for debug: their INFO lines are
# about their own machinery (kopf's handler bookkeeping, aiohttp's access log).
_LIBRARY_FLOOR = logging.WARNING


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at write time, not at configuration time, so a
    process (or a test) that swaps stderr after configuring logging never writes to a closed
    stream."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def parse_level(level: str) -> int:
    """``--log-level`` in any case ("debug", "DEBUG") -> the numeric level."""
    if not isinstance(level, str) or level.lower() not in LEVELS:
        raise ValueError(f"--log-level: must be one of {', '.join(LEVELS)}, got {level!r}")
    return int(getattr(logging, level.upper()))


class LevelGate:
    """Whether configure_logging's level writes a debug line, read as an attribute.

    A module's ``log = structlog.get_logger(__name__)`` is a lazy proxy: dropping a filtered
    ``log.debug(...)`` still costs three Python calls (the proxy's ``__getattr__``, its
    ``bind`` and the no-op method). A hot path (one line per pod) asks ``if
    DEBUG.enabled:`` first: an attribute read when the line is dropped, the same line when
    it is written. True until configure_logging sets a level (structlog's own default
    configuration writes every level)."""

    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True


DEBUG = LevelGate()

# The (format, level) configure_logging was last called with: a child process of the
# daemon (scheduler.client.event_process) configures its logging the same way.
_current: tuple[str, str] | None = None


def current_settings() -> tuple[str, str] | None:
    """(fmt, level) of the last configure_logging, None when it was never called."""
    return _current


def configure_logging(*, fmt: str = "console", level: str = "info") -> None:
    """Configure structlog and the stdlib root logger (aiohttp and kopf log through it)."""
    global _current
    if fmt not in ("json", "console"):
        raise ValueError(f"--log-format: must be 'json' or 'console', got {fmt!r}")
    numeric = parse_level(level)
    _current = (fmt, level)
    DEBUG.enabled = numeric <= logging.DEBUG
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=os.environ.get(CACHE_ENV, "1") != "0",
    )
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    ))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric if numeric <= logging.DEBUG else max(numeric, _LIBRARY_FLOOR))
