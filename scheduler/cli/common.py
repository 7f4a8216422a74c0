"""What every subcommand shares: the ``Command`` record and the common flags.

One convention for every subcommand: ``--log-level`` takes lowercase names (any case is
accepted), ``--log-format`` json|console, ``--version``.  A subcommand is a ``Command``:
its flags (``add_arguments``) and its handler, which returns an exit code from
``scheduler.exit_codes``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from scheduler import KUBE_SCHEDULER_RELEASE, __version__
from scheduler.logging import LEVELS, configure_logging

PROG = "kube-py-scheduler"
# `--version`: ours, and the kube-scheduler release whose behaviour we match.
VERSION = f"{PROG} {__version__} (kube-scheduler v{KUBE_SCHEDULER_RELEASE})"


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[argparse.Namespace], int]
    default_log_level: str = "info"


def add_common_options(parser: argparse.ArgumentParser, *, default_log_level: str) -> None:
    group = parser.add_argument_group("common options")
    group.add_argument("--log-level", type=str.lower, choices=LEVELS, default=default_log_level,
                       help="log level, any case (default %(default)s)")
    group.add_argument("--log-format", choices=("json", "console"), default="console",
                       help="log line format (default %(default)s)")
    group.add_argument("--version", action="version", version=VERSION)


def setup_logging(args: argparse.Namespace) -> None:
    configure_logging(fmt=args.log_format, level=args.log_level)


def print_error(error: Exception) -> None:
    """A startup error on stderr, each of its lines prefixed with the program's name (a
    broken config reports all its problems, one per line)."""
    import sys

    for line in str(error).splitlines() or [""]:
        print(f"{PROG}: {line}", file=sys.stderr)
