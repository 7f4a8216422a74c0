"""The daemon's life: validate everything, connect, (lead,) schedule, stop through one path.

``App.prepare`` does all the checking that can be done without the cluster (the config file,
plugin args, TLS files), so a broken configuration exits with status 2 before any request.
``App.run`` owns every long-lived task; ``request_stop`` (SIGTERM/SIGINT) and a lost lease both
end in ``_shutdown``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.config.errors import ConfigError
from scheduler.config.load import load_config_file
from scheduler.config.defaults import default_config
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.framework.runtime import Framework, PluginConfigError
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.registry import Registry
from scheduler.server import (
    HealthServer,
    HealthState,
    PreparedServing,
    ServingError,
    ServingOptions,
    prepare_serving,
    serving_options_from_args,
)

log = structlog.get_logger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_LOST_LEASE = 3


SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def own_namespace() -> str:
    """The namespace this process runs in (for the Lease), falling back to kube-system."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE_FILE, encoding="utf-8") as f:
            return f.read().strip() or "kube-system"
    except OSError:
        return "kube-system"


class StartupError(Exception):
    """A configuration problem found before touching the cluster (exit status 2)."""


@dataclass
class AppOptions:
    config: KubeSchedulerConfiguration
    config_source: str
    kubeconfig: str | None
    context: str | None
    serving: ServingOptions
    sandbox: bool = False
    sandbox_nodes: int = 4
    demo_pods: int = 12
    sandbox_kubeconfig_out: str | None = None
    stop_grace_seconds: float = 10.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AppOptions:
        try:
            config = load_config_file(args.config) if args.config else default_config()
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        except OSError as exc:
            raise StartupError(f"--config: cannot read {args.config!r}: {exc.strerror}") from exc
        if args.leader_elect is not None:
            config.leader_election.leader_elect = args.leader_elect == "true"
        try:
            serving = serving_options_from_args(args, sandbox=args.sandbox)
        except ServingError as exc:
            raise StartupError(str(exc)) from exc
        if args.sandbox and args.nodes < 0:
            raise StartupError(f"--nodes: must be >= 0, got {args.nodes}")
        if args.stop_grace_seconds < 0:
            raise StartupError("--stop-grace-seconds: must be >= 0")
        return cls(
            config=config,
            config_source=args.config or "<default config>",
            kubeconfig=args.kubeconfig,
            context=args.context,
            serving=serving,
            sandbox=args.sandbox,
            sandbox_nodes=args.nodes,
            demo_pods=args.demo_pods,
            sandbox_kubeconfig_out=args.sandbox_kubeconfig_out,
            stop_grace_seconds=args.stop_grace_seconds,
        )


def validate_profiles(
    config: KubeSchedulerConfiguration, registry: Registry, *, source: str = "<default config>"
) -> None:
    """Build every profile's plugins once, offline, so bad plugin args fail at startup."""
    from scheduler.offline import offline_handle_kwargs

    for index, profile in enumerate(config.profiles):
        try:
            Framework(profile=profile, registry=registry, **offline_handle_kwargs())
        except PluginConfigError as exc:
            raise StartupError(f"{source}: profiles[{index}]: {exc}") from exc
        except (KeyError, ValueError, TypeError) as exc:
            raise StartupError(
                f"{source}: profiles[{index}] ({profile.scheduler_name}): {exc}"
            ) from exc


# Terminal pods no longer use node resources: the pod informer does not even see them, and a
# pod that finishes is delivered as a delete (as kube-scheduler's informer does).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass
class Components:
    """The connected pieces of a scheduler, built without I/O; ``start``/``aclose`` run them."""

    client: Any
    informers: Any
    recorders: list[Any]
    scheduler: Any

    async def start(self, *, sync_timeout: float | None = None) -> None:
        for recorder in self.recorders:
            recorder.start()
        self.informers.start()
        await self.scheduler.wait_for_sync(sync_timeout)

    async def aclose(self, *, grace_seconds: float = 5.0) -> None:
        await self.scheduler.stop(grace_seconds=grace_seconds)
        await self.informers.stop()
        for recorder in self.recorders:
            await recorder.stop()
        await self.client.close()


def build_components(
    config: KubeSchedulerConfiguration,
    connection: Any,
    *,
    metrics: SchedulerMetrics,
    health: HealthState | None = None,
    registry: Registry | None = None,
) -> Components:
    from scheduler.client.api import ApiClient
    from scheduler.client.events import EventRecorder
    from scheduler.client.informer import InformerFactory
    from scheduler.client.pod_status import update_pod_condition
    from scheduler.scheduler import Scheduler

    client = ApiClient(
        connection, qps=config.client_connection.qps, burst=config.client_connection.burst,
        metrics=metrics,
    )
    informers = InformerFactory(client, pod_field_selector=POD_FIELD_SELECTOR)
    recorders: list[Any] = []

    def recorder_factory(scheduler_name: str) -> Any:
        recorder = EventRecorder(client, scheduler_name=scheduler_name, metrics=metrics)
        recorders.append(recorder)
        return recorder

    sched = Scheduler(
        config=config, client=client, informers=informers, recorder_factory=recorder_factory,
        update_pod_condition=update_pod_condition, registry=registry, metrics=metrics,
        health=health,
    )
    return Components(client=client, informers=informers, recorders=recorders, scheduler=sched)


class App:
    def __init__(self, options: AppOptions) -> None:
        self.options = options
        self.registry = Registry()
        self.metrics = SchedulerMetrics()
        self.health = HealthState()
        self._stop: asyncio.Event | None = None  # created inside the running loop
        self._serving: PreparedServing | None = None
        self.exit_code = EXIT_OK

    def prepare(self) -> None:
        validate_profiles(self.options.config, self.registry, source=self.options.config_source)
        # Last: binds the port, so nothing else may fail after it (a port in use is reported
        # before the sandbox, informers or leader election start).
        try:
            self._serving = prepare_serving(self.options.serving)
        except ServingError as exc:
            raise StartupError(str(exc)) from exc

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> int:
        self._stop = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            kubeconfig = self.options.kubeconfig
            if self.options.sandbox:
                kubeconfig = await self._start_sandbox(stack)
            return await self._run_connected(stack, kubeconfig)

    async def _start_sandbox(self, stack: contextlib.AsyncExitStack) -> str:
        from scheduler.sandbox import Sandbox

        handle = Sandbox.start_in_thread(nodes=self.options.sandbox_nodes)
        stack.callback(handle.stop)
        path = self.options.sandbox_kubeconfig_out or os.path.join(
            tempfile.gettempdir(), "kube-py-scheduler-sandbox.kubeconfig"
        )
        handle.write_kubeconfig(path)
        print(f"sandbox API server at {handle.url}", flush=True)
        print(f"  export KUBECONFIG={path}", flush=True)
        print("  kubectl get pods -o wide -w", flush=True)
        return path

    async def _run_connected(
        self, stack: contextlib.AsyncExitStack, kubeconfig: str | None
    ) -> int:
        from scheduler.client.connection import ConfigurationError, load_connection

        try:
            connection = load_connection(kubeconfig=kubeconfig, context=self.options.context)
        except ConfigurationError as exc:
            log.error("cannot configure the API connection", error=str(exc))
            return EXIT_FAILURE
        cfg = self.options.config
        parts = build_components(
            cfg, connection, metrics=self.metrics, health=self.health, registry=self.registry
        )
        client, informers, sched = parts.client, parts.informers, parts.scheduler
        stack.push_async_callback(client.close)
        assert self._serving is not None, "prepare() binds the serving port"
        server = HealthServer.serving(
            self._serving, registry=self.metrics.registry, health=self.health,
            guard=self._request_guard(client),
        )
        await server.start()
        stack.push_async_callback(server.stop)
        for recorder in parts.recorders:
            recorder.start()
            stack.push_async_callback(recorder.stop)

        if self.options.sandbox:
            from scheduler.demo import create_demo_workload

            await create_demo_workload(
                client, pods=self.options.demo_pods,
                scheduler_name=cfg.profiles[0].scheduler_name,
            )

        informers.start()
        stack.push_async_callback(informers.stop)
        await sched.wait_for_sync()

        elector = self._elector(client)
        if elector is not None:
            self.health.liveness_checks["leader-election"] = elector.healthy
            self.health.info["leader-election"] = lambda: (
                "leading" if elector.is_leader
                else f"standby (leader: {elector.leader_identity or 'none'})"
            )
            if not await elector.acquire(stop=self._stop):
                return EXIT_OK  # stopped while waiting: nothing to hand over
        log.info("scheduling", profiles=sorted(sched.profiles))

        tasks: dict[str, asyncio.Task[Any]] = {
            "loop": asyncio.create_task(sched.run(), name="scheduling-loop"),
            "stop": asyncio.create_task(self._wait_stop(), name="stop-signal"),
        }
        if elector is not None:
            tasks["lease"] = asyncio.create_task(elector.hold(stop=self._stop),
                                                 name="leader-lease-renewal")
        controller_stop = asyncio.Event()
        controller = self._start_podgroup_controller(sched, connection, controller_stop)
        done, _ = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED)
        controller_stop.set()
        exit_code = self.exit_code
        stopping = self._stop is not None and self._stop.is_set()
        if "lease" in tasks and tasks["lease"] in done and not stopping:
            # Lost the lease: cancel in-flight bindings before anyone else can lead, then exit
            # non-zero so Kubernetes restarts us as a standby.
            log.error("lost the leader lease; stopping at once")
            sched.lose_leadership()
            exit_code = EXIT_LOST_LEASE
        log.info("stopping", grace_seconds=self.options.stop_grace_seconds)
        grace = 0.0 if exit_code == EXIT_LOST_LEASE else self.options.stop_grace_seconds
        await sched.stop(grace_seconds=grace)
        for task in tasks.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if controller is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(controller, timeout=10)
        if elector is not None and exit_code != EXIT_LOST_LEASE:
            await elector.release()
        loop_task = tasks["loop"]
        if loop_task in done and not loop_task.cancelled() and loop_task.exception() is not None:
            log.error("scheduling loop crashed", error=repr(loop_task.exception()))
            return EXIT_FAILURE
        return exit_code

    def _start_podgroup_controller(
        self, sched: Any, connection: Any, stop: asyncio.Event
    ) -> asyncio.Task[None] | None:
        """The PodGroup status controller runs beside the scheduler, only while leading."""
        if not any(fwk.get_plugin("Coscheduling") for fwk in sched.profiles.values()):
            return None
        from scheduler.plugins.coscheduling.controller import run_controller

        task = asyncio.create_task(
            run_controller(kubeconfig=None, namespace=None, stop=stop, connection=connection),
            name="podgroup-controller",
        )

        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.error("PodGroup controller stopped", error=repr(t.exception()))

        task.add_done_callback(done)
        return task

    def _elector(self, client: Any) -> Any:
        from scheduler.client.leader_election import (
            LeaderElectionSettings,
            LeaderElector,
            default_identity,
        )

        le = self.options.config.leader_election
        if not le.leader_elect:
            return None
        settings = LeaderElectionSettings(
            name=le.resource_name,
            namespace=le.resource_namespace or own_namespace(),
            identity=os.environ.get("POD_NAME") or default_identity(),
            lease_duration=le.lease_duration_seconds,
            renew_deadline=le.renew_deadline_seconds,
            retry_period=le.retry_period_seconds,
        )
        return LeaderElector(client, settings)

    async def _wait_stop(self) -> None:
        assert self._stop is not None
        await self._stop.wait()

    def _request_guard(self, client: Any) -> Any:
        serving = self.options.serving
        if not serving.authentication:
            return None
        from scheduler.client.delegated_auth import DelegatedAuth

        return DelegatedAuth(client, authentication=True, authorization=serving.authorization)
