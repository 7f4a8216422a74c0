"""DRAExtendedResource through NodeResourcesFit and DynamicResources: Fit leaves a resource a
DeviceClass backs to DynamicResources on nodes that do not advertise it; DynamicResources
allocates the pod's special claim with its other claims, holds it in flight, creates it at
PreBind and writes the pod's extendedResourceClaimStatus; a claim a prior attempt left is
deleted, never allocated twice."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scheduler.dra.extended import ANNOTATION, CLASS_PREFIX
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.dynamicresources.claims import FINALIZER
from scheduler.plugins.dynamicresources.plugin import (
    REASON_CANNOT_ALLOCATE,
    REASON_EXTENDED_DELETED,
    REASON_EXTENDED_STALE,
    STATE_KEY,
    DynamicResources,
)
from scheduler.plugins.noderesources.fit import Fit, is_schedulable_after_class_change
from tests.builders import make_node, make_pod
from tests.fakes import FakeApiClient, FakeHandle, FakeResponse, node_infos
from tests.unit.dra.builders import claim, device, device_class, exactly, resource_slice

GPU = "example.com/gpu"
NS = "default"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"


def gpu_class(name: str = "gpu", resource: str | None = GPU) -> dict[str, Any]:
    c = device_class(name, "device.driver == 'gpu.example.com'")
    if resource is not None:
        c["spec"]["extendedResourceName"] = resource
    return c


def gpu_pod(name: str = "p", count: int = 1, resource: str = GPU,
            claims: tuple[str, ...] = ()) -> dict[str, Any]:
    pod = make_pod(name, cpu="100m", **{resource: str(count)})
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["spec"]["containers"][0]["name"] = "main"
    if claims:
        pod["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return pod


# n1 has two devices through DRA; n2 has none; n3 advertises the resource (a device plugin)
NODES = [make_node("n1"), make_node("n2"), make_node("n3", **{GPU: "4"})]
SLICES = [resource_slice("n1-gpus", node="n1", devices=[device("g0"), device("g1")])]


def setup(*, classes: list[dict[str, Any]] | None = None,
          claims: list[dict[str, Any]] | None = None, client: FakeApiClient | None = None
          ) -> tuple[DynamicResources, Fit, FakeHandle]:
    handle = FakeHandle(node_infos(NODES), client=client, objects={
        "resourceclaims": claims or [], "resourceslices": SLICES,
        "deviceclasses": [gpu_class()] if classes is None else classes})
    fit = Fit({"scoringStrategy": {"type": "LeastAllocated",
                                   "resources": [{"name": "cpu", "weight": 1}]}},
              handle)  # type: ignore[arg-type]
    return DynamicResources(None, handle), fit, handle  # type: ignore[arg-type]


def run_filters(p: DynamicResources, fit: Fit | None, pod: dict[str, Any], handle: FakeHandle
                ) -> tuple[CycleState, dict[str, tuple[Status | None, Status | None]]]:
    state = CycleState()
    info = PodInfo.from_pod(pod)
    nodes = handle.snapshot().list()
    _, st = p.pre_filter(state, info, nodes)
    assert st is None, st
    if fit is not None:
        fit.pre_filter(state, info, nodes)
    return state, {ni.name: (p.filter(state, info, ni),
                             fit.filter(state, info, ni) if fit is not None else None)
                   for ni in nodes}


def msg(st: Status | None) -> str | None:
    return None if st is None else st.message()


@pytest.mark.parametrize(("classes", "node", "want_fit"), [
    # a class backs it and the node does not advertise it: DynamicResources' job
    ([gpu_class()], "n1", None),
    ([gpu_class()], "n2", None),
    # the node advertises it: Fit's job, as before
    ([gpu_class()], "n3", None),
    # no class backs it: Fit's words, as without DRA
    ([], "n1", f"Insufficient {GPU}"),
    # a class backs another name only
    ([gpu_class(resource="example.com/tpu")], "n1", f"Insufficient {GPU}"),
])
def test_fit_leaves_backed_resources_to_dra(classes: list[dict[str, Any]], node: str,
                                            want_fit: str | None) -> None:
    _, fit, handle = setup(classes=classes)
    state = CycleState()
    info = PodInfo.from_pod(gpu_pod())
    fit.pre_filter(state, info, handle.snapshot().list())
    ni = next(n for n in handle.snapshot().list() if n.name == node)
    assert msg(fit.filter(state, info, ni)) == want_fit


def test_fit_still_counts_an_advertised_resource() -> None:
    _, fit, handle = setup()
    state = CycleState()
    info = PodInfo.from_pod(gpu_pod(count=5))  # n3 advertises 4
    fit.pre_filter(state, info, handle.snapshot().list())
    n3 = next(n for n in handle.snapshot().list() if n.name == "n3")
    assert msg(fit.filter(state, info, n3)) == f"Insufficient {GPU}"


@pytest.mark.parametrize(("pod", "want"), [
    # one device: only n1 has devices; n3 advertises the resource (Fit decides there)
    (gpu_pod(count=1), {"n1": None, "n2": REASON_CANNOT_ALLOCATE, "n3": None}),
    (gpu_pod(count=2), {"n1": None, "n2": REASON_CANNOT_ALLOCATE, "n3": None}),
    (gpu_pod(count=3), {"n1": REASON_CANNOT_ALLOCATE, "n2": REASON_CANNOT_ALLOCATE,
                        "n3": None}),
    # the implicit name of the class works as well
    (gpu_pod(resource=CLASS_PREFIX + "gpu"),
     {"n1": None, "n2": REASON_CANNOT_ALLOCATE, "n3": REASON_CANNOT_ALLOCATE}),
])
def test_filter_allocates_the_special_claim(pod: dict[str, Any], want: dict[str, str | None]
                                           ) -> None:
    p, fit, handle = setup()
    _, by_node = run_filters(p, fit, pod, handle)
    assert {n: msg(st) for n, (st, _) in by_node.items()} == want


def test_pods_without_backed_resources_skip() -> None:
    p, _, handle = setup(classes=[])
    _, st = p.pre_filter(CycleState(), PodInfo.from_pod(gpu_pod()), handle.snapshot().list())
    assert st is not None and st.is_skip()


def test_special_claim_and_normal_claims_all_or_none() -> None:
    # a claim for one device plus two devices through the resource: n1 has only two
    c = claim("c", exactly("r", "gpu"))
    p, _, handle = setup(claims=[c])
    _, by_node = run_filters(p, None, gpu_pod(count=2, claims=("c",)), handle)
    assert msg(by_node["n1"][0]) == REASON_CANNOT_ALLOCATE
    _, by_node = run_filters(p, None, gpu_pod(count=1, claims=("c",)), handle)
    assert by_node["n1"][0] is None


def test_two_pods_in_flight_never_share_a_device() -> None:
    p, _, handle = setup()
    a, b = gpu_pod("a", count=2), gpu_pod("b", count=1)
    state_a, by_node = run_filters(p, None, a, handle)
    assert by_node["n1"][0] is None
    assert p.reserve(state_a, PodInfo.from_pod(a), "n1") is None
    _, by_node = run_filters(p, None, b, handle)
    assert msg(by_node["n1"][0]) == REASON_CANNOT_ALLOCATE
    p.unreserve(state_a, PodInfo.from_pod(a), "n1")
    _, by_node = run_filters(p, None, b, handle)
    assert by_node["n1"][0] is None


def test_prebind_creates_the_claim_and_writes_the_pod_status() -> None:
    client = FakeApiClient()
    p, _, handle = setup(client=client)
    pod = gpu_pod(count=2)
    created = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "p-extended-resources-abcde", "namespace": NS,
                            "uid": "uid-claim", "resourceVersion": "1"}}
    path = f"{CLAIMS}/p-extended-resources-abcde"
    client.responses[("POST", CLAIMS)] = [FakeResponse(201, copy.deepcopy(created))]
    client.responses[("GET", path)] = [FakeResponse(200, copy.deepcopy(created))]
    client.responses[("PUT", path)] = [FakeResponse(200, copy.deepcopy(created))]
    state, _ = run_filters(p, None, pod, handle)
    info = PodInfo.from_pod(pod)
    assert p.reserve(state, info, "n1") is None
    assert p.pre_bind_pre_flight(state, info, "n1") is None
    assert asyncio.run(p.pre_bind(state, info, "n1")) is None
    calls = {(m, pth): body for m, pth, body in client.requests}
    body = calls[("POST", CLAIMS)]
    md = body["metadata"]
    assert "name" not in md and md["generateName"] == "p-extended-resources-"
    assert md["annotations"] == {ANNOTATION: "true"}
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                      "uid": "uid-p", "controller": True}]
    assert body["spec"]["devices"]["requests"] == [
        {"name": "container-0-request-1", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]
    assert FINALIZER in calls[("PUT", path)]["metadata"]["finalizers"]
    assert ("GET", path) not in calls  # written over the create's answer, as upstream
    status = calls[("PUT", path + "/status")]["status"]
    assert sorted(r["device"] for r in status["allocation"]["devices"]["results"]) == \
        ["g0", "g1"]
    assert {r["request"] for r in status["allocation"]["devices"]["results"]} == \
        {"container-0-request-1"}
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert calls[("PATCH", f"/api/v1/namespaces/{NS}/pods/p/status")] == {"status": {
        "extendedResourceClaimStatus": {
            "requestMappings": [{"containerName": "main", "resourceName": GPU,
                                 "requestName": "container-0-request-1"}],
            "resourceClaimName": "p-extended-resources-abcde"}}}
    creates = handle.metrics.ops.resourceclaim_creates
    assert creates.labels("success")._value.get() == 1
    assert creates.labels("failure")._value.get() == 0
    # the devices stay held under the claim's real name until the informer shows it
    _, by_node = run_filters(p, None, gpu_pod("q"), handle)
    assert msg(by_node["n1"][0]) == REASON_CANNOT_ALLOCATE


def test_a_claim_left_by_a_prior_attempt_is_deleted_not_reused() -> None:
    pod = gpu_pod()
    stale = claim("p-extended-resources-old", exactly("container-0-request-1", "gpu"))
    stale["metadata"]["annotations"] = {ANNOTATION: "true"}
    stale["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                             "uid": "uid-p", "controller": True}]
    client = FakeApiClient()
    p, _, handle = setup(claims=[stale], client=client)
    state, by_node = run_filters(p, None, pod, handle)
    assert {msg(st) for st, _ in by_node.values()} == {REASON_EXTENDED_STALE}
    assert {st.code for st, _ in by_node.values() if st is not None} == {
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE}

    async def post_filter() -> Status | None:
        _, st = p.post_filter(state, PodInfo.from_pod(pod), {})
        await asyncio.gather(*p._tasks)
        return st
    st = asyncio.run(post_filter())
    assert msg(st) == REASON_EXTENDED_DELETED
    assert ("DELETE", f"{CLAIMS}/p-extended-resources-old") in [
        (m, pth) for m, pth, _ in client.requests]
    assert isinstance(state.get(STATE_KEY), object)


@pytest.mark.parametrize(("old", "new", "want"), [
    (None, gpu_class(), QueueingHint.QUEUE),
    (gpu_class(resource=None), gpu_class(), QueueingHint.QUEUE),
    (gpu_class(), gpu_class(), QueueingHint.SKIP),
    (None, gpu_class(resource="example.com/tpu"), QueueingHint.SKIP),
])
def test_fit_requeues_when_a_class_starts_backing_the_resource(
        old: dict[str, Any] | None, new: dict[str, Any], want: QueueingHint) -> None:
    assert is_schedulable_after_class_change(gpu_pod(), old, new) == want


def test_preemption_counts_the_devices_a_victims_extended_claim_frees() -> None:
    victim = gpu_pod("v", count=2)
    victim["spec"]["nodeName"] = "n1"
    victim["status"] = {"extendedResourceClaimStatus": {
        "resourceClaimName": "v-extended-resources-1",
        "requestMappings": [{"containerName": "main", "resourceName": GPU,
                             "requestName": "container-0-request-1"}]}}
    alloc = {"devices": {"results": [
        {"request": "container-0-request-1", "driver": "gpu.example.com", "pool": "n1",
         "device": d} for d in ("g0", "g1")]}}
    held = claim("v-extended-resources-1", exactly("container-0-request-1", "gpu", count=2),
                 allocation=alloc,
                 reserved_for=[{"resource": "pods", "name": "v", "uid": "uid-v"}])
    held["metadata"]["annotations"] = {ANNOTATION: "true"}
    p, _, handle = setup(claims=[held])
    pod = gpu_pod("p")
    state, by_node = run_filters(p, None, pod, handle)
    assert msg(by_node["n1"][0]) == REASON_CANNOT_ALLOCATE
    n1 = next(n for n in handle.snapshot().list() if n.name == "n1")
    info, victim_info = PodInfo.from_pod(pod), PodInfo.from_pod(victim)
    assert p.remove_pod(state, info, victim_info, n1) is None
    assert p.filter(state, info, n1) is None  # with the victim gone its devices are free
    assert p.add_pod(state, info, victim_info, n1) is None
    assert msg(p.filter(state, info, n1)) == REASON_CANNOT_ALLOCATE


@pytest.mark.parametrize("patch_status", [500, 200])
def test_unreserve_deletes_the_created_claim_whichever_step_failed(patch_status: int) -> None:
    # PreBind failed writing the pod's status (500), or PreBind succeeded and Bind failed
    # later (200): either way Unreserve deletes the claim PreBind created
    client = FakeApiClient()
    p, _, handle = setup(client=client)
    pod = gpu_pod()
    created = {"metadata": {"name": "p-extended-resources-x", "namespace": NS, "uid": "u"}}
    path = f"{CLAIMS}/p-extended-resources-x"
    client.responses[("POST", CLAIMS)] = [FakeResponse(201, copy.deepcopy(created))]
    client.responses[("GET", path)] = [FakeResponse(200, copy.deepcopy(created))]
    client.responses[("PATCH", f"/api/v1/namespaces/{NS}/pods/p/status")] = [
        FakeResponse(patch_status, {})]
    state, _ = run_filters(p, None, pod, handle)
    info = PodInfo.from_pod(pod)
    assert p.reserve(state, info, "n1") is None

    async def bind_then_unreserve() -> Status | None:
        st = await p.pre_bind(state, info, "n1")
        p.unreserve(state, info, "n1")
        await asyncio.gather(*p._tasks)  # the deletion runs as a named task
        return st
    st = asyncio.run(bind_then_unreserve())
    if patch_status == 500:
        assert st is not None and st.code == Code.ERROR
        assert "ExtendedResourceClaimStatus" in st.message()
    else:
        assert st is None
    assert ("DELETE", path) in [(m, pth) for m, pth, _ in client.requests]
    # and the devices are free again
    _, by_node = run_filters(p, None, gpu_pod("q", count=2), handle)
    assert by_node["n1"][0] is None


def test_in_flight_devices_go_when_the_informer_shows_the_created_claim() -> None:
    from scheduler.plugins.dynamicresources.claims import ClaimTracker

    tracker = ClaimTracker()
    alloc = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "n1",
                                      "device": "g0"}]}}
    tracker.assume("default/<extended-resources>uid-p", "uid-p", alloc)
    tracker.alias("default/p-extended-resources-x", "default/<extended-resources>uid-p")
    assert set(tracker.held()) == {("d", "n1", "g0")}
    seen = {"metadata": {"name": "p-extended-resources-x", "namespace": "default"}}
    tracker.claim_added(seen)  # created, not allocated yet: still in flight
    assert set(tracker.held()) == {("d", "n1", "g0")}
    tracker.claim_updated(seen, {**seen, "status": {"allocation": alloc}})
    assert set(tracker.held()) == {("d", "n1", "g0")}  # held once, by the informer's copy
    assert tracker.in_flight("default/<extended-resources>uid-p") is None
    tracker.claim_deleted(seen)
    assert set(tracker.held()) == set()


@pytest.mark.parametrize(("strategy", "allocated", "want"), [
    # n1: two devices of the class; the pod asks for one. n2: no device (not scored: 0).
    # n3 advertises 4 through a device plugin: scored from its allocatable as before.
    ("LeastAllocated", [], {"n1": 50, "n2": 0, "n3": 75}),
    ("LeastAllocated", ["g0"], {"n1": 0, "n2": 0, "n3": 75}),
    ("MostAllocated", ["g0"], {"n1": 100, "n2": 0, "n3": 25}),
])
def test_fit_scores_a_backed_resource_by_the_class_devices(
        strategy: str, allocated: list[str], want: dict[str, int]) -> None:
    alloc = {"devices": {"results": [{"request": "r", "driver": "gpu.example.com",
                                      "pool": "n1", "device": d} for d in allocated]}}
    claims = [claim("held", exactly("r", "gpu"), allocation=alloc)] if allocated else []
    handle = FakeHandle(node_infos(NODES), objects={
        "resourceclaims": claims, "resourceslices": SLICES, "deviceclasses": [gpu_class()]})
    fit = Fit({"scoringStrategy": {"type": strategy,
                                   "resources": [{"name": GPU, "weight": 1}]}},
              handle)  # type: ignore[arg-type]
    state = CycleState()
    info = PodInfo.from_pod(gpu_pod())
    nodes = handle.snapshot().list()
    assert fit.pre_score(state, info, nodes) is None
    got = {ni.name: fit.score(state, info, ni)[0] for ni in nodes}
    assert got == want
    scores, st = fit.score_nodes(state, info, nodes)
    assert st is None and dict(zip(got, scores)) == want


def test_balanced_allocation_scores_a_backed_resource_by_the_class_devices() -> None:
    from scheduler.plugins.noderesources.balanced_allocation import BalancedAllocation

    _, _, handle = setup()
    ba = BalancedAllocation({"resources": [{"name": "cpu", "weight": 1},
                                           {"name": GPU, "weight": 1}]},
                            handle)  # type: ignore[arg-type]
    state = CycleState()
    pod = gpu_pod()
    info = PodInfo.from_pod(pod)
    nodes = handle.snapshot().list()
    assert ba.sign(info) is None  # scores read slices and claims: never reused by batching
    assert ba.pre_score(state, info, nodes) is None
    got = {ni.name: ba.score(state, info, ni)[0] for ni in nodes}
    # cpu 100m of 4 (0.025) beside the GPU share: n1 1 of its 2 devices (0.5), n3 1 of the 4
    # it advertises (0.25); n2 has no device: cpu alone
    assert got == {"n1": int((1 - (0.5 - 0.025) / 2) * 100), "n2": 100,
                   "n3": int((1 - (0.25 - 0.025) / 2) * 100)}


def test_cache_comparer_counts_the_special_claims_in_flight() -> None:
    from scheduler.cache.comparer import compare_devices

    p, _, handle = setup()
    pod = gpu_pod()
    state, _ = run_filters(p, None, pod, handle)
    assert p.reserve(state, PodInfo.from_pod(pod), "n1") is None
    held = p.tracker.held()
    assert len(held) == 1
    # without the in-flight special claim the held device looks allocated by nobody
    assert [d.kind for d in compare_devices(held=held, claims=[],
                                            in_flight=p.tracker.in_flight)] == \
        ["DeviceRedundant"]
    assert compare_devices(held=held, claims=p.tracker.unnamed_in_flight(),
                           in_flight=p.tracker.in_flight) == []


@pytest.mark.parametrize("seed", range(5))
def test_random_pod_streams_never_put_a_device_in_two_allocations(seed: int) -> None:
    import random

    rng = random.Random(seed)
    slices = [resource_slice(f"{n}-gpus", node=n, devices=[device(f"g{i}") for i in range(3)])
              for n in ("n1", "n2")]
    handle = FakeHandle(node_infos(NODES), objects={
        "resourceclaims": [], "resourceslices": slices, "deviceclasses": [gpu_class()]})
    p = DynamicResources(None, handle)  # type: ignore[arg-type]
    reserved: dict[str, tuple[CycleState, dict[str, Any], str, set[Any]]] = {}
    for step in range(40):
        if reserved and rng.random() < 0.3:  # a reserved pod fails later: its devices free
            name = rng.choice(sorted(reserved))
            state, pod, node, _ = reserved.pop(name)
            p.unreserve(state, PodInfo.from_pod(pod), node)
            continue
        pod = gpu_pod(f"p{step}", count=rng.randint(1, 3))
        state, by_node = run_filters(p, None, pod, handle)
        feasible = sorted(n for n, (st, _) in by_node.items() if st is None and n != "n3")
        taken = set().union(*(devs for *_, devs in reserved.values()))
        free = {n: 3 - sum(1 for d in taken if d[1] == n) for n in ("n1", "n2")}
        want = pod["spec"]["containers"][0]["resources"]["requests"][GPU]
        # a node is feasible exactly when it has that many free devices
        assert feasible == sorted(n for n in ("n1", "n2") if free[n] >= int(want))
        if not feasible:
            continue
        node = rng.choice(feasible)
        info = PodInfo.from_pod(pod)
        assert p.reserve(state, info, node) is None
        data = state.get(STATE_KEY)
        alloc = data.by_node[node].allocations[-1]
        devs = {(r["driver"], r["pool"], r["device"])
                for r in alloc["devices"]["results"]}
        assert not devs & taken  # never a device already in flight for another pod
        reserved[pod["metadata"]["name"]] = (state, pod, node, devs)
