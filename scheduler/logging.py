"""structlog setup: JSON lines for production, a readable console format for people.

Everything logs through ``structlog.get_logger(__name__)`` with pod/node context bound as
keys, so a log pipeline can filter one pod's life across the queue, the cycle and binding.
"""

from __future__ import annotations

import logging
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure_logging(*, fmt: str = "console", level: str = "info") -> None:
    """Configure structlog and the stdlib root logger (aiohttp and kopf log through it)."""
    if fmt not in ("json", "console"):
        raise ValueError(f"--log-format: must be 'json' or 'console', got {fmt!r}")
    if level.lower() not in LEVELS:
        raise ValueError(f"--log-level: must be one of {', '.join(LEVELS)}, got {level!r}")
    numeric = getattr(logging, level.upper())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)
