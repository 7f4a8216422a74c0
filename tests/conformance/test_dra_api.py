"""resource.k8s.io/v1 served as kube-apiserver serves it: discovery, OpenAPI, tables, field
selectors, watch, defaulting, validation (the field named in each error), immutability and
the status writes kube-scheduler's PreBind makes (finalizer, allocation, reservedFor, 409 on a
stale resourceVersion)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.builders import (
    dra_allocation,
    dra_claim,
    dra_claim_template,
    dra_consumer,
    dra_device,
    dra_device_class,
    dra_exact,
    dra_slice,
)
from sbhelpers import Http

# The API server's semantics alone: no resourceclaim controller dropping the reservations of
# the made-up pods these tests write.
pytestmark = pytest.mark.sandbox(simulate_controllers=False)

G = "/apis/resource.k8s.io/v1"
CLASSES = f"{G}/deviceclasses"
SLICES = f"{G}/resourceslices"
CLAIMS = f"{G}/namespaces/default/resourceclaims"
TEMPLATES = f"{G}/namespaces/default/resourceclaimtemplates"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


async def test_discovery_lists_the_four_types(http: Http) -> None:
    s, groups = await http.get("/apis")
    assert s == 200
    g = next(x for x in groups["groups"] if x["name"] == "resource.k8s.io")
    assert g["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1"
    s, rl = await http.get(G)
    assert s == 200 and rl["groupVersion"] == "resource.k8s.io/v1"
    by_name = {r["name"]: r for r in rl["resources"]}
    assert {"deviceclasses", "resourceclaims", "resourceclaims/status", "resourceclaimtemplates",
            "resourceslices"} <= set(by_name)
    assert by_name["deviceclasses"]["namespaced"] is False
    assert by_name["resourceslices"]["namespaced"] is False
    assert by_name["resourceclaims"]["namespaced"] is True and by_name["resourceclaims"]["kind"] == "ResourceClaim"
    assert by_name["resourceclaimtemplates"]["namespaced"] is True
    s, oa = await http.get("/openapi/v3/apis/resource.k8s.io/v1")
    assert s == 200
    kinds = {op["patch"]["x-kubernetes-group-version-kind"]["kind"] for op in oa["paths"].values()}
    assert kinds == {"DeviceClass", "DeviceTaintRule", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"}


async def test_claim_defaults_and_generation(http: Http) -> None:
    s, c = await http.post(CLAIMS, dra_claim("defaults", requests=[dra_exact("gpu"), dra_exact("all", mode="All")]))
    assert s == 201, c
    reqs = c["spec"]["devices"]["requests"]
    assert reqs[0]["exactly"]["allocationMode"] == "ExactCount" and reqs[0]["exactly"]["count"] == 1
    assert reqs[1]["exactly"]["allocationMode"] == "All" and "count" not in reqs[1]["exactly"]
    assert c["apiVersion"] == "resource.k8s.io/v1" and c["kind"] == "ResourceClaim"
    assert "status" not in c  # status is reset on create
    s, sl = await http.post(SLICES, dra_slice("gen-slice", node="node-1"))
    assert s == 201 and sl["metadata"]["generation"] == 1
    sl["spec"]["devices"].append(dra_device("gpu-9", index=9))
    s, sl2 = await http.put(f"{SLICES}/gen-slice", sl)
    assert s == 200 and sl2["metadata"]["generation"] == 2


# (what is posted, expected (field, reason) causes)
INVALID: list[tuple[str, str, dict[str, Any], list[tuple[str, str]]]] = [
    ("claim: request name", CLAIMS, dra_claim("a", requests=[dra_exact("GPU")]),
     [("spec.devices.requests[0].name", "FieldValueInvalid")]),
    ("claim: duplicate request", CLAIMS, dra_claim("b", requests=[dra_exact("gpu"), dra_exact("gpu")]),
     [("spec.devices.requests[1]", "FieldValueDuplicate")]),
    ("claim: no class", CLAIMS, dra_claim("c", requests=[{"name": "r", "exactly": {}}]),
     [("spec.devices.requests[0].exactly.deviceClassName", "FieldValueRequired")]),
    ("claim: neither exactly nor firstAvailable", CLAIMS, dra_claim("d", requests=[{"name": "r"}]),
     [("spec.devices.requests[0]", "FieldValueRequired")]),
    ("claim: both exactly and firstAvailable", CLAIMS,
     dra_claim("e", requests=[{**dra_exact("r"), "firstAvailable": [dra_exact("s")["exactly"] | {"name": "s"}]}]),
     [("spec.devices.requests[0]", "FieldValueInvalid")]),
    ("claim: count with All", CLAIMS, dra_claim("f", requests=[dra_exact("r", mode="All", count=2)]),
     [("spec.devices.requests[0].exactly.count", "FieldValueInvalid")]),
    ("claim: zero count", CLAIMS, dra_claim("g", requests=[dra_exact("r", mode="ExactCount", count=-1)]),
     [("spec.devices.requests[0].exactly.count", "FieldValueInvalid")]),
    ("claim: bad mode", CLAIMS, dra_claim("h", requests=[dra_exact("r", mode="Some")]),
     [("spec.devices.requests[0].exactly.allocationMode", "FieldValueNotSupported")]),
    ("claim: too many requests", CLAIMS, dra_claim("i", requests=[dra_exact(f"r{i}") for i in range(33)]),
     [("spec.devices.requests", "FieldValueTooMany")]),
    ("claim: constraint names unknown request", CLAIMS,
     dra_claim("j", constraints=[{"requests": ["nope"], "matchAttribute": "gpu.example.com/model"}]),
     [("spec.devices.constraints[0].requests[0]", "FieldValueInvalid")]),
    ("claim: constraint attribute without domain", CLAIMS,
     dra_claim("k", constraints=[{"matchAttribute": "model"}]),
     [("spec.devices.constraints[0].matchAttribute", "FieldValueRequired")]),
    ("claim: selector without cel", CLAIMS, dra_claim("l", requests=[
        {"name": "r", "exactly": {"deviceClassName": "c", "selectors": [{}]}}]),
     [("spec.devices.requests[0].exactly.selectors[0].cel", "FieldValueRequired")]),
    ("claim: config without opaque", CLAIMS, dra_claim("m", config=[{"requests": ["gpu"]}]),
     [("spec.devices.config[0].opaque", "FieldValueRequired")]),
    ("claim: name", CLAIMS, dra_claim("Bad_Name"), [("metadata.name", "FieldValueInvalid")]),
    ("template: nested spec validated", TEMPLATES,
     dra_claim_template("t", requests=[dra_exact("r", count=-2, mode="ExactCount")]),
     [("spec.spec.devices.requests[0].exactly.count", "FieldValueInvalid")]),
    ("class: selector", CLASSES, dra_device_class("cls", selectors=[""]),
     [("spec.selectors[0].cel.expression", "FieldValueRequired")]),
    ("class: name", CLASSES, dra_device_class("Cls"), [("metadata.name", "FieldValueInvalid")]),
    ("class: selector syntax", CLASSES, dra_device_class("syntax", selectors=["device.driver =="]),
     [("spec.selectors[0].cel.expression", "FieldValueInvalid")]),
    ("claim: selector syntax", CLAIMS, dra_claim("n", requests=[dra_exact("r", selectors=["device.("])]),
     [("spec.devices.requests[0].exactly.selectors[0].cel.expression", "FieldValueInvalid")]),
    ("slice: no node placement", SLICES, dra_slice("s1", node=None, pool="p"),
     [("spec", "FieldValueRequired")]),
    ("slice: two placements", SLICES, dra_slice("s2", allNodes=True), [("spec", "FieldValueInvalid")]),
    ("slice: driver", SLICES, dra_slice("s3", driver="-bad"), [("spec.driver", "FieldValueInvalid")]),
    ("slice: slice count", SLICES, dra_slice("s4", slice_count=0),
     [("spec.pool.resourceSliceCount", "FieldValueInvalid")]),
    ("slice: duplicate device", SLICES, dra_slice("s5", devices=[dra_device("d"), dra_device("d")]),
     [("spec.devices[1]", "FieldValueDuplicate")]),
    ("slice: device name", SLICES, dra_slice("s6", devices=[dra_device("D_1")]),
     [("spec.devices[0].name", "FieldValueInvalid")]),
    ("slice: attribute with two values", SLICES,
     dra_slice("s7", devices=[{"name": "d", "attributes": {"model": {"int": 1, "string": "a"}}}]),
     [("spec.devices[0].attributes[model]", "FieldValueInvalid")]),
    ("slice: version attribute", SLICES,
     dra_slice("s8", devices=[{"name": "d", "attributes": {"driverVersion": {"version": "1.2"}}}]),
     [("spec.devices[0].attributes[driverVersion].version", "FieldValueInvalid")]),
    ("slice: capacity quantity", SLICES,
     dra_slice("s9", devices=[dra_device("d", capacity={"memory": "lots"})]),
     [("spec.devices[0].capacity[memory].value", "FieldValueInvalid")]),
    ("slice: devices and shared counters", SLICES,
     dra_slice("s11", sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]),
     [("spec", "FieldValueInvalid")]),
    ("slice: counter set without counters", SLICES,
     dra_slice("s12", devices=[], sharedCounters=[{"name": "gpu-0"}]),
     [("spec.sharedCounters[0].counters", "FieldValueRequired")]),
    ("slice: counter quantity", SLICES,
     dra_slice("s13", devices=[], sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "x"}}}]),
     [("spec.sharedCounters[0].counters[memory].value", "FieldValueInvalid")]),
    ("slice: duplicate counter set", SLICES,
     dra_slice("s14", devices=[], sharedCounters=[
         {"name": "gpu-0", "counters": {"memory": {"value": "1"}}},
         {"name": "gpu-0", "counters": {"memory": {"value": "1"}}}]),
     [("spec.sharedCounters[1]", "FieldValueDuplicate")]),
    ("slice: consumption without a counter set", SLICES,
     dra_slice("s15", devices=[{"name": "d", "consumesCounters": [
         {"counters": {"memory": {"value": "1"}}}]}]),
     [("spec.devices[0].consumesCounters[0].counterSet", "FieldValueRequired")]),
    ("slice: one counter set consumed twice", SLICES,
     dra_slice("s16", devices=[{"name": "d", "consumesCounters": [
         {"counterSet": "s", "counters": {"memory": {"value": "1"}}} for _ in range(2)]}]),
     [("spec.devices[0].consumesCounters[1]", "FieldValueDuplicate")]),
    ("slice: 33 shared counters", SLICES,
     dra_slice("s17", devices=[], sharedCounters=[
         {"name": "a", "counters": {f"c{i}": {"value": "1"} for i in range(17)}},
         {"name": "b", "counters": {f"c{i}": {"value": "1"} for i in range(16)}}]),
     [("spec.sharedCounters", "FieldValueInvalid")]),
    ("slice: too many devices", SLICES, dra_slice("s10", devices=[dra_device(f"d{i}") for i in range(129)]),
     [("spec.devices", "FieldValueTooMany")]),
    ("slice: 5 binding conditions", SLICES,
     dra_slice("s18", devices=[{"name": "d0", "bindingConditions": [f"c{i}" for i in range(5)],
                                "bindingFailureConditions": ["failed"]}]),
     [("spec.devices[0].bindingConditions", "FieldValueTooMany")]),
    ("slice: bad binding failure condition", SLICES,
     dra_slice("s19", devices=[{"name": "d0", "bindingConditions": ["ready"],
                                "bindingFailureConditions": ["not ok"]}]),
     [("spec.devices[0].bindingFailureConditions[0]", "FieldValueInvalid")]),
    ("slice: bindsToNode not a boolean", SLICES,
     dra_slice("s20", devices=[{"name": "d0", "bindsToNode": "yes"}]),
     [("spec.devices[0].bindsToNode", "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("path", "body", "want"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
async def test_invalid_objects_name_the_field(http: Http, path: str, body: dict[str, Any],
                                              want: list[tuple[str, str]]) -> None:
    s, st = await http.post(path, body)
    assert s == 422, st
    assert st["reason"] == "Invalid" and st["details"]["group"] == "resource.k8s.io"
    assert _causes(st) == want
    assert st["details"]["kind"] == body["kind"]


async def test_valid_objects_of_every_kind_are_accepted(http: Http) -> None:
    ok = [
        (CLASSES, dra_device_class("gpu.example.com", selectors=['device.driver == "gpu.example.com"'])),
        (SLICES, dra_slice("node-1-gpu", node="node-1",
                           devices=[dra_device("gpu-0", index=0, model="A100", capacity={"memory": "80Gi"})])),
        (SLICES, dra_slice("net", node=None, pool="net", allNodes=True)),
        # a partitionable GPU: its counters in one slice, its partitions in another
        (SLICES, dra_slice("node-2-counters", node="node-2", slice_count=2, devices=[],
                           sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}])),
        (SLICES, dra_slice("node-2-gpus", node="node-2", slice_count=2, devices=[
            {"name": f"half-{i}", "consumesCounters": [
                {"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}]} for i in range(2)])),
        (CLAIMS, dra_claim("shared", requests=[dra_exact("gpu", count=2, selectors=["true"])],
                           constraints=[{"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"}],
                           config=[{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com",
                                                                   "parameters": {"mode": "x"}}}])),
        (CLAIMS, dra_claim("first", requests=[{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.example.com", "count": 2},
            {"name": "small", "deviceClassName": "gpu.example.com"}]}])),
        (TEMPLATES, dra_claim_template("gpu-template", labels={"app": "train"})),
    ]
    for path, body in ok:
        s, o = await http.post(path, body)
        assert s == 201, (path, o)
    s, sub = await http.get(f"{CLAIMS}/first")
    assert sub["spec"]["devices"]["requests"][0]["firstAvailable"][1] == {
        "name": "small", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}


async def test_field_selectors_on_slices(http: Http) -> None:
    for name, node, driver in [("a", "node-1", "gpu.example.com"), ("b", "node-2", "gpu.example.com"),
                               ("c", "node-1", "net.example.com"), ("d", None, "net.example.com")]:
        body = dra_slice(name, node=node, driver=driver, pool=name)
        if node is None:
            body["spec"]["allNodes"] = True
        s, _ = await http.post(SLICES, body)
        assert s == 201
    cases = [
        ("spec.nodeName=node-1", {"a", "c"}),
        ("spec.driver=gpu.example.com", {"a", "b"}),
        ("spec.nodeName=node-1,spec.driver=net.example.com", {"c"}),
        ("spec.nodeName!=node-1", {"b", "d"}),
        ("spec.nodeName=", {"d"}),
        ("metadata.name=b", {"b"}),
    ]
    for sel, want in cases:
        s, lst = await http.get(SLICES, params={"fieldSelector": sel})
        assert s == 200 and {o["metadata"]["name"] for o in lst["items"]} == want, sel
    s, st = await http.get(SLICES, params={"fieldSelector": "spec.pool.name=a"})
    assert s == 400 and "field label not supported: spec.pool.name" in st["message"]
    s, st = await http.get(CLAIMS, params={"fieldSelector": "spec.nodeName=node-1"})
    assert s == 400


async def test_tables_have_upstream_columns(http: Http) -> None:
    await http.post(SLICES, dra_slice("t-slice", node="node-2", pool="node-2"))
    await http.post(CLAIMS, dra_claim("t-claim"))
    await http.post(CLASSES, dra_device_class("t-class"))
    await http.post(TEMPLATES, dra_claim_template("t-tmpl"))
    want = {
        SLICES: (["Name", "Node", "Driver", "Pool", "Age"], ["t-slice", "node-2", "gpu.example.com", "node-2"]),
        CLAIMS: (["Name", "State", "Age"], ["t-claim", "pending"]),
        CLASSES: (["Name", "Age"], ["t-class"]),
        TEMPLATES: (["Name", "Age"], ["t-tmpl"]),
    }
    for path, (cols, cells) in want.items():
        s, t = await http.get(path, headers={"Accept": TABLE})
        assert s == 200 and t["kind"] == "Table"
        assert [c["name"] for c in t["columnDefinitions"]] == cols
        assert t["rows"][0]["cells"][: len(cells)] == cells


async def test_scheduler_writes_finalizer_allocation_reservation(http: Http) -> None:
    """PreBind's writes in order: finalizer on the claim (update), then status with allocation
    and reservedFor; a stale resourceVersion is a 409; the State column follows."""
    s, c = await http.post(CLAIMS, dra_claim("bind-me"))
    assert s == 201
    c["metadata"]["finalizers"] = [FINALIZER]
    s, c2 = await http.put(f"{CLAIMS}/bind-me", c)
    assert s == 200 and c2["metadata"]["finalizers"] == [FINALIZER]
    status = {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
              "reservedFor": [dra_consumer("p", "0b1c7a1e-9d0c-4a8e-8a4e-3f4b5c6d7e8f")]}
    stale = {**c, "status": status}  # resourceVersion from before the finalizer update
    s, st = await http.put(f"{CLAIMS}/bind-me/status", stale)
    assert s == 409 and st["reason"] == "Conflict"
    s, c3 = await http.put(f"{CLAIMS}/bind-me/status", {**c2, "status": status})
    assert s == 200, c3
    assert c3["status"] == status and c3["metadata"]["finalizers"] == [FINALIZER]
    s, t = await http.get(f"{CLAIMS}/bind-me", headers={"Accept": TABLE})
    assert t["rows"][0]["cells"][1] == "allocated,reserved"
    # status writes keep the spec, main-resource writes keep the status
    s, c4 = await http.patch(f"{CLAIMS}/bind-me/status", {"spec": {"devices": {"requests": []}}})
    assert s == 200 and c4["spec"] == c2["spec"]
    s, c5 = await http.patch(f"{CLAIMS}/bind-me", {"status": None, "metadata": {"labels": {"x": "y"}}})
    assert s == 200 and c5["status"] == status
    # deleting waits for the finalizer; the claim shows deleted
    s, d = await http.delete(f"{CLAIMS}/bind-me")
    assert s == 200 and d["metadata"]["deletionTimestamp"]
    s, t = await http.get(f"{CLAIMS}/bind-me", headers={"Accept": TABLE})
    assert t["rows"][0]["cells"][1] == "deleted,allocated,reserved"
    # no new consumer once deleted; dropping one and the allocation is fine
    more = {**status, "reservedFor": [*status["reservedFor"], dra_consumer("q", "1b1c7a1e-9d0c-4a8e-8a4e-3f4b5c6d7e8f")]}
    s, st = await http.patch(f"{CLAIMS}/bind-me/status", {"status": more})
    assert s == 422 and _causes(st) == [("status.reservedFor", "FieldValueForbidden")]
    s, c6 = await http.patch(f"{CLAIMS}/bind-me/status", {"status": {"reservedFor": None, "allocation": None}})
    assert s == 200 and not c6["status"]
    s, _ = await http.patch(f"{CLAIMS}/bind-me", {"metadata": {"finalizers": None}})
    assert s == 200
    s, _ = await http.get(f"{CLAIMS}/bind-me")
    assert s == 404


STATUS_INVALID: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("reservedFor without allocation", {"reservedFor": [dra_consumer("p", "u1")]},
     [("status.reservedFor", "FieldValueForbidden")]),
    ("reservedFor entry without uid",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
      "reservedFor": [{"resource": "pods", "name": "p"}]},
     [("status.reservedFor[0].uid", "FieldValueRequired")]),
    ("reservedFor duplicate uid",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
      "reservedFor": [dra_consumer("p", "u1"), dra_consumer("p2", "u1")]},
     [("status.reservedFor[1]", "FieldValueDuplicate")]),
    ("reservedFor over 256",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
      "reservedFor": [dra_consumer(f"p{i}", f"u{i}") for i in range(257)]},
     [("status.reservedFor", "FieldValueTooMany")]),
    ("result for an unknown request",
     {"allocation": dra_allocation("node-1", [("cpu", "gpu.example.com", "node-1", "gpu-0")])},
     [("status.allocation.devices.results[0].request", "FieldValueInvalid")]),
    ("result device name",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "GPU 0")])},
     [("status.allocation.devices.results[0].device", "FieldValueInvalid")]),
    ("result without driver",
     {"allocation": dra_allocation("node-1", [("gpu", "", "node-1", "gpu-0")])},
     [("status.allocation.devices.results[0].driver", "FieldValueRequired")]),
    # status.devices (DRAResourceClaimDeviceStatus): drivers report on allocated devices only
    ("device status of a device not allocated",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
      "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-1"}]},
     [("status.devices[0]", "FieldValueInvalid")]),
    ("device status without allocation",
     {"devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]},
     [("status.devices[0]", "FieldValueInvalid")]),
    ("device status twice",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
      "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}] * 2},
     [("status.devices[1]", "FieldValueDuplicate")]),
    ("device status interface name",
     {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
      "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0",
                   "networkData": {"interfaceName": "x" * 257}}]},
     [("status.devices[0].networkData.interfaceName", "FieldValueTooLong")]),
]


async def test_driver_reports_device_status(http: Http) -> None:
    s, c = await http.post(CLAIMS, dra_claim("reported"))
    status = {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")]),
              "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0",
                           "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared",
                                           "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                           "networkData": {"interfaceName": "net1", "ips": ["10.0.0.5/24"]},
                           "data": {"any": "thing"}}]}
    s, c2 = await http.put(f"{CLAIMS}/reported/status", {**c, "status": status})
    assert s == 200, c2
    s, got = await http.get(f"{CLAIMS}/reported")
    assert got["status"]["devices"] == status["devices"]


@pytest.mark.parametrize(("status", "want"), [c[1:] for c in STATUS_INVALID], ids=[c[0] for c in STATUS_INVALID])
async def test_invalid_status_writes(http: Http, status: dict[str, Any], want: list[tuple[str, str]]) -> None:
    s, c = await http.post(CLAIMS, dra_claim("st"))
    assert s == 201
    s, st = await http.put(f"{CLAIMS}/st/status", {**c, "status": status})
    assert s == 422, st
    assert _causes(st) == want


async def test_256_consumers_and_allocation_immutable(http: Http) -> None:
    s, c = await http.post(CLAIMS, dra_claim("wide"))
    alloc = dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")])
    s, c = await http.put(f"{CLAIMS}/wide/status", {**c, "status": {
        "allocation": alloc, "reservedFor": [dra_consumer(f"p{i}", f"u{i}") for i in range(256)]}})
    assert s == 200 and len(c["status"]["reservedFor"]) == 256
    other = dra_allocation("node-2", [("gpu", "gpu.example.com", "node-2", "gpu-0")])
    s, st = await http.put(f"{CLAIMS}/wide/status", {**c, "status": {**c["status"], "allocation": other}})
    assert s == 422 and _causes(st) == [("status.allocation", "FieldValueInvalid")]
    assert "field is immutable" in st["message"]


IMMUTABLE: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = [
    ("claim spec", CLAIMS, dra_claim("imm"), {"spec": {"devices": {"requests": [dra_exact("other")]}}}, "spec"),
    ("template spec", TEMPLATES, dra_claim_template("imm"),
     {"spec": {"spec": {"devices": {"requests": [dra_exact("other")]}}}}, "spec"),
    ("slice driver", SLICES, dra_slice("imm-1"), {"spec": {"driver": "other.example.com"}}, "spec.driver"),
    ("slice node", SLICES, dra_slice("imm-2"), {"spec": {"nodeName": "node-2"}}, "spec.nodeName"),
    ("slice pool name", SLICES, dra_slice("imm-3"), {"spec": {"pool": {"name": "other"}}}, "spec.pool.name"),
]


@pytest.mark.parametrize(("path", "body", "patch", "fld"), [c[1:] for c in IMMUTABLE], ids=[c[0] for c in IMMUTABLE])
async def test_immutable_fields(http: Http, path: str, body: dict[str, Any], patch: dict[str, Any], fld: str) -> None:
    s, o = await http.post(path, body)
    assert s == 201, o
    s, st = await http.patch(f"{path}/{o['metadata']['name']}", patch)
    assert s == 422, st
    assert (fld, "FieldValueInvalid") in _causes(st) and "field is immutable" in st["message"]
    # an update that resends the stored spec without defaults is not a change
    same = {**o, "spec": body["spec"], "metadata": {**o["metadata"], "labels": {"touched": "yes"}}}
    s, o2 = await http.put(f"{path}/{o['metadata']['name']}", same)
    assert s == 200, o2


async def test_watch_sees_claim_lifecycle(http: Http) -> None:
    s, lst = await http.get(CLAIMS)
    rv = lst["metadata"]["resourceVersion"]
    watch = asyncio.create_task(http.watch(CLAIMS, {"resourceVersion": rv}, until=3))
    await asyncio.sleep(0.05)
    s, c = await http.post(CLAIMS, dra_claim("w"))
    alloc = dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")])
    await http.put(f"{CLAIMS}/w/status", {**c, "status": {"allocation": alloc}})
    await http.delete(f"{CLAIMS}/w")
    events = await watch
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["status"]["allocation"] == alloc


async def test_strategic_merge_patch_merges_reservations_by_uid(http: Http) -> None:
    """``status.reservedFor`` is a map list keyed by uid with patchStrategy merge: a strategic
    patch adds or removes one consumer without resending the others."""
    s, c = await http.post(CLAIMS, dra_claim("smp"))
    alloc = dra_allocation("node-1", [("gpu", "gpu.example.com", "node-1", "gpu-0")])
    a, b = dra_consumer("a", "uid-a"), dra_consumer("b", "uid-b")
    s, c = await http.put(f"{CLAIMS}/smp/status", {**c, "status": {"allocation": alloc, "reservedFor": [a]}})
    assert s == 200
    smp = "application/strategic-merge-patch+json"
    s, c = await http.patch(f"{CLAIMS}/smp/status", {"status": {"reservedFor": [b]}}, ct=smp)
    assert s == 200 and c["status"]["reservedFor"] == [a, b]
    s, c = await http.patch(f"{CLAIMS}/smp/status",
                            {"status": {"reservedFor": [{"uid": "uid-a", "$patch": "delete"}]}}, ct=smp)
    assert s == 200 and c["status"]["reservedFor"] == [b]
    # a merge patch replaces the list
    s, c = await http.patch(f"{CLAIMS}/smp/status", {"status": {"reservedFor": [a]}})
    assert s == 200 and c["status"]["reservedFor"] == [a]


POD_INVALID: list[tuple[str, list[dict[str, Any]], list[str], list[tuple[str, str]]]] = [
    ("no source", [{"name": "gpu"}], ["gpu"], [("spec.resourceClaims[0]", "FieldValueInvalid")]),
    ("two sources", [{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}], ["gpu"],
     [("spec.resourceClaims[0]", "FieldValueInvalid")]),
    ("duplicate name", [{"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"}],
     ["gpu"], [("spec.resourceClaims[1].name", "FieldValueDuplicate")]),
    ("bad name", [{"name": "GPU", "resourceClaimName": "a"}], [], [("spec.resourceClaims[0].name", "FieldValueInvalid")]),
    ("bad claim name", [{"name": "gpu", "resourceClaimName": "A_b"}], ["gpu"],
     [("spec.resourceClaims[0].resourceClaimName", "FieldValueInvalid")]),
    ("container uses an unknown claim", [{"name": "gpu", "resourceClaimName": "a"}], ["nic"],
     [("spec.containers[0].resources.claims[0]", "FieldValueNotFound")]),
    ("container uses a claim twice", [{"name": "gpu", "resourceClaimName": "a"}], ["gpu", "gpu"],
     [("spec.containers[0].resources.claims[1]", "FieldValueDuplicate")]),
]


@pytest.mark.parametrize(("claims", "used", "want"), [c[1:] for c in POD_INVALID], ids=[c[0] for c in POD_INVALID])
async def test_pod_resource_claims_are_validated(http: Http, claims: list[dict[str, Any]], used: list[str],
                                                 want: list[tuple[str, str]]) -> None:
    body = {"metadata": {"name": "p"}, "spec": {"resourceClaims": claims, "containers": [
        {"name": "c", "image": "busybox", "resources": {"claims": [{"name": n} for n in used]}}]}}
    s, st = await http.post("/api/v1/namespaces/default/pods", body)
    assert s == 422, st
    assert _causes(st) == want


async def test_container_claim_without_pod_claims(http: Http) -> None:
    body = {"metadata": {"name": "q"}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}
    s, st = await http.post("/api/v1/namespaces/default/pods", body)
    assert s == 422 and st["details"]["causes"][0]["message"] == (
        'Not found: "gpu": must be one of the names in pod.spec.resourceClaims which is empty')


async def test_cel_compile_error_message(http: Http) -> None:
    s, st = await http.post(CLASSES, dra_device_class("cel-msg", selectors=["device.driver =="]))
    assert s == 422
    msg = st["details"]["causes"][0]["message"]
    assert msg.startswith('Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:17: Syntax error')
