"""The daemon's composition root and its one lifecycle: validate, connect, (lead,) schedule,
stop through one path.

``App.prepare`` does all the checking that can be done without the cluster (plugin args, TLS
files), so a broken configuration exits with status 2 before any request.  ``Components``
owns the connected pieces and their start/stop order (the daemon, the integration harness
and the bench all run them through it); ``App.run`` adds what only the daemon has around
them: the health/metrics server, leader election and the PodGroup controller.
``request_stop`` (SIGTERM/SIGINT) and a lost lease both end in the same stop path.

The daemon knows no sandbox, demo or bench: those are tools in ``scheduler/cli/`` that drive
this module's public entry (``App``, ``build_components``) like any embedder.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import ssl
from dataclasses import dataclass, field

import structlog

from scheduler.client.api import ApiClient
from scheduler.client.connection import ConfigurationError, ConnectionConfig, load_connection
from scheduler.client.event_process import EventProcess, RemoteEventRecorder, use_event_process
from scheduler.client.events import EventRecorder
from scheduler.client.informer import InformerFactory
from scheduler.client.leader_election import (
    LeaderElectionSettings,
    LeaderElector,
    default_identity,
)
from scheduler.client.pod_status import update_pod_condition
from scheduler.config.types import KubeSchedulerConfiguration, Profile
from scheduler.exit_codes import EXIT_FAILURE, EXIT_LOST_LEASE, EXIT_OK
from scheduler.explain.debug import SchedulerIntrospection, cache_debugger
from scheduler.explain.memory import MemoryIntrospection, malloc_trimmer
from scheduler.extenders import build_ssl_context
from scheduler.framework.builder import ProfileBuilder
from scheduler.framework.registry import Registry, did_you_mean, extension_points_of
from scheduler.framework.runtime import Framework, PluginConfigError
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.names import CAPACITY_SCHEDULING, COSCHEDULING
from scheduler.plugins.outoftree import PluginLoadError, describe, load_entry_points
from scheduler.plugins.registry import in_tree_registry
from scheduler.scheduler import Scheduler
from scheduler.server import (
    HealthServer,
    HealthState,
    PreparedServing,
    RequestGuard,
    ServingError,
    ServingOptions,
    prepare_serving,
)

log = structlog.get_logger(__name__)

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
    """What the daemon runs with, already parsed and checked (the CLI builds it from flags)."""

    config: KubeSchedulerConfiguration
    config_source: str
    kubeconfig: str | None
    context: str | None
    serving: ServingOptions
    stop_grace_seconds: float = 10.0
    # --event-process: write Events from a child process (auto: when this process may use
    # two CPUs or more; scheduler.client.event_process). The command line's default is
    # auto; an embedder building AppOptions itself keeps one process unless it asks.
    event_process: str = "off"
    # --write-pipeline: the API writes (Binding and Event POSTs, status patches) made in one
    # loop turn, up to this many pipelined on one connection in one send (1: off;
    # scheduler.client.http1).
    write_pipeline: int = 1


def validate_profiles(
    config: KubeSchedulerConfiguration, registry: Registry, *, source: str = "<default config>"
) -> None:
    """Build every profile's plugins once, offline, so bad plugin args fail at startup.

    Every problem is reported (one line each, naming the profile, the plugin and the field),
    as upstream's validation aggregates its field errors: a broken plugin does not hide the
    next one, nor a broken profile the next profile."""
    from scheduler.offline import offline_handle_kwargs  # inert stand-ins: no I/O

    problems: list[str] = []
    for index, profile in enumerate(config.profiles):
        try:
            fwk = Framework(profile=profile, registry=registry, **offline_handle_kwargs())
        except PluginConfigError as exc:
            for error in getattr(exc, "errors", [exc]):
                problems.append(f"{source}: profiles[{index}]: "
                                f"{error}{_out_of_tree(registry, error.plugin)}")
            continue
        except (KeyError, ValueError, TypeError) as exc:
            problems.append(f"{source}: profiles[{index}] ({profile.scheduler_name}): {exc}")
            continue
        for name, plugin in fwk.plugins.items():
            if not extension_points_of(plugin):
                problems.append(
                    f"{source}: profiles[{index}]: plugin {name!r} implements no extension "
                    f"point{_out_of_tree(registry, name)}")
        problems += _unused_plugin_config_problems(
            profile, registry, fwk, where=f"{source}: profiles[{index}]")
    for index, extender in enumerate(config.extenders):
        try:
            build_ssl_context(extender)
        except (OSError, ssl.SSLError, ValueError) as exc:
            problems.append(f"{source}: extenders[{index}].tlsConfig: {exc}")
    if problems:
        raise StartupError("\n".join(problems))


def _unused_plugin_config_problems(
    profile: Profile, registry: Registry, fwk: Framework, *, where: str
) -> list[str]:
    """pluginConfig of a plugin the profile does not enable is still checked: a typo in a
    plugin's name or args would otherwise be silently ignored (kube-scheduler ignores it;
    we would rather tell). The plugin is built offline with those args and dropped."""
    problems: list[str] = []
    for name, args in profile.plugin_config.items():
        if name in fwk.plugins:
            continue
        if name not in registry:
            suggestion = did_you_mean(name, registry)
            hint = f"did you mean {suggestion!r}?" if suggestion else "check the name"
            problems.append(
                f"{where}: pluginConfig: plugin {name!r} is not registered (not an in-tree "
                f"plugin nor an installed out-of-tree one; {hint})")
            continue
        probe = Profile(scheduler_name=profile.scheduler_name, plugin_config={name: args})
        try:
            ProfileBuilder(probe, registry, fwk.handle).instantiate(name)
        except PluginConfigError as exc:
            problems.append(
                f"{where}: pluginConfig: {exc} (the plugin is not enabled in this profile, "
                f"but its args must be valid){_out_of_tree(registry, name)}")
    return problems


def _out_of_tree(registry: Registry, plugin: str) -> str:
    """`` (from entry point 'X = m:C' of distribution d 1.0)`` for an out-of-tree plugin."""
    if not plugin or plugin not in registry or registry.origin(plugin).in_tree:
        return ""
    return f" (from {describe(registry.origin(plugin))})"


def installed_registry() -> Registry:
    """The in-tree plugins plus every installed ``kube_py_scheduler.plugins`` entry point;
    StartupError names a broken entry point and its distribution."""
    try:
        return load_entry_points(in_tree_registry())
    except PluginLoadError as exc:
        raise StartupError(str(exc)) from exc


# Terminal pods no longer use node resources: the pod informer does not even see them, and a
# pod that finishes is delivered as a delete (as kube-scheduler's informer does).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

# How long Components.start waits, after the informers' sync, for the event process.
EVENT_PROCESS_READY_SECONDS = 10.0

# The write pool's connections Components.start opens while the informers sync, so the first
# bindings (and their Events) find one ready instead of connecting (~0.3 s under load).
# A few: the pool opens more as the writes need them.
WARM_WRITE_CONNECTIONS = 8

# Allocations between young-generation collections while scheduling (CPython's default:
# 700); see Components.start.
GC_YOUNG_THRESHOLD = 20_000


class _GcTuning:
    """The collector tuned while any scheduler of this process runs (the heap frozen, a
    larger young generation), restored as it was when the last one stops."""

    def __init__(self) -> None:
        self._active = 0
        self._saved: tuple[int, ...] = ()

    def enter(self) -> None:
        if self._active == 0:
            self._saved = gc.get_threshold()
            gc.set_threshold(GC_YOUNG_THRESHOLD, *self._saved[1:])
        self._active += 1
        gc.freeze()  # each scheduler's synced cache, once synced

    def exit(self) -> None:
        self._active -= 1
        if self._active == 0:
            gc.unfreeze()
            gc.set_threshold(*self._saved)


_gc_tuning = _GcTuning()


@dataclass
class Components:
    """The connected pieces of a scheduler, built without I/O, and their one start/stop order:
    ``start`` (recorders, informers, cache sync), ``stop_scheduling`` (no new cycles; bindings
    in flight get ``grace_seconds``), ``aclose`` (the rest, then the connection).  Each step
    runs once; ``aclose`` stops only what was started."""

    client: ApiClient
    informers: InformerFactory
    recorders: list[EventRecorder | RemoteEventRecorder]
    scheduler: Scheduler
    # The child process that writes the recorders' Events (--event-process), or None when
    # they are written from this process; the recorders start and stop it.
    event_process: EventProcess | None = None
    _started: bool = field(default=False, init=False)
    _scheduling_stopped: bool = field(default=False, init=False)
    _closed: bool = field(default=False, init=False)
    _gc_tuned: bool = field(default=False, init=False)
    _warming: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self, *, sync_timeout: float | None = None) -> None:
        self._started = True
        for recorder in self.recorders:
            recorder.start()
        # Not awaited: the sync does not wait for it, nor the first cycle (a binding that
        # comes before a connection is ready connects as it would have).
        self._warming = asyncio.create_task(self._warm_writes(), name="warm-write-pool")
        self.informers.start()
        await self.scheduler.wait_for_sync(sync_timeout)
        if self.event_process is not None:
            # The child started with the recorders and imported while the informers
            # listed: Events are written from the first cycle on (those recorded before it
            # is up wait in its buffer).
            try:
                await self.event_process.wait_ready(EVENT_PROCESS_READY_SECONDS)
            except TimeoutError:
                log.warning("the event process is not ready yet; Events wait in its buffer",
                            waited_seconds=EVENT_PROCESS_READY_SECONDS)
        # The synced cache (nodes, NodeInfos, every bound pod) is most of the heap and lives
        # as long as the daemon; CPython's full collections rescan it all, so their cost
        # grows with the cluster (~0.1-0.2 ms CPU per scheduled pod at 5000 nodes, a quarter
        # of the per-pod floor). Freezing moves it out of the collector's sight; objects
        # freed later by reference counting are still freed. And every pod passes through
        # thousands of short-lived objects (decoded watch events, requests, tasks): with
        # CPython's 700-allocation young generation, those in flight were promoted and
        # triggered full collections every ~1000 pods; a 20000-allocation one lets them die
        # young. aclose restores both.
        _gc_tuning.enter()
        self._gc_tuned = True

    async def _warm_writes(self) -> None:
        try:
            opened = await self.client.warm_writes(WARM_WRITE_CONNECTIONS)
        except Exception as exc:  # a failed warm-up never fails the start
            log.warning("could not open the write pool's connections ahead of the first "
                        "writes; they connect as they go", error=repr(exc))
        else:
            log.debug("write pool warmed", connections=opened)

    async def stop_scheduling(self, *, grace_seconds: float) -> None:
        if self._scheduling_stopped:
            return
        self._scheduling_stopped = True
        await self.scheduler.stop(grace_seconds=grace_seconds)

    async def aclose(self, *, grace_seconds: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        await self.stop_scheduling(grace_seconds=grace_seconds)
        if self._started:
            await self.informers.stop()
            for recorder in self.recorders:
                await recorder.stop()
        if self._warming is not None:
            # Still connecting (a slow or unreachable server): the connections it opened
            # are the pool's, closed with the client below.
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
            self._warming = None
        await self.client.close()
        if self._gc_tuned:
            # Back to the collector's sight: an embedder (or a test process) that starts
            # several schedulers one after another must not keep their garbage forever.
            _gc_tuning.exit()
            self._gc_tuned = False


def build_components(
    config: KubeSchedulerConfiguration,
    connection: ConnectionConfig,
    *,
    metrics: SchedulerMetrics,
    health: HealthState | None = None,
    registry: Registry | None = None,
    event_process: str = "off",
    write_pipeline: int = 1,
) -> Components:
    """Wire a scheduler (client, informers, event recorders, cache, queue, profiles) without
    I/O.  ``registry`` defaults to the in-tree plugins; ``event_process`` (auto, on, off)
    says whether a child process writes the Events; ``write_pipeline`` how many writes of
    one loop turn share a connection and a send (1: one each)."""
    client = ApiClient(
        connection, qps=config.client_connection.qps, burst=config.client_connection.burst,
        metrics=metrics, write_pipeline=write_pipeline,
    )
    informers = InformerFactory(client, pod_field_selector=POD_FIELD_SELECTOR)
    recorders: list[EventRecorder | RemoteEventRecorder] = []
    process = _event_process(config, connection, metrics=metrics, mode=event_process,
                             write_pipeline=write_pipeline)

    def recorder_factory(scheduler_name: str) -> EventRecorder | RemoteEventRecorder:
        # reportingInstance names the replica: in a cluster the hostname is the pod's
        # name (POD_NAME); replicas sharing one host (the soak's) stay apart by it.
        hostname = os.environ.get("POD_NAME") or None
        recorder: EventRecorder | RemoteEventRecorder = (
            process.recorder(scheduler_name, hostname=hostname) if process is not None
            else EventRecorder(client, scheduler_name=scheduler_name, metrics=metrics,
                               hostname=hostname))
        recorders.append(recorder)
        return recorder

    sched = Scheduler(
        config=config, client=client, informers=informers, recorder_factory=recorder_factory,
        update_pod_condition=update_pod_condition,
        registry=registry if registry is not None else in_tree_registry(), metrics=metrics,
        health=health,
    )
    return Components(client=client, informers=informers, recorders=recorders, scheduler=sched,
                      event_process=process)


def _event_process(config: KubeSchedulerConfiguration, connection: ConnectionConfig, *,
                   metrics: SchedulerMetrics, mode: str, write_pipeline: int = 1
                   ) -> EventProcess | None:
    """The event process when ``mode`` asks for it and the connection can be handed to a
    child (a credential plugin held in memory cannot: then Events are written from this
    process, with a warning)."""
    if not use_event_process(mode):
        return None
    try:
        pickle.dumps(connection)
    except Exception as exc:  # noqa: BLE001 - whatever a credential object refuses
        log.warning("the event process cannot use this connection's credentials; writing "
                    "Events from the scheduler's process", source=connection.source,
                    error=str(exc))
        return None
    return EventProcess(connection, qps=config.client_connection.qps,
                        burst=config.client_connection.burst, metrics=metrics,
                        write_pipeline=write_pipeline)


class App:
    """The daemon.  ``registry`` is the plugins profiles may enable (default: the in-tree
    ones); tests and embedders pass their own to add plugins programmatically."""

    def __init__(self, options: AppOptions, *, registry: Registry | None = None) -> None:
        self.options = options
        # Without an explicit registry, prepare() adds the installed out-of-tree plugins.
        self._load_entry_points = registry is None
        self.registry = registry if registry is not None else in_tree_registry()
        self.metrics = SchedulerMetrics()
        self.health = HealthState()
        self._stop: asyncio.Event | None = None  # created inside the running loop
        self._serving: PreparedServing | None = None

    def prepare(self) -> None:
        """Everything checkable offline; StartupError (exit 2) names what is wrong."""
        if self._load_entry_points:
            self.registry = installed_registry()
            self._load_entry_points = False
        validate_profiles(self.options.config, self.registry, source=self.options.config_source)
        # Last: binds the serving port, so that a port in use is reported before anything
        # (sandbox, informers, leader election) starts, and nothing can fail after it.
        try:
            self._serving = prepare_serving(self.options.serving)
        except ServingError as exc:
            raise StartupError(str(exc)) from exc

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> int:
        """Connect, serve health and metrics, sync, lead, schedule; return the exit code."""
        self._stop = asyncio.Event()
        try:
            connection = load_connection(
                kubeconfig=self.options.kubeconfig, context=self.options.context
            )
        except ConfigurationError as exc:
            log.error("cannot configure the API connection", error=str(exc))
            return EXIT_FAILURE
        parts = build_components(
            self.options.config, connection, metrics=self.metrics, health=self.health,
            registry=self.registry, event_process=self.options.event_process,
            write_pipeline=self.options.write_pipeline,
        )
        assert self._serving is not None, "prepare() binds the serving port"
        server = HealthServer.serving(
            self._serving, registry=self.metrics.registry, health=self.health,
            guard=self._request_guard(parts.client),
        )
        # /debug/pods/{namespace}/{name} and /debug/queue: the scheduler's own diagnoses.
        SchedulerIntrospection(parts.scheduler).register(server)
        if self.options.config.enable_profiling:
            # /debug/memory: objects per type and tracemalloc's growth (kube-scheduler's
            # /debug/pprof/heap, under the same switch).
            MemoryIntrospection().register(server)
        server_started = False
        try:
            await server.start()
            server_started = True
            await parts.start()
            # SIGUSR2 logs the cache and the queue (kube-scheduler's cache debugger).
            # malloc_trimmer: free memory back to the system every minute (a long-running
            # daemon's RSS otherwise creeps with what glibc keeps; docs/soak.md).
            async with cache_debugger(parts.scheduler), malloc_trimmer():
                return await self._lead_and_schedule(parts, connection)
        finally:
            await parts.aclose(grace_seconds=self.options.stop_grace_seconds)
            if server_started:
                await server.stop()

    async def _lead_and_schedule(self, parts: Components, connection: ConnectionConfig) -> int:
        """Wait for the lease (if electing), schedule until stopped or the lease is lost, then
        stop scheduling and hand the lease over."""
        assert self._stop is not None
        sched = parts.scheduler
        elector = self._elector(parts.client)
        if elector is not None:
            # component-base's leader_election_master_status{name}: 1 leading, 0 standby.
            self.metrics.ops.leader_election_master_status.labels(
                name=elector.settings.name).set_function(lambda: float(elector.is_leader))
            self.health.liveness_checks["leader-election"] = elector.healthy
            self.health.info["leader-election"] = lambda: (
                "leading" if elector.is_leader
                else f"standby (leader: {elector.leader_identity or 'none'})"
            )
            if not await elector.acquire(stop=self._stop):
                return EXIT_OK  # stopped while waiting: nothing to hand over
            sched.lease_check = elector.holds_lease
        log.info("scheduling", profiles=sorted(sched.profiles))

        tasks: dict[str, asyncio.Task[None]] = {
            "loop": asyncio.create_task(sched.run(), name="scheduling-loop"),
            "stop": asyncio.create_task(self._wait_stop(), name="stop-signal"),
        }
        if elector is not None:
            tasks["lease"] = asyncio.create_task(elector.hold(stop=self._stop),
                                                 name="leader-lease-renewal")
        controller_stop = asyncio.Event()
        controller = self._start_podgroup_controller(sched, connection, controller_stop)
        quota_controller = start_elastic_quota_controller(sched, parts.client, controller_stop)
        done, _ = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED)
        controller_stop.set()
        exit_code = EXIT_OK
        lease_lost = "lease" in tasks and (tasks["lease"] in done or not sched.lease_check())
        if lease_lost and not self._stop.is_set():
            # Lost the lease: cancel in-flight bindings before anyone else can lead, then exit
            # non-zero so Kubernetes restarts us as a standby.
            log.error("lost the leader lease; stopping at once")
            sched.lose_leadership()
            exit_code = EXIT_LOST_LEASE
        log.info("stopping", grace_seconds=self.options.stop_grace_seconds)
        grace = 0.0 if exit_code == EXIT_LOST_LEASE else self.options.stop_grace_seconds
        await parts.stop_scheduling(grace_seconds=grace)
        for task in tasks.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for running in (controller, quota_controller):
            if running is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(running, timeout=10)
        if elector is not None and exit_code != EXIT_LOST_LEASE:
            await elector.release()
        loop_task = tasks["loop"]
        if loop_task in done and not loop_task.cancelled() and loop_task.exception() is not None:
            log.error("scheduling loop crashed", error=repr(loop_task.exception()))
            return EXIT_FAILURE
        return exit_code

    def _start_podgroup_controller(
        self, sched: Scheduler, connection: ConnectionConfig, stop: asyncio.Event
    ) -> asyncio.Task[None] | None:
        """The PodGroup status controller runs beside the scheduler, only while leading."""
        if not any(fwk.get_plugin(COSCHEDULING) for fwk in sched.profiles.values()):
            return None
        from scheduler.controllers.podgroup import run_controller  # loads kopf: only if used

        task = asyncio.create_task(
            run_controller(kubeconfig=None, namespace=None, stop=stop, connection=connection),
            name="podgroup-controller",
        )

        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.error("PodGroup controller stopped", error=repr(t.exception()))

        task.add_done_callback(done)
        return task

    def _elector(self, client: ApiClient) -> LeaderElector | None:
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

    def _request_guard(self, client: ApiClient) -> RequestGuard | None:
        serving = self.options.serving
        if not serving.authentication:
            return None
        from scheduler.client.delegated_auth import DelegatedAuth

        return DelegatedAuth(client, authentication=True, authorization=serving.authorization)


def start_elastic_quota_controller(
    sched: Scheduler, client: ApiClient, stop: asyncio.Event
) -> asyncio.Task[None] | None:
    """The ElasticQuota status controller runs beside the scheduler, only while leading and
    only when a profile enables CapacityScheduling."""
    if not any(fwk.get_plugin(CAPACITY_SCHEDULING) for fwk in sched.profiles.values()):
        return None
    from scheduler.controllers.elasticquota import ElasticQuotaController

    controller = ElasticQuotaController(sched.informers, client)
    task = asyncio.create_task(controller.run(stop=stop), name="elasticquota-controller")

    def done(t: asyncio.Task[None]) -> None:
        if not t.cancelled() and t.exception() is not None:
            log.error("ElasticQuota controller stopped", error=repr(t.exception()))

    task.add_done_callback(done)
    return task
