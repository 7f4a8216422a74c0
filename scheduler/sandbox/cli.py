"""``python -m scheduler.sandbox`` / ``kube-py-scheduler sandbox``: run a sandbox until signalled.

Prints exactly one ``sandbox ready at <url>`` line on stdout once it accepts requests (tests
and scripts wait for it), exits 0 on SIGTERM/SIGINT and 2 on bad flags or a port it cannot listen on.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from scheduler.exit_codes import EXIT_OK, EXIT_USAGE

from .auth import parse_allow, parse_user
from .server import Sandbox
from .validation import parse_quantity


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def _quantity(s: str) -> str:
    q = parse_quantity(s)
    if q is None or q < 0:
        raise argparse.ArgumentTypeError(f"not a non-negative resource quantity: {s!r}")
    return s


def _labels(s: str) -> dict[str, str]:
    from scheduler.objects.labels import validate_label_key, validate_label_value

    out: dict[str, str] = {}
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        k, eq, v = part.partition("=")
        if not eq:
            raise argparse.ArgumentTypeError(f"label {part!r} is not key=value")
        err = validate_label_key(k) or validate_label_value(v)
        if err:
            raise argparse.ArgumentTypeError(f"label {part!r}: {err}")
        out[k] = v
    return out


def _dra_devices(s: str) -> str:
    from .dradriver import parse_device_kinds

    try:
        parse_device_kinds(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return s


def _auth_user(s: str) -> tuple[str, tuple[str, list[str]]]:
    try:
        return parse_user(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _auth_allow(s: str) -> tuple[str, str, str]:
    try:
        return parse_allow(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


DESCRIPTION = "In-memory Kubernetes API server for trying and testing the scheduler."


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m scheduler.sandbox`` (``kube-py-scheduler sandbox`` adds the
    same arguments to its subcommand, with the CLI's common ``--log-level``)."""
    p = argparse.ArgumentParser(prog="python -m scheduler.sandbox", description=DESCRIPTION)
    add_arguments(p)
    p.add_argument("--log-level", default="warning", type=str.lower,
                   choices=["debug", "info", "warning", "error", "critical"])
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_positive_int, default=0, help="port (0 = pick a free one)")
    p.add_argument("--kubeconfig-out", metavar="PATH",
                   help="where to write this sandbox's kubeconfig (default: a per-port file in the temp dir)")
    p.add_argument("--token", help="require 'Authorization: Bearer TOKEN' on every request (serves HTTPS)")
    p.add_argument("--tls", action=argparse.BooleanOptionalAction, default=None,
                   help="serve HTTPS with a CA generated at start (default: on iff --token)")
    p.add_argument("--nodes", type=_positive_int, default=0, help="number of simulated Ready nodes")
    p.add_argument("--node-cpu", type=_quantity, default="32")
    p.add_argument("--node-memory", type=_quantity, default="128Gi")
    p.add_argument("--node-pods", type=_quantity, default="110")
    p.add_argument("--node-labels", type=_labels, default=None, metavar="K=V,K2=V2")
    p.add_argument("--node-topology", action=argparse.BooleanOptionalAction, default=True,
                   help="label nodes with topology.kubernetes.io/zone (zone-a/b/c round robin) "
                        "and region (default on; off: no topology labels, as upstream "
                        "scheduler_perf's node-default template)")
    p.add_argument("--simulate-kubelet", action=argparse.BooleanOptionalAction, default=True,
                   help="bound pods on simulated nodes become Running (default on)")
    p.add_argument("--simulate-controllers", action=argparse.BooleanOptionalAction, default=True,
                   help="run Deployment/ReplicaSet/Job controllers and garbage collection (default on)")
    p.add_argument("--simulate-pv-controller", action=argparse.BooleanOptionalAction, default=True,
                   help="bind and provision PersistentVolumes like the PV controller (default on)")
    p.add_argument("--dra-devices", type=_dra_devices, action="append", default=[],
                   metavar="KIND=COUNT[:KEY=VALUE...]",
                   help="simulated DRA driver: a ResourceSlice per node with COUNT devices of driver "
                        "KIND.example.com and a DeviceClass of that name, e.g. gpu=8 or "
                        "gpu=4:memory=40Gi:model=a100 (repeatable or comma-separated)")
    p.add_argument("--auth-user", type=_auth_user, action="append", default=[], metavar="TOKEN=USERNAME[:G1;G2]",
                   help="a token TokenReview accepts, with its user and groups (repeatable)")
    p.add_argument("--auth-allow", type=_auth_allow, action="append", default=[], metavar="USERNAME:VERB:PATH",
                   help="a SubjectAccessReview rule; '*' wildcards (repeatable)")
    p.add_argument("--scheduler-prereqs", action=argparse.BooleanOptionalAction, default=True,
                   help="create namespace kube-py-scheduler and the PodGroup CRD at start (default on)")
    p.add_argument("--watch-history", type=_positive_int, default=10000,
                   help="events kept per resource type for watch resumption")
    p.add_argument("--max-requests-inflight", type=_positive_int, default=400)
    p.add_argument("--max-mutating-requests-inflight", type=_positive_int, default=200)
    p.add_argument("--bookmark-interval", type=float, default=10.0,
                   help="seconds between watch BOOKMARK events")


class _ListenError(Exception):
    pass


def sandbox_from_args(args: argparse.Namespace) -> Sandbox:
    """The sandbox the parsed command line describes (not started)."""
    return Sandbox(
        host=args.host, port=args.port, token=args.token, tls=args.tls, nodes=args.nodes,
        node_cpu=args.node_cpu, node_memory=args.node_memory, node_pods=args.node_pods,
        node_labels=args.node_labels, node_topology=args.node_topology,
        simulate_kubelet=args.simulate_kubelet,
        watch_history=max(1, args.watch_history),
        max_requests_inflight=max(1, args.max_requests_inflight),
        max_mutating_requests_inflight=max(1, args.max_mutating_requests_inflight),
        bookmark_interval=args.bookmark_interval,
        simulate_pv_controller=args.simulate_pv_controller, simulate_controllers=args.simulate_controllers,
        scheduler_prereqs=args.scheduler_prereqs, dra_devices=",".join(args.dra_devices),
        auth_users=dict(args.auth_user), auth_allow=list(args.auth_allow),
    )


async def _serve(args: argparse.Namespace) -> None:
    sb = sandbox_from_args(args)
    try:
        await sb.start()
    except OSError as e:
        raise _ListenError(e.strerror or str(e)) from None
    # What start-up built (the catalog, the --nodes nodes) lives as long as the process: out of
    # the collector's full passes, which otherwise walk it again and again while requests wait
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        # its own kubeconfig unless one is named: a second sandbox never overwrites the first's
        written = sb.write_kubeconfig(args.kubeconfig_out)
        print(f"sandbox ready at {sb.url}", flush=True)
        print(f"kubeconfig: {written}   (export KUBECONFIG={written})", flush=True)
        await stop.wait()
    finally:
        await sb.stop()  # removes the kubeconfig it wrote at its default path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if isinstance(e.code, int) else 2
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled, with parsed arguments (logging is the caller's)."""
    if args.bookmark_interval <= 0:
        print("error: --bookmark-interval must be > 0", file=sys.stderr)
        return EXIT_USAGE
    try:
        asyncio.run(_serve(args))
    except _ListenError as e:  # e.g. the port is in use: one line, nothing else touched
        print(f"sandbox: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return EXIT_OK
