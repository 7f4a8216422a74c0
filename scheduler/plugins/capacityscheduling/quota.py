"""ElasticQuota bookkeeping for CapacityScheduling: each quota's min, max and used, and the
two comparisons the plugin makes (over max, over min), as scheduler-plugins defines them.

A quota without ``min`` guarantees nothing (0 of cpu, memory and ephemeral storage); one
without ``max`` is unlimited in those three. A resource a quota does not name is compared
against that bound too for extended resources (0 for min, unlimited for max), while cpu,
memory and ephemeral storage left out of a ``min``/``max`` that is present count as 0, as
upstream's ``framework.Resource`` conversion gives them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.objects.resources import Resource

__all__ = [
    "UPPER_BOUND",
    "ElasticQuotaInfo",
    "QuotaSet",
    "over",
    "format_amount",
    "quota_from_object",
]

UPPER_BOUND = 2**63 - 1  # math.MaxInt64: "no limit"
LOWER_BOUND = 0


def _bound(value: int) -> Resource:
    return Resource(milli_cpu=value, memory=value, ephemeral_storage=value)


def over(x1: Resource, x2: Resource, y: Resource, bound: int) -> bool:
    """Whether ``x1 + x2`` exceeds ``y`` in any resource; extended resources of ``x1`` that
    ``y`` does not name are compared against ``bound`` (upstream cmp2)."""
    if x1.milli_cpu + x2.milli_cpu > y.milli_cpu:
        return True
    if x1.memory + x2.memory > y.memory:
        return True
    if x1.ephemeral_storage + x2.ephemeral_storage > y.ephemeral_storage:
        return True
    if x1.allowed_pod_number + x2.allowed_pod_number > y.allowed_pod_number:
        return True
    ys = y.scalar_resources
    xs2 = x2.scalar_resources
    for name, amount in x1.scalar_resources.items():
        if amount + xs2.get(name, 0) > ys.get(name, bound):
            return True
    return False


_ZERO = Resource()


@dataclass(slots=True)
class ElasticQuotaInfo:
    """One ElasticQuota: the namespaces it covers, its min and max, and what its pods use.

    ``base`` holds the uids counted from the scheduler's snapshot (shared between copies,
    never changed through them); ``pods`` the pods added on top (reserved ones, preemption's
    what-ifs) and ``removed`` the base pods taken out, so that a copy per cycle costs the
    size of those changes, not of the namespace's pods."""

    namespace: str
    name: str
    min: Resource
    max: Resource
    used: Resource = field(default_factory=Resource)
    pods: dict[str, Resource] = field(default_factory=dict)
    # names the quota's min and max list (what status.used reports)
    resource_names: tuple[str, ...] = ()
    namespaces: frozenset[str] = frozenset()
    base: frozenset[str] | set[str] = frozenset()
    removed: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def clone(self) -> ElasticQuotaInfo:
        return ElasticQuotaInfo(
            self.namespace, self.name, self.min, self.max, self.used.clone(), dict(self.pods),
            self.resource_names, self.namespaces, self.base, set(self.removed))

    def __contains__(self, uid: object) -> bool:
        return uid in self.pods or (uid in self.base and uid not in self.removed)

    def add_pod(self, uid: str, requests: Resource) -> None:
        if uid in self:
            return
        if uid in self.removed:
            self.removed.discard(uid)
        else:
            self.pods[uid] = requests
        self.used.add(requests)

    def remove_pod(self, uid: str, requests: Resource) -> None:
        extra = self.pods.pop(uid, None)
        if extra is not None:
            self.used.sub(extra)
        elif uid in self.base and uid not in self.removed:
            self.removed.add(uid)
            self.used.sub(requests)

    def used_over_min_with(self, request: Resource) -> bool:
        return over(request, self.used, self.min, LOWER_BOUND)

    def used_over_max_with(self, request: Resource) -> bool:
        return over(request, self.used, self.max, UPPER_BOUND)

    def used_over_min(self) -> bool:
        return over(self.used, _ZERO, self.min, LOWER_BOUND)


class QuotaSet:
    """The quotas of a cluster by the namespace they cover (one quota per namespace: the
    first by name wins, as upstream keeps the first it sees)."""

    __slots__ = ("by_namespace", "quotas")

    def __init__(self, quotas: Iterable[ElasticQuotaInfo] = ()) -> None:
        self.quotas: list[ElasticQuotaInfo] = []
        self.by_namespace: dict[str, ElasticQuotaInfo] = {}
        for q in quotas:
            self.add(q)

    def add(self, quota: ElasticQuotaInfo) -> None:
        self.quotas.append(quota)
        for ns in sorted(quota.namespaces or {quota.namespace}):
            self.by_namespace.setdefault(ns, quota)

    def get(self, namespace: str) -> ElasticQuotaInfo | None:
        return self.by_namespace.get(namespace)

    def clone(self) -> QuotaSet:
        return QuotaSet(q.clone() for q in self.quotas)

    def __bool__(self) -> bool:
        return bool(self.quotas)

    def aggregated_used_over_min_with(self, request: Resource) -> bool:
        """sum(used) + request > sum(min), in any resource."""
        used = Resource()
        low = Resource()
        for q in self.quotas:
            used.add(q.used)
            low.add(q.min)
        return over(used, request, low, LOWER_BOUND)

    def add_pod(self, namespace: str, uid: str, requests: Resource) -> None:
        q = self.by_namespace.get(namespace)
        if q is not None:
            q.add_pod(uid, requests)

    def remove_pod(self, namespace: str, uid: str, requests: Resource) -> None:
        q = self.by_namespace.get(namespace)
        if q is not None:
            q.remove_pod(uid, requests)


def quota_from_object(obj: Mapping[str, Any], *,
                      namespaces: frozenset[str] = frozenset()) -> ElasticQuotaInfo:
    """An ElasticQuota object (already validated) as an ElasticQuotaInfo with nothing used."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    low, high = spec.get("min"), spec.get("max")
    names = sorted(set(low or {}) | set(high or {}))
    return ElasticQuotaInfo(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        min=_bound(LOWER_BOUND) if low is None else Resource.from_resource_list(low),
        max=_bound(UPPER_BOUND) if high is None else Resource.from_resource_list(high),
        resource_names=tuple(names),
        namespaces=namespaces,
    )


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_amount(name: str, amount: int) -> str:
    """An amount as a quantity string: cpu in cores or millicores, bytes in the largest
    binary unit that divides them, anything else as an integer; the "no limit" bound as
    ``unlimited``."""
    if amount >= UPPER_BOUND:
        return "unlimited"
    if name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and (name in ("memory", "ephemeral-storage") or name.startswith("hugepages-")):
        for suffix, size in _BINARY:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
