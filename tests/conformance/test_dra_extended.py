"""DRAExtendedResource in the sandbox: a DeviceClass's ``spec.extendedResourceName`` checked as
kube-apiserver checks it, the driver publishing its class with one (``--dra-devices
...:extendedResourceName=NAME``), a pod's ``status.extendedResourceClaimStatus`` kept as
written, and the kubelet starting such a pod only once that claim is allocated for its node
and reserved for it (the claim going with its pod: tests/integration/test_dra_extended.py)."""

from __future__ import annotations

from typing import Any

import pytest
from sbhelpers import Http, binding, pod, wait_for

from scheduler.sandbox.dradriver import DeviceKind, parse_device_kinds
from tests.builders import dra_allocation, dra_claim, dra_consumer, dra_device_class

CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
PODS = "/api/v1/namespaces/default/pods"
GPU = "example.com/gpu"


def ext_class(name: str, resource: Any) -> dict[str, Any]:
    c = dra_device_class(name)
    c["spec"]["extendedResourceName"] = resource
    return c


@pytest.mark.parametrize("resource", [
    "gpu",  # not domain-prefixed
    "kubernetes.io/gpu",  # native
    "deviceclass.resource.kubernetes.io/gpu",  # a class's implicit name is never explicit
    "requests.example.com/gpu",
    "example.com/bad name",
    7,
])
async def test_invalid_extended_resource_name_names_the_field(http: Http, resource: Any) -> None:
    s, st = await http.post(CLASSES, ext_class("bad", resource))
    assert s == 422, st
    [cause] = st["details"]["causes"]
    assert cause["field"] == "spec.extendedResourceName"
    assert cause["reason"] == "FieldValueInvalid"
    assert "must be a valid extended resource name" in cause["message"]


async def test_valid_extended_resource_name_is_kept(http: Http) -> None:
    s, c = await http.post(CLASSES, ext_class("gpu.example.com", GPU))
    assert s == 201, c
    s, got = await http.get(f"{CLASSES}/gpu.example.com")
    assert got["spec"]["extendedResourceName"] == GPU


def test_driver_option_parses_and_refuses_bad_names() -> None:
    [kind] = parse_device_kinds(f"gpu=2:extendedResourceName={GPU}")
    assert kind == DeviceKind("gpu", 2, model="gpu-model", extended_resource=GPU)
    with pytest.raises(ValueError, match="is not a valid extended resource name"):
        parse_device_kinds("gpu=2:extendedResourceName=kubernetes.io/gpu")


@pytest.mark.sandbox(dra_devices=f"gpu=1:nodes=1:extendedResourceName={GPU}")
async def test_driver_publishes_the_class_with_its_extended_resource(http: Http) -> None:
    s, got = await http.get(f"{CLASSES}/gpu.example.com")
    assert s == 200
    assert got["spec"]["extendedResourceName"] == GPU


async def _phase(http: Http, name: str) -> str:
    _, p = await http.get(f"{PODS}/{name}")
    return str(p["status"]["phase"])


@pytest.mark.sandbox(simulate_controllers=False)
async def test_kubelet_waits_for_the_extended_resource_claim(http: Http, sandbox: Any) -> None:
    node = "node-0001"
    s, p = await http.post(PODS, pod("ext"))
    assert s == 201
    uid = p["metadata"]["uid"]
    claim = dra_claim("ext-extended-resources-1")
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "ext",
                                             "uid": uid, "controller": True}]
    s, c = await http.post(CLAIMS, claim)
    assert s == 201, c
    mappings = [{"containerName": p["spec"]["containers"][0]["name"], "resourceName": GPU,
                 "requestName": "gpu"}]
    s, got = await http.patch(f"{PODS}/ext/status", {"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": "ext-extended-resources-1"}}})
    assert s == 200, got
    assert got["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": mappings, "resourceClaimName": "ext-extended-resources-1"}
    s, _ = await http.post(f"{PODS}/ext/binding", binding("ext", node))
    assert s == 201
    sandbox.kubelet.step()
    assert await _phase(http, "ext") == "Pending"  # the claim is not allocated yet
    alloc = dra_allocation(node, [("gpu", "gpu.example.com", node, "gpu-0")])
    s, c = await http.put(f"{CLAIMS}/ext-extended-resources-1/status", {**c, "status": {
        "allocation": alloc, "reservedFor": [dra_consumer("ext", uid)]}})
    assert s == 200

    async def running() -> bool:
        return await _phase(http, "ext") == "Running"
    assert await wait_for(running, timeout=3)
