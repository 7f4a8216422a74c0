"""``kube-py-scheduler bench``: the benchmark tool (``scheduler.bench``) drives the daemon's
public entry against sandbox processes; the daemon never imports it."""

from __future__ import annotations

import argparse

from scheduler.cli.common import Command, setup_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from scheduler.bench import add_arguments as bench_arguments

    bench_arguments(parser)


def handle(args: argparse.Namespace) -> int:
    from scheduler.bench import run

    setup_logging(args)
    return run(args)


COMMAND = Command(
    name="bench",
    help="benchmark the scheduler against the sandbox",
    description="Scheduler throughput against a sandbox process, beside the raw binding rate "
    "of the same API server (the ceiling) and the daemon's floor.",
    add_arguments=add_arguments,
    handle=handle,
    default_log_level="warning",
)
