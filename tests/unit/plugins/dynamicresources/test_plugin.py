"""DynamicResources at each extension point, over dict listers and a recording API client."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.dynamicresources.claims import FINALIZER
from scheduler.plugins.dynamicresources.plugin import (
    STATE_KEY,
    REASON_CANNOT_ALLOCATE,
    REASON_DEALLOCATED,
    REASON_NOT_AVAILABLE,
    DynamicResources,
)
from tests.builders import make_node, make_pod
from tests.fakes import FakeApiClient, FakeHandle, FakeResponse, node_infos
from tests.unit.dra.builders import (
    DRIVER,
    claim,
    device,
    exactly,
    gpu_class,
    resource_slice,
)

NODES = [make_node("n1"), make_node("n2")]
SLICES = [resource_slice("n1-gpus", node="n1", devices=[device("g0")])]
CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"


def pod_with(name: str, *claim_names: str, template: str | None = None,
             generated: str | None = None) -> dict[str, Any]:
    pod = make_pod(name)
    pod["metadata"]["uid"] = f"uid-{name}"
    entries: list[dict[str, Any]] = [{"name": c, "resourceClaimName": c} for c in claim_names]
    if template is not None:
        entries.append({"name": "gpu", "resourceClaimTemplateName": template})
        if generated is not None:
            pod.setdefault("status", {})["resourceClaimStatuses"] = [
                {"name": "gpu", "resourceClaimName": generated}]
    pod["spec"]["resourceClaims"] = entries
    return pod


def plugin_with(claims: list[dict[str, Any]], *, slices: list[dict[str, Any]] = SLICES,
                client: FakeApiClient | None = None) -> tuple[DynamicResources, FakeHandle]:
    handle = FakeHandle(node_infos(NODES), client=client, objects={
        "resourceclaims": claims, "resourceslices": slices, "deviceclasses": [gpu_class()]})
    return DynamicResources(None, handle), handle  # type: ignore[arg-type]


def filter_all(p: DynamicResources, pod: dict[str, Any], handle: FakeHandle
               ) -> tuple[CycleState, dict[str, Status | None]]:
    state = CycleState()
    info = PodInfo.from_pod(pod)
    _, st = p.pre_filter(state, info, handle.snapshot().list())
    assert st is None, st
    return state, {ni.name: p.filter(state, info, ni) for ni in handle.snapshot().list()}


def owned(c: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    c["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                         "uid": pod["metadata"]["uid"], "controller": True}]
    return c


@pytest.mark.parametrize(("pod", "claims", "want"), [
    (make_pod("plain"), [], None),
    (pod_with("p", "c"), [claim("c", exactly("r"))], None),
    (pod_with("p", "c"), [], 'resourceclaim.resource.k8s.io "c" not found'),
    (pod_with("p", "c"), [claim("c", exactly("r"), deleting=True)],
     'resourceclaim "c" is being deleted'),
    (pod_with("p", template="t"), [], "pod default/p: ResourceClaim not created yet for 'gpu'"),
    (pod_with("p", template="t", generated="p-gpu"), [claim("p-gpu", exactly("r"))],
     "ResourceClaim p-gpu was not created for pod default/p (pod is not owner)"),
])
def test_pre_enqueue(pod: dict[str, Any], claims: list[dict[str, Any]], want: str | None
                     ) -> None:
    p, _ = plugin_with(claims)
    st = p.pre_enqueue(PodInfo.from_pod(pod))
    if want is None:
        assert st is None
    else:
        assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.message() == want


def test_template_claim_owned_by_the_pod_is_accepted() -> None:
    pod = pod_with("p", template="t", generated="p-gpu")
    p, _ = plugin_with([owned(claim("p-gpu", exactly("r")), pod)])
    assert p.pre_enqueue(PodInfo.from_pod(pod)) is None


def test_pods_without_claims_skip() -> None:
    p, handle = plugin_with([])
    _, st = p.pre_filter(CycleState(), PodInfo.from_pod(make_pod("x")), [])
    assert st is not None and st.is_skip()


@pytest.mark.parametrize("pod, signs", [
    (make_pod("x"), True),  # no claims: skipped by PreFilter, 0 on every node
    (pod_with("p", "c"), False),  # claims: reads the claims and other nodes' devices
    # an extended resource a DeviceClass could back: the special claim reads devices
    (make_pod("e", **{"example.com/gpu": 1}), False),
])
def test_only_pods_without_claims_sign(pod: dict[str, Any], signs: bool) -> None:
    """Opportunistic batching keeps a window's scores only when every Score plugin signs."""
    p, _ = plugin_with([claim("c", exactly("r"))])
    assert (p.sign(PodInfo.from_pod(pod)) is not None) is signs


def test_unknown_class_is_unresolvable_with_the_claims_words() -> None:
    p, handle = plugin_with([claim("c", exactly("r", "nope"))])
    _, st = p.pre_filter(CycleState(), PodInfo.from_pod(pod_with("p", "c")), [])
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "device class nope does not exist" in st.message()


def test_filter_only_where_the_device_is() -> None:
    p, handle = plugin_with([claim("c", exactly("r"))])
    state, by_node = filter_all(p, pod_with("p", "c"), handle)
    assert by_node["n1"] is None
    st = by_node["n2"]
    assert st is not None and st.code == Code.UNSCHEDULABLE
    assert st.message() == REASON_CANNOT_ALLOCATE
    assert p.node_details(state, "n2") == [
        "claim default/c, request r: no device of class gpu matches the selectors on this node"]


def test_allocated_claim_pins_the_pod() -> None:
    alloc = {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1",
                                      "device": "g0"}]},
             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                 {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}
    p, handle = plugin_with([claim("c", exactly("r"), allocation=alloc)])
    _, by_node = filter_all(p, pod_with("p", "c"), handle)
    assert by_node["n1"] is None
    st = by_node["n2"]
    assert st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message() == REASON_NOT_AVAILABLE


def test_two_pods_in_flight_never_get_the_same_device() -> None:
    p, handle = plugin_with([claim("a", exactly("r")), claim("b", exactly("r"))])
    pa, pb = pod_with("pa", "a"), pod_with("pb", "b")
    state_a, by_node = filter_all(p, pa, handle)
    assert by_node["n1"] is None
    assert p.reserve(state_a, PodInfo.from_pod(pa), "n1") is None
    _, by_node = filter_all(p, pb, handle)
    st = by_node["n1"]
    assert st is not None and st.message() == REASON_CANNOT_ALLOCATE
    p.unreserve(state_a, PodInfo.from_pod(pa), "n1")  # A failed later: the device is free
    _, by_node = filter_all(p, pb, handle)
    assert by_node["n1"] is None


def test_in_flight_allocation_gives_way_to_the_api_copy() -> None:
    p, handle = plugin_with([claim("a", exactly("r"))])
    pa = pod_with("pa", "a")
    state, _ = filter_all(p, pa, handle)
    p.reserve(state, PodInfo.from_pod(pa), "n1")
    assert p.tracker.in_flight("default/a") is not None
    written = copy.deepcopy(handle.listers.objects["resourceclaims"][0])
    written["status"] = {"allocation": p.tracker.in_flight("default/a")}
    written["metadata"]["resourceVersion"] = "2"
    handle.listers.objects["resourceclaims"] = [written]
    assert p.tracker.in_use(handle.listers.list("resourceclaims")) == {(DRIVER, "n1", "g0")}
    assert p.tracker.in_flight("default/a") is None


@pytest.mark.parametrize("informer_rv, expected", [
    # upstream's bindClaim: the informer's copy is written first, read again on a conflict
    ("1", [("PUT", "c"), ("PUT", "status"), ("GET", "c"), ("PUT", "status")]),
    # no resourceVersion in the informer's copy: nothing to write over, the API is read first
    ("", [("GET", "c"), ("PUT", "c"), ("PUT", "status"), ("GET", "c"), ("PUT", "status")]),
])
async def test_pre_bind_writes_finalizer_allocation_and_reservation(
        informer_rv: str, expected: list[tuple[str, str]]) -> None:
    c = claim("c", exactly("r"))
    c["metadata"]["resourceVersion"] = informer_rv
    in_api = copy.deepcopy(c)
    in_api["metadata"]["resourceVersion"] = "1"
    client = FakeApiClient()
    # read first only when the informer's copy cannot be written
    client.responses[("GET", CLAIM_PATH + "c")] = [] if informer_rv else [
        FakeResponse(200, copy.deepcopy(in_api))]
    with_fin = copy.deepcopy(in_api)
    with_fin["metadata"]["finalizers"] = [FINALIZER]
    client.responses[("PUT", CLAIM_PATH + "c")] = [FakeResponse(200, with_fin)]
    # the first status write conflicts: the claim is read again and written again
    client.responses[("PUT", CLAIM_PATH + "c/status")] = [FakeResponse(409, {}),
                                                         FakeResponse(200, {})]
    client.responses[("GET", CLAIM_PATH + "c")].append(FakeResponse(200, copy.deepcopy(with_fin)))
    p, handle = plugin_with([c], client=client)
    pod = pod_with("p", "c")
    state, _ = filter_all(p, pod, handle)
    info = PodInfo.from_pod(pod)
    assert p.reserve(state, info, "n1") is None
    assert await p.pre_bind(state, info, "n1") is None
    methods = [(m, path.rsplit("/", 1)[-1]) for m, path, _ in client.requests]
    assert methods == expected
    status = client.requests[-1][2]["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert status["allocation"]["devices"]["results"] == [
        {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"}]
    put = next(body for m, path, body in client.requests if (m, path) == ("PUT", CLAIM_PATH + "c"))
    assert put["metadata"]["finalizers"] == [FINALIZER]
    assert put["metadata"]["resourceVersion"] == "1"
    # the informer's copy is never changed in place
    assert "finalizers" not in handle.listers.objects["resourceclaims"][0]["metadata"]
    assert handle.listers.objects["resourceclaims"][0].get("status", {}) == {}


def test_pre_bind_pre_flight_skips_unless_a_claim_is_left_to_reserve() -> None:
    """NominatedNodeNameForExpectation: only a pod with claims to write is nominated first."""
    p, handle = plugin_with([claim("c", exactly("r"))])
    pod = pod_with("p", "c")
    state, _ = filter_all(p, pod, handle)
    info = PodInfo.from_pod(pod)
    assert p.reserve(state, info, "n1") is None
    assert p.pre_bind_pre_flight(state, info, "n1") is None
    plain = PodInfo.from_pod(make_pod("plain"))
    skipped = p.pre_bind_pre_flight(CycleState(), plain, "n1")
    assert skipped is not None and skipped.code == Code.SKIP
    # every claim already reserved for the pod: nothing for PreBind to write
    data = state.read(STATE_KEY)
    data.claims = [{**c, "status": {**(c.get("status") or {}), "reservedFor": [
        {"resource": "pods", "name": "p", "uid": info.uid}]}} for c in data.claims]
    done = p.pre_bind_pre_flight(state, info, "n1")
    assert done is not None and done.code == Code.SKIP


async def test_post_filter_deallocates_an_idle_claim() -> None:
    alloc = {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1",
                                      "device": "g0"}]},
             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                 {"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]}}
    c = claim("c", exactly("r"), allocation=alloc)
    c["metadata"]["finalizers"] = [FINALIZER]
    # a driver's report on the device goes with the allocation (it may name only allocated
    # devices: kube-apiserver would refuse the deallocation otherwise)
    c["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "g0"}]
    client = FakeApiClient()
    client.responses[("GET", CLAIM_PATH + "c")] = [FakeResponse(200, copy.deepcopy(c))]
    client.responses[("PUT", CLAIM_PATH + "c/status")] = [FakeResponse(200, copy.deepcopy(c))]
    p, handle = plugin_with([c], client=client)
    state, _ = filter_all(p, pod_with("p", "c"), handle)
    _, st = p.post_filter(state, PodInfo.from_pod(pod_with("p", "c")), {})
    assert st is not None and st.message() == REASON_DEALLOCATED
    await asyncio.gather(*p._tasks)
    assert "allocation" not in client.requests[1][2]["status"]
    assert "devices" not in client.requests[1][2]["status"]
    assert client.requests[2][2]["metadata"]["finalizers"] == []


def test_preemption_counts_the_devices_victims_free() -> None:
    victim = pod_with("victim", "held")
    victim["spec"]["nodeName"] = "n1"
    alloc = {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1",
                                      "device": "g0"}]}}
    held = claim("held", exactly("r"), allocation=alloc,
                 reserved_for=[{"resource": "pods", "name": "victim", "uid": "uid-victim"}])
    p, handle = plugin_with([held, claim("c", exactly("r"))])
    pod = pod_with("p", "c")
    state, by_node = filter_all(p, pod, handle)
    assert by_node["n1"] is not None and by_node["n1"].code == Code.UNSCHEDULABLE
    n1 = handle.snapshot().get("n1")
    assert n1 is not None
    info, vinfo = PodInfo.from_pod(pod), PodInfo.from_pod(victim)
    what_if = state.clone()
    p.remove_pod(what_if, info, vinfo, n1)
    assert p.filter(what_if, info, n1) is None
    assert p.filter(state, info, n1) is not None  # the original state is untouched
    p.add_pod(what_if, info, vinfo, n1)
    assert p.filter(what_if, info, n1) is not None


def test_in_flight_allocation_of_a_deleted_claim_is_dropped() -> None:
    # the claim is deleted (its pod gone) before this scheduler saw its allocation written
    p, handle = plugin_with([claim("a", exactly("r")), claim("b", exactly("r"))])
    pa = pod_with("pa", "a")
    state, _ = filter_all(p, pa, handle)
    p.reserve(state, PodInfo.from_pod(pa), "n1")
    assert p.tracker.in_use(handle.listers.list("resourceclaims")) == {(DRIVER, "n1", "g0")}
    handle.listers.objects["resourceclaims"] = [claim("b", exactly("r"))]
    assert p.tracker.in_use(handle.listers.list("resourceclaims")) == set()
    _, by_node = filter_all(p, pod_with("pb", "b"), handle)
    assert by_node["n1"] is None


@pytest.mark.parametrize(("args", "error"), [
    (None, None),
    ({"filterTimeout": "0s"}, None),
    ({"filterTimeout": "2.5s"}, None),
    ({"filterTimeout": "-1s"}, "DynamicResources.args.filterTimeout"),
    ({"filterTimeout": "soon"}, "DynamicResources.args.filterTimeout"),
    ({"bindingTimeout": "10m"}, None),
    ({"bindingTimeout": "500ms"}, "DynamicResources.args.bindingTimeout"),
    ({"bindingTimeout": "later"}, "DynamicResources.args.bindingTimeout"),
    ({"bindTimeout": "10m"}, "DynamicResources.args.bindTimeout"),
])
def test_filter_timeout_args(args: dict[str, Any] | None, error: str | None) -> None:
    from scheduler.config.errors import ConfigError

    handle = FakeHandle(node_infos(NODES), objects={})
    if error is None:
        DynamicResources(args, handle)  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigError, match=error):
        DynamicResources(args, handle)  # type: ignore[arg-type]


@pytest.mark.parametrize(("gate", "timed_out"), [(True, True), (False, False)])
def test_filter_times_out_on_its_clock_while_the_gate_is_on(gate: bool, timed_out: bool
                                                            ) -> None:
    from scheduler.config import features

    # 7 devices; 3 + 3 + 2 of them asked for: a long, hopeless search
    slices = [resource_slice("n1-gpus", node="n1", devices=[device(f"g{i}") for i in range(7)])]
    c = claim("c", exactly("x", "gpu", count=3), exactly("y", "gpu", count=3),
              exactly("z", "gpu", count=2))
    handle = FakeHandle(node_infos(NODES), objects={
        "resourceclaims": [c], "resourceslices": slices, "deviceclasses": [gpu_class()]})
    ticks = iter(range(10_000_000))
    features.DEFAULT.set_from_map({"DRASchedulerFilterTimeout": gate})
    try:
        p = DynamicResources({"filterTimeout": "1s"}, handle,  # type: ignore[arg-type]
                             clock=lambda: float(next(ticks)))
    finally:
        features.DEFAULT.reset()
    _, statuses = filter_all(p, pod_with("p", "c"), handle)
    st = statuses["n1"]
    assert st is not None and not st.is_success()
    assert ("timed out trying to allocate devices" in st.message()) is timed_out
