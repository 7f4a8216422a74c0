"""Matching-pod counts per topology domain, kept incrementally across scheduling cycles.

PreFilter needs, for every constraint, the number of matching pods in each domain over all
eligible nodes.  Recounting means visiting every node every cycle; yet between two cycles of
a spreading workload only the node the previous replica went to has changed.  A DomainCounts
remembers each node's contribution with the NodeInfo ``plugin_generation`` it was computed from and
updates the per-domain sums for changed, added and removed nodes only.

It is used when node eligibility does not depend on the incoming pod (no Honor policy that
would consult the pod's node affinity or tolerations), by PreFilter (``DoNotSchedule``) and
PreScore (``ScheduleAnyway`` but hostname); otherwise they count afresh.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from scheduler.framework.interfaces import NodeInfoLister
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.node_memo import NodeChanges
from scheduler.plugins.podtopologyspread.common import (
    HONOR,
    Constraint,
    PodTopologySpreadBase,
    count_on_node,
    node_labels,
)

# (plugin_generation, domain value or None when the node is not eligible, matching pods)
_Entry = tuple[int, str | None, int]


def _no_counter(node_info: NodeInfo) -> int:
    raise TypeError("DomainCounts: no counter given")


class DomainCounts:
    __slots__ = ("count", "counts", "_changes", "_nodes_in_domain", "_per_node")

    def __init__(self, *, counter: Callable[[NodeInfo], int] | None = None) -> None:
        # The matching pods on one node, for callers that keep it with the table.
        self.count: Callable[[NodeInfo], int] = counter or _no_counter
        # domain value -> matching pods over the eligible nodes in it (0 for empty domains)
        self.counts: dict[str, int] = {}
        self._nodes_in_domain: dict[str, int] = {}
        self._per_node: dict[str, _Entry] = {}
        self._changes = NodeChanges()

    def refresh(
        self,
        node_infos: Sequence[NodeInfo],
        *,
        topology_key: str,
        required_keys: Sequence[str],
        count: Callable[[NodeInfo], int],
        snapshot: NodeInfoLister | None = None,
    ) -> dict[str, int]:
        """Bring the sums up to date with ``node_infos`` (``snapshot.list()`` when
        ``snapshot`` is given, whose change log then says what changed) and return them (do
        not mutate)."""
        per_node = self._per_node
        changed, removed = self._changes.since_last(node_infos, snapshot=snapshot)
        for name in removed:
            self._apply(per_node.pop(name), -1)
        for i in changed:
            node_info = node_infos[i]
            self._recount(node_info.name, node_info, topology_key, required_keys, count)
        return self.counts

    def _recount(self, name: str, node_info: NodeInfo, topology_key: str,
                 required_keys: Sequence[str], count: Callable[[NodeInfo], int]) -> None:
        entry = self._per_node.get(name)
        if entry is not None:
            self._apply(entry, -1)
        value: str | None = None
        found = 0
        node = node_info.node
        if node is not None:
            labels = node_labels(node)
            if all(key in labels for key in required_keys):
                # A key not required (PreScore's system defaults) missing: the domain "".
                value = labels.get(topology_key, "")
                found = count(node_info)
        entry = (node_info.plugin_generation, value, found)
        self._per_node[name] = entry
        self._apply(entry, 1)

    def _apply(self, entry: _Entry, sign: int) -> None:
        _, value, found = entry
        if value is None:
            return
        nodes = self._nodes_in_domain.get(value, 0) + sign
        if nodes <= 0:
            self._nodes_in_domain.pop(value, None)
            self.counts.pop(value, None)
            return
        self._nodes_in_domain[value] = nodes
        self.counts[value] = self.counts.get(value, 0) + sign * found


# Distinct (selector, namespace, topology key) tables kept at once; oldest dropped first.
MAX_DOMAIN_TABLES = 64


class KeptDomains(PodTopologySpreadBase):
    """The per-domain sums kept across cycles, for PreFilter and PreScore alike."""

    @staticmethod
    def _eligibility_is_pod_independent(
        constraints: list[Constraint], pod_info: PodInfo
    ) -> bool:
        """True when no constraint's node policies consult the incoming pod."""
        affinity_free = pod_info.required_node_affinity.is_empty()
        return all(
            (c.node_affinity_policy != HONOR or affinity_free) and c.node_taints_policy != HONOR
            for c in constraints
        )

    def _domain_counts(self, c: Constraint, namespace: str,
                       keys: tuple[str, ...]) -> DomainCounts:
        """The kept counts of ``c`` (its selector over ``keys``, in ``namespace``).

        Compiled constraints are shared between the pods that carry the same ones, so the
        table is found by the constraint's identity first (held in the entry, so the id
        cannot be reused while it is there) and only then by the selector's value."""
        by_id = self._domains_by_id
        entry = by_id.get((id(c), namespace, keys))
        if entry is not None and entry[0] is c:
            return entry[1]
        domain_key = (c.selector, namespace, c.topology_key, keys)
        domains = self._domains.get(domain_key)
        if domains is None:
            domains = self._domains[domain_key] = DomainCounts(
                counter=functools.partial(count_on_node, c.selector, namespace))
            if len(self._domains) > MAX_DOMAIN_TABLES:
                self._domains.pop(next(iter(self._domains)))
                by_id.clear()  # the evicted table must not stay reachable
        if len(by_id) >= 4 * MAX_DOMAIN_TABLES:
            by_id.clear()
        by_id[(id(c), namespace, keys)] = (c, domains)
        return domains
