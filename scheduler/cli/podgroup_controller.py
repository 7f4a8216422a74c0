"""``kube-py-scheduler podgroup-controller``: only the PodGroup status controller.

The controller itself is ``scheduler.controllers.podgroup``; this is its command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from scheduler.cli.common import PROG, Command, setup_logging
from scheduler.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, $KUBECONFIG, "
                             "~/.kube/config)")
    parser.add_argument("--namespace", default=None,
                        help="watch only this namespace (default: all namespaces)")


def handle(args: argparse.Namespace) -> int:
    from scheduler.client.connection import ConfigurationError
    from scheduler.controllers.podgroup import run_controller

    setup_logging(args)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        # kopf's own INFO lines (every handler run) only at debug.
        await run_controller(kubeconfig=args.kubeconfig, namespace=args.namespace, stop=stop,
                             verbose=args.log_level == "debug")

    try:
        asyncio.run(_main())
    except ConfigurationError as exc:
        print(f"{PROG} podgroup-controller: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        print(f"{PROG} podgroup-controller: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


COMMAND = Command(
    name="podgroup-controller",
    help="run only the PodGroup status controller",
    description="Keep PodGroup status (phase, running/succeeded/failed, scheduleStartTime, "
    "occupiedBy) in step with the group's pods.",
    add_arguments=add_arguments,
    handle=handle,
)
