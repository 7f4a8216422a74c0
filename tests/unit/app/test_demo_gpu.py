"""The GPU part of the `run --sandbox` demo: how many GPU pods (one more than the simulated
driver's GPUs, so one waits), and that the sandbox accepts the demo's objects and its
resourceclaim controller gives every GPU pod its claim."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli.run import demo_gpu_pods
from scheduler.client.api import ApiClient
from scheduler.client.connection import load_connection
from scheduler.demo import GPU_TEMPLATE, create_demo_workload
from scheduler.sandbox import Sandbox


@pytest.mark.parametrize(("devices", "nodes", "want"), [
    ("gpu=2:nodes=1", 4, 3),
    ("gpu=1", 3, 4),
    ("gpu=2:nodes=9", 2, 5),  # no more nodes than the cluster has
    ("gpu=8", 4, 0),  # 32 GPUs: too many for a small demo
    ("nic=2", 4, 0),
    ("", 4, 0),
])
def test_demo_gpu_pods(devices: str, nodes: int, want: int) -> None:
    assert demo_gpu_pods(devices, nodes) == want


@pytest.mark.sandbox(dra_devices="gpu=2:nodes=1")
async def test_demo_objects_are_accepted_and_claimed(sandbox: Sandbox, tmp_path: Path) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with ApiClient(load_connection(kubeconfig=str(kc)), qps=0) as client:
        await create_demo_workload(client, pods=1, scheduler_name="kube-py-scheduler", gpu_pods=3)
        await create_demo_workload(client, pods=1, scheduler_name="kube-py-scheduler", gpu_pods=3)  # idempotent
        tmpl = await client.get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/{GPU_TEMPLATE}")
        assert tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"
        assert await client.get("/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com")
        assert sandbox.claim_controller is not None
        sandbox.claim_controller.sync()  # the controller's turn, now
        pods = (await client.get("/api/v1/namespaces/default/pods", params={"labelSelector": "app=demo-gpu"}))["items"]
        assert sorted(p["metadata"]["name"] for p in pods) == ["demo-gpu-0", "demo-gpu-1", "demo-gpu-2"]
        for p in pods:
            assert p["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
            [status] = p["status"]["resourceClaimStatuses"]
            assert status["name"] == "gpu" and status["resourceClaimName"].startswith(f"{p['metadata']['name']}-gpu-")
