"""Consumable capacity (DRAConsumableCapacity, DRAFractionalCapacityRange) as kube-apiserver
validates it: a shared device's ``requestPolicy``, a request's ``capacity.requests``, a
result's ``consumedCapacity`` and ``shareID``, each error naming its field."""

from __future__ import annotations

from typing import Any

import pytest
from scheduler.sandbox.dradriver import DeviceKind, parse_device_kinds
from tests.builders import dra_allocation, dra_claim, dra_exact, dra_slice
from sbhelpers import Http

pytestmark = pytest.mark.sandbox(simulate_controllers=False)

G = "/apis/resource.k8s.io/v1"
SLICES = f"{G}/resourceslices"
CLAIMS = f"{G}/namespaces/default/resourceclaims"


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


def shared(policy: dict[str, Any] | None = None, *, value: str = "100Gi",
           multi: Any = True) -> dict[str, Any]:
    cap: dict[str, Any] = {"value": value}
    if policy is not None:
        cap["requestPolicy"] = policy
    d: dict[str, Any] = {"name": "nic0", "capacity": {"bw": cap}}
    if multi is not None:
        d["allowMultipleAllocations"] = multi
    return d


def with_capacity(**requests: Any) -> dict[str, Any]:
    return dra_exact("r", capacity={"requests": requests})


BW = "spec.devices[0].capacity[bw].requestPolicy"
RANGE = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "50Gi", "step": "5Gi"}}
INVALID: list[tuple[str, str, dict[str, Any], list[tuple[str, str]]]] = [
    ("policy without allowMultipleAllocations", SLICES,
     dra_slice("c1", devices=[shared(RANGE, multi=None)]), [(BW, "FieldValueForbidden")]),
    ("allowMultipleAllocations not a boolean", SLICES,
     dra_slice("c2", devices=[shared(multi="yes")]),
     [("spec.devices[0].allowMultipleAllocations", "FieldValueInvalid")]),
    ("validValues and validRange", SLICES,
     dra_slice("c3", devices=[shared({**RANGE, "validValues": ["10Gi"]})]),
     [(BW, "FieldValueForbidden")]),
    ("validValues unsorted", SLICES,
     dra_slice("c4", devices=[shared({"default": "10Gi", "validValues": ["20Gi", "10Gi"]})]),
     [(f"{BW}.validValues[1]", "FieldValueInvalid")]),
    ("validValues without the default", SLICES,
     dra_slice("c5", devices=[shared({"default": "15Gi", "validValues": ["10Gi", "20Gi"]})]),
     [(f"{BW}.default", "FieldValueInvalid")]),
    ("validValues without a default", SLICES,
     dra_slice("c6", devices=[shared({"validValues": ["10Gi"]})]),
     [(f"{BW}.default", "FieldValueRequired")]),
    ("eleven validValues", SLICES,
     dra_slice("c7", devices=[shared({"default": "1Gi",
                                      "validValues": [f"{i}Gi" for i in range(1, 12)]})]),
     [(f"{BW}.validValues", "FieldValueTooMany")]),
    ("range max below min", SLICES,
     dra_slice("c8", devices=[shared({"default": "10Gi",
                                      "validRange": {"min": "10Gi", "max": "5Gi"}})]),
     [(f"{BW}.validRange.max", "FieldValueInvalid"), (f"{BW}.default", "FieldValueInvalid")]),
    ("range max above the capacity", SLICES,
     dra_slice("c9", devices=[shared({"default": "10Gi",
                                      "validRange": {"min": "10Gi", "max": "200Gi"}})]),
     [(f"{BW}.validRange.max", "FieldValueInvalid")]),
    ("range without min", SLICES,
     dra_slice("c10", devices=[shared({"default": "10Gi", "validRange": {"max": "20Gi"}})]),
     [(f"{BW}.validRange.min", "FieldValueRequired")]),
    ("range step zero", SLICES,
     dra_slice("c11", devices=[shared({"default": "10Gi",
                                       "validRange": {"min": "10Gi", "step": "0"}})]),
     [(f"{BW}.validRange.step", "FieldValueInvalid")]),
    ("default negative", SLICES,
     dra_slice("c17", devices=[shared({"default": "-1Gi"})]),
     [(f"{BW}.default", "FieldValueInvalid")]),
    ("default above the capacity", SLICES,
     dra_slice("c12", devices=[shared({"default": "200Gi"})]),
     [(f"{BW}.default", "FieldValueInvalid")]),
    ("capacity request quantity", CLAIMS,
     dra_claim("c13", requests=[with_capacity(bw="lots")]),
     [("spec.devices.requests[0].exactly.capacity.requests[bw]", "FieldValueInvalid")]),
    ("capacity request negative", CLAIMS,
     dra_claim("c14", requests=[with_capacity(bw="-1Gi")]),
     [("spec.devices.requests[0].exactly.capacity.requests[bw]", "FieldValueInvalid")]),
    ("capacity request name", CLAIMS,
     dra_claim("c15", requests=[with_capacity(**{"Bad Name": "1"})]),
     [("spec.devices.requests[0].exactly.capacity.requests", "FieldValueInvalid")]),
    ("subrequest capacity", CLAIMS,
     dra_claim("c16", requests=[{"name": "r", "firstAvailable": [
         {"name": "s", "deviceClassName": "gpu.example.com",
          "capacity": {"requests": {"bw": "x"}}}]}]),
     [("spec.devices.requests[0].firstAvailable[0].capacity.requests[bw]",
       "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("path", "body", "want"), [c[1:] for c in INVALID],
                         ids=[c[0] for c in INVALID])
async def test_invalid_consumable_capacity_names_the_field(
        http: Http, path: str, body: dict[str, Any], want: list[tuple[str, str]]) -> None:
    s, st = await http.post(path, body)
    assert s == 422, st
    assert _causes(st) == want


async def test_valid_consumable_capacity_is_accepted(http: Http) -> None:
    fractional = {"default": "500m", "validRange": {"min": "250m", "max": "2", "step": "250m"}}
    for i, policy in enumerate((RANGE, {"default": "10Gi", "validValues": ["10Gi", "20Gi"]},
                                None)):
        s, st = await http.post(SLICES, dra_slice(f"ok{i}", devices=[shared(policy)]))
        assert s == 201, st
    s, st = await http.post(SLICES, dra_slice("ok-frac", devices=[
        {"name": "cpu0", "allowMultipleAllocations": True,
         "capacity": {"cores": {"value": "4", "requestPolicy": fractional}}}]))
    assert s == 201, st
    s, st = await http.post(CLAIMS, dra_claim("ok", requests=[with_capacity(bw="15Gi")]))
    assert s == 201, st
    assert st["spec"]["devices"]["requests"][0]["exactly"]["capacity"] == {
        "requests": {"bw": "15Gi"}}


@pytest.mark.parametrize(("result", "want"), [
    ({"consumedCapacity": {"bw": "15Gi"}, "shareID": "0b6e1f3c-2f4e-4d7a-9c1e-3a5b7c9d1e2f"},
     []),
    ({"consumedCapacity": {"bw": "x"}},
     [("status.allocation.devices.results[0].consumedCapacity[bw]", "FieldValueInvalid")]),
    ({"shareID": "not-a-uuid"},
     [("status.allocation.devices.results[0].shareID", "FieldValueInvalid")]),
])
async def test_allocation_results_with_shares(http: Http, result: dict[str, Any],
                                              want: list[tuple[str, str]]) -> None:
    s, c = await http.post(CLAIMS, dra_claim("share", requests=[dra_exact("r")]))
    assert s == 201, c
    alloc = dra_allocation("node-1", [("r", "gpu.example.com", "node-1", "nic0")])
    alloc["devices"]["results"][0].update(result)
    s, st = await http.put(f"{CLAIMS}/share/status", {**c, "status": {"allocation": alloc}})
    if want:
        assert s == 422, st
        assert _causes(st) == want
    else:
        assert s == 200, st
        assert st["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] == {
            "bw": "15Gi"}


@pytest.mark.parametrize(("text", "want"), [
    ("nic=2:shared=true", [DeviceKind("nic", 2, model="nic-model", shared=True)]),
    ("nic=1:memory=100Gi:shared=true:step=10Gi",
     [DeviceKind("nic", 1, memory="100Gi", model="nic-model", shared=True, step="10Gi")]),
])
def test_driver_spec_for_shared_devices(text: str, want: list[DeviceKind]) -> None:
    assert parse_device_kinds(text) == want


@pytest.mark.parametrize(("text", "error"), [
    ("nic=1:shared=yes", "is not true or false"),
    ("nic=1:step=10Gi", "step needs shared=true"),
    ("nic=1:shared=true:step=0", "not a positive quantity"),
    ("nic=1:shared=true:partitions=2", "do not go together"),
])
def test_driver_spec_for_shared_devices_errors(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_device_kinds(text)


@pytest.mark.sandbox(dra_devices="nic=2:memory=100Gi:shared=true:step=10Gi:nodes=1")
async def test_driver_publishes_shared_devices(http: Http) -> None:
    _, lst = await http.get(SLICES, params={"fieldSelector": "spec.nodeName=node-0000"})
    [sl] = lst["items"]
    for d in sl["spec"]["devices"]:
        assert d["allowMultipleAllocations"] is True
        assert d["capacity"]["memory"] == {"value": "100Gi", "requestPolicy": {
            "default": "10Gi", "validRange": {"min": "10Gi", "max": "100Gi", "step": "10Gi"}}}
