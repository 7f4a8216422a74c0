"""The demo workload that ``run --sandbox`` creates, so the first command shows real scheduling.

A handful of web pods that fit, spread by the scheduler over the simulated nodes, and one pod
too big for any node, which shows what FailedScheduling looks like in `kubectl describe pod`.

With the sandbox's simulated DRA driver (``run --sandbox --dra-devices``, by default two GPUs
on one node), also a small GPU workload the Dynamic Resource Allocation way: a
ResourceClaimTemplate ``single-gpu`` asking for one device of the driver's DeviceClass, and
one more pod than there are GPUs, each with a claim from that template; the last one waits.
"""

from __future__ import annotations

from typing import Any

import structlog

from scheduler.client.api import AlreadyExists, ApiClient

log = structlog.get_logger(__name__)

DEMO_NAMESPACE = "default"
GPU_CLASS = "gpu.example.com"  # the DeviceClass of the sandbox's simulated driver (gpu=N)
GPU_TEMPLATE = "single-gpu"


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


def gpu_claim_template() -> dict[str, Any]:
    """One device of the GPU class, per pod (a ResourceClaimTemplate)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": GPU_TEMPLATE, "namespace": DEMO_NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}},
    }


def gpu_pod(name: str, *, scheduler_name: str) -> dict[str, Any]:
    """A pod whose container uses one GPU through a claim generated from the template."""
    pod = demo_pod(name, scheduler_name=scheduler_name, cpu="250m", memory="128Mi")
    pod["metadata"]["labels"] = {"app": "demo-gpu"}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": GPU_TEMPLATE}]
    container = pod["spec"]["containers"][0]
    container["name"] = "train"
    container["resources"]["claims"] = [{"name": "gpu"}]
    return pod


async def create_demo_workload(client: ApiClient, *, pods: int, scheduler_name: str, gpu_pods: int = 0) -> None:
    """The web pods, the too-big pod and, if ``gpu_pods``, the GPU template and GPU pods."""
    if gpu_pods:
        try:
            await client.create(
                f"/apis/resource.k8s.io/v1/namespaces/{DEMO_NAMESPACE}/resourceclaimtemplates",
                gpu_claim_template())
        except AlreadyExists:
            pass
    path = f"/api/v1/namespaces/{DEMO_NAMESPACE}/pods"
    objects = [
        demo_pod(f"demo-web-{i}", scheduler_name=scheduler_name, cpu="500m", memory="256Mi")
        for i in range(pods)
    ]
    objects.append(
        demo_pod("demo-too-big", scheduler_name=scheduler_name, cpu="1000", memory="1Ti")
    )
    objects += [gpu_pod(f"demo-gpu-{i}", scheduler_name=scheduler_name) for i in range(gpu_pods)]
    for obj in objects:
        try:
            await client.create(path, obj)
        except AlreadyExists:
            pass
    log.info("demo workload created", pods=len(objects), namespace=DEMO_NAMESPACE)
