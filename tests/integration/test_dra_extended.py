"""DRAExtendedResource end to end against the sandbox over HTTP: a pod asking for
``example.com/gpu: 1`` in its resources (no ResourceClaim of its own) lands on the node with a
free device of the class that backs the resource; the scheduler's claim and the pod's
``status.extendedResourceClaimStatus`` are written as kube-scheduler writes them; the kubelet
starts the pod; a second pod waits with kube-scheduler's words; deleting the first pod
deletes its claim and frees the device for the second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import PodBuilder
from tests.integration.dra import API, CLAIMS, dra_cluster
from tests.integration.harness import for_api, running_scheduler, wait_until

GPU = "example.com/gpu"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# one GPU, on the first node only, its DeviceClass backing example.com/gpu; no node
# advertises example.com/gpu in its allocatable (no device plugin)
ONE_GPU = f"gpu=1:nodes=1:extendedResourceName={GPU}"


def gpu_pod(name: str) -> dict[str, Any]:
    pod = for_api(PodBuilder(name, "default").scheduler_name("py-scheduler")
                  .req(cpu="100m", memory="64Mi", **{GPU: "1"})
                  .limits(**{GPU: "1"}).obj())
    pod["spec"]["containers"][0]["name"] = "main"
    return pod


async def test_pod_asking_for_an_extended_resource_gets_a_device_through_dra(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    async with dra_cluster(sandbox_factory, tmp_path, nodes=4, dra_devices=ONE_GPU) as env:
        cluster, api, gpu_node = env.cluster, env.api, env.nodes[0]
        cls = await api.get(f"{API}/deviceclasses/gpu.example.com")
        assert cls["spec"]["extendedResourceName"] == GPU

        await cluster.create_pod(gpu_pod("first"))
        await wait_until(lambda: cluster.node_name("first"), timeout=30,
                         message="first bound")
        assert await cluster.node_name("first") == gpu_node

        first = await cluster.get_pod("first")
        assert first is not None
        ers = first["status"]["extendedResourceClaimStatus"]
        claim_name = ers["resourceClaimName"]
        assert claim_name.startswith("first-extended-resources-")
        # request names: the container's index, then the resource's among its sorted requests
        assert ers["requestMappings"] == [{"containerName": "main", "resourceName": GPU,
                                           "requestName": "container-0-request-1"}]
        claim = await api.get(f"{CLAIMS}/{claim_name}")
        md = claim["metadata"]
        assert md["annotations"] == {ANNOTATION: "true"}
        assert md["generateName"] == "first-extended-resources-"
        assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "first",
                                          "uid": first["metadata"]["uid"],
                                          "controller": True}]
        assert md["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert claim["spec"]["devices"]["requests"] == [
            {"name": "container-0-request-1", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                "count": 1}}]
        alloc = claim["status"]["allocation"]
        assert alloc["devices"]["results"] == [
            {"request": "container-0-request-1", "driver": "gpu.example.com",
             "pool": gpu_node, "device": "gpu-0"}]
        assert alloc["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [gpu_node]}]}]}
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": "first", "uid": first["metadata"]["uid"]}]

        async def running() -> bool:
            p = await cluster.get_pod("first")
            return p is not None and (p.get("status") or {}).get("phase") == "Running"

        await wait_until(running, timeout=20, message="the kubelet starts the first pod")

        # the only device is taken: the second pod waits with DynamicResources' words, and
        # NodeResourcesFit does not call the resource insufficient
        await cluster.create_pod(gpu_pod("second"))

        await wait_until(lambda: env.failed("second"), timeout=20,
                         message="second's FailedScheduling")
        note = (await env.failed("second"))[0]
        assert note.startswith("0/4 nodes are available: 4 cannot allocate all claims"), note
        assert "Insufficient" not in note, note

        # deleting the first pod deletes its claim (owner reference) and frees the device
        await cluster.delete_pod("first")
        await wait_until(lambda: cluster.node_name("second"), timeout=30,
                         message="second bound once the device is free")
        assert await cluster.node_name("second") == gpu_node

        async def first_claim_gone() -> bool:
            return all(c["metadata"]["name"] != claim_name for c in await env.claims())

        await wait_until(first_claim_gone, timeout=20, message="the first claim deleted")
        second = await cluster.get_pod("second")
        assert second is not None
        other = second["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        assert other != claim_name and other.startswith("second-extended-resources-")


async def test_a_claim_left_by_a_scheduler_that_stopped_is_read_back_not_allocated_twice(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # A scheduler created the pod's claim (allocated, reserved) and stopped before binding:
    # the next one reads the claim back from the API, deletes it and allocates anew, so the
    # device never has two claims
    async with dra_cluster(sandbox_factory, tmp_path, nodes=2, dra_devices=ONE_GPU,
                           schedule=False) as env:
        cluster, api, gpu_node = env.cluster, env.api, env.nodes[0]
        await cluster.create_pod(gpu_pod("p"))
        pod = await cluster.get_pod("p")
        assert pod is not None
        uid = pod["metadata"]["uid"]
        left = await api.create(CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": "p-extended-resources-", "namespace": "default",
                         "annotations": {ANNOTATION: "true"},
                         "finalizers": ["resource.kubernetes.io/delete-protection"],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                              "uid": uid, "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                "count": 1}}]}}})
        left["status"] = {"allocation": {"devices": {"results": [
            {"request": "container-0-request-1", "driver": "gpu.example.com",
             "pool": gpu_node, "device": "gpu-0"}]}, "nodeSelector": {"nodeSelectorTerms": [
                 {"matchFields": [{"key": "metadata.name", "operator": "In",
                                   "values": [gpu_node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}]}
        name = left["metadata"]["name"]
        await api.update(f"{CLAIMS}/{name}/status", left)

        async with running_scheduler(env.kubeconfig):
            await wait_until(lambda: cluster.node_name("p"), timeout=30, message="p bound")
        assert await cluster.node_name("p") == gpu_node
        items = await env.claims()
        assert [c["metadata"]["name"] for c in items if c["metadata"]["name"] == name] == []
        allocated = [c for c in items if (c.get("status") or {}).get("allocation")]
        assert len(allocated) == 1
        p = await cluster.get_pod("p")
        assert p is not None
        assert p["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == \
            allocated[0]["metadata"]["name"]


async def test_explain_says_which_nodes_cannot_give_the_device(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    import io
    import json

    from scheduler.explain.cli import amain

    async with dra_cluster(sandbox_factory, tmp_path, nodes=2, dra_devices=ONE_GPU,
                           schedule=False) as env:
        nodes = env.nodes
        await env.cluster.create_pod(gpu_pod("wants-gpu"))
        out, err = io.StringIO(), io.StringIO()
        code = await amain(["wants-gpu", "--kubeconfig", str(env.kubeconfig), "-o", "json"],
                           stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    got = json.loads(out.getvalue())
    assert got["selected-node"] == nodes[0], got
    text = json.dumps(got)
    assert "cannot allocate all claims" in text  # the node without the device
    assert "Insufficient example.com/gpu" not in text
