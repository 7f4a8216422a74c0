"""The cache comparer, table-driven: each kind of difference is found (naming the object), and
a cache that matches the cluster (assumed pods in flight included) gives none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.cache import Cache
from scheduler.cache.comparer import (
    DEVICE_MISSING,
    DEVICE_REDUNDANT,
    NODE_MISSING,
    NODE_REDUNDANT,
    NODE_REQUESTED,
    NODE_STALE,
    POD_MISSING,
    POD_NODE,
    POD_NOT_QUEUED,
    POD_QUEUED_REDUNDANT,
    POD_REDUNDANT,
    POD_STALE,
    POD_STILL_ASSUMED,
    compare,
    compare_devices,
    compare_queue,
)
from scheduler.dra.inventory import DeviceID
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder, dra_allocation, dra_claim, set_path

GPU = "example.com/gpu"


def node(name: str, rv: str = "1") -> dict[str, Any]:
    return NodeBuilder(name).capacity(cpu="8", memory="16Gi", pods=110, **{GPU: 4}) \
        .resource_version(rv).obj()


def pod(name: str, node_name: str | None = None, *, cpu: str = "1", rv: str = "1",
        gpu: int = 0) -> dict[str, Any]:
    b = PodBuilder(name).resource_version(rv)
    b.req(cpu=cpu, memory="1Gi", **({GPU: gpu} if gpu else {}))
    if node_name:
        b.node(node_name)
    return b.obj()


@dataclass
class Case:
    id: str
    cluster_nodes: list[dict[str, Any]]
    cluster_pods: list[dict[str, Any]]
    cache_nodes: list[dict[str, Any]]
    added: list[dict[str, Any]] = field(default_factory=list)
    assumed: list[dict[str, Any]] = field(default_factory=list)
    # a change made to the cache behind its state machine's back (drifted bookkeeping)
    tamper: Callable[[Cache], None] | None = None
    expected: set[tuple[str, str]] = field(default_factory=set)


def _gpu_leak(cache: Cache) -> None:
    (info,) = [i for name, i in cache.node_infos() if name == "a"]
    info.requested.scalar_resources[GPU] = info.requested.scalar_resources.get(GPU, 0) + 1


def _malformed_node() -> dict[str, Any]:
    bad = node("bad")
    set_path(bad, "status.allocatable", {"cpu": "x"})
    return bad


A, B = node("a"), node("b")
CASES = [
    Case("clean: bound and in-flight assumed pods, a GPU pod",
         [A, B], [pod("p1", "a", gpu=2), pod("p2")], [A, B],
         added=[pod("p1", "a", gpu=2)], assumed=[pod("p2", "b")]),
    Case("clean: empty cluster, empty cache", [], [], []),
    Case("clean: a malformed node is kept out of the cache on purpose",
         [A, _malformed_node()], [], [A]),
    Case("node missing from the cache", [A, B], [], [A],
         expected={(NODE_MISSING, "b")}),
    Case("node left in the cache", [A], [], [A, B],
         expected={(NODE_REDUNDANT, "b")}),
    Case("node cached at an older resourceVersion", [node("a", rv="2")], [], [A],
         expected={(NODE_STALE, "a")}),
    Case("bound pod missing from the cache", [A], [pod("p1", "a")], [A],
         expected={(POD_MISSING, "default/p1"), (NODE_REQUESTED, "a")}),
    Case("bound pod left in the cache after its delete", [A], [], [A],
         added=[pod("p1", "a")],
         expected={(POD_REDUNDANT, "default/p1"), (NODE_REQUESTED, "a")}),
    Case("assumed pod left in the cache after its delete", [A], [], [A],
         assumed=[pod("p1", "a")],
         expected={(POD_REDUNDANT, "default/p1"), (NODE_REQUESTED, "a")}),
    Case("bound pod cached as pending in the cluster", [A], [pod("p1")], [A],
         added=[pod("p1", "a")],
         expected={(POD_REDUNDANT, "default/p1"), (NODE_REQUESTED, "a")}),
    Case("pod cached on another node than it is bound to", [A, B], [pod("p1", "b")], [A, B],
         added=[pod("p1", "a")],
         expected={(POD_NODE, "default/p1"), (NODE_REQUESTED, "a"), (NODE_REQUESTED, "b")}),
    Case("pod bound in the cluster, still only assumed here", [A], [pod("p1", "a")], [A],
         assumed=[pod("p1", "a")], expected={(POD_STILL_ASSUMED, "default/p1")}),
    Case("pod update missed (same requests)", [A], [pod("p1", "a", rv="2")], [A],
         added=[pod("p1", "a")], expected={(POD_STALE, "default/p1")}),
    Case("cached requests differ from the pod's (a resize missed)", [A],
         [pod("p1", "a", cpu="2", rv="2")], [A], added=[pod("p1", "a", cpu="1")],
         expected={(POD_STALE, "default/p1"), (NODE_REQUESTED, "a")}),
    Case("a node's extended-resource total drifted from its pods'", [A],
         [pod("p1", "a", gpu=1)], [A], added=[pod("p1", "a", gpu=1)], tamper=_gpu_leak,
         expected={(NODE_REQUESTED, "a")}),
    Case("pods bound to a node the cache lacks are reported once, as pods", [A],
         [pod("p1", "b")], [A], expected={(POD_MISSING, "default/p1")}),
    Case("pods without a UID cannot be cached and are not expected", [A],
         [PodBuilder("x").uid("").node("a").req(cpu="1").obj()], [A]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_differences(case: Case) -> None:
    cache = Cache()
    for n in case.cache_nodes:
        cache.add_node(n)
    for p in case.added:
        cache.add_pod(PodInfo.from_pod(p))
    for p in case.assumed:
        cache.assume_pod(PodInfo.from_pod(p))
    if case.tamper is not None:
        case.tamper(cache)
    result = compare(cache, nodes=case.cluster_nodes, pods=case.cluster_pods)
    assert {(d.kind, d.object) for d in result.differences} == case.expected
    assert all(d.detail for d in result.differences)
    assert result.clean == (not case.expected)
    assert len(result.differences) == len(case.expected)  # one line per difference
    assert (result.nodes, result.pods, result.assumed) == (
        len(case.cache_nodes), len(case.added) + len(case.assumed), len(case.assumed))


def test_requested_detail_names_each_resource_that_differs() -> None:
    cache = Cache()
    cache.add_node(A)
    cache.add_pod(PodInfo.from_pod(pod("p1", "a", cpu="1", gpu=1)))
    result = compare(cache, nodes=[A], pods=[pod("p1", "a", cpu="1500m", gpu=3, rv="2")])
    stale, diff = result.differences
    assert stale.kind == POD_STALE
    assert diff.detail == ("requested differs from the sum of its pods' requests: "
                           f"cpu: cache 1000, pods 1500; {GPU}: cache 1, pods 3")
    assert result.to_dict() == {"differences": [stale.to_dict(), diff.to_dict()], "nodes": 1,
                                "pods": 1, "assumed": 0}


def test_a_forgotten_pod_leaves_no_zeroed_extended_resource_behind_as_a_difference() -> None:
    """Resource.sub keeps a scalar at 0 rather than dropping it: not a difference."""
    cache = Cache()
    cache.add_node(A)
    gpu_pod = pod("p1", "a", gpu=2)
    cache.assume_pod(PodInfo.from_pod(gpu_pod))
    cache.forget_pod(gpu_pod)
    assert compare(cache, nodes=[A], pods=[]).clean


# --- DRA: the claims tracker's held devices ----------------------------------------------

D1: DeviceID = ("gpu.example.com", "node-1", "gpu-0")
D2: DeviceID = ("gpu.example.com", "node-1", "gpu-1")
D3: DeviceID = ("gpu.example.com", "node-1", "gpu-2")


def claim(name: str, *devices: DeviceID) -> dict[str, Any]:
    c = dra_claim(name)
    if devices:
        c.setdefault("status", {})["allocation"] = dra_allocation(
            "node-1", [("req", *d) for d in devices])
    return c


IN_FLIGHT = {"default/pending": dra_allocation("node-1", [("req", *D2)])}


def shared_claim(name: str, device: DeviceID) -> dict[str, Any]:
    """A claim holding a share of ``device`` (consumable capacity), not the device whole."""
    c = claim(name, device)
    c["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"memory": "1Gi"}
    return c


DEVICE_CASES = [
    ("clean: allocated and in flight", {D1, D2}, [claim("c1", D1), claim("pending")], set()),
    ("clean: nothing", set(), [claim("pending-unknown")], set()),
    ("allocated device not held", {D2}, [claim("c1", D1), claim("pending")],
     {(DEVICE_MISSING, "gpu.example.com/node-1/gpu-0")}),
    ("held device allocated by nobody", {D1, D2, D3}, [claim("c1", D1), claim("pending")],
     {(DEVICE_REDUNDANT, "gpu.example.com/node-1/gpu-2")}),
    ("in-flight device of a deleted claim still held", {D1, D2}, [claim("c1", D1)],
     {(DEVICE_REDUNDANT, "gpu.example.com/node-1/gpu-1")}),
    ("clean: a share does not hold the device", {D1, D2},
     [claim("c1", D1), claim("pending"), shared_claim("s1", D3)], set()),
]


@pytest.mark.parametrize("held,claims,expected", [c[1:] for c in DEVICE_CASES],
                         ids=[c[0] for c in DEVICE_CASES])
def test_device_differences(held: set[DeviceID], claims: list[dict[str, Any]],
                            expected: set[tuple[str, str]]) -> None:
    diffs = compare_devices(held=held, claims=claims, in_flight=IN_FLIGHT.get)
    assert {(d.kind, d.object) for d in diffs} == expected
    assert all("claim" in d.detail for d in diffs)


# --- the comparer over a real claims tracker: assume/forget symmetry of devices ------------

def _tracker_steps() -> dict[str, list[str]]:
    return {
        "assume, forget (the pod was unreserved)": ["assume", "forget"],
        "assume, the API shows the allocation, the claim is deleted":
            ["assume", "allocated", "deleted"],
        "assume, the API shows the allocation, it is deallocated":
            ["assume", "allocated", "deallocated"],
        "assume, the claim is deleted while in flight": ["assume", "deleted"],
        "assume, forget by another pod (ignored), forget": ["assume", "forget-other", "forget"],
    }


@pytest.mark.parametrize("steps", list(_tracker_steps().values()), ids=list(_tracker_steps()))
def test_tracker_sequences_stay_clean_and_give_every_device_back(steps: list[str]) -> None:
    from scheduler.plugins.dynamicresources.claims import ClaimTracker

    tracker = ClaimTracker()
    other = claim("other", D1)  # allocated before: its device stays held throughout
    tracker.claim_added(other)
    cluster = {"other": other, "c": claim("c")}
    tracker.claim_added(cluster["c"])
    before = set(tracker.held())
    alloc = dra_allocation("node-1", [("req", *D2)])
    for step in steps:
        if step == "assume":
            tracker.assume("default/c", "uid-pod", alloc)
        elif step == "forget":
            tracker.forget("default/c", "uid-pod")
        elif step == "forget-other":
            tracker.forget("default/c", "uid-someone-else")
        elif step == "allocated":
            new = claim("c", D2)
            tracker.claim_updated(cluster["c"], new)
            cluster["c"] = new
        elif step == "deallocated":
            new = claim("c")
            tracker.claim_updated(cluster["c"], new)
            cluster["c"] = new
        elif step == "deleted":
            tracker.claim_deleted(cluster.pop("c"))
        diffs = compare_devices(held=tracker.held(), claims=list(cluster.values()),
                                in_flight=tracker.in_flight)
        assert diffs == [], (step, diffs)
    assert set(tracker.held()) == before == {D1}


# --- the scheduling queue against the cluster's pending pods -----------------------------

def pending(name: str, scheduler: str = "py-scheduler") -> dict[str, Any]:
    return PodBuilder(name).scheduler_name(scheduler).req(cpu="1").obj()


def _malformed_pending() -> dict[str, Any]:
    bad = pending("bad")
    set_path(bad, "spec.containers[0].resources", {"requests": {"cpu": "abc"}})
    return bad


QUEUE_CASES = [
    ("clean: queued, another scheduler's, assumed while binding, bound",
     [pending("q"), pending("theirs", "other-scheduler"), pending("binding"),
      pod("bound", "a")],
     [pending("q")], ["binding"], set()),
    ("clean: a malformed pending pod is kept out of the queue on purpose",
     [_malformed_pending()], [], [], set()),
    ("clean: a pending pod being deleted is dropped when popped",
     [PodBuilder("terminating").scheduler_name("py-scheduler").deletion_timestamp().obj()],
     [], [], set()),
    ("pending pod held nowhere", [pending("lost"), pending("q")], [pending("q")], [],
     {(POD_NOT_QUEUED, "default/lost")}),
    ("pods without a schedulerName are default-scheduler's",
     [PodBuilder("plain").req(cpu="1").obj()], [], [],
     {(POD_NOT_QUEUED, "default/plain")}),
    ("queued pod deleted from the cluster", [], [pending("gone")], [],
     {(POD_QUEUED_REDUNDANT, "default/gone")}),
    ("queued pod bound in the cluster", [pod("q", "a")], [pending("q")], [],
     {(POD_QUEUED_REDUNDANT, "default/q")}),
]


@pytest.mark.parametrize("cluster,queued,assumed,expected", [c[1:] for c in QUEUE_CASES],
                         ids=[c[0] for c in QUEUE_CASES])
def test_queue_differences(cluster: list[dict[str, Any]], queued: list[dict[str, Any]],
                           assumed: list[str], expected: set[tuple[str, str]]) -> None:
    cache = Cache()
    cache.add_node(A)
    for name in assumed:
        cache.assume_pod(PodInfo.from_pod(PodBuilder(name).scheduler_name("py-scheduler")
                                          .req(cpu="1").node("a").obj()))
    diffs = compare_queue(cache, queued=queued, pods=cluster,
                          schedulers={"py-scheduler", "default-scheduler"})
    assert {(d.kind, d.object) for d in diffs} == expected
    assert all(d.detail for d in diffs)
