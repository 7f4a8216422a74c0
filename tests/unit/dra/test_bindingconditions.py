"""Device binding conditions (DRADeviceBindingConditions): the allocation carries a device's
binding conditions (and is pinned to the node for ``bindsToNode``), devices without them are
preferred, PreBind waits on an injected clock until the claim's ``status.devices`` shows them
True, fails on a failure condition or after ``bindingTimeout``, and the next attempt finds
the claim unavailable and deallocates it."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scheduler.config import features
from scheduler.dra.bindingconditions import FAILED, PENDING, READY, binding_state, decorate
from scheduler.dra.inventory import Inventory
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.dynamicresources.plugin import (
    BINDING_POLL_SECONDS,
    DEFAULT_BINDING_TIMEOUT_SECONDS,
    EVENT_BINDING_PENDING,
    REASON_DEALLOCATED,
    REASON_NOT_AVAILABLE,
    DynamicResources,
)
from tests.builders import make_node
from tests.fakes import FakeApiClient, FakeHandle, FakeResponse, node_infos
from tests.unit.dra.builders import DRIVER, claim, device, exactly, gpu_class, resource_slice
from tests.unit.plugins.dynamicresources.test_plugin import CLAIM_PATH, filter_all, pod_with

NODES = [make_node("n1"), make_node("n2")]


def attachable(name: str, *, binds: bool = True) -> dict[str, Any]:
    d = device(name)
    d["bindingConditions"] = ["example.com/attached"]
    d["bindingFailureConditions"] = ["example.com/attach-failed"]
    if binds:
        d["bindsToNode"] = True
    return d


FABRIC = resource_slice("fabric", node_selector={"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "fabric", "operator": "Exists"}]}]}, pool="fabric", devices=[attachable("f0")])


def result(device_name: str = "f0", pool: str = "fabric", *, conditions: bool = True) -> dict[str, Any]:
    r: dict[str, Any] = {"request": "r", "driver": DRIVER, "pool": pool, "device": device_name}
    if conditions:
        r["bindingConditions"] = ["example.com/attached"]
        r["bindingFailureConditions"] = ["example.com/attach-failed"]
    return r


def allocated(*, devices: list[dict[str, Any]] | None = None, at: str | None = None,
              reserved: bool = True) -> dict[str, Any]:
    alloc: dict[str, Any] = {"devices": {"results": [result()]}}
    if at:
        alloc["allocationTimestamp"] = at
    c = claim("c", exactly("r"), allocation=alloc,
              reserved_for=[{"resource": "pods", "name": "p", "uid": "uid-p"}] if reserved else None)
    if devices is not None:
        c["status"]["devices"] = devices
    return c


def reported(**conds: str) -> list[dict[str, Any]]:
    return [{"driver": DRIVER, "pool": "fabric", "device": "f0", "conditions": [
        {"type": t, "status": s, "reason": "Test", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t, s in conds.items()]}]


STATES = [
    ("no binding conditions", claim("c", exactly("r"), allocation={"devices": {"results": [
        result(conditions=False)]}}), READY),
    ("no status yet", allocated(), PENDING),
    ("condition False", allocated(devices=reported(**{"example.com/attached": "False"})), PENDING),
    ("condition True", allocated(devices=reported(**{"example.com/attached": "True"})), READY),
    ("failure True wins", allocated(devices=reported(**{"example.com/attached": "True",
                                                         "example.com/attach-failed": "True"})), FAILED),
    ("failure False", allocated(devices=reported(**{"example.com/attach-failed": "False"})), PENDING),
    ("entry for another device", allocated(devices=[{**reported(**{"example.com/attached": "True"})[0],
                                                     "device": "f1"}]), PENDING),
]


@pytest.mark.parametrize(("c", "want"), [s[1:] for s in STATES], ids=[s[0] for s in STATES])
def test_binding_state_reads_the_claims_device_status(c: dict[str, Any], want: str) -> None:
    assert binding_state(c).state == want


def test_decorate_copies_conditions_and_pins_binds_to_node() -> None:
    inv = Inventory([FABRIC, resource_slice("n1-gpus", node="n1", devices=[device("g0")]),
                     resource_slice("loose", node="n2", pool="loose", devices=[attachable("l0", binds=False)])])
    plain = {"devices": {"results": [result("g0", "n1", conditions=False)]}}
    assert decorate(plain, inv, "n1") is plain
    out = decorate({"devices": {"results": [result(conditions=False)]}}, inv, "n1")
    assert out["devices"]["results"] == [result()]
    assert out["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    loose = decorate({"devices": {"results": [result("l0", "loose", conditions=False)]}}, inv, "n2")
    assert loose["devices"]["results"][0]["bindingConditions"] == ["example.com/attached"]
    assert "nodeSelector" not in loose


def _plugin(claims: list[dict[str, Any]], *, slices: list[dict[str, Any]], client: FakeApiClient | None = None,
            args: dict[str, Any] | None = None) -> tuple[DynamicResources, FakeHandle, list[float]]:
    nodes = [make_node("n1", labels={"fabric": "a"}), make_node("n2", labels={"fabric": "a"})]
    handle = FakeHandle(node_infos(nodes), client=client, objects={
        "resourceclaims": claims, "resourceslices": slices, "deviceclasses": [gpu_class()]})
    now = [1000.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s
        await asyncio.sleep(0)

    p = DynamicResources(args, handle, clock=lambda: now[0],  # type: ignore[arg-type]
                         wall_clock=lambda: 1_800_000_000.0 + now[0], sleep=sleep)
    p.slept = slept  # type: ignore[attr-defined]
    return p, handle, now


def test_devices_without_binding_conditions_are_preferred() -> None:
    local = resource_slice("n1-gpus", node="n1", devices=[device("g0")])
    p, handle, _ = _plugin([claim("c", exactly("r"))], slices=[FABRIC, local])
    state, statuses = filter_all(p, pod_with("p", "c"), handle)
    assert statuses["n1"] is None
    info = PodInfo.from_pod(pod_with("p", "c"))
    assert p.reserve(state, info, "n1") is None
    alloc = p.tracker.in_flight("default/c")
    assert alloc is not None and alloc["devices"]["results"][0]["device"] == "g0"
    assert "bindingConditions" not in alloc["devices"]["results"][0]


async def _bind(p: DynamicResources, handle: FakeHandle, client: FakeApiClient,
                then: list[dict[str, Any]] | None) -> tuple[Any, dict[str, Any]]:
    """Filter, Reserve and PreBind the pod on n1; ``then``: the device status the driver
    reports after the first poll (None: never)."""
    c = handle.listers.objects["resourceclaims"][0]
    client.responses[("GET", CLAIM_PATH + "c")] = [FakeResponse(200, copy.deepcopy(c))]
    with_fin = copy.deepcopy(c)
    with_fin["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    client.responses[("PUT", CLAIM_PATH + "c")] = [FakeResponse(200, with_fin)]
    pod = pod_with("p", "c")
    state, _ = filter_all(p, pod, handle)
    info = PodInfo.from_pod(pod)
    assert p.reserve(state, info, "n1") is None
    assert p.pre_bind_pre_flight(state, info, "n1") is None
    task = asyncio.ensure_future(p.pre_bind(state, info, "n1"))
    while not client.requests or client.requests[-1][1] != CLAIM_PATH + "c/status":
        await asyncio.sleep(0)
    written = copy.deepcopy(client.requests[-1][2])
    written["metadata"]["resourceVersion"] = "2"
    handle.listers.objects["resourceclaims"] = [written]
    if then is not None:
        while not p.slept:  # type: ignore[attr-defined]
            await asyncio.sleep(0)
        handle.listers.objects["resourceclaims"] = [{**written, "status": {**written["status"], "devices": then}}]
    return await task, written


@pytest.mark.parametrize(("then", "want", "polls"), [
    (reported(**{"example.com/attached": "True"}), None, 1),
    (reported(**{"example.com/attach-failed": "True"}), "binding failed", 1),
    (None, "binding timeout after 600s", int(DEFAULT_BINDING_TIMEOUT_SECONDS / BINDING_POLL_SECONDS)),
], ids=["conditions True: bind", "failure condition: error", "never: timeout"])
async def test_pre_bind_waits_for_binding_conditions(then: list[dict[str, Any]] | None, want: str | None,
                                                     polls: int) -> None:
    client = FakeApiClient()
    p, handle, now = _plugin([claim("c", exactly("r"))], slices=[FABRIC], client=client)
    start = now[0]
    st, written = await _bind(p, handle, client, then)
    alloc = written["status"]["allocation"]
    assert alloc["devices"]["results"] == [result()]
    assert alloc["allocationTimestamp"] == "2027-01-15T08:16:40Z"
    assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
    assert written["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    events = handle.event_recorder.events
    assert [(e["reason"], e["message"]) for e in events] == [
        (EVENT_BINDING_PENDING, "waiting for binding conditions for device on node n1")]
    assert len(p.slept) == polls and set(p.slept) == {BINDING_POLL_SECONDS}  # type: ignore[attr-defined]
    outcome = "success" if want is None else "failure" if then is not None else "timeout"
    registry = handle.metrics.registry
    labels = {"profile": handle.profile_name, "driver": DRIVER, "status": outcome}
    assert registry.get_sample_value("scheduler_dra_bindingconditions_allocations_total", labels) == 1
    assert registry.get_sample_value("scheduler_dra_bindingconditions_wait_duration_seconds_sum",
                                     labels) == now[0] - start
    if want is None:
        assert st is None
    else:
        assert st is not None and st.code == Code.ERROR and want in st.message()
        assert now[0] - start == (DEFAULT_BINDING_TIMEOUT_SECONDS if then is None else BINDING_POLL_SECONDS)


async def test_binding_timeout_arg_bounds_the_wait() -> None:
    client = FakeApiClient()
    p, handle, now = _plugin([claim("c", exactly("r"))], slices=[FABRIC], client=client,
                             args={"bindingTimeout": "12s"})
    st, _ = await _bind(p, handle, client, None)
    assert st is not None and "binding timeout after 12s" in st.message()
    assert p.slept == [5.0, 5.0, 2.0]  # type: ignore[attr-defined]


NEXT = [
    ("failed", allocated(devices=reported(**{"example.com/attach-failed": "True"}),
                         at="2027-01-15T08:16:40Z"), "binding failed"),
    ("timed out", allocated(at="2027-01-15T07:00:00Z"), "binding timed out"),
]


@pytest.mark.parametrize(("c", "why"), [n[1:] for n in NEXT], ids=[n[0] for n in NEXT])
async def test_next_attempt_finds_the_claim_unavailable_and_deallocates_it(c: dict[str, Any], why: str) -> None:
    client = FakeApiClient()
    client.responses[("GET", CLAIM_PATH + "c")] = [FakeResponse(200, copy.deepcopy(c))]
    p, handle, _ = _plugin([c], slices=[FABRIC], client=client)
    state, statuses = filter_all(p, pod_with("p", "c"), handle)
    for name, st in statuses.items():
        assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.message() == REASON_NOT_AVAILABLE
        assert why in p.node_details(state, name)[0]
    _, st = p.post_filter(state, PodInfo.from_pod(pod_with("p", "c")), {})
    assert st is not None and st.message() == REASON_DEALLOCATED
    await asyncio.gather(*p._tasks)
    status = client.requests[1][2]["status"]
    assert "allocation" not in status and "reservedFor" not in status and "devices" not in status


def test_a_pending_claim_still_in_time_is_waited_for_again() -> None:
    # reserved for the pod already, conditions not yet True, timeout not passed: PreBind
    # is not skipped (it waits again) and the claim stays available
    c = allocated(at="2027-01-15T08:16:40Z")
    p, handle, _ = _plugin([c], slices=[FABRIC])
    state, statuses = filter_all(p, pod_with("p", "c"), handle)
    assert statuses["n1"] is None
    assert p.pre_bind_pre_flight(state, PodInfo.from_pod(pod_with("p", "c")), "n1") is None


def test_with_the_gate_off_devices_with_binding_conditions_are_never_allocated() -> None:
    local = resource_slice("n1-gpus", node="n1", devices=[device("g0")])
    for gate, fits in ((True, {"n1", "n2"}), (False, {"n1"})):
        features.DEFAULT.set_from_map({"DRADeviceBindingConditions": gate})
        try:
            p, handle, _ = _plugin([claim("c", exactly("r"))], slices=[FABRIC, local])
        finally:
            features.DEFAULT.reset()
        _, statuses = filter_all(p, pod_with("p", "c"), handle)
        assert {n for n, st in statuses.items() if st is None} == fits, gate
