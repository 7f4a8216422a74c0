"""``kube-py-scheduler bench``: scheduler throughput against the sandbox, with its ceiling.

One run measures, against the same sandbox process (on the other core):

1. the ceiling: binding POSTs from 32 concurrent connections with no scheduling at all (our
   aiohttp client, and the official ``kubernetes.aio`` client for reference), and the same
   with what a kube-scheduler-like scheduler also asks of the server per pod (the
   ``Scheduled`` event POST, a pod watch open): "binding + event", the ceiling every
   scheduler figure is divided by;
2. unless ``--no-floor``, the daemon's floor: the same wiring with a profile that has no
   Filter or Score plugins, on as many plain pods;
3. the scheduler on the workload, measured as upstream's scheduler_perf does: existing pods
   bound and gated pods gated first; the real scheduler (the daemon's own wiring, in this
   process) starts and syncs; then a creator process (``creator.py``) creates the measured
   pods while it runs.  Reported: pods from the first creation to the last bind, upstream's
   SchedulingThroughput average of 1 s samples (``throughput.py``; the figure upstream's
   CI floors apply to), the sync-inclusive rate, each cycle's latency, this process's CPU
   time and peak RSS.

Workloads are upstream scheduler_perf's shapes by name (upstream's CI floor for the shape at
5000 nodes is printed beside our figure) plus ``gang`` and the bench's older shapes.
``--curve 500,1000,...`` runs the workload once per node count, each in its own process, and
prints a table (``--plot FILE`` draws it; matplotlib is the optional ``bench`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from scheduler.bench.report import curve_table, format_result, plot_curve
from scheduler.bench.workloads import WORKLOADS
from scheduler.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

__all__ = ["WORKLOADS", "add_arguments", "build_parser", "main", "run"]


def _node_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated node counts, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"positive node counts, got {text!r}")
    return counts


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``kube-py-scheduler bench`` (the CLI layer owns the parser)."""
    p.epilog = "workloads: " + "; ".join(
        f"{w.name}" + (f" (upstream floor {w.upstream_floor:g} pods/s)"
                       if w.upstream_floor else "")
        for w in WORKLOADS.values())
    p.add_argument("--nodes", type=int, default=1000,
                   help="nodes in the sandbox (default %(default)s)")
    p.add_argument("--pods", type=int, default=0,
                   help="measured pods (default: the workload's upstream count)")
    p.add_argument("--existing", type=int, default=None,
                   help="pods bound before the measurement (default: the workload's "
                        "upstream count, scaled to --nodes)")
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="SchedulingBasic",
                   help="upstream scheduler_perf shape or one of ours (default %(default)s)")
    p.add_argument("--gang-size", type=int, default=0,
                   help="gang workload: pods per PodGroup (default 8)")
    p.add_argument("--node-cpu", default="", help="node CPU (default: the workload's)")
    p.add_argument("--node-memory", default="",
                   help="node memory (default: the workload's)")
    p.add_argument("--concurrency", type=int, default=32,
                   help="connections for creating pods and for the ceiling measurements "
                        "(default %(default)s)")
    p.add_argument("--raw-binds", type=int, default=3000,
                   help="pods bound in each ceiling measurement, at most the measured pods "
                        "(default %(default)s)")
    p.add_argument("--qps", type=float, default=0.0,
                   help="scheduler client QPS; 0 = unlimited, to measure the scheduler "
                        "itself (default %(default)s)")
    p.add_argument("--config", default=None,
                   help="KubeSchedulerConfiguration file for the scheduler "
                        "(default: upstream's default plugins)")
    p.add_argument("--no-floor", dest="floor", action="store_false",
                   help="skip the floor run, the daemon with no Filter/Score plugins "
                        "(default: run it)")
    p.add_argument("--no-batching", dest="batching", action="store_false",
                   help="turn opportunistic batching off, for A/B comparisons "
                        "(default: on)")
    p.add_argument("--curve", type=_node_counts, metavar="N,N,...", default=None,
                   help="run once per node count (each in its own process) and print the "
                        "scaling curve (default: one run at --nodes)")
    p.add_argument("--plot", metavar="FILE", default=None,
                   help="with --curve: write the curve as a PNG (default: no plot)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for the measured pods to be bound "
                        "(default %(default)s)")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar (default: a bar when stderr is a terminal)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (default: a table)")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                   help="the event loop the scheduler runs on (default %(default)s)")
    p.add_argument("--event-process", choices=("auto", "on", "off"), default="off",
                   help="write Kubernetes Events from a child process, as the daemon's "
                        "--event-process (whose default is auto); the bench's default, "
                        "%(default)s, keeps its figures comparable with earlier runs (here "
                        "the sandbox shares the scheduler's cores)")
    p.add_argument("--write-pipeline", type=int, default=1, metavar="N",
                   help="the scheduler's API writes made at once pipelined up to N on one "
                        "connection, in one send, as the daemon's --write-pipeline; "
                        "default %(default)s (off), as the daemon's")


def build_parser() -> argparse.ArgumentParser:
    """A standalone parser (``python -m scheduler.bench`` style use and tests)."""
    p = argparse.ArgumentParser(
        prog="kube-py-scheduler bench", description=(__doc__ or "").split("\n")[0])
    add_arguments(p)
    return p


def _point_argv(args: argparse.Namespace, nodes: int) -> list[str]:
    argv = [sys.executable, "-m", "scheduler", "bench", "--json", "--nodes", str(nodes),
            "--workload", args.workload, "--concurrency", str(args.concurrency),
            "--raw-binds", str(args.raw_binds), "--qps", str(args.qps),
            "--timeout", str(args.timeout), "--event-process", args.event_process,
            "--write-pipeline", str(args.write_pipeline)]
    for flag, value in (("--pods", args.pods), ("--gang-size", args.gang_size), ("--existing", args.existing),
                        ("--node-cpu", args.node_cpu), ("--node-memory", args.node_memory),
                        ("--config", args.config)):
        if value:
            argv += [flag, str(value)]
    if not args.floor:
        argv.append("--no-floor")
    if not args.progress:
        argv.append("--no-progress")
    if not args.batching:
        argv.append("--no-batching")
    return argv


def _run_curve(args: argparse.Namespace) -> int:
    results: list[dict[str, Any]] = []
    for nodes in args.curve:
        # Its own process per point: peak RSS and the heap are those of that size alone.
        done = subprocess.run(_point_argv(args, nodes), stdout=subprocess.PIPE, text=True)
        if done.returncode != 0 or not done.stdout.strip():
            print(f"kube-py-scheduler bench: the {nodes}-node run failed "
                  f"(exit {done.returncode})", file=sys.stderr)
            return EXIT_FAILURE
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    if args.plot:
        plot_curve(results, args.plot,
                   title=f"{args.workload}: kube-py-scheduler on 2 cores, by cluster size")
    if args.json:
        print(json.dumps({"curve": results}))
    else:
        print(curve_table(results))
    return EXIT_OK if all(r["bound"] == r["pods"] for r in results) else EXIT_FAILURE


def run(args: argparse.Namespace) -> int:
    """Run the benchmark with parsed flags (logging is set up by the caller); exit 0 when
    every measured pod was bound, 2 for bad flags."""
    if args.nodes < 1 or args.pods < 0 or (args.existing is not None and args.existing < 0):
        print("kube-py-scheduler bench: --nodes must be positive, --pods and --existing "
              "not negative", file=sys.stderr)
        return EXIT_USAGE
    if args.write_pipeline < 1:
        print(f"kube-py-scheduler bench: --write-pipeline must be at least 1, got "
              f"{args.write_pipeline}", file=sys.stderr)
        return EXIT_USAGE
    if args.plot and not args.curve:
        print("kube-py-scheduler bench: --plot needs --curve", file=sys.stderr)
        return EXIT_USAGE
    if args.curve:
        return _run_curve(args)
    from scheduler.bench.machine import Machine
    from scheduler.bench.run import run_point

    # Named first, so a figure copied from the terminal keeps its machine.
    print(f"kube-py-scheduler bench: {Machine.current().line()}", file=sys.stderr)
    factory = None
    if args.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(run_point(args, WORKLOADS[args.workload]))
    result["event_loop"] = args.loop
    print(json.dumps(result) if args.json else format_result(result))
    return EXIT_OK if result["bound"] == result["pods"] else EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    from scheduler.logging import configure_logging

    args = build_parser().parse_args(list(argv) if argv is not None else None)
    configure_logging(fmt="console", level="warning")
    return run(args)
