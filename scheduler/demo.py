"""The demo workload that ``run --sandbox`` creates, so the first command shows real scheduling.

A handful of web pods that fit, spread by the scheduler over the simulated nodes, and one pod
too big for any node, which shows what FailedScheduling looks like in `kubectl describe pod`.
"""

from __future__ import annotations

from typing import Any

import structlog

from scheduler.client.api import AlreadyExists, ApiClient

log = structlog.get_logger(__name__)

DEMO_NAMESPACE = "default"


def demo_pod(name: str, *, scheduler_name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE, "labels": {"app": "demo"}},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "web",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


async def create_demo_workload(client: ApiClient, *, pods: int, scheduler_name: str) -> None:
    path = f"/api/v1/namespaces/{DEMO_NAMESPACE}/pods"
    objects = [
        demo_pod(f"demo-web-{i}", scheduler_name=scheduler_name, cpu="500m", memory="256Mi")
        for i in range(pods)
    ]
    objects.append(
        demo_pod("demo-too-big", scheduler_name=scheduler_name, cpu="1000", memory="1Ti")
    )
    for obj in objects:
        try:
            await client.create(path, obj)
        except AlreadyExists:
            pass
    log.info("demo workload created", pods=len(objects), namespace=DEMO_NAMESPACE)
