"""``kube-py-scheduler bench``: scheduler throughput against the sandbox, with its ceiling.

One run measures, against the same sandbox process (on the other core):

1. the raw binding rate: binding POSTs from 32 concurrent connections, no scheduling at all —
   the most any scheduler could bind through this API server and client stack — with our
   aiohttp client and, for reference, with the official ``kubernetes.aio`` client; and the
   same with what a kube-scheduler-like scheduler also asks of the server per pod (the
   ``Scheduled`` event POST, a pod watch open);
2. the scheduler: M pending pods are created first, then the real scheduler (the daemon's own
   wiring, in this process) starts; we time from its start until every pod is bound, and
   record each scheduling cycle's latency, this process's CPU time and peak RSS.

Before (2), unless ``--no-floor``, the same wiring runs once with a profile that has no Filter
or Score plugins (PrioritySort and DefaultBinder only) on as many plain pods: the daemon's floor,
what informers, queue, snapshot, assume, binding and events cost with no plugin work at all.

The ratio of (2) to (1) is the figure that survives a noisy machine; both absolute numbers are
printed too, as are the floor's rate and its ratio to (1), which bound what any profile of this
daemon can reach on this machine.  Workloads: ``plain`` (cpu/memory requests),
``anti-affinity`` (replica sets with required pod anti-affinity on hostname), ``spread``
(topology spread over zones, maxSkew 1), ``gang`` (PodGroups scheduled all-or-nothing by
Coscheduling).
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
from collections.abc import Callable, Sequence
from typing import Any

WORKLOADS = ("plain", "anti-affinity", "spread", "gang")
RAW_SCHEDULER_NAME = "bench-raw-binder"
BENCH_NAMESPACE = "default"
RAW_NAMESPACE = "bench-raw"


def _pod(name: str, *, scheduler_name: str, namespace: str = BENCH_NAMESPACE,
         labels: dict[str, str] | None = None, cpu: str = "100m",
         memory: str = "128Mi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }],
        },
    }


def workload_pods(kind: str, count: int, *, nodes: int, scheduler_name: str,
                  gang_size: int = 8) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    if kind == "plain":
        for i in range(count):
            pods.append(_pod(f"plain-{i}", scheduler_name=scheduler_name))
    elif kind == "anti-affinity":
        # Replica sets no larger than the node count, each spread one per node.
        group = max(1, min(nodes, 50))
        for i in range(count):
            app = f"aa-{i // group}"
            pod = _pod(f"aa-{i}", scheduler_name=scheduler_name, labels={"app": app})
            pod["spec"]["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": "kubernetes.io/hostname",
                }]}}
            pods.append(pod)
    elif kind == "spread":
        for i in range(count):
            app = f"sp-{i // 100}"
            pod = _pod(f"sp-{i}", scheduler_name=scheduler_name, labels={"app": app})
            pod["spec"]["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": app}}},
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                 "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {"app": app}}},
            ]
            pods.append(pod)
    elif kind == "gang":
        for i in range(count):
            gang = f"gang-{i // gang_size}"
            pods.append(_pod(
                f"gang-{i}", scheduler_name=scheduler_name,
                labels={"scheduling.x-k8s.io/pod-group": gang}, cpu="1", memory="1Gi",
            ))
    else:
        raise ValueError(f"--workload: one of {', '.join(WORKLOADS)}, got {kind!r}")
    return pods


def pod_groups(count: int, gang_size: int) -> list[dict[str, Any]]:
    return [{
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": f"gang-{g}", "namespace": BENCH_NAMESPACE},
        "spec": {"minMember": gang_size, "scheduleTimeoutSeconds": 60},
    } for g in range((count + gang_size - 1) // gang_size)]


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def _gather_bounded(items: Sequence[Any], fn: Callable[[Any], Any], concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> None:
        async with slots:
            await fn(item)

    await asyncio.gather(*(one(i) for i in items))


async def _create_namespace(client: Any, namespace: str) -> None:
    await client.create("/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


async def _unscheduled_pods(client: Any, namespace: str, count: int,
                            concurrency: int) -> list[dict[str, Any]]:
    """A fresh namespace with ``count`` pods no scheduler watches, as the server returned them."""
    await _create_namespace(client, namespace)
    path = f"/api/v1/namespaces/{namespace}/pods"
    created: list[dict[str, Any]] = []

    async def create(i: int) -> None:
        created.append(await client.create(path, _pod(
            f"raw-{i}", scheduler_name=RAW_SCHEDULER_NAME, namespace=namespace)))

    await _gather_bounded(list(range(count)), create, concurrency)
    return created


async def measure_raw_binding(client: Any, node_names: list[str], count: int,
                              concurrency: int) -> float:
    """Create ``count`` pods nobody schedules, then bind them as fast as possible."""
    created = await _unscheduled_pods(client, RAW_NAMESPACE, count, concurrency)
    started = time.perf_counter()

    async def bind(item: tuple[int, dict[str, Any]]) -> None:
        i, pod = item
        await client.bind(pod, node_names[i % len(node_names)])

    await _gather_bounded(list(enumerate(created)), bind, concurrency)
    elapsed = time.perf_counter() - started
    await client.delete(f"/api/v1/namespaces/{RAW_NAMESPACE}")
    return count / elapsed


async def measure_binding_with_event(client: Any, node_names: list[str], count: int,
                                     concurrency: int) -> float:
    """What the API server alone allows a scheduler that reports like kube-scheduler: per
    pod, the binding POST and the ``Scheduled`` event POST, with a pod watch open (its
    informer), from ``concurrency`` connections and with no scheduling at all."""
    from datetime import datetime, timezone

    from scheduler.client.events import micro_time

    namespace = RAW_NAMESPACE + "-events"
    created = await _unscheduled_pods(client, namespace, count, concurrency)
    path = f"/api/v1/namespaces/{namespace}/pods"
    listed = await client.get(path)

    async def drain() -> None:
        params = {"resourceVersion": listed["metadata"]["resourceVersion"]}
        async for _ in client.watch(path, params):
            pass  # the server's fan-out is the load being measured

    watcher = asyncio.create_task(drain(), name="bench-raw-watch")
    events = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"

    async def bind(item: tuple[int, dict[str, Any]]) -> None:
        i, pod = item
        node = node_names[i % len(node_names)]
        await client.bind(pod, node)
        meta = pod["metadata"]
        await client.create(events, {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.bench", "namespace": namespace},
            "eventTime": micro_time(datetime.now(timezone.utc)),
            "reportingController": "bench", "reportingInstance": "bench",
            "action": "Binding", "reason": "Scheduled", "type": "Normal",
            "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace,
                          "name": meta["name"], "uid": meta["uid"]},
            "note": f"Successfully assigned {namespace}/{meta['name']} to {node}",
        })

    started = time.perf_counter()
    await _gather_bounded(list(enumerate(created)), bind, concurrency)
    elapsed = time.perf_counter() - started
    watcher.cancel()
    try:
        await watcher
    except (asyncio.CancelledError, Exception):
        pass
    await client.delete(f"/api/v1/namespaces/{namespace}")
    return count / elapsed


async def measure_raw_binding_official_client(
    kubeconfig: str, client: Any, node_names: list[str], count: int, concurrency: int
) -> float:
    """The same raw binding measurement through the official ``kubernetes.aio`` client."""
    from kubernetes.aio import client as kclient
    from kubernetes.aio import config as kconfig

    namespace = RAW_NAMESPACE + "-official"
    created = await _unscheduled_pods(client, namespace, count, concurrency)
    configuration = kclient.Configuration()
    await kconfig.load_kube_config(  # type: ignore[no-untyped-call]  # untyped upstream
        config_file=kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = concurrency
    async with kclient.ApiClient(configuration) as api_client:
        core = kclient.CoreV1Api(api_client)

        async def bind(item: tuple[int, dict[str, Any]]) -> None:
            i, pod = item
            body = kclient.V1Binding(
                metadata=kclient.V1ObjectMeta(name=pod["metadata"]["name"],
                                              uid=pod["metadata"]["uid"]),
                target=kclient.V1ObjectReference(api_version="v1", kind="Node",
                                                 name=node_names[i % len(node_names)]),
            )
            response = await core.create_namespaced_pod_binding_without_preload_content(
                pod["metadata"]["name"], namespace, body)
            await response.read()
            response.release()

        started = time.perf_counter()
        await _gather_bounded(list(enumerate(created)), bind, concurrency)
        elapsed = time.perf_counter() - started
    await client.delete(f"/api/v1/namespaces/{namespace}")
    return count / elapsed


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


class _SchedulerRun:
    """One timed run of the real scheduler wiring until ``expected`` pods are scheduled."""

    def __init__(self, *, bound: int, wall: float, cpu: float, sync_seconds: float,
                 cycle_latencies: list[float]) -> None:
        self.bound = bound
        self.wall = wall
        self.cpu = cpu
        self.sync_seconds = sync_seconds
        self.cycle_latencies = cycle_latencies

    @property
    def rate(self) -> float:
        return self.bound / self.wall if self.wall > 0 else 0.0


async def _run_scheduler(config: Any, connection: Any, *, expected: int,
                         timeout: float) -> _SchedulerRun:
    from scheduler.app import build_components
    from scheduler.metrics import SchedulerMetrics

    scheduler_name = config.profiles[0].scheduler_name
    metrics = SchedulerMetrics()
    parts = build_components(config, connection, metrics=metrics)
    cycle_latencies: list[float] = []
    original = parts.scheduler.cycle.schedule_one

    def timed(qpi: Any) -> None:
        t = time.perf_counter()
        original(qpi)
        cycle_latencies.append(time.perf_counter() - t)

    parts.scheduler.cycle.schedule_one = timed  # type: ignore[method-assign]  # timing wrapper
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await parts.start(sync_timeout=120)
    sync_seconds = time.perf_counter() - wall0
    loop = asyncio.create_task(parts.scheduler.run(), name="bench-scheduling-loop")
    scheduled = metrics.schedule_attempts.labels("scheduled", scheduler_name)
    deadline = time.perf_counter() + timeout
    while scheduled._value.get() < expected and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    bound = int(scheduled._value.get())
    await parts.aclose(grace_seconds=5)
    loop.cancel()
    return _SchedulerRun(bound=bound, wall=wall, cpu=cpu, sync_seconds=sync_seconds,
                         cycle_latencies=cycle_latencies)


async def _create_pods(user: Any, namespace: str, pods: list[dict[str, Any]],
                       concurrency: int) -> float:
    started = time.perf_counter()
    await _gather_bounded(
        pods, lambda p: user.create(f"/api/v1/namespaces/{namespace}/pods", p), concurrency)
    return len(pods) / (time.perf_counter() - started)


async def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.config.defaults import default_config
    from scheduler.config.load import load_config_file
    from scheduler.sandbox.testing import SandboxProcess

    flags = {"nodes": args.nodes, "simulate_kubelet": False,
             "node_cpu": args.node_cpu, "node_memory": args.node_memory}
    floor: _SchedulerRun | None = None
    async with SandboxProcess(**flags) as sandbox:
        connection = load_connection(kubeconfig=str(sandbox.kubeconfig_path))
        user = ApiClient(connection, qps=0, pool_size=64)
        try:
            nodes = (await user.get("/api/v1/nodes"))["items"]
            node_names = [n["metadata"]["name"] for n in nodes]
            raw_rate = await measure_raw_binding(
                user, node_names, min(args.pods, args.raw_binds), args.concurrency)
            official_rate = await measure_raw_binding_official_client(
                str(sandbox.kubeconfig_path), user, node_names,
                min(args.pods, args.raw_binds), args.concurrency)
            with_event_rate = await measure_binding_with_event(
                user, node_names, min(args.pods, args.raw_binds), args.concurrency)

            if args.floor:
                # Same pod count and shape as a plain run, then gone before the real run.
                await _create_namespace(user, FLOOR_NAMESPACE)
                floor_pods = workload_pods("plain", args.pods, nodes=args.nodes,
                                           scheduler_name=FLOOR_SCHEDULER_NAME)
                for pod in floor_pods:
                    pod["metadata"]["namespace"] = FLOOR_NAMESPACE
                await _create_pods(user, FLOOR_NAMESPACE, floor_pods, args.concurrency)
                config = floor_config()
                config.leader_election.leader_elect = False
                config.client_connection.qps = 0
                floor = await _run_scheduler(config, connection, expected=len(floor_pods),
                                             timeout=args.timeout)
                await user.delete(f"/api/v1/namespaces/{FLOOR_NAMESPACE}")

            if args.config:
                config = load_config_file(args.config)
            else:
                config = default_config()
            config.leader_election.leader_elect = False
            config.client_connection.qps = args.qps
            config.client_connection.burst = max(int(args.qps * 2), 1) if args.qps > 0 else 0
            scheduler_name = config.profiles[0].scheduler_name
            if args.workload == "gang":
                await _install_gang(user, config, args)
            pods = workload_pods(args.workload, args.pods, nodes=args.nodes,
                                 scheduler_name=scheduler_name, gang_size=args.gang_size)
            create_rate = await _create_pods(user, BENCH_NAMESPACE, pods, args.concurrency)
            run = await _run_scheduler(config, connection, expected=len(pods),
                                       timeout=args.timeout)
            listed = (await user.get(f"/api/v1/namespaces/{BENCH_NAMESPACE}/pods"))["items"]
            confirmed = sum(1 for p in listed if (p.get("spec") or {}).get("nodeName"))
        finally:
            await user.close()

    throughput = run.rate
    latencies = run.cycle_latencies
    result: dict[str, Any] = {
        "workload": args.workload,
        "nodes": args.nodes,
        "pods": len(pods),
        "bound": confirmed,
        "raw_binding_rate_per_s": round(raw_rate, 1),
        "raw_binding_rate_official_client_per_s": round(official_rate, 1),
        "binding_with_event_rate_per_s": round(with_event_rate, 1),
        "pod_create_rate_per_s": round(create_rate, 1),
    }
    if floor is not None:
        result["floor_pods_per_s"] = round(floor.rate, 1)
        result["floor_cpu_per_pod_ms"] = round(floor.cpu / max(floor.bound, 1) * 1000, 3)
    result.update({
        "scheduler_pods_per_s": round(throughput, 1),
        "ratio_to_raw_binding": round(throughput / raw_rate, 3) if raw_rate else None,
        "ratio_to_official_client_binding": round(throughput / official_rate, 3)
        if official_rate else None,
        "binding_with_event_ratio_to_raw_binding": round(with_event_rate / raw_rate, 3)
        if raw_rate else None,
    })
    if floor is not None:
        result["floor_ratio_to_raw_binding"] = (
            round(floor.rate / raw_rate, 3) if raw_rate else None)
        result["ratio_to_floor"] = round(throughput / floor.rate, 3) if floor.rate else None
    result.update({
        "informer_sync_s": round(run.sync_seconds, 3),
        "wall_s": round(run.wall, 3),
        "cycle_p50_ms": round(percentile(latencies, 50) * 1000, 3),
        "cycle_p99_ms": round(percentile(latencies, 99) * 1000, 3),
        "cycle_mean_ms": round(statistics.fmean(latencies) * 1000, 3) if latencies else 0.0,
        "cycles": len(latencies),
        "cpu_s": round(run.cpu, 2),
        "cpu_per_pod_ms": round(run.cpu / max(run.bound, 1) * 1000, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    })
    return result


async def _install_gang(user: Any, config: Any, args: argparse.Namespace) -> None:
    import yaml

    from scheduler.config.types import PluginRef

    crd_path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml")
    with open(crd_path, encoding="utf-8") as f:
        crd = yaml.safe_load(f)
    await user.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    for _ in range(100):  # wait until the new resource is served
        try:
            await user.get(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/"
                           f"{BENCH_NAMESPACE}/podgroups")
            break
        except Exception:
            await asyncio.sleep(0.05)
    for group in pod_groups(args.pods, args.gang_size):
        await user.create(
            f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{BENCH_NAMESPACE}/podgroups", group)
    profile = config.profiles[0]
    profile.plugins.multi_point.enabled.append(PluginRef("Coscheduling"))
    profile.plugins.queue_sort.enabled.append(PluginRef("Coscheduling"))
    profile.plugins.queue_sort.disabled.append(PluginRef("*"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``kube-py-scheduler bench`` (the CLI layer owns the parser)."""
    p.add_argument("--nodes", type=int, default=1000,
                   help="simulated nodes in the sandbox (default %(default)s)")
    p.add_argument("--pods", type=int, default=5000,
                   help="pending pods the scheduler binds (default %(default)s)")
    p.add_argument("--workload", choices=WORKLOADS, default="plain",
                   help="what the pods ask of the scheduler (default %(default)s)")
    p.add_argument("--gang-size", type=int, default=8,
                   help="with --workload gang: pods per PodGroup (default %(default)s)")
    p.add_argument("--node-cpu", default="32",
                   help="allocatable CPU of each node (default %(default)s)")
    p.add_argument("--node-memory", default="128Gi",
                   help="allocatable memory of each node (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=32,
                   help="connections for creating pods and for the raw binding measurement "
                   "(default %(default)s)")
    p.add_argument("--raw-binds", type=int, default=3000,
                   help="pods bound in the raw binding measurement, at most --pods "
                   "(default %(default)s)")
    p.add_argument("--qps", type=float, default=0.0,
                   help="scheduler client QPS; 0 = unlimited, to measure the scheduler itself "
                   "(default %(default)s)")
    p.add_argument("--config", default=None,
                   help="KubeSchedulerConfiguration file for the scheduler "
                   "(default: the built-in profile)")
    p.add_argument("--no-floor", dest="floor", action="store_false",
                   help="skip the floor run, the daemon with no Filter/Score plugins "
                   "(default: run it)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for every pod to be bound (default %(default)s)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of a table (default: a table)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark with parsed flags; exit 0 when every pod was bound."""
    if args.nodes < 1 or args.pods < 1:
        print("kube-py-scheduler bench: --nodes and --pods must be positive", file=sys.stderr)
        return 2
    result = asyncio.run(run_bench(args))
    if args.json:
        print(json.dumps(result))
    else:
        width = max(len(k) for k in result)
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    return 0 if result["bound"] == result["pods"] else 1
