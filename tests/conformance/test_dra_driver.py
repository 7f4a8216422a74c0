"""The simulated DRA driver (``--dra-devices``): a ResourceSlice per node and a DeviceClass,
published through the registry; and the simulated kubelet, which starts a pod only once its
claims are allocated for its node and reserved for it."""

from __future__ import annotations

from typing import Any

import pytest
from sbhelpers import Http, binding, pod, wait_for

from scheduler.sandbox.cli import main as sandbox_main
from scheduler.sandbox.dradriver import DeviceKind, parse_device_kinds
from tests.builders import dra_allocation, dra_claim, dra_consumer, with_pod_claims

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
PODS = "/api/v1/namespaces/default/pods"


@pytest.mark.parametrize(("text", "want"), [
    ("gpu=8", [DeviceKind("gpu", 8)]),
    ("gpu=2:memory=40Gi:model=a100:nodes=1, nic=1:speed=400:vendor=x",
     [DeviceKind("gpu", 2, memory="40Gi", model="a100", nodes=1),
      DeviceKind("nic", 1, model="nic-model", attributes={"speed": 400, "vendor": "x"})]),
    ("gpu=2:memory=40Gi:partitions=4", [DeviceKind("gpu", 2, memory="40Gi", partitions=4)]),
])
def test_parse_device_kinds(text: str, want: list[DeviceKind]) -> None:
    got = parse_device_kinds(text)
    for k in want:
        if not k.model:
            object.__setattr__(k, "model", f"{k.name}-model")
    assert got == want


@pytest.mark.parametrize(("text", "error"), [
    ("gpu", "expected KIND=COUNT"),
    ("GPU=1", "must be a lowercase DNS label"),
    ("gpu=x", "is not an integer"),
    ("gpu=0", "between 1 and 128"),
    ("gpu=129", "between 1 and 128"),
    ("gpu=1:memory=lots", "is not a quantity"),
    ("gpu=1:nodes=-1", "is not a non-negative integer"),
    ("gpu=1:oops", "is not KEY=VALUE"),
    ("gpu=1,gpu=2", "given twice"),
    ("gpu=1:partitions=1", "not an integer of at least 2"),
    ("gpu=8:partitions=8", "72 devices, more than a slice holds \\(64\\)"),
])
def test_parse_device_kinds_errors(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_device_kinds(text)


def test_cli_rejects_a_bad_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert sandbox_main(["--dra-devices", "gpu=0"]) == 2
    assert "argument --dra-devices: 'gpu=0': the count must be between 1 and 128" in capsys.readouterr().err


@pytest.mark.sandbox(dra_devices="gpu=4:memory=40Gi,nic=2:nodes=1")
async def test_slices_and_classes_are_published(http: Http) -> None:
    s, lst = await http.get(SLICES)
    assert s == 200
    by = {(o["spec"]["nodeName"], o["spec"]["driver"]): o for o in lst["items"]}
    assert sorted(by) == [("node-0000", "gpu.example.com"), ("node-0000", "nic.example.com"),
                          ("node-0001", "gpu.example.com"), ("node-0002", "gpu.example.com")]
    sl = by[("node-0001", "gpu.example.com")]
    assert sl["metadata"]["name"].startswith("node-0001-gpu.example.com-")
    assert sl["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert sl["spec"]["pool"] == {"name": "node-0001", "generation": 1, "resourceSliceCount": 1}
    devs = sl["spec"]["devices"]
    assert [d["name"] for d in devs] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert devs[2]["attributes"]["index"] == {"int": 2}
    assert devs[2]["attributes"]["model"] == {"string": "gpu-model"}
    assert devs[2]["attributes"]["driverVersion"] == {"version": "1.0.0"}
    assert devs[2]["capacity"] == {"memory": {"value": "40Gi"}}
    assert len({d["attributes"]["uuid"]["string"] for d in devs}) == 4
    s, classes = await http.get(CLASSES)
    got = {c["metadata"]["name"]: c["spec"]["selectors"] for c in classes["items"]}
    assert got == {"gpu.example.com": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                   "nic.example.com": [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]}

    # a node joining gets its slice (nic: already on its one node); a node leaving takes it along
    s, n = await http.post("/api/v1/nodes", {"metadata": {"name": "late"}})
    assert s == 201

    async def published() -> list[dict[str, Any]] | None:
        _, lst = await http.get(SLICES, params={"fieldSelector": "spec.nodeName=late"})
        return lst["items"] or None
    items = await wait_for(published, timeout=3)
    assert [o["spec"]["driver"] for o in items] == ["gpu.example.com"]
    s, _ = await http.delete("/api/v1/nodes/late")

    async def withdrawn() -> bool:
        _, lst = await http.get(SLICES, params={"fieldSelector": "spec.nodeName=late"})
        return not lst["items"]
    assert await wait_for(withdrawn, timeout=3)


async def _phase(http: Http, name: str) -> str:
    _, p = await http.get(f"{PODS}/{name}")
    return str(p["status"]["phase"])


@pytest.mark.sandbox(simulate_controllers=False)  # the resourceclaim controller would reserve for the bound pod
async def test_kubelet_starts_a_pod_only_with_its_claims_ready(http: Http, sandbox: Any) -> None:
    node = "node-0001"
    s, c = await http.post(CLAIMS, dra_claim("gate"))
    s, p = await http.post(PODS, with_pod_claims(pod("needs-gpu"), ("gpu", "claim", "gate")))
    s, _ = await http.post(f"{PODS}/needs-gpu/binding", binding("needs-gpu", node))
    assert s == 201
    sandbox.kubelet.step()  # the kubelet's turn (whatever its own loop did already): no allocation, no start
    assert await _phase(http, "needs-gpu") == "Pending"
    # allocated for the node but not reserved for the pod: still waits
    alloc = dra_allocation(node, [("gpu", "gpu.example.com", node, "gpu-0")])
    s, c = await http.put(f"{CLAIMS}/gate/status", {**c, "status": {"allocation": alloc}})
    assert s == 200
    sandbox.kubelet.step()
    assert await _phase(http, "needs-gpu") == "Pending"
    s, c = await http.put(f"{CLAIMS}/gate/status", {**c, "status": {
        "allocation": alloc, "reservedFor": [dra_consumer("needs-gpu", p["metadata"]["uid"])]}})
    assert s == 200

    async def running() -> bool:
        return await _phase(http, "needs-gpu") == "Running"
    assert await wait_for(running, timeout=3)


async def test_claim_allocated_for_another_node_keeps_the_pod_pending(http: Http, sandbox: Any) -> None:
    s, c = await http.post(CLAIMS, dra_claim("elsewhere"))
    s, p = await http.post(PODS, with_pod_claims(pod("misplaced"), ("gpu", "claim", "elsewhere")))
    alloc = dra_allocation("node-0002", [("gpu", "gpu.example.com", "node-0002", "gpu-0")])
    s, c = await http.put(f"{CLAIMS}/elsewhere/status", {**c, "status": {
        "allocation": alloc, "reservedFor": [dra_consumer("misplaced", p["metadata"]["uid"])]}})
    assert s == 200
    s, _ = await http.post(f"{PODS}/misplaced/binding", binding("misplaced", "node-0001"))
    assert s == 201
    sandbox.kubelet.step()
    assert await _phase(http, "misplaced") == "Pending"
    # a pod without claims on the same node starts as usual
    s, _ = await http.post(PODS, pod("plain", nodeName="node-0001"))

    async def running() -> bool:
        return await _phase(http, "plain") == "Running"
    assert await wait_for(running, timeout=3)
    assert await _phase(http, "misplaced") == "Pending"


@pytest.mark.sandbox(dra_devices="gpu=2:memory=40Gi:partitions=2:nodes=1")
async def test_partitionable_devices_are_published_as_counters_and_partitions(http: Http) -> None:
    _, lst = await http.get(SLICES, params={"fieldSelector": "spec.nodeName=node-0000"})
    [devices] = [o for o in lst["items"] if o["spec"].get("devices")]
    [counters] = [o for o in lst["items"] if o["spec"].get("sharedCounters")]
    for sl in (devices, counters):  # one pool of two slices
        assert sl["spec"]["pool"] == {"name": "node-0000", "generation": 1, "resourceSliceCount": 2}
    assert counters["spec"]["sharedCounters"] == [
        {"name": f"gpu-{i}", "counters": {"memory": {"value": "40Gi"}}} for i in range(2)]
    devs = {d["name"]: d for d in devices["spec"]["devices"]}
    assert sorted(devs) == ["gpu-0", "gpu-0-part-0", "gpu-0-part-1",
                            "gpu-1", "gpu-1-part-0", "gpu-1-part-1"]
    assert devs["gpu-1"]["consumesCounters"] == [
        {"counterSet": "gpu-1", "counters": {"memory": {"value": "40Gi"}}}]
    half = str(20 * 1024**3)
    assert devs["gpu-1-part-1"]["consumesCounters"] == [
        {"counterSet": "gpu-1", "counters": {"memory": {"value": half}}}]
    assert devs["gpu-1-part-1"]["attributes"]["partition"] == {"int": 1}
    assert devs["gpu-1-part-1"]["attributes"]["index"] == {"int": 1}
    assert devs["gpu-1-part-1"]["capacity"] == {"memory": {"value": half}}
    assert len({d["attributes"]["uuid"]["string"] for d in devs.values()}) == 6
