"""Run the real scheduler against a sandbox over HTTP, and talk to the sandbox as a user would.

Integration tests use the same wiring as the daemon (``scheduler.app.build_components``): real
informers, cache, queue, plugins and binder, a real HTTP connection from a kubeconfig.  Only
leader election is left out (tests of it start whole processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from scheduler.app import Components, build_components
from scheduler.client.api import ApiClient, NotFound
from scheduler.client.connection import load_connection
from scheduler.config.defaults import default_config
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.metrics import SchedulerMetrics

PODS = "/api/v1/namespaces/{ns}/pods"
POD = "/api/v1/namespaces/{ns}/pods/{name}"


def scheduler_config(**overrides: Any) -> KubeSchedulerConfiguration:
    config = default_config()
    config.leader_election.leader_elect = False
    # Tests want fast retries; the semantics (doubling up to the max) are unchanged.
    config.pod_initial_backoff_seconds = 1
    config.pod_max_backoff_seconds = 2
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


async def wait_until(
    predicate: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)


class Cluster:
    """A user's view of the sandbox: create and read objects over HTTP."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    async def create_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        ns = pod["metadata"].get("namespace", "default")
        result: dict[str, Any] = await self.client.create(PODS.format(ns=ns), pod)
        return result

    async def create_pods(self, pods: list[dict[str, Any]], *, concurrency: int = 16) -> None:
        slots = asyncio.Semaphore(concurrency)

        async def one(pod: dict[str, Any]) -> None:
            async with slots:
                await self.create_pod(pod)

        await asyncio.gather(*(one(p) for p in pods))

    async def create_node(self, node: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.create("/api/v1/nodes", node)
        return result

    async def get_pod(self, name: str, ns: str = "default") -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.client.get(POD.format(ns=ns, name=name))
            return result
        except NotFound:
            return None

    async def delete_pod(self, name: str, ns: str = "default") -> None:
        with contextlib.suppress(NotFound):
            await self.client.delete(POD.format(ns=ns, name=name),
                                     params={"gracePeriodSeconds": "0"})

    async def list_pods(self, ns: str | None = None) -> list[dict[str, Any]]:
        path = "/api/v1/pods" if ns is None else PODS.format(ns=ns)
        result = await self.client.get(path)
        return list(result.get("items") or [])

    async def list_nodes(self) -> list[dict[str, Any]]:
        result = await self.client.get("/api/v1/nodes")
        return list(result.get("items") or [])

    async def events_for(self, name: str, ns: str = "default") -> list[dict[str, Any]]:
        """events.k8s.io/v1 events regarding the named object."""
        result = await self.client.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")
        return [
            e for e in result.get("items") or []
            if (e.get("regarding") or {}).get("name") == name
        ]

    async def node_name(self, name: str, ns: str = "default") -> str:
        pod = await self.get_pod(name, ns)
        return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


@contextlib.asynccontextmanager
async def running_scheduler(
    kubeconfig: Path | str,
    *,
    config: KubeSchedulerConfiguration | None = None,
    metrics: SchedulerMetrics | None = None,
    event_process: str = "off",
    write_pipeline: int = 1,
) -> AsyncIterator[Components]:
    """The daemon's components, synced and scheduling, stopped on exit."""
    connection = load_connection(kubeconfig=str(kubeconfig))
    parts = build_components(
        config or scheduler_config(), connection, metrics=metrics or SchedulerMetrics(),
        event_process=event_process, write_pipeline=write_pipeline,
    )
    await parts.start(sync_timeout=15)
    loop_task = asyncio.create_task(parts.scheduler.run(), name="test-scheduling-loop")
    try:
        yield parts
    finally:
        await parts.aclose(grace_seconds=2.0)
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task


@contextlib.asynccontextmanager
async def user_client(kubeconfig: Path | str) -> AsyncIterator[Cluster]:
    client = ApiClient(load_connection(kubeconfig=str(kubeconfig)), qps=0)
    try:
        yield Cluster(client)
    finally:
        await client.close()


SERVER_SET_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation")


def for_api(obj: dict[str, Any]) -> dict[str, Any]:
    """A builder object with the fields only the API server may set removed.

    Pods lose their status (the API server resets it on create); nodes keep theirs, as a
    kubelet registers its node with capacity and allocatable in the create call.
    """
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET_FIELDS}
    keep_status = obj.get("kind") == "Node"
    clean = {k: v for k, v in obj.items() if k != "status" or keep_status}
    clean["metadata"] = meta
    return clean


def requests_on(pods: list[dict[str, Any]], node: str) -> tuple[int, int]:
    """(milli-CPU, bytes of memory) requested by the given pods on ``node``."""
    from scheduler.objects.pod import pod_requests

    cpu = memory = 0
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") == node:
            req = pod_requests(pod)
            cpu += req.milli_cpu
            memory += req.memory
    return cpu, memory
