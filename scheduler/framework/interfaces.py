"""Plugin extension points and the Handle the framework gives plugins.

A plugin is a class that subclasses the extension-point bases it implements (``FilterPlugin``,
``ScorePlugin`` ...); the runtime finds them with ``isinstance``, as kube-scheduler finds Go
interfaces with type assertions, so multiPoint configuration enables a plugin at exactly the
points it implements.  Every scheduling-cycle method receives the pod's ``PodInfo`` (parsed once
per resourceVersion), never a bare dict, so no plugin re-parses requests per node.

Return ``None`` for Success.  Scheduling-cycle methods are synchronous (CPU work on the event
loop); PreBind and Bind are ``async`` because they talk to the API server.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ClusterEventWithHint
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import (
    NodeScore,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:  # prometheus_client stays out of the plugin API's import cost
    from scheduler.metrics import SchedulerMetrics

PluginArgs = Mapping[str, Any]


class Plugin(abc.ABC):
    """Base of every plugin.  Subclasses set ``NAME`` and validate args in ``__init__``."""

    NAME: str = ""

    @property
    def name(self) -> str:
        return self.NAME


class PreEnqueuePlugin(Plugin):
    @abc.abstractmethod
    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        """Gate the pod before it enters activeQ (scheduling gates, missing PodGroup)."""


class QueueSortPlugin(Plugin):
    @abc.abstractmethod
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` should be scheduled before ``b``."""

    def sort_key(self) -> Callable[[QueuedPodInfo], tuple[Any, ...]] | None:
        """A key giving ``less``'s order (``less(a, b)`` exactly when ``key(a) < key(b)``),
        computed once per pod as it enters a queue heap, so a heap comparison is one tuple
        comparison instead of two ``less`` calls. None (the default) when the order
        depends on state that changes while the pod waits: the heaps then call ``less``."""
        return None


class EnqueueExtensions(abc.ABC):
    """Implemented by every plugin that can reject a pod (PreEnqueue/PreFilter/Filter/Reserve/Permit)."""

    @abc.abstractmethod
    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Cluster events that could make a pod this plugin rejected schedulable."""


class PreFilterExtensions(Protocol):
    """Incremental updates of PreFilter state when pods are added/removed (preemption, nominated pods)."""

    def add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None: ...


class PreFilterPlugin(Plugin):
    @abc.abstractmethod
    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        """Compute per-cycle state; Skip disables this plugin's Filter for the cycle."""

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    @abc.abstractmethod
    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        """Whether the pod can run on this node."""

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: builtins.list[NodeInfo]
    ) -> builtins.list[Status | None]:
        """Filter many nodes at once: entry ``i`` is what ``filter`` answers for ``nodes[i]``.

        The runtime calls this with the nodes every earlier Filter plugin passed, so the
        first rejecting plugin still names each node's status.  A plugin overrides it to
        hoist per-pod work out of the per-node loop, as ``ScorePlugin.score_nodes`` does; it
        must not stop early and must not share one Status object between nodes.
        """
        f = self.filter
        return [f(state, pod_info, node_info) for node_info in nodes]


class PostFilterPlugin(Plugin):
    @abc.abstractmethod
    def post_filter(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_to_status: Mapping[str, Status],
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Called when no node fits (preemption, gang rejection)."""


# node name -> (victims, most important first; PodDisruptionBudgets their eviction violates)
PreemptionVictims = dict[str, tuple[list[PodInfo], int]]


@runtime_checkable
class ExtenderPreemption(Protocol):
    """A PostFilter plugin whose preemption candidates the HTTP extenders' preempt verb may
    narrow (upstream: the preemption Evaluator's ``callExtenders``).

    Extender calls are I/O and PostFilter is not, so the scheduling cycle calls these two
    before PostFilter, knowing no concrete plugin: ``preemption_victims`` runs the dry run
    and returns the candidates to offer the extenders (None when there is nothing to offer:
    the plugin's PostFilter then answers alone); ``narrow_preemption`` hands back what the
    extenders kept, or the Status of their failure, and PostFilter chooses from that instead
    of a second dry run."""

    def preemption_victims(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> PreemptionVictims | None: ...

    def narrow_preemption(self, state: CycleState, kept: PreemptionVictims | Status) -> None: ...


class PreScorePlugin(Plugin):
    @abc.abstractmethod
    def pre_score(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> Status | None:
        """Prepare scoring over the feasible nodes; Skip disables this plugin's Score."""


class ScoreExtensions(Protocol):
    def normalize_score(
        self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]
    ) -> Status | None: ...


class ScoreValuesNormalizer(Protocol):
    """Optional on a ScoreExtensions object: NormalizeScore over bare scores.

    The runtime prefers it to ``normalize_score`` (no NodeScore object per node); it must
    return what ``normalize_score`` would leave in the scores, in the same order.
    """

    def normalize_score_values(
        self, state: CycleState, pod_info: PodInfo, names: builtins.list[str],
        values: builtins.list[int],
    ) -> tuple[builtins.list[int], Status | None]: ...


class ScorePlugin(Plugin):
    @abc.abstractmethod
    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        """A score in [0, MAX_NODE_SCORE] after normalization."""

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: builtins.list[NodeInfo]
    ) -> tuple[builtins.list[int], Status | None]:
        """Score every feasible node at once, in order; stop at the first failure.

        The runtime calls this, not ``score``: a plugin overrides it to hoist per-pod work
        out of the per-node loop (one Python call per node and plugin is the dominant cost
        of a cycle on a large cluster).  It must return what ``score`` would, node by node.
        """
        scores: builtins.list[int] = []
        for node_info in nodes:
            value, status = self.score(state, pod_info, node_info)
            if status is not None and status.code != Code.SUCCESS:
                return scores, status
            scores.append(value)
        return scores, None

    def score_extensions(self) -> ScoreExtensions | None:
        return None


class ReservePlugin(Plugin):
    @abc.abstractmethod
    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None: ...

    @abc.abstractmethod
    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        """Undo ``reserve``; must be idempotent and must not fail."""


class PermitPlugin(Plugin):
    @abc.abstractmethod
    def permit(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> tuple[Status | None, float]:
        """Allow, reject, or Wait (with a timeout in seconds)."""


class PreBindPlugin(Plugin):
    @abc.abstractmethod
    async def pre_bind(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None: ...

    def pre_bind_pre_flight(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """Will ``pre_bind`` have work for this pod (upstream PreBindPreFlight)?  Success
        (None): yes, so the binding cycle may take long and the pod is nominated to the node
        first (NominatedNodeNameForExpectation); Skip: nothing to do, and the runtime then
        skips this plugin's PreBind; Error fails the binding cycle.  Cheap and synchronous: no
        API call.  The default answers Success, as a PreBind plugin that says nothing can only
        be assumed to work (Skip would skip its PreBind); plugins that often have nothing to
        do (VolumeBinding, DynamicResources) answer Skip then, so a plain pod costs no
        status write."""
        return None


class BindPlugin(Plugin):
    @abc.abstractmethod
    async def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        """Bind the pod; return Skip to let the next bind plugin do it."""


class PostBindPlugin(Plugin):
    @abc.abstractmethod
    def post_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None: ...


class PodGroupPlugin(abc.ABC):
    """A plugin that schedules some pods as a group (a gang): the scheduler tries the
    group's queued members in one pass, back to back against the same snapshot, with no
    other pod in between (upstream 1.36's PodGroup scheduling cycle), and tells the plugin
    when the pass is over so a group that did not complete holds nothing.  Not an extension
    point of the configuration: a plugin enabled at any point that implements it is asked."""

    @abc.abstractmethod
    def pod_group_members(self, pod_info: PodInfo) -> list[dict[str, Any]] | None:
        """None if the pod is not in a group this plugin schedules; else the group's other
        pending members to try in the same pass (in this order)."""

    @abc.abstractmethod
    def pod_group_pass_done(self, pod_info: PodInfo) -> bool:
        """The pass that began with ``pod_info`` is over (every member tried): True if the
        group is complete (scheduled), False if not."""


EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


# --- what the framework offers plugins -------------------------------------------------------


class NodeInfoLister(Protocol):
    """Read-only view of the cycle's snapshot."""

    def list(self) -> list[NodeInfo]: ...

    def get(self, node_name: str) -> NodeInfo | None: ...

    # builtins.list: inside this class, ``list`` names the method above.
    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]: ...

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]: ...


class ObjectLister(Protocol):
    """Informer-backed read access to other resources, by plural resource name.

    Resources: ``persistentvolumes``, ``persistentvolumeclaims``, ``storageclasses``,
    ``csinodes``, ``csidrivers``, ``poddisruptionbudgets``, ``podgroups``, ``namespaces``.
    """

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]: ...

    def by_index(self, resource: str, index: str, value: str,
                 key: Callable[[dict[str, Any]], str | None]) -> builtins.list[dict[str, Any]]:
        """Objects for which ``key`` answers ``value``, from an index named ``index`` that
        the informer keeps (built on first use; pass the same ``key`` for a given name).
        Raises KeyError when no informer serves ``resource``."""
        ...


@runtime_checkable
class ObjectWatcher(Protocol):
    """Listers that also deliver their informers' events (optional: a plugin checks with
    ``isinstance`` and falls back to listing)."""

    def watch(self, resource: str, *, on_add: Callable[[dict[str, Any]], None],
              on_update: Callable[[dict[str, Any], dict[str, Any]], None],
              on_delete: Callable[[dict[str, Any]], None]) -> None:
        """Call these on every change of ``resource`` (the objects already cached are
        replayed to ``on_add`` at once; a delete gets the last state known).  Raises KeyError
        when no informer serves ``resource``."""
        ...


class ApiResponse(Protocol):
    status: int
    body: Any


class ApiClient(Protocol):
    """The slice of the API client plugins may use (writes go through QPS limiting)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        discard_ok_body: bool = False,
    ) -> ApiResponse: ...


class EventRecorder(Protocol):
    def event(
        self,
        regarding: Mapping[str, Any],
        *,
        type: str,
        reason: str,
        action: str,
        message: str,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        """Record an event (sent asynchronously, rate-limited and aggregated)."""


class WaitingPod(Protocol):
    @property
    def pod_info(self) -> PodInfo: ...

    def pending_plugins(self) -> list[str]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


class PodNominator(Protocol):
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...


class Handle(Protocol):
    """What a plugin can reach besides its args."""

    @property
    def profile_name(self) -> str: ...

    def snapshot(self) -> NodeInfoLister: ...

    @property
    def listers(self) -> ObjectLister: ...

    @property
    def client(self) -> ApiClient: ...

    @property
    def event_recorder(self) -> EventRecorder: ...

    @property
    def nominator(self) -> PodNominator: ...

    @property
    def metrics(self) -> SchedulerMetrics:
        """The scheduler's metrics (kube-scheduler's names), for plugins that record their
        own (preemption attempts and victims)."""
        ...

    def clock(self) -> float:
        """Monotonic seconds (injectable in tests)."""
        ...

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]: ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def reject_waiting_pod(self, uid: str) -> bool: ...

    def activate(self, pods: Iterable[dict[str, Any]]) -> None:
        """Move these pods (if queued and unschedulable/backing off) to activeQ now."""
        ...

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None: ...


PluginFactory = Callable[[PluginArgs, Handle], Plugin]
