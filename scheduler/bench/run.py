"""One bench point: a sandbox process, the ceiling, the floor and the scheduler on a workload.

The flow follows upstream scheduler_perf's: the nodes, the existing (bound) pods and the
gated pods exist first; the scheduler (the daemon's own wiring, in this process; the sandbox
is its own process) starts and syncs its informers; only then are the measured pods created,
while it runs, by a creator process of their own (``creator.py``: bodies encoded and
connections open before the clock starts), with the workload's churn beside them.  The
scheduler thus pays the measured pods' watch events, but not their creation.

Figures: pods over the window from the first measured pod's creation to the last bind;
upstream's SchedulingThroughput Average from 1 s samples (``throughput.py``), the figure
upstream's CI floors are floors on; and, for continuity, pods over the time from the
scheduler's start (informer sync included) to the last bind.  CPU per pod is this process's
CPU time up to the last bind, from the scheduler's start and from the end of the sync.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import math
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from scheduler.bench.ceiling import (
    create_namespace,
    gather_bounded,
    measure_binding_with_event,
    measure_raw_binding,
    measure_raw_binding_official_client,
)
from scheduler.bench.creator import CreatorProcess, CreatorReport
from scheduler.bench.machine import Machine, load_average, process_cpu_seconds
from scheduler.bench.report import Progress, cores_bound, percentile
from scheduler.bench.throughput import (
    SAMPLE_INTERVAL_S,
    Throughput,
    barrier_stop,
    scheduling_throughput,
)
from scheduler.bench.workloads import (
    CHURN_NAMESPACE,
    EXISTING_NAMESPACE,
    MEASURED_NAMESPACE,
    RACK_KEY,
    Workload,
    churn_object,
    claim_template,
    gang_member,
    gated_pod,
    light_pod,
    pod,
    pod_groups,
    rack_of,
)

FLOOR_SCHEDULER_NAME = "bench-floor"
# The span of binds the size advice aims for: the baseline tick, one sampled tick, a margin.
MIN_SAMPLED_SECONDS = 3
FLOOR_NAMESPACE = "bench-floor"
STEADY_FLOOR_PODS = 2000  # a steady-state shape's floor run: this many plain pods at once


def floor_config() -> Any:
    """A profile with no Filter or Score plugins: PrioritySort and DefaultBinder only.

    Scheduling with it costs what the daemon costs around the plugins (informers, queue,
    snapshot, assume, the binding POST, the Scheduled event): the most any profile of this
    daemon can schedule through this sandbox, measured with the same wiring.
    """
    from scheduler.config.load import parse_config

    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": FLOOR_SCHEDULER_NAME,
            "plugins": {
                "multiPoint": {"disabled": [{"name": "*"}]},
                "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                "bind": {"enabled": [{"name": "DefaultBinder"}]},
            },
        }],
    })


@dataclass
class SchedulerRun:
    """One run of the real scheduler wiring until ``expected`` measured pods are bound.

    Times are ``time.monotonic()`` (one clock for this process and the creator's)."""

    bound: int
    started: float  # the scheduler's start (before its informers list)
    synced: float  # the informers synced
    released: float  # the creator was told to start: upstream's collector starts here
    creation: CreatorReport
    last_bind: float  # the last measured pod's bind (or the timeout)
    bind_times: list[float]
    cpu: float  # the scheduler process's CPU time from its start to the last bind
    cycle_cpu: float  # the same from the end of the informer sync
    cycle_latencies: list[float]
    extender_calls: int = 0
    batch_reused: int = 0  # node Filter results reused by opportunistic batching
    # The measured pods were all created (pending) before the scheduler started: the
    # window then runs from the first bind to the last.
    backlog: bool = False
    # The sandbox process's CPU seconds from the creator's release to the last bind (None
    # when its /proc/<pid>/stat could not be read)
    sandbox_cpu: float | None = None
    # The event process's CPU seconds over the same window (--event-process on; None when
    # the Events were written from the scheduler's process)
    event_process_cpu: float | None = None

    @property
    def released_to_last_bind(self) -> float:
        return self.last_bind - self.released

    def cpu_split(self) -> dict[str, float | None]:
        """Who used the cores: CPU milliseconds per measured pod of the creator (over its
        creation), the sandbox and the scheduler (from the release to the last bind), and
        how many cores the three kept busy on average over that window."""
        pods = max(self.bound, 1)
        creator = self.creation.cpu
        spent = [self.cycle_cpu, self.sandbox_cpu, None if self.backlog else creator,
                 self.event_process_cpu]
        span = self.released_to_last_bind
        busy = (sum(c for c in spent if c is not None) / span
                if span > 0 and None not in spent[:2] else None)
        return {
            "creator_cpu_per_pod_ms": (round(creator / max(self.creation.created, 1) * 1000, 3)
                                       if creator is not None else None),
            "sandbox_cpu_per_pod_ms": (round(self.sandbox_cpu / pods * 1000, 3)
                                       if self.sandbox_cpu is not None else None),
            "scheduler_cpu_per_pod_ms": round(self.cycle_cpu / pods * 1000, 3),
            "event_process_cpu_per_pod_ms": (round(self.event_process_cpu / pods * 1000, 3)
                                             if self.event_process_cpu is not None else None),
            "busy_cores": round(busy, 2) if busy is not None else None,
        }

    @property
    def sync_seconds(self) -> float:
        return self.synced - self.started

    @property
    def window(self) -> float:
        """From the first measured pod's creation to the last bind; for a backlog, from
        the first bind to the last."""
        if self.backlog:
            return self.last_bind - self.bind_times[0] if self.bind_times else 0.0
        return self.last_bind - self.creation.started

    @property
    def first_bind_seconds(self) -> float | None:
        """From the scheduler's start (informer sync included) to the first bind."""
        return self.bind_times[0] - self.started if self.bind_times else None

    @property
    def rate(self) -> float:
        """Measured pods over :attr:`window`: the figure compared with the ceiling."""
        return self.bound / self.window if self.window > 0 else 0.0

    @property
    def rate_incl_sync(self) -> float:
        """Measured pods from the scheduler's start (informer sync included) to the last
        bind: the bench's figure before the creator existed, kept for continuity."""
        wall = self.last_bind - self.started
        return self.bound / wall if wall > 0 else 0.0

    def rates_around_creation(self) -> tuple[float | None, float | None]:
        """Pods/s bound while the creator was creating, and after it had finished (None
        for a phase that lasted no time): whether creating beside scheduling slowed it."""
        if self.backlog:  # created before the scheduler started
            return None, (self.rate if self.window > 0 else None)
        end = self.creation.finished
        during = bisect.bisect_right(self.bind_times, end)
        first, second = end - self.creation.started, self.last_bind - end
        return (during / first if first > 0 else None,
                (self.bound - during) / second if second > 0 else None)

    def throughput(self) -> Throughput:
        """Upstream's SchedulingThroughput: sampling starts when the creator is released
        and stops at its barrier's first poll after the last bind."""
        return scheduling_throughput(
            self.bind_times, start=self.released,
            stop=barrier_stop(creation_finished=self.creation.finished,
                              last_bind=self.last_bind))


async def run_scheduler(config: Any, connection: Any, *, namespace: str, expected: int,
                        creator: CreatorProcess, timeout: float, progress: Progress,
                        label: str, batching: bool = True,
                        during: Callable[[], Coroutine[Any, Any, None]] | None = None,
                        backlog: bool = False, sandbox_pid: int | None = None,
                        event_process: str = "off", write_pipeline: int = 1) -> SchedulerRun:
    """Start the daemon's wiring and let it sync; then release ``creator`` (a ready
    :class:`CreatorProcess` holding the measured pods) and run until ``expected`` pods of
    ``namespace`` are bound; ``during`` runs beside it from the release (churn) and is
    cancelled at the end.  ``backlog``: the creator creates every measured pod before the
    scheduler starts, so its informers list them all as pending pods.  ``sandbox_pid``: the
    API server's process, whose CPU time over the window the run reports."""
    from scheduler.app import build_components
    from scheduler.metrics import SchedulerMetrics

    metrics = SchedulerMetrics()
    parts = build_components(config, connection, metrics=metrics, event_process=event_process,
                             write_pipeline=write_pipeline)
    sched = parts.scheduler
    if not batching:
        sched.cycle.batches = None
    cycle_latencies: list[float] = []
    schedule_one = sched.cycle.schedule_one

    def timed(qpi: Any) -> Any:
        t = time.perf_counter()
        pending = schedule_one(qpi)
        if pending is None:
            cycle_latencies.append(time.perf_counter() - t)
            return None

        async def finish() -> None:  # a cycle that awaits an HTTP extender
            await pending
            cycle_latencies.append(time.perf_counter() - t)

        return finish()

    sched.cycle.schedule_one = timed  # type: ignore[method-assign]  # timing wrapper
    bind_times: list[float] = []
    cpu_at_last_bind = 0.0
    sandbox_at_last_bind: float | None = None
    events_at_last_bind: float | None = None
    all_bound = asyncio.Event()
    bind = sched.bind

    async def counted(fwk: Any, state: Any, pod_info: Any, node_name: str) -> Any:
        nonlocal cpu_at_last_bind, sandbox_at_last_bind, events_at_last_bind
        status = await bind(fwk, state, pod_info, node_name)
        ok = status is None or status.is_success()
        if ok and pod_info.pod["metadata"].get("namespace") == namespace:
            bind_times.append(time.monotonic())
            if len(bind_times) >= expected and not all_bound.is_set():
                cpu_at_last_bind = time.process_time()
                sandbox_at_last_bind = sandbox_cpu()
                events_at_last_bind = events_cpu()
                all_bound.set()
        return status

    sched.bind = counted  # type: ignore[method-assign]  # counting wrapper

    def sandbox_cpu() -> float | None:
        return process_cpu_seconds(sandbox_pid) if sandbox_pid is not None else None

    def events_cpu() -> float | None:
        """The event process's CPU seconds so far (a child the scheduler started: the
        scheduler's CPU per pod is its own process's, this is the rest of its cost)."""
        pid = parts.event_process.pid if parts.event_process is not None else None
        return process_cpu_seconds(pid) if pid is not None else None

    backlog_created: CreatorReport | None = None
    if backlog:
        await creator.go()
        backlog_created = await creator.result(timeout=timeout)
        if backlog_created.failed:
            await parts.aclose(grace_seconds=5)
            raise RuntimeError(f"{label}: the creator failed to create "
                               f"{backlog_created.failed} pods; first error: "
                               f"{backlog_created.error}")
    cpu0, started = time.process_time(), time.monotonic()
    await parts.start(sync_timeout=120)
    if parts.event_process is not None:
        await parts.event_process.wait_ready()
    synced = time.monotonic()
    cpu_synced = time.process_time()
    loop = asyncio.create_task(sched.run(), name="bench-scheduling-loop")
    released = time.monotonic()
    sandbox_at_release = sandbox_cpu()
    events_at_release = events_cpu()
    if backlog_created is None:
        await creator.go()
    side = asyncio.create_task(during(), name="bench-churn") if during is not None else None
    deadline = released + timeout
    while not all_bound.is_set() and time.monotonic() < deadline:
        progress.update(label, len(bind_times), expected)
        try:
            await asyncio.wait_for(all_bound.wait(), timeout=0.1)
        except asyncio.TimeoutError:
            pass
    if all_bound.is_set():
        last_bind = bind_times[expected - 1]
    else:
        last_bind, cpu_at_last_bind = time.monotonic(), time.process_time()
        sandbox_at_last_bind = sandbox_cpu()
        events_at_last_bind = events_cpu()
    bound = min(len(bind_times), expected)
    progress.close()
    try:
        creation = (backlog_created if backlog_created is not None
                    else await creator.result(timeout=max(deadline - time.monotonic(), 5.0)))
    finally:
        for task in (side, loop):
            if task is not None:
                task.cancel()
        await parts.aclose(grace_seconds=5)
        for task in (side, loop):
            if task is not None:
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
    extender_calls = int(sum(
        metrics.registry.get_sample_value("scheduler_py_extender_requests_total",
                                          {"verb": verb, "result": "success"}) or 0
        for verb in ("filter", "prioritize")))
    batches = sched.cycle.batches
    return SchedulerRun(bound=bound, started=started, synced=synced, released=released,
                        creation=creation,
                        last_bind=last_bind, bind_times=bind_times[:expected],
                        cpu=cpu_at_last_bind - cpu0, cycle_cpu=cpu_at_last_bind - cpu_synced,
                        cycle_latencies=cycle_latencies, extender_calls=extender_calls,
                        batch_reused=batches.reused if batches is not None else 0,
                        backlog=backlog,
                        sandbox_cpu=(sandbox_at_last_bind - sandbox_at_release
                                     if sandbox_at_release is not None
                                     and sandbox_at_last_bind is not None else None),
                        event_process_cpu=(events_at_last_bind - events_at_release
                                           if events_at_release is not None
                                           and events_at_last_bind is not None else None))


async def create_all(user: Any, pods: list[dict[str, Any]], concurrency: int,
                     progress: Progress, label: str) -> None:
    """Create the pods that exist before the scheduler starts (each into its own
    namespace), from this process: they are not measured."""
    done = 0

    async def create(p: dict[str, Any]) -> None:
        nonlocal done
        await user.create(f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p)
        done += 1
        if done % 100 == 0:
            progress.update(label, done, len(pods))

    await gather_bounded(pods, create, concurrency)
    progress.close()


def delete_loop(user: Any, pods: list[dict[str, Any]], *, per_second: float,
                sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                clock: Callable[[], float] = time.monotonic,
                ) -> Callable[[], Coroutine[Any, Any, None]]:
    """Upstream's deletePods opcode: delete ``pods`` (their metadata: namespace and name) in
    order, the n-th at n/``per_second`` s from the start (a ticker: a slow DELETE does not
    push the later ones back), until all are gone or the run is cancelled."""
    interval = 1.0 / per_second

    async def run() -> None:
        start = clock()
        for n, meta in enumerate(pods, start=1):
            wait = start + n * interval - clock()
            if wait > 0:
                await sleep(wait)
            try:
                await user.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
            except Exception:
                pass  # already gone (deleted by someone else): nothing to delete
    return run


def churn_loop(user: Any, workload: Workload, *, scheduler_name: str,
               iterations: int | None = None,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
               ) -> Callable[[], Coroutine[Any, Any, None]]:
    """The workload's churn, upstream's churn op with ``number`` 1: every interval
    (``iterations`` of them, None: until cancelled), "create" creates one object of each
    kind; "recreate" creates them, or deletes the ones it created at the interval before."""
    churn = workload.churn
    assert churn is not None

    async def run() -> None:
        previous: list[str] = []
        index = tick = 0
        while iterations is None or tick < iterations:
            await sleep(churn.interval_s)
            tick += 1
            if previous:
                for path in previous:
                    try:
                        await user.delete(path)
                    except Exception:
                        pass  # e.g. a pod already deleted by preemption
                previous = []
                continue
            for kind in churn.kinds:
                collection, obj = churn_object(kind, index, scheduler_name=scheduler_name)
                await user.create(collection, obj)
                if churn.mode == "recreate":
                    previous.append(f"{collection}/{obj['metadata']['name']}")
            index += 1

    return run


async def measure(config: Any, connection: Any, *, kubeconfig: str,
                  pods: list[dict[str, Any]], concurrency: int, timeout: float,
                  progress: Progress, label: str, batching: bool = True,
                  during: Callable[[], Coroutine[Any, Any, None]] | None = None,
                  backlog: bool = False, sandbox_pid: int | None = None,
                  event_process: str = "off", write_pipeline: int = 1) -> SchedulerRun:
    """The measured pods into a ready creator process, then :func:`run_scheduler` with it;
    every pod lands in the first pod's namespace."""
    creator = await CreatorProcess.start(kubeconfig, pods, concurrency=concurrency)
    try:
        run = await run_scheduler(config, connection, namespace=pods[0]["metadata"]["namespace"],
                                  expected=len(pods), creator=creator, timeout=timeout,
                                  progress=progress, label=label, batching=batching,
                                  during=during, backlog=backlog, sandbox_pid=sandbox_pid,
                                  event_process=event_process, write_pipeline=write_pipeline)
    finally:
        await creator.aclose()
    if run.creation.failed:
        raise RuntimeError(f"{label}: the creator failed to create {run.creation.failed} of "
                           f"{len(pods)} pods; first error: {run.creation.error}")
    return run


def sandbox_flags(workload: Workload, *, nodes: int, node_cpu: str,
                  node_memory: str) -> dict[str, Any]:
    """The sandbox process's flags for a run: the shape's nodes (zones only where upstream's
    nodes have them), no simulated kubelet (nothing runs), the DRA driver's devices."""
    flags: dict[str, Any] = {"nodes": nodes, "simulate_kubelet": False,
                             "node_cpu": node_cpu, "node_memory": node_memory,
                             "node_pods": workload.node_pods,
                             "node_topology": workload.node_zones}
    if workload.dra_devices:
        flags["dra_devices"] = workload.dra_devices
    return flags


async def run_point(args: argparse.Namespace, workload: Workload) -> dict[str, Any]:
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.config.defaults import default_config
    from scheduler.config.load import load_config_file
    from scheduler.sandbox.testing import SandboxProcess

    progress = Progress(enabled=None if args.progress else False)
    machine = Machine.current()
    nodes = args.nodes
    node_cpu = args.node_cpu or workload.node_cpu
    node_memory = args.node_memory or workload.node_memory
    measured = args.pods if args.pods else workload.measured_pods
    existing = (args.existing if args.existing is not None
                else workload.before(workload.existing_pods, nodes=nodes, pods=measured))
    gated = workload.before(workload.gated_pods, nodes=nodes, pods=measured)
    raw_count = min(measured, args.raw_binds)
    flags = sandbox_flags(workload, nodes=nodes, node_cpu=node_cpu, node_memory=node_memory)
    floor: SchedulerRun | None = None
    extender: tuple[asyncio.subprocess.Process, str] | None = None
    async with SandboxProcess(**flags) as sandbox:
        connection = load_connection(kubeconfig=str(sandbox.kubeconfig_path))
        user = ApiClient(connection, qps=0, pool_size=64)
        try:
            node_names = [n["metadata"]["name"]
                          for n in (await user.get("/api/v1/nodes"))["items"]]
            progress.update("ceiling: raw binding", 0, 3)
            raw_rate = await measure_raw_binding(user, node_names, raw_count, args.concurrency)
            progress.update("ceiling: official client", 1, 3)
            official_rate = await measure_raw_binding_official_client(
                str(sandbox.kubeconfig_path), user, node_names, raw_count, args.concurrency)
            progress.update("ceiling: binding + event", 2, 3)
            with_event_rate = await measure_binding_with_event(
                user, node_names, raw_count, args.concurrency)
            progress.close()

            kubeconfig = str(sandbox.kubeconfig_path)
            if args.floor:
                # As many plain pods as measured, created the same way; gone before the
                # real run.
                await create_namespace(user, FLOOR_NAMESPACE)
                floor_count = min(measured, STEADY_FLOOR_PODS) if workload.steady_batch else measured
                shape = light_pod if workload.light else pod
                floor_pods = [shape(f"floor-{i}", namespace=FLOOR_NAMESPACE,
                                    scheduler_name=FLOOR_SCHEDULER_NAME)
                              for i in range(floor_count)]
                config = floor_config()
                config.leader_election.leader_elect = False
                config.client_connection.qps = 0
                floor = await measure(config, connection, kubeconfig=kubeconfig,
                                      pods=floor_pods, concurrency=args.concurrency,
                                      timeout=args.timeout, progress=progress,
                                      label="floor: scheduling", backlog=workload.backlog,
                                      sandbox_pid=sandbox.pid,
                                      event_process=args.event_process,
                                      write_pipeline=args.write_pipeline)
                await user.delete(f"/api/v1/namespaces/{FLOOR_NAMESPACE}")

            config = load_config_file(args.config) if args.config else default_config()
            config.leader_election.leader_elect = False
            config.client_connection.qps = args.qps
            config.client_connection.burst = max(int(args.qps * 2), 1) if args.qps > 0 else 0
            scheduler_name = config.profiles[0].scheduler_name
            if workload.extender:
                extender = await start_example_extender(sandbox.url, sandbox.token or "")
                config.extenders = [bench_extender(extender[1])]
            for namespace in (EXISTING_NAMESPACE, MEASURED_NAMESPACE, CHURN_NAMESPACE):
                await create_namespace(user, namespace)
            template = workload.measured
            if workload.dra_devices:
                await user.create(f"/apis/resource.k8s.io/v1/namespaces/{MEASURED_NAMESPACE}"
                                  "/resourceclaimtemplates", claim_template())
            if workload.gang_size:
                gang_size = args.gang_size or workload.gang_size
                template = gang_member(gang_size, mixed=workload.gang_mixed)
                await _install_gang(user, config, measured, gang_size,
                                    mixed=workload.gang_mixed, topology=workload.gang_topology)
                if workload.gang_topology:
                    await _label_racks(user, node_names, args.concurrency)
            before: list[dict[str, Any]] = []
            if workload.existing is not None:
                for i in range(existing):
                    p = workload.existing(i, scheduler_name)
                    p["spec"]["nodeName"] = node_names[i % len(node_names)]
                    before.append(p)
            before.extend(gated_pod(i, scheduler_name) for i in range(gated))
            if before:
                await create_all(user, before, args.concurrency, progress, "existing pods")
            pods = [template(i, scheduler_name)
                    for i in range(1 if workload.steady_batch else measured)]
            during = None
            if workload.churn is not None:
                # Objects that stay ("create") are capped at one per ten nodes: on a tiny
                # cluster, unbounded 3-CPU pods would take every node from the measured pods.
                cap = max(1, nodes // 10) if workload.churn.mode == "create" else None
                during = churn_loop(user, workload, scheduler_name=scheduler_name,
                                    iterations=cap)
            elif workload.delete_existing_per_s and existing and workload.existing is not None:
                during = delete_loop(user, [p["metadata"] for p in before[:existing]],
                                     per_second=workload.delete_existing_per_s)
            if workload.allocated_claims is not None:
                await _allocate_claims(user, workload, node_names, args.concurrency)
            if workload.steady_batch:
                run = await _measure_steady(config, connection, kubeconfig=kubeconfig,
                                            workload=workload, template=pods[0],
                                            max_pods=measured, args=args, progress=progress,
                                            sandbox_pid=sandbox.pid)
                # deleted as they go: the pods are those the run saw scheduled
                measured_count = confirmed = run.bound
            else:
                run = await measure(config, connection, kubeconfig=kubeconfig, pods=pods,
                                    concurrency=args.concurrency, timeout=args.timeout,
                                    progress=progress, label=f"{workload.name}: scheduling",
                                    batching=args.batching, during=during,
                                    backlog=workload.backlog, sandbox_pid=sandbox.pid,
                                    event_process=args.event_process,
                                    write_pipeline=args.write_pipeline)
                measured_count = len(pods)
                listed = (await user.get(f"/api/v1/namespaces/{MEASURED_NAMESPACE}/pods"))
                confirmed = sum(1 for p in listed["items"]
                                if (p.get("spec") or {}).get("nodeName"))
        finally:
            await user.close()
            if extender is not None:
                extender[0].terminate()
                await extender[0].wait()

    result = _result(workload, nodes=nodes, measured=measured_count, existing=existing,
                     gated=gated,
                     confirmed=confirmed, raw_rate=raw_rate, official_rate=official_rate,
                     with_event_rate=with_event_rate, floor=floor, run=run,
                     machine=machine, load_at_end=load_average())
    # --write-pipeline: the scheduler's writes of one loop turn pipelined, up to this many
    result["write_pipeline"] = args.write_pipeline
    return result


def no_average_reason(*, samples: int, pods: int, window: float, rate: float) -> str:
    """Why a run has no SchedulingThroughput Average (nor a ratio to upstream's floor) and
    what ``--pods`` would give one: upstream's collector records nothing at the first tick
    that sees a bound pod (the baseline), so the binds must span two 1 s ticks and more."""
    span = MIN_SAMPLED_SECONDS * SAMPLE_INTERVAL_S
    enough = max(100, math.ceil(rate * span / 100) * 100) if rate > 0 else None
    size = (f"at this rate ({rate:.0f} pods/s), --pods {enough} or more gives a figure"
            if enough is not None else "a run of more pods gives a figure")
    return (f"too few 1 s samples ({samples}): {pods} pods were bound in {window:.2f} s, and "
            f"upstream's Average needs the binds to span at least two 1 s ticks (the first "
            f"is its baseline); {size}")


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _result(workload: Workload, *, nodes: int, measured: int, existing: int, gated: int,
            confirmed: int, raw_rate: float, official_rate: float, with_event_rate: float,
            floor: SchedulerRun | None, run: SchedulerRun, machine: Machine | None = None,
            load_at_end: tuple[float, float, float] | None = None) -> dict[str, Any]:
    latencies = run.cycle_latencies
    rate = run.rate
    upstream = run.throughput()
    while_creating, after_creation = run.rates_around_creation()
    average = upstream.average
    result: dict[str, Any] = {
        "workload": workload.name,
        "nodes": nodes,
        "pods": measured,
        "existing_pods": existing,
        "gated_pods": gated,
        "bound": confirmed,
        "upstream_floor_pods_per_s": workload.upstream_floor,
        "raw_binding_rate_per_s": round(raw_rate, 1),
        "raw_binding_rate_official_client_per_s": round(official_rate, 1),
        "binding_with_event_rate_per_s": round(with_event_rate, 1),
        # while the scheduler runs: creation and scheduling share the API server
        "pod_create_rate_per_s": round(run.creation.rate, 1),
    }
    if machine is not None:
        # which machine gave these figures, and how busy it was
        result.update({
            "cpu_model": machine.cpu_model, "cores": machine.cores,
            "scheduler_affinity": machine.affinity,
            "load_average_start": list(machine.load) if machine.load is not None else None,
            "load_average_end": list(load_at_end) if load_at_end is not None else None,
        })
    if run.backlog:
        result["backlog"] = True
    # --event-process: whether a child process wrote the Events (its CPU is in cpu_split)
    result["event_process"] = run.event_process_cpu is not None
    if floor is not None:
        result["floor_pods_per_s"] = round(floor.rate, 1)
        result["floor_pods_per_s_avg"] = _rounded(floor.throughput().average)
        result["floor_cpu_per_pod_ms"] = round(floor.cpu / max(floor.bound, 1) * 1000, 3)
        result["floor_cycle_cpu_per_pod_ms"] = round(
            floor.cycle_cpu / max(floor.bound, 1) * 1000, 3)
        if floor.event_process_cpu is not None:
            result["floor_event_process_cpu_per_pod_ms"] = round(
                floor.event_process_cpu / max(floor.bound, 1) * 1000, 3)
        if floor.backlog:
            result["floor_time_to_first_bind_s"] = _rounded(floor.first_bind_seconds, 3)
    result.update({
        "scheduler_pods_per_s": round(rate, 1),
        "scheduler_pods_per_s_avg": _rounded(average),
        "scheduler_pods_per_s_p50": _rounded(upstream.percentile(50)),
        "scheduler_pods_per_s_p90": _rounded(upstream.percentile(90)),
        "scheduler_pods_per_s_p99": _rounded(upstream.percentile(99)),
        "throughput_samples": len(upstream.samples),
        "pods_per_s_incl_sync": round(run.rate_incl_sync, 1),
        "pods_per_s_while_creating": _rounded(while_creating),
        "pods_per_s_after_creation": _rounded(after_creation),
        # upstream's floor is a floor on SchedulingThroughput's Average
        "ratio_to_upstream_floor": (_ratio(average, workload.upstream_floor)
                                    if workload.upstream_floor and average is not None
                                    else None),
        "ratio_to_binding_with_event": _ratio(rate, with_event_rate),
        "ratio_to_raw_binding": _ratio(rate, raw_rate),
        "ratio_to_official_client_binding": _ratio(rate, official_rate),
        "binding_with_event_ratio_to_raw_binding": _ratio(with_event_rate, raw_rate),
    })
    if floor is not None:
        result["floor_ratio_to_raw_binding"] = _ratio(floor.rate, raw_rate)
        result["floor_ratio_to_binding_with_event"] = _ratio(floor.rate, with_event_rate)
        result["ratio_to_floor"] = _ratio(rate, floor.rate)
    result.update({
        "informer_sync_s": round(run.sync_seconds, 3),
        "time_to_first_bind_s": _rounded(run.first_bind_seconds, 3),
        # of which after the sync: the creator's release to the first bind (the first
        # measured pod's creation, its watch event, its cycle and binding)
        "release_to_first_bind_s": (round(run.bind_times[0] - run.released, 3)
                                    if run.bind_times else None),
        "measured_s": round(run.window, 3),
        "wall_s": round(run.last_bind - run.started, 3),
        "cycle_p50_ms": round(percentile(latencies, 50) * 1000, 3),
        "cycle_p99_ms": round(percentile(latencies, 99) * 1000, 3),
        "cycle_mean_ms": round(statistics.fmean(latencies) * 1000, 3) if latencies else 0.0,
        "cycles": len(latencies),
        "cpu_s": round(run.cpu, 2),
        "cpu_per_pod_ms": round(run.cpu / max(run.bound, 1) * 1000, 3),
        "cycle_cpu_per_pod_ms": round(run.cycle_cpu / max(run.bound, 1) * 1000, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "batched_node_filters_per_pod": round(run.batch_reused / max(run.bound, 1), 1),
        # who used the cores over the window (creator, sandbox, scheduler)
        **run.cpu_split(),
    })
    # and the most pods/s those cores could carry at that CPU per pod
    result.update(cores_bound(result))
    if average is None:
        result["no_average_because"] = no_average_reason(
            samples=len(upstream.samples), pods=run.bound, window=run.window, rate=rate)
    if workload.extender:
        result["extender_calls"] = run.extender_calls
    if workload.note:
        result["note"] = workload.note
    return result


async def start_example_extender(
    api_server: str, token: str
) -> tuple[asyncio.subprocess.Process, str]:
    """examples/extenders/gpu_model_extender.py in its own process (node names resolved from
    the sandbox); (process, URL)."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "examples", "extenders", "gpu_model_extender.py")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, script, "--port", "0", "--api-server", api_server, "--token", token,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
    return proc, str(json.loads(line)["ready"])


def bench_extender(url: str) -> Any:
    from scheduler.config.types import Extender

    # Interested in every pod (no managedResources): one filter and one prioritize call each.
    return Extender(url_prefix=url, filter_verb="filter", prioritize_verb="prioritize",
                    weight=1, node_cache_capable=True)


async def _label_racks(user: Any, node_names: list[str], concurrency: int) -> None:
    """Label every node with its rack (workloads.rack_of), before the scheduler starts."""
    slots = asyncio.Semaphore(max(concurrency, 1))

    async def one(index: int, name: str) -> None:
        async with slots:
            await user.patch(f"/api/v1/nodes/{name}",
                             {"metadata": {"labels": {RACK_KEY: rack_of(index)}}},
                             patch_type="merge")
    await asyncio.gather(*(one(i, n) for i, n in enumerate(node_names)))


async def _install_gang(user: Any, config: Any, count: int, gang_size: int, *,
                        mixed: bool = False, topology: bool = False) -> None:
    import yaml

    from scheduler.config.types import PluginRef

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    crd_path = os.path.join(root, "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml")
    with open(crd_path, encoding="utf-8") as f:
        crd = yaml.safe_load(f)
    await user.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{MEASURED_NAMESPACE}/podgroups"
    for _ in range(100):  # wait until the new resource is served
        try:
            await user.get(path)
            break
        except Exception:
            await asyncio.sleep(0.05)
    for group in pod_groups(count, gang_size, mixed=mixed, topology=topology):
        await user.create(path, group)
    profile = config.profiles[0]
    names = {ref.name for ref in profile.plugins.multi_point.enabled}
    if "Coscheduling" not in names:
        profile.plugins.multi_point.enabled.append(PluginRef("Coscheduling"))
        profile.plugins.queue_sort.enabled.append(PluginRef("Coscheduling"))
        profile.plugins.queue_sort.disabled.append(PluginRef("*"))


async def _allocate_claims(user: Any, workload: Workload, node_names: list[str],
                           concurrency: int) -> None:
    """Upstream's allocResourceClaims: claims of no pod, allocated before the scheduler
    starts (a fixed seed: the same devices every run)."""
    import random

    from scheduler.bench.steady import allocate_claims, pick_devices
    from scheduler.bench.workloads import allocated_claim
    from scheduler.sandbox.dradriver import parse_device_kinds

    assert workload.allocated_claims is not None
    [kind] = parse_device_kinds(workload.dra_devices)
    count = workload.allocated_claims(len(node_names) * kind.count)
    picks = pick_devices(count, nodes=sorted(node_names), per_node=kind.count,
                         rng=random.Random(0))
    await allocate_claims(user, [allocated_claim(i, node=node, device=f"{kind.name}-{d}")
                                 for i, (node, d) in enumerate(picks)], concurrency)


async def _measure_steady(config: Any, connection: Any, *, kubeconfig: str, workload: Workload,
                          template: dict[str, Any], max_pods: int, args: argparse.Namespace,
                          progress: Progress, sandbox_pid: int | None = None) -> SchedulerRun:
    """A steady-state shape (``steady.py``): the run lasts the workload's duration (or until
    ``max_pods`` pods were scheduled), its pods created and deleted by the driver process."""
    from scheduler.bench.steady import start_driver

    driver = await start_driver(kubeconfig, template, batch=workload.steady_batch,
                                duration=workload.steady_duration_s, max_pods=max_pods,
                                concurrency=args.concurrency)
    try:
        run = await run_scheduler(config, connection, namespace=MEASURED_NAMESPACE,
                                  expected=max_pods, creator=driver,
                                  timeout=workload.steady_duration_s, progress=progress,
                                  label=f"{workload.name}: scheduling", batching=args.batching,
                                  sandbox_pid=sandbox_pid,
                                  event_process=args.event_process)
    finally:
        await driver.aclose()
    if run.creation.failed:
        raise RuntimeError(f"{workload.name}: the steady-state driver failed "
                           f"{run.creation.failed} requests; first error: {run.creation.error}")
    return run
