"""The ceiling the scheduler is compared with, measured against the same sandbox.

Binding POSTs from many concurrent connections with no scheduling at all (with our aiohttp
client and, for reference, the official ``kubernetes.aio`` client), and the same plus what a
kube-scheduler-like scheduler also asks of the API server per pod (the ``Scheduled`` event
POST, a pod watch open): the most any such scheduler could reach through this API server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from scheduler.bench.workloads import pod

RAW_SCHEDULER_NAME = "bench-raw-binder"
RAW_NAMESPACE = "bench-raw"


async def gather_bounded(items: Sequence[Any], fn: Callable[[Any], Any], concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> None:
        async with slots:
            await fn(item)

    await asyncio.gather(*(one(i) for i in items))


async def create_namespace(client: Any, namespace: str) -> None:
    await client.create("/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


async def _unscheduled_pods(client: Any, namespace: str, count: int,
                            concurrency: int) -> list[dict[str, Any]]:
    """A fresh namespace with ``count`` pods no scheduler watches, as the server returned them."""
    await create_namespace(client, namespace)
    path = f"/api/v1/namespaces/{namespace}/pods"
    created: list[dict[str, Any]] = []

    async def create(i: int) -> None:
        created.append(await client.create(path, pod(
            f"raw-{i}", scheduler_name=RAW_SCHEDULER_NAME, namespace=namespace)))

    await gather_bounded(list(range(count)), create, concurrency)
    return created


async def measure_raw_binding(client: Any, node_names: list[str], count: int,
                              concurrency: int) -> float:
    """Create ``count`` pods nobody schedules, then bind them as fast as possible."""
    created = await _unscheduled_pods(client, RAW_NAMESPACE, count, concurrency)
    started = time.perf_counter()

    async def bind(item: tuple[int, dict[str, Any]]) -> None:
        i, pod = item
        await client.bind(pod, node_names[i % len(node_names)])

    await gather_bounded(list(enumerate(created)), bind, concurrency)
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
    await gather_bounded(list(enumerate(created)), bind, concurrency)
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
        await gather_bounded(list(enumerate(created)), bind, concurrency)
        elapsed = time.perf_counter() - started
    await client.delete(f"/api/v1/namespaces/{namespace}")
    return count / elapsed
