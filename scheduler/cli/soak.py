"""``kube-py-scheduler soak``: the soak tool (``scheduler.soak``) runs scheduler replicas
against a sandbox process under a seeded changing mix and checks invariants; the daemon
never imports it."""

from __future__ import annotations

import argparse

from scheduler.cli.common import Command, setup_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from scheduler.soak import add_arguments as soak_arguments

    soak_arguments(parser)


def handle(args: argparse.Namespace) -> int:
    from scheduler.soak import run

    setup_logging(args)
    return run(args)


COMMAND = Command(
    name="soak",
    help="run the scheduler against the sandbox for a while under a changing mix, "
         "checking invariants",
    description="A seeded soak: a sandbox process, scheduler replicas with leader election, "
    "a mix of workloads, node churn, API faults and leader changes; invariants (no "
    "overcommit, no double or standby binding, bounded pending time and attempts, cache "
    "equal to the cluster, flat RSS, idle CPU, clean logs) checked continuously.",
    add_arguments=add_arguments,
    handle=handle,
    default_log_level="warning",
)
