"""``kube-py-scheduler run``: the daemon, against a cluster or (``--sandbox``) a sandbox.

The ``--sandbox`` wiring lives here, in the CLI layer, not in the daemon: it starts the
embedded sandbox API server in a thread, writes its kubeconfig, creates the demo workload,
and then runs the same ``App`` as against a cluster, pointed at the sandbox's kubeconfig.
The daemon (``scheduler.app`` and below) never imports the sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING

from scheduler.cli.common import PROG, Command, print_error
from scheduler.exit_codes import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:  # the daemon is imported when the command runs, not for --help
    from scheduler.app import App, AppOptions
    from scheduler.config.types import KubeSchedulerConfiguration
    from scheduler.config.features import FeatureGates


def add_arguments(run: argparse.ArgumentParser) -> None:
    from scheduler.server import add_serving_flags

    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then "
                     "$KUBECONFIG, then ~/.kube/config)")
    run.add_argument("--context", help="kubeconfig context to use")
    run.add_argument("--config", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)"
                     " YAML file")
    run.add_argument("--sandbox", action="store_true",
                     help="start the embedded sandbox API server in this process, create a "
                     "small demo cluster and schedule against it")
    run.add_argument("--nodes", type=int, default=4,
                     help="with --sandbox: number of simulated nodes (default %(default)s)")
    run.add_argument("--demo-pods", type=int, default=12,
                     help="with --sandbox: demo pods to create (default %(default)s)")
    run.add_argument("--dra-devices", default="gpu=2:nodes=1", metavar="KIND=COUNT[:KEY=VALUE...]",
                     help="with --sandbox: the simulated DRA driver's devices, e.g. gpu=8 or "
                     "gpu=4:memory=40Gi:nodes=2 ('' for none; default %(default)s)")
    run.add_argument("--sandbox-kubeconfig-out", default=None,
                     help="with --sandbox: where to write the sandbox kubeconfig for kubectl "
                     "(default: a file in the temp directory, printed at start)")
    add_serving_flags(run)
    run.add_argument("--leader-elect", choices=("true", "false"), default=None,
                     help="override leaderElection.leaderElect from the config file")
    run.add_argument("--feature-gates", default="", metavar="NAME=BOOL,...",
                     help="kube-scheduler's feature gates by upstream's names, e.g. "
                     "'NodeDeclaredFeatures=true' (GA gates are locked; see docs/parity.md)")
    run.add_argument("--stop-grace-seconds", type=float, default=10.0,
                     help="on SIGTERM, how long in-flight bindings may finish "
                     "(default %(default)s)")
    add_event_process_flag(run)
    add_write_pipeline_flag(run)


def add_write_pipeline_flag(parser: argparse.ArgumentParser) -> None:
    """--write-pipeline (the bench has its own, off by default as here)."""
    parser.add_argument(
        "--write-pipeline", type=int, default=1, metavar="N",
        help="write up to N API writes made at once (Binding and Event POSTs) pipelined on "
        "one HTTP/1.1 connection, in one send; 1 (default, off) sends each on a "
        "connection of its own. Fewer system calls on both sides; but an API server that "
        "answers a connection's requests one after the other (kube-apiserver over "
        "HTTP/1.1) then serves them one after the other")


def add_event_process_flag(parser: argparse.ArgumentParser) -> None:
    """--event-process, for run and bench."""
    parser.add_argument("--event-process", choices=("auto", "on", "off"), default="auto",
                        help="write Kubernetes Events from a child process, on a second core: "
                        "auto (default) when this process may use two CPUs or more (its "
                        "affinity and its cgroup's cpu.max)")


def load_config(path: str | None) -> tuple[KubeSchedulerConfiguration, str]:
    """(--config's configuration or the built-in default, its source name); StartupError
    (exit 2) when the file is broken."""
    from scheduler.app import StartupError
    from scheduler.config.defaults import shipped_config
    from scheduler.config.errors import ConfigError
    from scheduler.config.load import load_config_file

    try:
        config = load_config_file(path) if path else shipped_config()
    except ConfigError as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        raise StartupError(f"--config: cannot read {path!r}: {exc.strerror}") from exc
    return config, path or "<built-in default>"


def options_from_args(args: argparse.Namespace) -> AppOptions:
    """The daemon's options from the flags; StartupError (exit 2) for anything wrong."""
    from scheduler.app import AppOptions, StartupError
    from scheduler.server import ServingError, serving_options_from_args

    config, source = load_config(args.config)
    if args.leader_elect is not None:
        config.leader_election.leader_elect = args.leader_elect == "true"
    try:
        serving = serving_options_from_args(args, sandbox=args.sandbox)
    except ServingError as exc:
        raise StartupError(str(exc)) from exc
    if args.sandbox and args.nodes < 0:
        raise StartupError(f"--nodes: must be >= 0, got {args.nodes}")
    if args.sandbox and args.demo_pods < 0:
        raise StartupError(f"--demo-pods: must be >= 0, got {args.demo_pods}")
    if args.write_pipeline < 1:
        raise StartupError(f"--write-pipeline: must be >= 1, got {args.write_pipeline}")
    if args.stop_grace_seconds < 0:
        raise StartupError("--stop-grace-seconds: must be >= 0")
    if args.sandbox and args.dra_devices:
        from scheduler.sandbox.dradriver import parse_device_kinds

        try:
            parse_device_kinds(args.dra_devices)
        except ValueError as exc:
            raise StartupError(f"--dra-devices: {exc}") from exc
    return AppOptions(
        config=config,
        config_source=source,
        kubeconfig=args.kubeconfig,
        context=args.context,
        serving=serving,
        stop_grace_seconds=args.stop_grace_seconds,
        event_process=args.event_process,
        write_pipeline=args.write_pipeline,
    )


def apply_feature_gates(gates: FeatureGates) -> None:
    """Hand the gates to the modules below the config layer that read them (objects cannot
    import config): the Lt/Gt toleration operators, the pod-level resize report."""
    from scheduler.objects.pod import set_pod_level_resources_resize
    from scheduler.objects.taints import set_comparison_operators

    set_comparison_operators(gates.enabled("TaintTolerationComparisonOperators"))
    set_pod_level_resources_resize(gates.enabled("InPlacePodLevelResourcesVerticalScaling"))


def handle(args: argparse.Namespace) -> int:
    from scheduler.app import App, StartupError
    from scheduler.cli.common import setup_logging
    from scheduler.config.features import DEFAULT as FEATURE_GATES
    from scheduler.config.features import FeatureGateError

    setup_logging(args)
    try:
        FEATURE_GATES.set(args.feature_gates)
    except FeatureGateError as exc:
        print(f"{PROG}: --feature-gates: {exc}", file=sys.stderr)
        return EXIT_USAGE
    apply_feature_gates(FEATURE_GATES)
    try:
        options = options_from_args(args)
        app = App(options)
        app.prepare()
    except StartupError as exc:
        print_error(exc)
        return EXIT_USAGE

    async def _main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, app.request_stop)
        if not args.sandbox:
            return await app.run()
        return await _run_on_sandbox(app, args)

    try:
        return asyncio.run(_main())
    except KeyboardInterrupt:
        return EXIT_OK


def demo_gpu_pods(dra_devices: str, nodes: int) -> int:
    """One GPU pod more than the simulated driver's GPUs, so one waits (none without GPUs, or
    with more than 8: the demo stays small)."""
    from scheduler.sandbox.dradriver import parse_device_kinds

    gpu = next((k for k in parse_device_kinds(dra_devices) if k.name == "gpu"), None) if dra_devices else None
    if gpu is None:
        return 0
    gpus = gpu.count * min(nodes, gpu.nodes if gpu.nodes is not None else nodes)
    return gpus + 1 if 0 < gpus <= 8 else 0


async def _run_on_sandbox(app: App, args: argparse.Namespace) -> int:
    """Start the sandbox, create the demo workload, run the daemon against it, stop it."""
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.demo import create_demo_workload
    from scheduler.sandbox import Sandbox

    sandbox = Sandbox.start_in_thread(nodes=args.nodes, scheduler_prereqs=True, dra_devices=args.dra_devices)
    # One kubeconfig per sandbox (its own default path unless one is given), so a second
    # sandbox never overwrites the first one's.
    path = str(sandbox.write_kubeconfig(args.sandbox_kubeconfig_out))
    try:
        print(f"sandbox API server at {sandbox.url}", flush=True)
        print(f"  export KUBECONFIG={path}", flush=True)
        print("  kubectl get pods -o wide -w", flush=True)
        async with ApiClient(load_connection(kubeconfig=path), qps=0) as client:
            await create_demo_workload(
                client, pods=args.demo_pods, gpu_pods=demo_gpu_pods(args.dra_devices, args.nodes),
                scheduler_name=app.options.config.profiles[0].scheduler_name,
            )
        app.options.kubeconfig = path
        app.options.context = None
        return await app.run()
    finally:
        sandbox.stop()  # also removes a kubeconfig it wrote at its own default path


COMMAND = Command(
    name="run",
    help="run the scheduler against a cluster (or an embedded sandbox with --sandbox)",
    description="Run kube-py-scheduler. Pods opt in with spec.schedulerName. Flags without a "
    "subcommand mean `run`.",
    add_arguments=add_arguments,
    handle=handle,
)
