"""``kube-py-scheduler sandbox``: the sandbox API server alone (``scheduler.sandbox.cli``)."""

from __future__ import annotations

import argparse
import logging

from scheduler.cli.common import Command, setup_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from scheduler.sandbox.cli import add_arguments as sandbox_arguments

    sandbox_arguments(parser)


def handle(args: argparse.Namespace) -> int:
    from scheduler.sandbox.cli import run

    setup_logging(args)
    # The sandbox logs through the stdlib logger "scheduler.sandbox", at the chosen level.
    logging.getLogger("scheduler.sandbox").setLevel(args.log_level.upper())
    return run(args)


COMMAND = Command(
    name="sandbox",
    help="run the sandbox API server (an in-memory kube-apiserver stand-in)",
    description="In-memory Kubernetes API server for trying and testing the scheduler. "
    "Prints one `sandbox ready at URL` line once it accepts requests.",
    add_arguments=add_arguments,
    handle=handle,
    default_log_level="warning",
)
