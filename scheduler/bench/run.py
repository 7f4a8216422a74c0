"""One bench point: a sandbox process, the ceiling, the floor and the scheduler on a workload.

The scheduler runs with the daemon's own wiring in this process (the sandbox is its own
process, on the other core).  Existing pods are created bound and gated pods gated before
the scheduler starts; the measured pods are created pending; the scheduler is then timed from
its start (informer sync included) until every measured pod is bound, while the workload's
churn runs.  CPU time is counted from the end of the informer sync too, so the per-pod cost
of the cycles can be compared between cluster sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from scheduler.bench.report import Progress, percentile
from scheduler.bench.workloads import (
    CHURN_NAMESPACE,
    EXISTING_NAMESPACE,
    MEASURED_NAMESPACE,
    Workload,
    churn_object,
    gang_member,
    gated_pod,
    pod,
    pod_groups,
)

FLOOR_SCHEDULER_NAME = "bench-floor"
FLOOR_NAMESPACE = "bench-floor"


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
    """One timed run of the real scheduler wiring until ``expected`` pods are bound."""

    bound: int
    wall: float
    cpu: float
    cycle_cpu: float  # CPU time after the informer sync
    sync_seconds: float
    cycle_latencies: list[float]
    extender_calls: int = 0
    batch_reused: int = 0  # node Filter results reused by opportunistic batching

    @property
    def rate(self) -> float:
        return self.bound / self.wall if self.wall > 0 else 0.0


async def run_scheduler(config: Any, connection: Any, *, namespace: str, expected: int,
                        timeout: float, progress: Progress, label: str, batching: bool = True,
                        during: Callable[[], Coroutine[Any, Any, None]] | None = None,
                        ) -> SchedulerRun:
    """Start the daemon's wiring, time it until ``expected`` pods of ``namespace`` are bound;
    ``during`` runs beside it (churn) and is cancelled at the end."""
    from scheduler.app import build_components
    from scheduler.metrics import SchedulerMetrics

    metrics = SchedulerMetrics()
    parts = build_components(config, connection, metrics=metrics)
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
    bound = 0
    all_bound = asyncio.Event()
    bind = sched.bind

    async def counted(fwk: Any, state: Any, pod_info: Any, node_name: str) -> Any:
        nonlocal bound
        status = await bind(fwk, state, pod_info, node_name)
        ok = status is None or status.is_success()
        if ok and pod_info.pod["metadata"].get("namespace") == namespace:
            bound += 1
            if bound >= expected:
                all_bound.set()
        return status

    sched.bind = counted  # type: ignore[method-assign]  # counting wrapper
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await parts.start(sync_timeout=120)
    sync_seconds = time.perf_counter() - wall0
    cpu_synced = time.process_time()
    loop = asyncio.create_task(sched.run(), name="bench-scheduling-loop")
    side = asyncio.create_task(during(), name="bench-churn") if during is not None else None
    deadline = time.perf_counter() + timeout
    while not all_bound.is_set() and time.perf_counter() < deadline:
        progress.update(label, bound, expected)
        try:
            await asyncio.wait_for(all_bound.wait(), timeout=0.1)
        except asyncio.TimeoutError:
            pass
    wall = time.perf_counter() - wall0
    cpu_end = time.process_time()
    progress.close()
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
    return SchedulerRun(bound=bound, wall=wall, cpu=cpu_end - cpu0,
                        cycle_cpu=cpu_end - cpu_synced, sync_seconds=sync_seconds,
                        cycle_latencies=cycle_latencies, extender_calls=extender_calls,
                        batch_reused=batches.reused if batches is not None else 0)


async def create_all(user: Any, pods: list[dict[str, Any]], concurrency: int,
                     progress: Progress, label: str) -> float:
    """Create the pods (each into its own namespace); returns the creation rate."""
    done = 0

    async def create(p: dict[str, Any]) -> None:
        nonlocal done
        await user.create(f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p)
        done += 1
        if done % 100 == 0:
            progress.update(label, done, len(pods))

    started = time.perf_counter()
    await gather_bounded(pods, create, concurrency)
    progress.close()
    return len(pods) / max(time.perf_counter() - started, 1e-9)


def churn_loop(user: Any, workload: Workload, *, scheduler_name: str, node_cpu: str,
               node_memory: str, iterations: int | None = None,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
               ) -> Callable[[], Coroutine[Any, Any, None]]:
    """The workload's churn: every interval, create (or replace) one object of each kind."""
    churn = workload.churn
    assert churn is not None

    async def run() -> None:
        previous: list[str] = []
        index = 0
        while iterations is None or index < iterations:
            await sleep(churn.interval_s)
            if churn.mode == "recreate":
                for path in previous:
                    try:
                        await user.delete(path)
                    except Exception:
                        pass  # e.g. a pod already deleted by preemption
                previous = []
            for kind in churn.kinds:
                collection, obj = churn_object(kind, index, scheduler_name=scheduler_name,
                                               node_cpu=node_cpu, node_memory=node_memory)
                await user.create(collection, obj)
                previous.append(f"{collection}/{obj['metadata']['name']}")
            index += 1

    return run


async def run_point(args: argparse.Namespace, workload: Workload) -> dict[str, Any]:
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.config.defaults import default_config
    from scheduler.config.load import load_config_file
    from scheduler.sandbox.testing import SandboxProcess

    progress = Progress(enabled=None if args.progress else False)
    nodes = args.nodes
    node_cpu = args.node_cpu or workload.node_cpu
    node_memory = args.node_memory or workload.node_memory
    measured = args.pods if args.pods else workload.measured_pods
    existing = (args.existing if args.existing is not None
                else workload.scaled(workload.existing_pods, nodes))
    gated = workload.scaled(workload.gated_pods, nodes)
    raw_count = min(measured, args.raw_binds)
    flags = {"nodes": nodes, "simulate_kubelet": False,
             "node_cpu": node_cpu, "node_memory": node_memory}
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

            if args.floor:
                # As many plain pods as measured, then gone before the real run.
                await create_namespace(user, FLOOR_NAMESPACE)
                floor_pods = [pod(f"floor-{i}", namespace=FLOOR_NAMESPACE,
                                  scheduler_name=FLOOR_SCHEDULER_NAME) for i in range(measured)]
                await create_all(user, floor_pods, args.concurrency, progress, "floor: pods")
                config = floor_config()
                config.leader_election.leader_elect = False
                config.client_connection.qps = 0
                floor = await run_scheduler(config, connection, namespace=FLOOR_NAMESPACE,
                                            expected=measured, timeout=args.timeout,
                                            progress=progress, label="floor: scheduling")
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
            if workload.gang_size:
                gang_size = args.gang_size or workload.gang_size
                template = gang_member(gang_size)
                await _install_gang(user, config, measured, gang_size)
            before: list[dict[str, Any]] = []
            if workload.existing is not None:
                for i in range(existing):
                    p = workload.existing(i, scheduler_name)
                    p["spec"]["nodeName"] = node_names[i % len(node_names)]
                    before.append(p)
            before.extend(gated_pod(i, scheduler_name) for i in range(gated))
            if before:
                await create_all(user, before, args.concurrency, progress, "existing pods")
            pods = [template(i, scheduler_name) for i in range(measured)]
            create_rate = await create_all(user, pods, args.concurrency, progress,
                                           "measured pods")
            during = None
            if workload.churn is not None:
                # Objects that stay ("create") are capped at one per ten nodes: on a tiny
                # cluster, unbounded 3-CPU pods would take every node from the measured pods.
                cap = max(1, nodes // 10) if workload.churn.mode == "create" else None
                during = churn_loop(user, workload, scheduler_name=scheduler_name,
                                    node_cpu=node_cpu, node_memory=node_memory,
                                    iterations=cap)
            run = await run_scheduler(config, connection, namespace=MEASURED_NAMESPACE,
                                      expected=len(pods), timeout=args.timeout,
                                      progress=progress, label=f"{workload.name}: scheduling",
                                      batching=args.batching, during=during)
            listed = (await user.get(f"/api/v1/namespaces/{MEASURED_NAMESPACE}/pods"))["items"]
            confirmed = sum(1 for p in listed if (p.get("spec") or {}).get("nodeName"))
        finally:
            await user.close()
            if extender is not None:
                extender[0].terminate()
                await extender[0].wait()

    return _result(workload, nodes=nodes, measured=len(pods), existing=existing, gated=gated,
                   confirmed=confirmed, raw_rate=raw_rate, official_rate=official_rate,
                   with_event_rate=with_event_rate, create_rate=create_rate, floor=floor,
                   run=run)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _result(workload: Workload, *, nodes: int, measured: int, existing: int, gated: int,
            confirmed: int, raw_rate: float, official_rate: float, with_event_rate: float,
            create_rate: float, floor: SchedulerRun | None,
            run: SchedulerRun) -> dict[str, Any]:
    latencies = run.cycle_latencies
    throughput = run.rate
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
        "pod_create_rate_per_s": round(create_rate, 1),
    }
    if floor is not None:
        result["floor_pods_per_s"] = round(floor.rate, 1)
        result["floor_cpu_per_pod_ms"] = round(floor.cpu / max(floor.bound, 1) * 1000, 3)
        result["floor_cycle_cpu_per_pod_ms"] = round(
            floor.cycle_cpu / max(floor.bound, 1) * 1000, 3)
    result.update({
        "scheduler_pods_per_s": round(throughput, 1),
        "ratio_to_upstream_floor": (_ratio(throughput, workload.upstream_floor)
                                    if workload.upstream_floor else None),
        "ratio_to_binding_with_event": _ratio(throughput, with_event_rate),
        "ratio_to_raw_binding": _ratio(throughput, raw_rate),
        "ratio_to_official_client_binding": _ratio(throughput, official_rate),
        "binding_with_event_ratio_to_raw_binding": _ratio(with_event_rate, raw_rate),
    })
    if floor is not None:
        result["floor_ratio_to_raw_binding"] = _ratio(floor.rate, raw_rate)
        result["floor_ratio_to_binding_with_event"] = _ratio(floor.rate, with_event_rate)
        result["ratio_to_floor"] = _ratio(throughput, floor.rate)
    result.update({
        "informer_sync_s": round(run.sync_seconds, 3),
        "wall_s": round(run.wall, 3),
        "cycle_p50_ms": round(percentile(latencies, 50) * 1000, 3),
        "cycle_p99_ms": round(percentile(latencies, 99) * 1000, 3),
        "cycle_mean_ms": round(statistics.fmean(latencies) * 1000, 3) if latencies else 0.0,
        "cycles": len(latencies),
        "cpu_s": round(run.cpu, 2),
        "cpu_per_pod_ms": round(run.cpu / max(run.bound, 1) * 1000, 3),
        "cycle_cpu_per_pod_ms": round(run.cycle_cpu / max(run.bound, 1) * 1000, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "batched_node_filters_per_pod": round(run.batch_reused / max(run.bound, 1), 1),
    })
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


async def _install_gang(user: Any, config: Any, count: int, gang_size: int) -> None:
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
    for group in pod_groups(count, gang_size):
        await user.create(path, group)
    profile = config.profiles[0]
    names = {ref.name for ref in profile.plugins.multi_point.enabled}
    if "Coscheduling" not in names:
        profile.plugins.multi_point.enabled.append(PluginRef("Coscheduling"))
        profile.plugins.queue_sort.enabled.append(PluginRef("Coscheduling"))
        profile.plugins.queue_sort.disabled.append(PluginRef("*"))
