"""``kube-py-scheduler soak``: hours, not minutes, of a seeded changing mix against real
scheduler replicas, with invariants checked continuously.

A sandbox process (with the DRA driver) and ``--replicas`` scheduler processes (``run``,
leader election on) run while the mix (``mix.py``) scales Deployments, runs Jobs, creates
gangs (one that only partly fits for a while), pods with ResourceClaimTemplates and PVCs,
preemptors, adds/cordons/taints/removes nodes, drops watches, compacts history (410s),
injects API errors and latency, and kills, pauses or stops the leader.  The checker
(``checker.py``, invariants in ``invariants.py``) watches the sandbox over HTTP and reads
the replicas' logs, metrics and ``/proc``; the first violation stops the soak with its
evidence and exit code 1.  ``report.py`` prints the summary and writes the JSON and PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys

from scheduler.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

__all__ = ["add_arguments", "parse_duration", "run"]

_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``2m``, ``1h``, ``1h30m`` -> seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smh])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"a duration like 90s, 2m or 1h, got {text!r}")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"a positive duration, got {text!r}")
    return seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``kube-py-scheduler soak`` (the CLI layer owns the parser)."""
    p.add_argument("--duration", type=parse_duration, default=parse_duration("2m"),
                   help="how long to run: 90s, 2m, 1h (default 2m)")
    p.add_argument("--seed", type=int, default=1, help="seed of the mix (default %(default)s)")
    p.add_argument("--nodes", type=int, default=10,
                   help="base nodes of the sandbox, never removed (default %(default)s)")
    p.add_argument("--replicas", type=int, default=2,
                   help="scheduler replicas with leader election (default %(default)s)")
    p.add_argument("--plot", metavar="PATH", default=None,
                   help="write RSS, throughput, pending pods and attempts over time as a PNG "
                        "(default: no plot)")
    p.add_argument("--report", metavar="PATH", default=None,
                   help="write the summary, timeline and violations as JSON (default: none)")
    p.add_argument("--memory-every", metavar="DURATION", type=parse_duration, default=None,
                   help="every DURATION, write each replica's /debug/memory (objects per "
                        "type and their growth; allocation sites with --tracemalloc) to "
                        "memory/ in the logs directory (default: never)")
    p.add_argument("--tracemalloc", metavar="FRAMES", type=int, default=0,
                   help="with --memory-every: the first report of each replica starts "
                        "tracemalloc with FRAMES frames per allocation, so that the next "
                        "ones list the allocation sites that grew since (the replica runs "
                        "slower and larger; default 0: off)")


def run(args: argparse.Namespace) -> int:
    """Run the soak with parsed flags (logging is the caller's): exit 0 with no violation,
    1 with one (its evidence printed and in the report), 2 for bad flags."""
    if getattr(args, "tracemalloc", 0) < 0:
        print("kube-py-scheduler soak: --tracemalloc must be 0 (off) or more frames",
              file=sys.stderr)
        return EXIT_USAGE
    if args.nodes < 2 or not 1 <= args.replicas <= 3:
        print("kube-py-scheduler soak: --nodes must be at least 2 and --replicas 1 to 3",
              file=sys.stderr)
        return EXIT_USAGE
    from scheduler.soak.report import format_summary, plot, write_report
    from scheduler.soak.run import run_soak

    result = asyncio.run(run_soak(args, out=sys.stdout))
    print(format_summary(result), flush=True)
    if args.report:
        write_report(result, args.report)
    if args.plot:
        plot(result, args.plot)
    return EXIT_FAILURE if result["violations"] else EXIT_OK
