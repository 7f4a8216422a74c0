"""NodeDeclaredFeatures (KEP-5328; alpha 1.35, GA 1.37): a pod that needs a node feature goes
only to nodes that declare it in ``status.declaredFeatures``.

A pod's required features are inferred from its spec by a registry of features (upstream's
``k8s.io/component-helpers/nodedeclaredfeatures``): each feature says whether a pod needs it
to be scheduled.  Only features that infer a requirement at scheduling time matter here (the
others guard pod updates, which the admission controller checks); ``FEATURES`` holds them.
A node lacking a required feature is UnschedulableAndUnresolvable: evicting pods cannot give
a node a feature, so preemption never tries.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.config import features
from scheduler.framework.cycle_state import CycleState, read_state
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PluginArgs,
    PreFilterPlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Code, Status
from scheduler.framework.types import PreFilterResult
from scheduler.objects.pod import PodInfo, is_pod_resize_deferred, pod_uid
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.NODE_DECLARED_FEATURES
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
ERR_REASON_UNSATISFIED_REQUIREMENTS = "node(s) didn't match Pod's required features"

_CONTAINER_FIELDS = ("containers", "initContainers")
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class DeclaredFeature:
    """One feature of the registry: its declared name and whether a pod spec needs it."""

    name: str
    infer_for_scheduling: Callable[[Mapping[str, Any]], bool]


def _restarts_all_containers(spec: Mapping[str, Any]) -> bool:
    """A container restart rule with action RestartAllContainers (KEP-5532)."""
    for field in _CONTAINER_FIELDS:
        for c in spec.get(field) or ():
            if type(c) is not dict and not isinstance(c, Mapping):  # a dict from the wire
                continue
            for rule in c.get("restartPolicyRules") or ():
                if isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers":
                    return True
    return False


def _user_namespace_with_host_network(spec: Mapping[str, Any]) -> bool:
    """Host networking inside a user namespace (``hostUsers: false``)."""
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


# The features of upstream's registry that infer a requirement at scheduling time.
FEATURES: tuple[DeclaredFeature, ...] = (
    DeclaredFeature("RestartAllContainersOnContainerExits", _restarts_all_containers),
    DeclaredFeature("UserNamespacesHostNetworkSupport", _user_namespace_with_host_network),
)


def infer_for_scheduling(pod: Mapping[str, Any],
                         registry: Sequence[DeclaredFeature] = FEATURES) -> frozenset[str]:
    """The declared features ``pod`` needs on its node."""
    spec = pod.get("spec")
    if type(spec) is not dict and not isinstance(spec, Mapping):  # a dict from the wire
        return _NONE
    # Asked at every pod's PreFilter: a list first, one shared empty set for the common pod.
    required = [f.name for f in registry if f.infer_for_scheduling(spec)]
    return frozenset(required) if required else _NONE


def node_declared_features(node: Mapping[str, Any] | None) -> frozenset[str]:
    if node is None:
        return frozenset()
    status = node.get("status")
    raw = status.get("declaredFeatures") if isinstance(status, Mapping) else None
    if not isinstance(raw, list):
        return frozenset()
    return frozenset(x for x in raw if isinstance(x, str))


class _PreFilterState:
    __slots__ = ("required",)

    def __init__(self, required: frozenset[str]) -> None:
        self.required = required

    def clone(self) -> _PreFilterState:
        return self


class NodeDeclaredFeatures(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None, *,
                 registry: Sequence[DeclaredFeature] = FEATURES,
                 gates: features.FeatureGates | None = None) -> None:
        validate_no_args(NAME, args)
        del handle
        gates = gates or features.DEFAULT
        self.registry = tuple(registry)
        self.enabled = gates.enabled("NodeDeclaredFeatures")
        self.skip_deferred_resizes = gates.enabled(
            "InPlacePodVerticalScalingSchedulerPreemption")

    def sign(self, pod_info: PodInfo) -> Hashable:
        """What Filter reads of the pod: its required features (opportunistic batching)."""
        return tuple(sorted(infer_for_scheduling(pod_info.pod, self.registry)))

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if self.skip_deferred_resizes and is_pod_resize_deferred(pod_info.pod):
            return None, SKIP
        if not self.enabled:
            return None, SKIP
        required = infer_for_scheduling(pod_info.pod, self.registry)
        if not required:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(required))
        return None, None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod_info, [node_info])[0]

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None]:
        if not self.enabled:
            return [None] * len(nodes)
        s = read_state(state, PRE_FILTER_STATE_KEY, _PreFilterState)
        if isinstance(s, Status):
            return [Status(s.code, *s.reasons) for _ in nodes]
        return [
            None if s.required <= node_declared_features(n.node)
            else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSATISFIED_REQUIREMENTS)
            for n in nodes
        ]

    def events_to_register(self) -> list[ClusterEventWithHint]:
        if not self.enabled:
            return []
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE,
                             ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE),
                self.is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE),
                self.is_schedulable_after_target_pod_update,
            ),
        ]

    @staticmethod
    def is_schedulable_after_node_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, dict):
            return QueueingHint.QUEUE
        if isinstance(old, dict) and _declared_list(old) == _declared_list(new):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    def is_schedulable_after_target_pod_update(
        self, pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        if not isinstance(old, dict) or not isinstance(new, dict):
            return QueueingHint.QUEUE
        if pod_uid(new) != pod_uid(pod):
            return QueueingHint.SKIP  # upstream's TargetPod: only the pod's own updates
        if infer_for_scheduling(old, self.registry) == infer_for_scheduling(new, self.registry):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


def _declared_list(node: Mapping[str, Any]) -> Any:
    status = node.get("status")
    return status.get("declaredFeatures") if isinstance(status, Mapping) else None
