"""CapacityScheduling: elastic quotas (ElasticQuota min/max per namespace) that lend idle
capacity and reclaim it by preemption, with kubernetes-sigs/scheduler-plugins' semantics and
wording.

- PreFilter: the pod is rejected when its quota's ``used`` plus the pod (and the nominated pods
  of its quota at least as important) would exceed the quota's ``max``, or when the sum of
  every quota's ``used`` plus the pod (and those nominated pods, and the nominated pods of
  quotas still within their min) would exceed the sum of every quota's ``min``.
- Reserve/Unreserve: a reserved pod counts in its quota until it is seen in the cache's
  snapshot (it is assumed there) or unreserved.
- PostFilter: preemption (the DefaultPreemption machinery, every node a candidate) choosing
  victims by quota: a preemptor whose quota stays within its min with the pod may take back
  what quotas over their min borrowed, whatever their pods' priority; a preemptor that would
  go over its min may only preempt lower-priority pods of its own quota; a pod without quota
  may only preempt lower-priority pods without quota. PDBs are respected as by
  DefaultPreemption. With no quota in the cluster it is exactly DefaultPreemption.

``used`` is recounted from the snapshot (assigned and assumed pods, terminal ones left out),
so it cannot drift from what is bound; the same count is what the ElasticQuota status
controller writes to ``status.used``.

Extension: a quota may also cover the namespaces its ``scheduling.x-k8s.io/namespace-selector``
annotation selects (a label selector string); without it, one namespace, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.framework import events as ev
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ClusterEventWithHint, QueueingHint
from scheduler.framework.interfaces import (
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    ReservePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult, PreFilterResult
from scheduler.objects.labels import parse_selector_string
from scheduler.objects.pod import PodInfo, is_being_deleted, is_terminal, pod_requests
from scheduler.objects.resources import Resource
from scheduler.objects.validation import validate_object
from scheduler.plugins import names
from scheduler.plugins.capacityscheduling.quota import ElasticQuotaInfo, QuotaSet, quota_from_object
from scheduler.plugins.defaultpreemption.evaluator import (
    PDB,
    filter_pods_with_pdb_violation,
    importance_key,
    reprieve_victims,
)
from scheduler.plugins.defaultpreemption.plugin import (
    ERR_NOT_ELIGIBLE_POLICY_NEVER,
    ERR_NOT_ELIGIBLE_TERMINATING,
    MESSAGE_PREFIX,
    PREEMPT_NEVER,
    DefaultPreemption,
)
from scheduler.plugins.helper import args_error

__all__ = [
    "NAME",
    "NAMESPACE_SELECTOR_ANNOTATION",
    "REASON_OVER_MAX",
    "REASON_OVER_MIN",
    "CapacityScheduling",
]

NAME = names.CAPACITY_SCHEDULING
QUOTAS = "elasticquotas"
NAMESPACES = "namespaces"
QUOTA_KIND = "ElasticQuota"
PODGROUPS = "podgroups"
PODS = "pods"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # Coscheduling's (a sibling plugin)
RESOURCE_CLAIMS = "resourceclaims"
# DRA devices count in a quota under ResourceQuota's name for them: <class>.deviceclass.resource.k8s.io/devices
DEVICE_CLASS_RESOURCE = "{device_class}.deviceclass.resource.k8s.io/devices"
# A node's pods counted per namespace with a quota: namespace -> (requests, uids).
_Part = dict[str, tuple[Resource, list[str]]]
NAMESPACE_SELECTOR_ANNOTATION = "scheduling.x-k8s.io/namespace-selector"

# scheduler-plugins' wording
REASON_OVER_MAX = "Pod {namespace}/{name} is rejected in PreFilter because ElasticQuota {quota} is more than Max"
REASON_OVER_MIN = "Pod {namespace}/{name} is rejected in PreFilter because total ElasticQuota used is more than min"
# ours: a gang (Coscheduling's PodGroup) is admitted against its quota as a whole
REASON_GANG_OVER_MAX = (
    "Pod {namespace}/{name} is rejected in PreFilter because ElasticQuota {quota} is more than "
    "Max for PodGroup {group} ({count} member(s) still to place)")
ERR_NO_VICTIMS_ON_NODE = "No victims found on node {node} for preemptor pod {pod}"
ERR_QUOTA_EXCEEDED = "global quota max exceeded"

PREFILTER_KEY = "PreFilter" + NAME
SNAPSHOT_KEY = "ElasticQuotaSnapshot"


@dataclass(slots=True)
class _PreFilterState:
    pod_req: Resource
    # the pod plus the nominated pods of its quota at least as important
    in_eq_with_pod: Resource
    # that, plus the nominated pods of other quotas still within their min
    all_with_pod: Resource
    # which rule rejected the pod ("" when none), for explain
    rejected_by: str = ""

    def clone(self) -> _PreFilterState:
        return self  # read-only after PreFilter


@dataclass(slots=True)
class _QuotaSnapshot:
    quotas: QuotaSet

    def clone(self) -> _QuotaSnapshot:
        return _QuotaSnapshot(self.quotas.clone())


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _Extensions(PreFilterExtensions):
    """Preemption's what-ifs move a pod in or out of its quota in the cycle's copy."""

    def __init__(self, requests_of: Callable[[PodInfo], Resource]) -> None:
        self._requests_of = requests_of

    def add_pod(self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        snap = state.get(SNAPSHOT_KEY)
        if isinstance(snap, _QuotaSnapshot):
            snap.quotas.add_pod(pod_to_add.namespace, pod_to_add.uid, self._requests_of(pod_to_add))
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        snap = state.get(SNAPSHOT_KEY)
        if isinstance(snap, _QuotaSnapshot):
            snap.quotas.remove_pod(pod_to_remove.namespace, pod_to_remove.uid,
                                   self._requests_of(pod_to_remove))
        return None


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The pod's ResourceClaims by name (direct, or generated from a template once the
    resourceclaim controller named it)."""
    spec = pod.get("spec") or {}
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
                if isinstance(s, Mapping)}
    out: list[str] = []
    for entry in spec.get("resourceClaims") or []:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("resourceClaimName")
        if not isinstance(name, str):
            name = statuses.get(entry.get("name"))
        if isinstance(name, str) and name:
            out.append(name)
    return out


def claim_devices(claim: Mapping[str, Any]) -> dict[str, int]:
    """Devices a ResourceClaim takes, by quota resource name: its allocation when it has one,
    else its requests (exactly: count, 1 by default; firstAvailable: the first subrequest;
    allocationMode All counts 1 until allocated)."""
    out: dict[str, int] = {}
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {})
               .get("results"))
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    classes: dict[str, str] = {}
    for req in requests:
        if not isinstance(req, Mapping):
            continue
        exact = req.get("exactly") if isinstance(req.get("exactly"), Mapping) else None
        first = req.get("firstAvailable")
        name = str(req.get("name") or "")
        if exact is not None:
            classes[name] = str(exact.get("deviceClassName") or "")
        if isinstance(first, list):
            for sub in first:
                if isinstance(sub, Mapping):
                    classes[f"{name}/{sub.get('name')}"] = str(sub.get("deviceClassName") or "")
        if results:
            continue
        chosen = exact if exact is not None else (
            first[0] if isinstance(first, list) and first and isinstance(first[0], Mapping) else None)
        if chosen is None or not chosen.get("deviceClassName"):
            continue
        count = chosen.get("count", 1) if chosen.get("allocationMode", "ExactCount") == "ExactCount" else 1
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            count = 1
        key = DEVICE_CLASS_RESOURCE.format(device_class=chosen["deviceClassName"])
        out[key] = out.get(key, 0) + count
    if isinstance(results, list):
        for r in results:
            if not isinstance(r, Mapping):
                continue
            device_class = classes.get(str(r.get("request") or ""))
            if device_class:
                key = DEVICE_CLASS_RESOURCE.format(device_class=device_class)
                out[key] = out.get(key, 0) + 1
    return out


def _quota_event_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    return QueueingHint.QUEUE


def _pod_finished_hint(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """An assigned pod that turned terminal stops counting in its quota."""
    if isinstance(new, dict) and is_terminal(new) and not (isinstance(old, dict) and is_terminal(old)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


class CapacityScheduling(DefaultPreemption, PreFilterPlugin, ReservePlugin):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle, **kw: Any) -> None:
        args = args or {}
        if not isinstance(args, Mapping):
            raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
        for key in args:
            raise args_error(NAME, str(key), "unknown field")  # no args, as upstream
        super().__init__(None, handle, **kw)
        self._extensions = _Extensions(self.requests_of)
        self._last_good: dict[str, dict[str, Any]] = {}  # quota key -> last valid object
        self._quota_memo: tuple[tuple[tuple[str, str], ...], QuotaSet] | None = None
        self._counts_for: QuotaSet | None = None
        # node -> (its NodeInfo's plugin_generation, the NodeInfo, its part, whether the
        # part read a ResourceClaim)
        self._node_parts: dict[str, tuple[int, Any, _Part, bool]] = {}
        self._totals: dict[str, Resource] = {}
        self._uids: dict[str, set[str]] = {}
        self._counts_version = 0  # moves whenever the totals do
        self._bases: dict[str, tuple[int, frozenset[str]]] = {}  # quota -> (version, uids)
        self._reserved: dict[str, tuple[str, Resource]] = {}  # uid -> (namespace, requests)

    # --- enqueue -----------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Freed quota: a pod deleted, or one that finished.
            ClusterEventWithHint(ev.ASSIGNED_POD_DELETE),
            ClusterEventWithHint(ev.ASSIGNED_POD_UPDATE, _pod_finished_hint),
            # A quota created, changed (min/max) or deleted.
            ClusterEventWithHint(ev.ELASTIC_QUOTA_ADD, _quota_event_hint),
            ClusterEventWithHint(ev.ELASTIC_QUOTA_UPDATE, _quota_event_hint),
            ClusterEventWithHint(ev.ELASTIC_QUOTA_DELETE, _quota_event_hint),
        ]

    # --- the quotas and their usage ----------------------------------------------------------

    def _selected_namespaces(self, obj: Mapping[str, Any]) -> frozenset[str]:
        """The extension: the namespaces a quota's namespace-selector annotation selects
        (its own namespace included); empty when it has none or it does not parse."""
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(NAMESPACE_SELECTOR_ANNOTATION)
        if not raw:
            return frozenset()
        try:
            selector = parse_selector_string(str(raw))
        except ValueError:
            return frozenset()
        own = str((obj.get("metadata") or {}).get("namespace") or "")
        out = {own}
        for ns in self._handle.listers.list(NAMESPACES):
            meta = ns.get("metadata") or {}
            if selector.matches(meta.get("labels") or {}):
                out.add(str(meta.get("name") or ""))
        return frozenset(out)

    def quotas(self) -> QuotaSet:
        """Every valid quota (a malformed update keeps the quota's last valid version; the
        event handlers log it once, naming the field), with nothing used yet."""
        objs = sorted(self._handle.listers.list(QUOTAS), key=_key)
        namespaces_rv = ""
        if any(NAMESPACE_SELECTOR_ANNOTATION in ((o.get("metadata") or {}).get("annotations") or {})
               for o in objs):
            namespaces_rv = ",".join(sorted(_key(n) + "@" + _rv(n)
                                            for n in self._handle.listers.list(NAMESPACES)))
        version = tuple((_key(o), _rv(o)) for o in objs) + (("namespaces", namespaces_rv),)
        if self._quota_memo is not None and self._quota_memo[0] == version:
            return self._quota_memo[1]
        seen: set[str] = set()
        quotas = QuotaSet()
        for obj in objs:
            key = _key(obj)
            seen.add(key)
            if validate_object(QUOTA_KIND, obj) is None:
                self._last_good[key] = obj
            good = self._last_good.get(key)
            if good is not None:
                quotas.add(quota_from_object(good, namespaces=self._selected_namespaces(good)))
        for key in set(self._last_good) - seen:
            del self._last_good[key]
        self._quota_memo = (version, quotas)
        return quotas

    def _refresh_counts(self, quotas: QuotaSet) -> None:
        """Per-namespace totals of the snapshot's pods, kept incrementally: only nodes whose
        NodeInfo changed since the last call are counted again (a cycle costs O(nodes) plus
        the changed nodes' pods, not O(pods)).  A part reads a pod's namespace, phase, UID and
        requests, all of which ``reads_alike`` compares, so it follows the NodeInfo's
        ``plugin_generation``: a binding's confirmation counts nothing again.  A part that
        read a ResourceClaim (a pod's devices) is counted again on every call, since the
        claim's allocation changes no NodeInfo; the totals move only when a part does."""
        if self._counts_for is not quotas:  # other namespaces matter now: count afresh
            self._counts_for = quotas
            self._counts_version += 1
            self._bases.clear()
            self._node_parts.clear()
            self._totals.clear()
            self._uids.clear()
        node_infos = self._handle.snapshot().list()
        parts = self._node_parts
        for node_info in node_infos:
            name = node_info.name
            cached = parts.get(name)
            if (cached is not None and cached[0] == node_info.plugin_generation
                    and cached[1] is node_info and not cached[3]):
                continue
            part, read_claims = self._count_node(node_info, quotas)
            parts[name] = (node_info.plugin_generation, node_info, part, read_claims)
            if cached is not None:
                if cached[2] == part:  # the same counts: the totals and bases stand
                    continue
                self._drop_part(cached[2])
            self._counts_version += 1
            for ns, (amounts, uids) in part.items():
                self._totals.setdefault(ns, Resource()).add(amounts)
                self._uids.setdefault(ns, set()).update(uids)
        if len(parts) != len(node_infos):  # parts hold every listed node: some went away
            seen = {n.name for n in node_infos}
            for name in [n for n in parts if n not in seen]:
                self._counts_version += 1
                self._drop_part(parts.pop(name)[2])

    def _count_node(self, node_info: NodeInfo, quotas: QuotaSet) -> tuple[_Part, bool]:
        """A node's part (per namespace with a quota: its pods' requests and UIDs, terminal
        pods left out) and whether it read a ResourceClaim to make it."""
        part: _Part = {}
        read_claims = False
        for p in node_info.pods:
            if quotas.get(p.namespace) is None or is_terminal(p.pod):
                continue
            amounts, uids = part.setdefault(p.namespace, (Resource(), []))
            amounts.add(self.requests_of(p))
            uids.append(p.uid)
            read_claims = read_claims or bool((p.pod.get("spec") or {}).get("resourceClaims"))
        return part, read_claims

    def _drop_part(self, part: Mapping[str, tuple[Resource, list[str]]]) -> None:
        for ns, (amounts, uids) in part.items():
            self._totals[ns].sub(amounts)
            self._uids[ns].difference_update(uids)

    def usage(self) -> QuotaSet:
        """The quotas with ``used`` counted from the snapshot (and reserved pods not in it
        yet); a copy the caller may change."""
        quotas = self.quotas()
        out = QuotaSet()
        if quotas:
            self._refresh_counts(quotas)
            for q in quotas.quotas:
                copy = q.clone()
                # a namespace two quotas cover counts in the first (QuotaSet's rule)
                covered = [ns for ns in sorted(q.namespaces or {q.namespace}) if quotas.get(ns) is q]
                for ns in covered:
                    if ns in self._totals:
                        copy.used.add(self._totals[ns])
                base = self._bases.get(q.key)
                if base is None or base[0] != self._counts_version:
                    base = (self._counts_version,
                            frozenset().union(*(self._uids.get(ns, ()) for ns in covered)))
                    self._bases[q.key] = base
                copy.base = base[1]
                out.add(copy)
        for uid, (namespace, requests) in list(self._reserved.items()):
            owner = out.get(namespace)
            if owner is not None and uid in owner.base:
                del self._reserved[uid]  # the snapshot has it now
            else:
                out.add_pod(namespace, uid, requests)
        return out

    def requests_of(self, pod_info: PodInfo) -> Resource:
        """The pod's requests as its quota counts them: its resources plus the DRA devices of
        its ResourceClaims by device class."""
        spec = pod_info.pod.get("spec") or {}
        if not spec.get("resourceClaims"):
            return pod_info.requests
        out = pod_info.requests.clone()
        for name in claim_names(pod_info.pod):
            claim = self._handle.listers.get(RESOURCE_CLAIMS, pod_info.namespace, name)
            if claim is not None:
                for resource, count in claim_devices(claim).items():
                    out.add_amount(resource, count)
        return out

    # --- PreFilter ---------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        quotas = self.usage()
        state.write(SNAPSHOT_KEY, _QuotaSnapshot(quotas))
        pod_req = self.requests_of(pod_info)
        eq = quotas.get(pod_info.namespace)
        if eq is None:
            state.write(PREFILTER_KEY, _PreFilterState(pod_req, pod_req.clone(), pod_req.clone()))
            return None, None
        in_eq = pod_req.clone()
        in_all = pod_req.clone()
        nominator = self._handle.nominator
        names = getattr(nominator, "nominated_node_names", None)  # the queue's Nominator has it
        nominated_nodes = (list(names()) if callable(names)
                           else [n.name for n in self._handle.snapshot().list()])
        for node_name in nominated_nodes:
            for p in nominator.nominated_pods_for_node(node_name):
                if p.uid == pod_info.uid:
                    continue
                other = quotas.get(p.namespace)
                if other is None:
                    continue
                if other is eq and p.priority >= pod_info.priority:
                    in_eq.add(self.requests_of(p))
                    in_all.add(self.requests_of(p))
                elif other is not eq and not other.used_over_min():
                    in_all.add(self.requests_of(p))
        pre = _PreFilterState(pod_req, in_eq, in_all)
        state.write(PREFILTER_KEY, pre)
        if eq.used_over_max_with(in_eq):
            pre.rejected_by = "max"
            return None, Status(Code.UNSCHEDULABLE, REASON_OVER_MAX.format(
                namespace=pod_info.namespace, name=pod_info.name, quota=eq.namespace), plugin=NAME)
        gang = self._gang_rest(pod_info, counted=eq)
        if gang is not None:
            group, count, rest = gang
            with_gang = in_eq.clone()
            with_gang.add(rest)
            if eq.used_over_max_with(with_gang):
                pre.rejected_by = "max"
                return None, Status(Code.UNSCHEDULABLE, REASON_GANG_OVER_MAX.format(
                    namespace=pod_info.namespace, name=pod_info.name, quota=eq.namespace,
                    group=group, count=count), plugin=NAME)
        if quotas.aggregated_used_over_min_with(in_all):
            pre.rejected_by = "min"
            return None, Status(Code.UNSCHEDULABLE, REASON_OVER_MIN.format(
                namespace=pod_info.namespace, name=pod_info.name), plugin=NAME)
        return None, None

    def _gang_rest(self, pod_info: PodInfo, *, counted: ElasticQuotaInfo
                   ) -> tuple[str, int, Resource] | None:
        """For a member of a PodGroup still short of minMember: (group, members still to
        place besides this pod, their requests), taking pending siblings by name (members
        bound, assumed or reserved already count in the quota's used); None for
        a pod outside a gang. A gang whose members cannot all fit its quota's max is
        refused before any member holds quota (Coscheduling keeps the placed ones waiting)."""
        group = pod_info.labels.get(POD_GROUP_LABEL)
        if not group:
            return None
        pg = self._handle.listers.get(PODGROUPS, pod_info.namespace, group)
        spec = pg.get("spec") if isinstance(pg, dict) else None
        min_member = spec.get("minMember") if isinstance(spec, dict) else None
        if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member <= 1:
            return None
        placed = 0
        waiting: list[dict[str, Any]] = []
        for p in self._handle.listers.list(PODS, pod_info.namespace):
            meta = p.get("metadata") or {}
            if (meta.get("labels") or {}).get(POD_GROUP_LABEL) != group or is_terminal(p):
                continue
            uid = str(meta.get("uid") or "")
            if (p.get("spec") or {}).get("nodeName") or uid in counted:
                placed += 1
            elif uid != pod_info.uid and not is_being_deleted(p):
                waiting.append(p)
        need = min_member - placed - 1  # besides this pod
        if need <= 0:
            return None
        rest = Resource()
        for p in sorted(waiting, key=lambda o: str((o.get("metadata") or {}).get("name")))[:need]:
            try:
                rest.add(pod_requests(p))
            except Exception:  # noqa: BLE001 - a malformed sibling: its own cycle reports it
                continue
        return group, need, rest

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self._extensions

    # --- Reserve -----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        if self.quotas().get(pod_info.namespace) is not None:
            self._reserved[pod_info.uid] = (pod_info.namespace, self.requests_of(pod_info))
        return None

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        self._reserved.pop(pod_info.uid, None)

    # --- PostFilter --------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status],
    ) -> tuple[PostFilterResult | None, Status | None]:
        self.attempts += 1
        self.metrics.preemption_attempts.inc()
        self._forget_expired()
        result, status = self._preempt(state, pod_info, node_to_status)
        if status is not None and status.reasons and status.message():
            status = Status(status.code, MESSAGE_PREFIX + status.message(), plugin=NAME,
                            error=status.error)
        return result, status

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return 0, num_nodes  # every node, from the first (as scheduler-plugins)

    def _snapshot(self, state: CycleState) -> QuotaSet | None:
        snap = state.get(SNAPSHOT_KEY)
        return snap.quotas if isinstance(snap, _QuotaSnapshot) else None

    def pod_eligible_to_preempt_others(
        self, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[bool, str]:
        quotas = self._snapshot_for_eligibility()
        if not quotas:
            return super().pod_eligible_to_preempt_others(pod_info, node_to_status)
        if (pod_info.pod.get("spec") or {}).get("preemptionPolicy") == PREEMPT_NEVER:
            return False, ERR_NOT_ELIGIBLE_POLICY_NEVER
        nominated = str((pod_info.pod.get("status") or {}).get("nominatedNodeName") or "")
        if not nominated:
            return True, ""
        status = node_to_status.get(nominated)
        if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        node_info = self._handle.snapshot().get(nominated)
        if node_info is None:
            return True, ""
        eq = quotas.get(pod_info.namespace)
        pre = self._eligibility_state
        if eq is not None:
            more_than_min = eq.used_over_min_with(pre.in_eq_with_pod if pre else pod_info.requests)
            for p in node_info.pods:
                if not is_being_deleted(p.pod):
                    continue
                other = quotas.get(p.namespace)
                if other is None:
                    continue
                if other is eq and p.priority < pod_info.priority:
                    return False, ERR_NOT_ELIGIBLE_TERMINATING
                if other is not eq and not more_than_min and other.used_over_min():
                    return False, ERR_NOT_ELIGIBLE_TERMINATING
        else:
            for p in node_info.pods:
                if quotas.get(p.namespace) is None and is_being_deleted(p.pod) \
                        and p.priority < pod_info.priority:
                    return False, ERR_NOT_ELIGIBLE_TERMINATING
        return True, ""

    # pod_eligible_to_preempt_others has no CycleState argument: _preempt's caller sets these
    _eligibility_quotas: QuotaSet | None = None
    _eligibility_state: _PreFilterState | None = None

    def _snapshot_for_eligibility(self) -> QuotaSet | None:
        return self._eligibility_quotas

    def _preempt(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        self._eligibility_quotas = self._snapshot(state)
        pre = state.get(PREFILTER_KEY)
        self._eligibility_state = pre if isinstance(pre, _PreFilterState) else None
        try:
            return super()._preempt(state, pod_info, node_to_status)
        finally:
            self._eligibility_quotas = None
            self._eligibility_state = None

    def preemption_victims(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> dict[str, tuple[list[PodInfo], int]] | None:
        """The dry run the HTTP extenders narrow (before PostFilter), with the quotas'
        eligibility as in _preempt."""
        self._eligibility_quotas = self._snapshot(state)
        pre = state.get(PREFILTER_KEY)
        self._eligibility_state = pre if isinstance(pre, _PreFilterState) else None
        try:
            return super().preemption_victims(state, pod_info, node_to_status)
        finally:
            self._eligibility_quotas = None
            self._eligibility_state = None

    def select_victims_on_node(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_info: NodeInfo,
        pdbs: Sequence[PDB],
    ) -> tuple[list[PodInfo], int, Status | None]:
        quotas = self._snapshot(state)
        pre = state.get(PREFILTER_KEY)
        if not quotas or not isinstance(pre, _PreFilterState):
            return super().select_victims_on_node(state, pod_info, node_info, pdbs)
        handle = self._handle

        def remove(victim: PodInfo) -> Status | None:
            node_info.remove_pod(victim.pod)
            status = handle.run_pre_filter_extension_remove_pod(state, pod_info, victim, node_info)
            return None if status is None or status.is_success() else Status(
                Code.ERROR, status.message(), plugin=NAME)

        def add(victim: PodInfo) -> Status | None:
            node_info.add_pod(victim)
            status = handle.run_pre_filter_extension_add_pod(state, pod_info, victim, node_info)
            return None if status is None or status.is_success() else Status(
                Code.ERROR, status.message(), plugin=NAME)

        eq = quotas.get(pod_info.namespace)
        now_key = importance_key(_now())
        pods = sorted(node_info.pods, key=now_key, reverse=True)  # least important first
        potential: list[PodInfo] = []
        if eq is not None:
            more_than_min = eq.used_over_min_with(pre.in_eq_with_pod)
            for p in pods:
                other = quotas.get(p.namespace)
                if other is None:
                    continue
                if more_than_min:
                    # over its min with the pod: only its own, lower-priority pods
                    chosen = other is eq and p.priority < pod_info.priority
                else:
                    # within its min: what quotas over their min borrowed, any priority
                    chosen = other is not eq and other.used_over_min()
                if chosen:
                    potential.append(p)
                    error = remove(p)
                    if error is not None:
                        return [], 0, error
        else:
            for p in pods:
                if quotas.get(p.namespace) is None and p.priority < pod_info.priority:
                    potential.append(p)
                    error = remove(p)
                    if error is not None:
                        return [], 0, error
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_VICTIMS_ON_NODE.format(
                node=node_info.name, pod=pod_info.name), plugin=NAME)
        status = handle.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
        if status is not None and not status.is_success():
            return [], 0, status
        if eq is not None and (eq.used_over_max_with(pre.pod_req)
                               or self._over_min_after(quotas, pre.pod_req)):
            return [], 0, Status(Code.UNSCHEDULABLE, ERR_QUOTA_EXCEEDED, plugin=NAME)

        potential.sort(key=now_key)  # most important first: reprieved first
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)

        def fits() -> bool:
            status = handle.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
            if status is not None and not status.is_success():
                return False
            return eq is None or not (
                eq.used_over_max_with(pre.in_eq_with_pod)
                or self._over_min_after(quotas, pre.all_with_pod))

        victims, num_violating, error = reprieve_victims(
            violating, non_violating, add=add, remove=remove, fits=fits)
        if error is not None:
            return [], 0, error
        if violating and non_violating:
            victims.sort(key=now_key)
        return victims, num_violating, None

    def _over_min_after(self, quotas: QuotaSet, request: Resource) -> bool:
        return quotas.aggregated_used_over_min_with(request)


def _now() -> float:
    import time

    return time.time()
