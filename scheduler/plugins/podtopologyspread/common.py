"""Topology spread constraints as PodTopologySpread reads them.

A pod's ``spec.topologySpreadConstraints`` (or, when it has none, the plugin's default
constraints with a selector deduced from the Services / ReplicationControllers / ReplicaSets /
StatefulSets that select the pod) are compiled once per cycle into :class:`Constraint`, with
upstream's defaults: minDomains 1, nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore, and
``matchLabelKeys`` merged into the selector as ``key = <the pod's value>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from scheduler.framework.interfaces import Handle, ObjectLister, Plugin
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import (
    EQUALS,
    LabelSelector,
    LabelSelectorError,
    Requirement,
)
from scheduler.objects.node_affinity import RequiredNodeAffinity
from scheduler.objects.taints import Taint, Toleration, find_untolerated_taint, parse_taints
from scheduler.plugins import names
from scheduler.plugins.node_memo import NodeMemo

if TYPE_CHECKING:  # domains and selectors import this module
    from scheduler.plugins.podtopologyspread.domains import DomainCounts
    from scheduler.plugins.podtopologyspread.selectors import DefaultSelectors

NAME = names.POD_TOPOLOGY_SPREAD

__all__ = [
    "DO_NOT_SCHEDULE",
    "SCHEDULE_ANYWAY",
    "HONOR",
    "IGNORE",
    "LABEL_HOSTNAME",
    "LABEL_TOPOLOGY_ZONE",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "Constraint",
    "filter_constraints",
    "default_selector",
    "node_labels",
    "node_has_all_keys",
    "count_pods_match_selector",
    "NodeInclusion",
]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

# Used with defaultingType System (upstream systemDefaultConstraints).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

_NO_FIELDS: Mapping[str, Any] = {}
_NO_LABELS: Mapping[str, str] = {}
_DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def node_labels(node: Mapping[str, Any] | None) -> Mapping[str, str]:
    if node is None:
        return _NO_LABELS
    labels = (node.get("metadata") or _NO_FIELDS).get("labels")
    return labels if labels else _NO_LABELS


def node_has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    """Whether the node carries every constraint's topology key."""
    for c in constraints:
        if c.topology_key not in labels:
            return False
    return True


def count_pods_match_selector(pods: Sequence[Any], selector: LabelSelector, namespace: str) -> int:
    """Pods (PodInfo) in ``namespace``, not terminating, whose labels the selector matches.

    An empty selector counts nothing, as upstream does.
    """
    if selector.is_empty() or selector.is_nothing():
        return 0
    count = 0
    for p in pods:
        if p.namespace != namespace:
            continue
        if (p.pod.get("metadata") or _NO_FIELDS).get("deletionTimestamp"):
            continue
        if selector.matches(p.labels):
            count += 1
    return count


def count_on_node(selector: LabelSelector, namespace: str, node_info: NodeInfo) -> int:
    """``count_pods_match_selector`` over one node's pods (bound with functools.partial)."""
    return count_pods_match_selector(node_info.pods, selector, namespace)


class NodeInclusion:
    """Per-cycle node eligibility under nodeAffinityPolicy / nodeTaintsPolicy, memoized by node."""

    __slots__ = ("_affinity", "_tolerations", "_affinity_memo", "_taints_memo")

    def __init__(self, affinity: RequiredNodeAffinity, tolerations: Sequence[Toleration]) -> None:
        self._affinity = affinity
        self._tolerations = tolerations
        self._affinity_memo: dict[int, bool] = {}
        self._taints_memo: dict[int, bool] = {}

    def matches(self, c: Constraint, node: Mapping[str, Any]) -> bool:
        if c.node_affinity_policy == HONOR and not self._affinity_ok(node):
            return False
        if c.node_taints_policy == HONOR and not self._taints_ok(node):
            return False
        return True

    def _affinity_ok(self, node: Mapping[str, Any]) -> bool:
        if self._affinity.is_empty():
            return True
        key = id(node)
        ok = self._affinity_memo.get(key)
        if ok is None:
            try:
                ok = self._affinity.match(node)
            except (ObjectError, LabelSelectorError, ValueError):
                ok = False  # a node we cannot read does not match (upstream ignores errors)
            self._affinity_memo[key] = ok
        return ok

    def _taints_ok(self, node: Mapping[str, Any]) -> bool:
        key = id(node)
        ok = self._taints_memo.get(key)
        if ok is None:
            taints = _taints(node)
            # A node whose taints cannot be read is treated as not tolerated.
            ok = taints is not None and find_untolerated_taint(
                taints, self._tolerations, effects=_DO_NOT_SCHEDULE_EFFECTS
            ) is None
            self._taints_memo[key] = ok
        return ok


def _taints(node: Mapping[str, Any]) -> list[Taint] | None:
    try:
        return parse_taints(node)
    except ObjectError:
        return None


def _int_field(raw: Mapping[str, Any], name: str, where: str, default: int | None) -> int:
    value = raw.get(name)
    if value is None:
        if default is None:
            raise LabelSelectorError(f"{where}.{name}: required")
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise LabelSelectorError(f"{where}.{name}: must be an integer, got {value!r}")
    return value


def filter_constraints(
    raw_constraints: Sequence[Any],
    pod_labels: Mapping[str, str],
    action: str,
    *,
    where: str = "spec.topologySpreadConstraints",
) -> list[Constraint]:
    """The constraints with ``whenUnsatisfiable == action``, compiled.

    Raises LabelSelectorError naming the field of a malformed constraint.
    """
    out: list[Constraint] = []
    for i, raw in enumerate(raw_constraints):
        path = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise LabelSelectorError(f"{path}: expected an object")
        if raw.get("whenUnsatisfiable") != action:
            continue
        selector = LabelSelector.from_dict(raw.get("labelSelector"), where=f"{path}.labelSelector")
        keys = raw.get("matchLabelKeys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise LabelSelectorError(f"{path}.matchLabelKeys: expected a list of strings")
        if keys and not selector.is_nothing():
            extra = [
                Requirement(k, EQUALS, (pod_labels[k],), where=f"{path}.matchLabelKeys")
                for k in keys
                if k in pod_labels
            ]
            if extra:
                selector = LabelSelector((*extra, *selector.requirements))
        topology_key = raw.get("topologyKey")
        if not isinstance(topology_key, str):
            raise LabelSelectorError(f"{path}.topologyKey: must be a string")
        affinity_policy = raw.get("nodeAffinityPolicy") or HONOR
        taints_policy = raw.get("nodeTaintsPolicy") or IGNORE
        for name, policy in (("nodeAffinityPolicy", affinity_policy),
                             ("nodeTaintsPolicy", taints_policy)):
            if policy not in (HONOR, IGNORE):
                raise LabelSelectorError(
                    f"{path}.{name}: unsupported value {policy!r}: must be Honor or Ignore"
                )
        out.append(
            Constraint(
                max_skew=_int_field(raw, "maxSkew", path, None),
                topology_key=topology_key,
                selector=selector,
                min_domains=_int_field(raw, "minDomains", path, 1),
                node_affinity_policy=affinity_policy,
                node_taints_policy=taints_policy,
            )
        )
    return out


# Compiled constraints of pods, by their raw constraints (and the pod's labels when a
# constraint has matchLabelKeys): the replicas of a workload carry the same constraints,
# and compiling them (selectors parsed and validated) was a tenth of a spreading pod's
# cycle.  Dropped whole when full.
_COMPILED: dict[tuple[bytes, tuple[tuple[str, str], ...], str], list[Constraint]] = {}
COMPILED_CONSTRAINTS_MAX = 256


OwnKey = tuple[bytes, tuple[tuple[str, str], ...]]


def own_constraints_key(raw_constraints: list[Any], pod_labels: Mapping[str, str]
                        ) -> OwnKey | None:
    """What compiling a pod's own constraints reads: the constraints as JSON and, when one
    has matchLabelKeys, the pod's labels; None when they are not plain JSON."""
    try:
        raw = orjson.dumps(raw_constraints, option=orjson.OPT_SORT_KEYS)
        uses_labels = any(isinstance(c, Mapping) and c.get("matchLabelKeys")
                          for c in raw_constraints)
        return raw, tuple(sorted(pod_labels.items())) if uses_labels else ()
    except (TypeError, orjson.JSONEncodeError):
        return None


def compile_own_constraints(raw_constraints: list[Any], pod_labels: Mapping[str, str],
                            action: str, *, key: OwnKey | None = None) -> list[Constraint]:
    """``filter_constraints`` of a pod's own constraints, compiled once per distinct
    constraints (a new list each call; the constraints are immutable).  A malformed
    constraint raises each time and is never kept.  ``key``: ``own_constraints_key`` of
    the same arguments, when the caller has it."""
    if key is None:
        key = own_constraints_key(raw_constraints, pod_labels)
        if key is None:  # not plain JSON: compile it every time
            return filter_constraints(raw_constraints, pod_labels, action)
    full = (key[0], key[1], action)
    compiled = _COMPILED.get(full)
    if compiled is None:
        compiled = filter_constraints(raw_constraints, pod_labels, action)
        if len(_COMPILED) >= COMPILED_CONSTRAINTS_MAX:
            _COMPILED.clear()
        _COMPILED[full] = compiled
    return list(compiled)


# Controllers whose selector spreads a pod by default: (apiVersion, kind) -> lister resource.
_CONTROLLERS = {
    ("v1", "ReplicationController"): "replicationcontrollers",
    ("apps/v1", "ReplicaSet"): "replicasets",
    ("apps/v1", "StatefulSet"): "statefulsets",
}


def _safe_list(listers: ObjectLister, resource: str, namespace: str) -> list[dict[str, Any]]:
    try:
        return listers.list(resource, namespace)
    except Exception:  # noqa: BLE001 - a lister that is not available means "none"
        return []


def _safe_get(listers: ObjectLister, resource: str, namespace: str, name: str
              ) -> dict[str, Any] | None:
    try:
        return listers.get(resource, namespace, name)
    except Exception:  # noqa: BLE001
        return None


def default_selector(pod: Mapping[str, Any], listers: ObjectLister) -> LabelSelector:
    """The selector of the Services and the controller that own the pod (upstream DefaultSelector).

    Requirements from all of them are ANDed; an empty result means "do not default".
    """
    meta = pod.get("metadata") or _NO_FIELDS
    namespace = str(meta.get("namespace") or "")
    labels: Mapping[str, str] = meta.get("labels") or _NO_LABELS
    label_set: dict[str, str] = {}
    for svc in _safe_list(listers, "services", namespace):
        sel = (svc.get("spec") or _NO_FIELDS).get("selector")
        if sel is None or not isinstance(sel, Mapping):
            continue  # a Service without a selector selects nothing
        if all(labels.get(k) == v for k, v in sel.items()):
            label_set.update(sel)
    extra: list[Requirement] = []
    owner = None
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            owner = ref
            break
    if owner is not None:
        resource = _CONTROLLERS.get((str(owner.get("apiVersion") or ""), str(owner.get("kind"))))
        name = str(owner.get("name") or "")
        obj = None if resource is None else _safe_get(listers, resource, namespace, name)
        if obj is not None:
            spec = obj.get("spec") or _NO_FIELDS
            if resource == "replicationcontrollers":
                sel = spec.get("selector")
                if isinstance(sel, Mapping):
                    label_set.update(sel)
            else:
                try:
                    extra.extend(LabelSelector.from_dict(spec.get("selector")).requirements)
                except LabelSelectorError:
                    pass  # an unreadable controller selector adds nothing (upstream too)
    reqs = [Requirement(k, EQUALS, (str(v),)) for k, v in sorted(label_set.items())]
    return LabelSelector((*reqs, *extra))


class PodTopologySpreadBase(Plugin):
    """The state the filtering and scoring halves share (set by the plugin's constructor):
    the default constraints, memoized per-node match counts, and the constraints of a pod."""

    NAME = NAME
    defaulting_type: str
    system_defaulted: bool
    default_constraints: tuple[Mapping[str, Any], ...]
    _handle: Handle
    _counts: NodeMemo[int]
    _domains: dict[tuple[Any, ...], DomainCounts]
    # (id of a compiled Constraint, namespace, keys) -> (that Constraint, its table)
    _domains_by_id: dict[tuple[int, str, tuple[str, ...]], tuple[Constraint, DomainCounts]]
    # whenUnsatisfiable -> the default constraints compiled, when that does not depend on
    # the pod (no matchLabelKeys): every pod without constraints of its own asks, twice a
    # cycle, and compiling them was most of PodTopologySpread's cost in a SchedulingBasic
    # cycle.
    _compiled_defaults: dict[str, list[Constraint]]
    # The default constraints' selector per pod shape, kept while the Services and
    # controllers of its namespace are unchanged (``selectors.DefaultSelectors``).
    _default_selectors: DefaultSelectors
    # The last pod's own constraints and labels (the objects, held so their ids stay
    # theirs) and their ``own_constraints_key``: PreFilter and PreScore ask about the same
    # pod, each for its whenUnsatisfiable.
    _last_own: tuple[list[Any], Any, OwnKey] | None
    # topology key -> every node's value of it by snapshot position (Filter's DomainMask)
    _columns: dict[str, Any]

    def _counter(self, c: Constraint, namespace: str) -> Callable[[NodeInfo], int]:
        """Counts matching pods on a node, memoized by the NodeInfo's ``plugin_generation``
        (the count reads pods' namespace, labels and deletionTimestamp, which ``reads_alike``
        compares: a binding's confirmation keeps it)."""
        table = self._counts.table((c.selector, namespace))
        selector = c.selector

        def count(node_info: NodeInfo) -> int:
            name = node_info.name
            entry = table.get(name)
            if entry is not None and entry[0] == node_info.plugin_generation:
                return entry[1]
            found = count_pods_match_selector(node_info.pods, selector, namespace)
            table[name] = (node_info.plugin_generation, found)
            return found

        return count

    def constraints_for(self, pod: Mapping[str, Any], action: str) -> list[Constraint]:
        """The pod's constraints for ``action``, or the defaults when it has none.

        Raises ObjectError naming the pod and the field when a constraint is malformed.
        """
        meta = pod.get("metadata") or _NO_FIELDS
        labels: Mapping[str, str] = meta.get("labels") or {}
        spec = pod.get("spec") or _NO_FIELDS
        own = spec.get("topologySpreadConstraints")
        try:
            if own:
                if not isinstance(own, list):
                    raise LabelSelectorError("spec.topologySpreadConstraints: expected a list")
                last = self._last_own
                labels_obj = meta.get("labels")
                if last is None or last[0] is not own or last[1] is not labels_obj:
                    key = own_constraints_key(own, labels)
                    if key is None:  # not plain JSON: compiled every time
                        return filter_constraints(own, labels, action)
                    last = self._last_own = (own, labels_obj, key)
                return compile_own_constraints(own, labels, action, key=last[2])
            if not self.default_constraints:
                return []
            constraints = self._compiled_defaults.get(action)
            if constraints is None:
                constraints = filter_constraints(
                    self.default_constraints, labels, action, where="defaultConstraints"
                )
                if not any(raw.get("matchLabelKeys") for raw in self.default_constraints):
                    self._compiled_defaults[action] = constraints
        except LabelSelectorError as exc:
            field, _, detail = str(exc).partition(": ")
            raise ObjectError.for_object(pod, field, detail or str(exc), kind="Pod") from None
        if not constraints:
            return []
        kept = self._default_selectors.get(pod)
        selector = kept.selector
        if selector.is_empty():
            return []
        built = kept.constraints.get(action)
        if built is None:
            built = [
                Constraint(
                    max_skew=c.max_skew,
                    topology_key=c.topology_key,
                    selector=selector,
                    min_domains=c.min_domains,
                    node_affinity_policy=c.node_affinity_policy,
                    node_taints_policy=c.node_taints_policy,
                )
                for c in constraints
            ]
            if action in self._compiled_defaults:  # they do not depend on the pod's labels
                kept.constraints[action] = built
        return list(built)
