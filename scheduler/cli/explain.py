"""``kube-py-scheduler explain POD``: why is this pod Pending, and where would it go?

The command's logic is ``scheduler.explain``; this is its place in the command line.
"""

from __future__ import annotations

import argparse
import asyncio

from scheduler.cli.common import Command, setup_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from scheduler.explain.cli import add_arguments as explain_arguments

    explain_arguments(parser)


def handle(args: argparse.Namespace) -> int:
    from scheduler.explain.cli import explain_and_print

    setup_logging(args)  # logs go to stderr; stdout is the answer (maybe JSON or YAML)
    return asyncio.run(explain_and_print(args))


COMMAND = Command(
    name="explain",
    help="why is this pod Pending, and where would it go?",
    description="Run a pod's profile over every node of the cluster, read-only: each node's "
    "Filter verdict, the scores of the feasible nodes, the node the scheduler would pick, or "
    "the FailedScheduling line it would post and what preemption would do.",
    add_arguments=add_arguments,
    handle=handle,
    default_log_level="warning",
)
