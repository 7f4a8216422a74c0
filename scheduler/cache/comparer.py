"""The cache comparer: does the cache hold what the cluster says it should?

kube-scheduler's cache debugger compares, on SIGUSR2, the node and pod names its cache holds
with those of its informers' listers and logs what is missing or redundant.  A cache that
drifts from the cluster is the slow failure a long-running scheduler meets (a lost event, an
assume that was never forgotten, an incremental total that no longer adds up), and the
comparison is the one check that finds it whatever the cause.  This module compares the same
things upstream does, and more:

- nodes missing from the cache or left in it (malformed nodes are kept out of the cache on
  purpose, so they are not expected there), and nodes whose cached object is older than the
  cluster's (a missed update);
- assigned pods missing from the cache or left in it, and pods cached on another node than
  the one they are bound to.  Assumed pods are accounted for as upstream does: a pod the
  scheduler assumed is expected in the cache while the cluster still shows it pending (its
  binding is in flight); once the cluster shows it bound it must have been confirmed;
- each node's requested resources (cpu, memory, ephemeral storage, extended resources) and
  pod count against the sum of the requests of the cluster's pods on it (parsed afresh
  unless the cache holds the same resourceVersion of the pod): an assume/forget asymmetry or
  a missed resize shows here even when every name matches;
- the pending pods of the scheduler's profiles against the scheduling queue, as upstream
  counts the queue's pods as held: a pending pod neither queued, in flight nor assumed would
  never be scheduled; a queued pod the cluster no longer shows pending is a leak;
- with DRA, the devices a claims tracker counts as held against the allocations of the
  cluster's claims and of the allocations still in flight.

The inputs are plain lists of API objects (the informers' stores, or a fresh LIST): the
module reads no informer and makes no request itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.cache.cache import Cache, object_meta, pod_key, pod_node
from scheduler.dra.inventory import DeviceID, device_ids_of
from scheduler.objects.errors import ObjectError
from scheduler.objects.node import validate_node
from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import Resource

__all__ = [
    "DEVICE_MISSING",
    "DEVICE_REDUNDANT",
    "KINDS",
    "NODE_MISSING",
    "NODE_REDUNDANT",
    "NODE_REQUESTED",
    "NODE_STALE",
    "POD_MISSING",
    "POD_NODE",
    "POD_NOT_QUEUED",
    "POD_QUEUED_REDUNDANT",
    "POD_REDUNDANT",
    "POD_STALE",
    "POD_STILL_ASSUMED",
    "Comparison",
    "Difference",
    "compare",
    "compare_devices",
    "compare_queue",
]

# The kinds of difference (the "kind" of each one, stable: the soak and alerts match them).
NODE_MISSING = "NodeMissing"  # in the cluster, not in the cache
NODE_REDUNDANT = "NodeRedundant"  # in the cache, not in the cluster
NODE_STALE = "NodeStale"  # cached at another resourceVersion than the cluster's
NODE_REQUESTED = "NodeRequestedMismatch"  # requested resources != the sum of its pods
POD_MISSING = "PodMissing"  # bound in the cluster, not in the cache
POD_REDUNDANT = "PodRedundant"  # in the cache, not bound (nor pending, if assumed) there
POD_NODE = "PodOnDifferentNode"  # cached on another node than it is bound to
POD_STILL_ASSUMED = "PodStillAssumed"  # bound in the cluster, still only assumed here
POD_STALE = "PodStale"  # cached at another resourceVersion than the cluster's
POD_NOT_QUEUED = "PodNotQueued"  # pending for one of our profiles, held nowhere
POD_QUEUED_REDUNDANT = "PodQueuedRedundant"  # queued, not pending in the cluster
DEVICE_MISSING = "DeviceMissing"  # allocated in the cluster, not held by the tracker
DEVICE_REDUNDANT = "DeviceRedundant"  # held by the tracker, allocated by nobody
KINDS = (NODE_MISSING, NODE_REDUNDANT, NODE_STALE, NODE_REQUESTED, POD_MISSING, POD_REDUNDANT,
         POD_NODE, POD_STILL_ASSUMED, POD_STALE, POD_NOT_QUEUED, POD_QUEUED_REDUNDANT,
         DEVICE_MISSING, DEVICE_REDUNDANT)


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the cache disagrees with the cluster, naming the object."""

    kind: str
    object: str  # "namespace/name" of a pod, a node's name, "driver/pool/device"
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "object": self.object, "detail": self.detail}


@dataclass(slots=True)
class Comparison:
    """The differences found and the sizes of what was compared (the cache's side)."""

    differences: list[Difference] = field(default_factory=list)
    nodes: int = 0  # nodes in the cache (deleted nodes still holding pods not counted)
    pods: int = 0  # pods in the cache, assumed ones included
    assumed: int = 0

    @property
    def clean(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {"differences": [d.to_dict() for d in self.differences],
                "nodes": self.nodes, "pods": self.pods, "assumed": self.assumed}


# ``dict`` checks, not ``Mapping``: objects are plain dicts from the wire, and an ABC check
# per object made a comparison of 30,000 pods spend most of its time in isinstance.
def _version(obj: Mapping[str, Any]) -> str:
    return str(object_meta(obj).get("resourceVersion") or "")


def compare(cache: Cache, *, nodes: Iterable[Mapping[str, Any]],
            pods: Iterable[Mapping[str, Any]]) -> Comparison:
    """Compare the cache with the cluster's ``nodes`` and (non-terminal) ``pods``.

    Differences come nodes first, then pods by key, then node totals by node name."""
    out = Comparison()
    infos = cache.node_infos()
    out.nodes = sum(1 for _, info in infos if info.node is not None)
    states = cache.pod_states()
    out.pods = len(states)
    out.assumed = sum(1 for _, assumed in states if assumed)
    diffs = out.differences
    _compare_nodes(infos, nodes, diffs)
    bound, pending = _split_pods(pods)
    _compare_pods(states, bound, pending, diffs)
    _compare_requested(infos, states, bound, pending, diffs)
    return out


def _compare_nodes(infos: list[tuple[str, Any]], nodes: Iterable[Mapping[str, Any]],
                   diffs: list[Difference]) -> None:
    cached = {name: info.node for name, info in infos if info.node is not None}
    cluster: dict[str, Mapping[str, Any]] = {}
    for node in nodes:
        name = str(object_meta(node).get("name"))
        if name not in cached:
            try:
                validate_node(dict(node))
            except ObjectError:
                continue  # kept out of the cache on purpose (the event handlers log it)
        cluster[name] = node
    for name in sorted(cluster.keys() - cached.keys()):
        diffs.append(Difference(NODE_MISSING, name, "node is in the cluster, not in the cache"))
    for name in sorted(cached.keys() - cluster.keys()):
        diffs.append(Difference(NODE_REDUNDANT, name, "node is in the cache, not in the cluster"))
    for name in sorted(cached.keys() & cluster.keys()):
        ours, theirs = _version(cached[name] or {}), _version(cluster[name])
        if ours != theirs:
            diffs.append(Difference(NODE_STALE, name, f"cache holds resourceVersion {ours!r}, "
                                    f"the cluster {theirs!r}"))


# A bound pod of the cluster: the object, its node, its resourceVersion.
_Bound = tuple[Mapping[str, Any], str, str]


def _split_pods(pods: Iterable[Mapping[str, Any]]) -> tuple[dict[str, _Bound], set[str]]:
    """The cluster's bound pods by UID, and the UIDs of its pending ones (pods without a UID
    cannot be in the cache, which keys pods by UID)."""
    bound: dict[str, _Bound] = {}
    pending: set[str] = set()
    for pod in pods:
        meta = object_meta(pod)
        uid = meta.get("uid")
        if not uid:
            continue
        node = pod_node(pod)
        if node:
            bound[str(uid)] = (pod, node, str(meta.get("resourceVersion") or ""))
        else:
            pending.add(str(uid))
    return bound, pending


def _compare_pods(states: list[tuple[PodInfo, bool]], bound: dict[str, _Bound],
                  pending: set[str], diffs: list[Difference]) -> None:
    found: list[Difference] = []
    for info, assumed in states:
        ours = info.node_name
        entry = bound.get(info.uid)
        if entry is None:
            if assumed and info.uid in pending:
                continue  # its binding is in flight: upstream counts it as cached
            what = "assumed" if assumed else "bound"
            where = "is pending there" if info.uid in pending else "is not in the cluster"
            found.append(Difference(POD_REDUNDANT, info.key,
                                    f"cache holds it {what} on node {ours!r}; the pod {where}"))
            continue
        _pod, theirs, version = entry
        if ours != theirs:
            found.append(Difference(POD_NODE, info.key,
                                    f"cache holds it on node {ours!r}, the cluster on {theirs!r}"))
        if assumed:
            found.append(Difference(POD_STILL_ASSUMED, info.key,
                                    f"bound to node {theirs!r} in the cluster, only assumed in "
                                    "the cache"))
        elif info.resource_version != version:
            found.append(Difference(POD_STALE, info.key,
                                    f"cache holds resourceVersion {info.resource_version!r}, "
                                    f"the cluster {version!r}"))
    cached = {info.uid for info, _ in states}
    for uid in bound.keys() - cached:
        pod, node, _version_ = bound[uid]
        try:
            PodInfo.from_assigned_pod(dict(pod))
        except ObjectError:
            continue  # unidentifiable: left out of the cache on purpose (logged there)
        found.append(Difference(POD_MISSING, pod_key(pod),
                                f"bound to node {node!r} in the cluster, not in the cache"))
    found.sort(key=lambda d: (d.object, d.kind))
    diffs.extend(found)


def _totals_view(requested: Resource, pods: int) -> dict[str, int]:
    view = {"cpu": requested.milli_cpu, "memory": requested.memory,
            "ephemeral-storage": requested.ephemeral_storage, "pods": pods}
    # An extended resource at 0 is the same as none.
    view.update({k: v for k, v in requested.scalar_resources.items() if v})
    return view


def _compare_requested(infos: list[tuple[str, Any]], states: list[tuple[PodInfo, bool]],
                       bound: dict[str, _Bound], pending: set[str],
                       diffs: list[Difference]) -> None:
    totals: dict[str, Resource] = {}
    counts: dict[str, int] = {}

    def account(node: str, requests: Resource) -> None:
        total = totals.get(node)
        if total is None:
            total = totals[node] = Resource()
        total.add(requests)
        counts[node] = counts.get(node, 0) + 1

    held = {info.uid: info for info, _assumed in states}
    for uid, (pod, node, version) in bound.items():
        info = held.get(uid)
        if info is None or not version or info.resource_version != version:
            try:
                # Parsed afresh, as the event handlers would (malformed fields dropped).
                info, _problems = PodInfo.from_assigned_pod(dict(pod))
            except ObjectError:
                continue
        # else the cache parsed this very version of the pod: its requests are the pod's
        # (parsing 30,000 pods again made one comparison take seconds).
        account(node, info.requests)
    for info, assumed in states:
        if assumed and info.uid in pending:
            account(info.node_name, info.requests)  # in flight: the cache's copy
    # Only the cache's NodeInfos: pods bound to a node the cache lacks are reported as
    # missing pods (one difference per cause, not two).
    for name, info in sorted(infos, key=lambda item: item[0]):
        ours = _totals_view(info.requested, len(info.pods))
        theirs = _totals_view(totals.get(name) or Resource(), counts.get(name, 0))
        if ours == theirs:
            continue
        parts = [f"{k}: cache {ours.get(k, 0)}, pods {theirs.get(k, 0)}"
                 for k in sorted(ours.keys() | theirs.keys())
                 if ours.get(k, 0) != theirs.get(k, 0)]
        diffs.append(Difference(NODE_REQUESTED, name,
                                "requested differs from the sum of its pods' requests: "
                                + "; ".join(parts)))


DEFAULT_SCHEDULER = "default-scheduler"


def _scheduler_name(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else DEFAULT_SCHEDULER


def compare_queue(cache: Cache, *, queued: Iterable[Mapping[str, Any]],
                  pods: Iterable[Mapping[str, Any]],
                  schedulers: Collection[str]) -> list[Difference]:
    """Compare the pods the scheduling queue holds (every sub-queue and those in flight)
    with the cluster's pending ``pods`` whose schedulerName is one of ``schedulers``; a pod
    assumed in the cache (its binding in flight) needs no queue entry."""
    held = {str(object_meta(p).get("uid") or "") for p in queued}
    held.update(info.uid for info, assumed in cache.pod_states() if assumed)
    pending: set[str] = set()
    found: list[Difference] = []
    for pod in pods:
        uid = str(object_meta(pod).get("uid") or "")
        if not uid or pod_node(pod):
            continue
        pending.add(uid)
        if uid in held or _scheduler_name(pod) not in schedulers:
            continue
        if object_meta(pod).get("deletionTimestamp"):
            continue  # being deleted: the scheduler drops it when it comes up, as upstream
        try:
            PodInfo.from_pod(dict(pod))
        except ObjectError:
            continue  # malformed: kept out of the queue on purpose (the pod is told why)
        found.append(Difference(POD_NOT_QUEUED, pod_key(pod),
                                f"pending for scheduler {_scheduler_name(pod)!r} in the "
                                "cluster, neither queued, in flight nor assumed"))
    for pod in queued:
        uid = str(object_meta(pod).get("uid") or "")
        if uid and uid not in pending:
            found.append(Difference(POD_QUEUED_REDUNDANT, pod_key(pod),
                                    "queued, but the cluster does not show it pending"))
    found.sort(key=lambda d: (d.object, d.kind))
    return found


def _device_name(device: DeviceID) -> str:
    return "/".join(device)


def compare_devices(*, held: Collection[DeviceID], claims: Iterable[Mapping[str, Any]],
                    in_flight: Callable[[str], Mapping[str, Any] | None]) -> list[Difference]:
    """Compare the devices a DRA claims tracker counts as held with those the cluster's
    ``claims`` have allocated plus those allocated in flight (``in_flight(namespace/name)``
    answers a claim's allocation chosen at Reserve that the cluster does not show yet)."""
    owners: dict[DeviceID, str] = {}
    for claim in claims:
        key = pod_key(claim)
        status = claim.get("status")
        alloc = status.get("allocation") if isinstance(status, Mapping) else None
        if not isinstance(alloc, Mapping):
            alloc = in_flight(key)
        # a share of a device allocated by capacity does not hold it whole (the tracker
        # counts shares apart: DRAConsumableCapacity)
        for device in device_ids_of(alloc, include_shared=False):
            owners.setdefault(device, key)
    held_set = set(held)
    diffs: list[Difference] = []
    for device in sorted(owners.keys() - held_set):
        diffs.append(Difference(DEVICE_MISSING, _device_name(device),
                                f"allocated to claim {owners[device]}, not held by the "
                                "scheduler's claims tracker"))
    for device in sorted(held_set - owners.keys()):
        diffs.append(Difference(DEVICE_REDUNDANT, _device_name(device),
                                "held by the scheduler's claims tracker, allocated to no claim "
                                "in the cluster"))
    return diffs
