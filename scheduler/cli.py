"""Command line: ``kube-py-scheduler run | sandbox | bench``.

Everything that can be wrong with the configuration (flags, the config file, plugin args) is
reported before the first request reaches the cluster, with exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from scheduler import __version__

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run",
        help="run the scheduler against a cluster (or an embedded sandbox with --sandbox)",
        description="Run kube-py-scheduler. Pods opt in with spec.schedulerName.",
    )
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then "
                     "$KUBECONFIG, then ~/.kube/config)")
    run.add_argument("--context", help="kubeconfig context to use")
    run.add_argument("--config", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)"
                     " YAML file")
    run.add_argument("--metrics-bind-address", default="0.0.0.0:10259",
                     help="host:port serving /metrics, /healthz, /livez, /readyz "
                     "(default %(default)s)")
    run.add_argument("--log-format", choices=("json", "console"), default="console")
    run.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                     default="info")
    run.add_argument("--sandbox", action="store_true",
                     help="start the embedded sandbox API server in this process, create a "
                     "small demo cluster and schedule against it")
    run.add_argument("--nodes", type=int, default=4,
                     help="with --sandbox: number of simulated nodes (default %(default)s)")
    run.add_argument("--demo-pods", type=int, default=12,
                     help="with --sandbox: demo pods to create (default %(default)s)")
    run.add_argument("--sandbox-kubeconfig-out", default=None,
                     help="with --sandbox: where to write the sandbox kubeconfig for kubectl "
                     "(default: a file in the temp directory, printed at start)")
    run.add_argument("--tls-cert-file", help="serve /metrics over HTTPS with this certificate")
    run.add_argument("--tls-private-key-file", help="private key for --tls-cert-file")
    run.add_argument("--authentication-token-webhook", action="store_true",
                     help="require bearer tokens on /metrics, checked with TokenReview and "
                     "SubjectAccessReview (get on /metrics)")
    run.add_argument("--leader-elect", choices=("true", "false"), default=None,
                     help="override leaderElection.leaderElect from the config file")
    run.add_argument("--stop-grace-seconds", type=float, default=10.0,
                     help="on SIGTERM, how long in-flight bindings may finish "
                     "(default %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kube-py-scheduler",
        description="A secondary Kubernetes scheduler with kube-scheduler semantics.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run_parser(sub)
    sub.add_parser("sandbox", help="run the sandbox API server (see `sandbox --help`)",
                   add_help=False)
    sub.add_parser("bench", help="benchmark the scheduler against the sandbox "
                   "(see `bench --help`)", add_help=False)
    sub.add_parser("podgroup-controller", help="run only the PodGroup status controller",
                   add_help=False)
    sub.add_parser("explain", help="why is this pod Pending, and where would it go? "
                   "(see `explain --help`)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Subcommands with their own parsers get the rest of the line untouched.
    if args_list and args_list[0] == "sandbox":
        from scheduler.sandbox.cli import main as sandbox_main

        return sandbox_main(args_list[1:])
    if args_list and args_list[0] == "bench":
        from scheduler.bench import main as bench_main

        return bench_main(args_list[1:])
    if args_list and args_list[0] == "podgroup-controller":
        from scheduler.plugins.coscheduling.controller import main as controller_main

        return controller_main(args_list[1:])
    if args_list and args_list[0] == "explain":
        from scheduler.explain.cli import main as explain_main

        return explain_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list or ["run"])
    if args.command in (None, "run"):
        return _run(args)
    parser.print_help()
    return EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    from scheduler.app import App, AppOptions, StartupError
    from scheduler.logging import configure_logging

    configure_logging(fmt=args.log_format, level=args.log_level)
    try:
        options = AppOptions.from_args(args)
        app = App(options)
        app.prepare()
    except StartupError as exc:
        print(f"kube-py-scheduler: {exc}", file=sys.stderr)
        return EXIT_USAGE

    async def _main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, app.request_stop)
        return await app.run()

    try:
        return asyncio.run(_main())
    except KeyboardInterrupt:
        return EXIT_OK
