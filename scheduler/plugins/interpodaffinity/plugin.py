"""InterPodAffinity: pod affinity and anti-affinity between the incoming pod and existing pods.

Filter enforces three required rules, as kube-scheduler does:

* the incoming pod's required affinity: some existing pod matching *all* its terms must sit in
  the node's topology domain of every term (a pod whose terms select itself may start a group
  when no pod in the cluster matches yet);
* the incoming pod's required anti-affinity: no existing pod matching a term in the domain;
* existing pods' required anti-affinity: no existing pod whose term selects the incoming pod
  in the node's domain of that term.

PreFilter walks the cluster once and counts matches per topology pair, so Filter is a few dict
lookups per node.  Pods without affinity cost nothing: existing pods are only looked at through
the snapshot's lists of nodes holding pods with (required anti-)affinity.

Score sums, per topology pair, the weights of preferred terms (both the incoming pod's and the
existing pods'), plus ``hardPodAffinityWeight`` for existing pods' required affinity terms that
select the incoming pod, and NormalizeScore scales the sums linearly to [0, 100].
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    Handle,
)
from scheduler.objects.pod import PodInfo
from scheduler.plugins.helper import args_error
from scheduler.plugins.interpodaffinity.terms import (
    AffinityTerm,
    TermsCache,
)
from scheduler.plugins.interpodaffinity.common import (
    _EMPTY,
    _NO_FIELDS,
    NAME,
    UniqueValues,
    _node_labels,
    pod_matches_all_terms,
)
from scheduler.plugins.interpodaffinity.filtering import Filtering, PairSums
from scheduler.plugins.interpodaffinity.scoring import Scoring

MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1

_ARGS_FIELDS = frozenset(
    {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"}
)


def _parse_args(args: Mapping[str, Any] | None) -> tuple[int, bool]:
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
    for key in args:
        if key not in _ARGS_FIELDS:
            raise args_error(NAME, str(key), "unknown field")
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    if weight is None:
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    if not isinstance(weight, int) or isinstance(weight, bool):
        raise args_error(NAME, "hardPodAffinityWeight", f"must be an integer, got {weight!r}")
    if not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        raise args_error(
            NAME,
            "hardPodAffinityWeight",
            f"Invalid value: {weight}: not in valid range "
            f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]",
        )
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if ignore is None:
        ignore = False
    if not isinstance(ignore, bool):
        raise args_error(
            NAME, "ignorePreferredTermsOfExistingPods", f"must be a boolean, got {ignore!r}"
        )
    return weight, ignore


class InterPodAffinity(Filtering, Scoring, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        self.hard_pod_affinity_weight, self.ignore_preferred_terms_of_existing_pods = (
            _parse_args(args)
        )
        self._handle = handle
        self._terms = TermsCache()
        self._sums_by_query: OrderedDict[Hashable, PairSums] = OrderedDict()
        self._unique: dict[str, UniqueValues] = {}

    # --- events -------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new assigned pod may satisfy affinity; a deleted one may lift anti-affinity;
            # a label change may do either.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD,
                    ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                    "Pod/Add|UpdatePodLabel|Delete",
                ),
                self.is_schedulable_after_pod_change,
            ),
            # A node joining (or changing) a topology domain.  Taint updates are listed as
            # upstream does, for nodes that were added not ready.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
                    "Node/Add|UpdateNodeLabel|UpdateNodeTaint",
                ),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        original = _as_pod(old) if old is not None else None
        modified = _as_pod(new) if new is not None else None
        if (modified is not None and not _node_name(modified)) or (
            original is not None and not _node_name(original)
        ):
            return QueueingHint.SKIP
        terms = self.terms_of(pod)
        affinity, anti = terms.required_affinity, terms.required_anti_affinity

        if original is not None and modified is not None:
            if not _matches_all(affinity, original) and _matches_all(affinity, modified):
                return QueueingHint.QUEUE
            if _matches_any(anti, original) and not _matches_any(anti, modified):
                return QueueingHint.QUEUE
            if self._blocks_by_anti_affinity(original, pod) and not self._blocks_by_anti_affinity(
                modified, pod
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        if modified is not None:
            return QueueingHint.QUEUE if _matches_all(affinity, modified) else QueueingHint.SKIP

        assert original is not None
        # A deleted pod frees the domain if the waiting pod's anti-affinity selected it, or if
        # its own anti-affinity selected the waiting pod.
        if _matches_any(anti, original) or self._blocks_by_anti_affinity(original, pod):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _blocks_by_anti_affinity(self, existing: Mapping[str, Any], pod: Mapping[str, Any]
                                 ) -> bool:
        """Whether ``existing``'s required anti-affinity selects ``pod``."""
        anti = self.terms_of(existing).required_anti_affinity
        if not anti:
            return False
        meta = pod.get("metadata") or _NO_FIELDS
        namespace = str(meta.get("namespace") or "")
        labels = meta.get("labels") or _EMPTY
        ns_labels = self._namespace_labels(namespace)
        return any(t.matches(namespace, labels, ns_labels) for t in anti)

    def is_schedulable_after_node_change(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        modified = _as_node(new)
        original = _as_node(old) if old is not None else None
        modified_labels = _node_labels(modified)
        original_labels = None if original is None else _node_labels(original)
        if original_labels is not None and original_labels == modified_labels:
            # A taint-only update stands in for an add that arrived while the node was not
            # ready: judge the node as if it had just been added.
            original_labels = None
        terms = self.terms_of(pod)
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if not affinity and not anti:
            # Rejected because of existing pods' anti-affinity: any node that joins or leaves a
            # topology domain may be free of them.
            return QueueingHint.QUEUE
        for term in affinity:
            key = term.topology_key
            if original_labels is None:
                if key in modified_labels:
                    return QueueingHint.QUEUE
                continue
            if key in modified_labels and original_labels.get(key) != modified_labels[key]:
                return QueueingHint.QUEUE
        for term in anti:
            if original_labels is None:
                # A new node without the key always accepts the pod; with the key, its domain
                # may be free.  Either way it is worth a try.
                return QueueingHint.QUEUE
            key = term.topology_key
            if key in original_labels and original_labels.get(key) != modified_labels.get(key):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _as_pod(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a Pod object, got {type(obj).__name__}")
    return obj


def _as_node(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{NAME}: expected a Node object, got {type(obj).__name__}")
    return obj


def _node_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or _NO_FIELDS).get("nodeName") or "")


def _ns_and_labels(pod: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    meta = pod.get("metadata") or _NO_FIELDS
    return str(meta.get("namespace") or ""), meta.get("labels") or _EMPTY


def _matches_all(terms: tuple[AffinityTerm, ...], pod: Mapping[str, Any]) -> bool:
    namespace, labels = _ns_and_labels(pod)
    return pod_matches_all_terms(terms, namespace, labels)


def _matches_any(terms: tuple[AffinityTerm, ...], pod: Mapping[str, Any]) -> bool:
    namespace, labels = _ns_and_labels(pod)
    return any(t.matches(namespace, labels, None) for t in terms)
