"""The Handle a profile's plugins receive: snapshot, listers, client, waiting pods, and the
framework's own Filter/PreFilter-extension runners (preemption needs them).

Plugins are constructed before their Framework has finished wiring its extension points, so
the runners go through ``attach`` rather than the constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    ApiClient,
    EventRecorder,
    NodeInfoLister,
    ObjectLister,
    PodNominator,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Status
from scheduler.framework.types import PreFilterResult, ReprieveFilter
from scheduler.framework.waiting_pods import WaitingPod, WaitingPodsMap
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo


class _FilterRunner(Protocol):
    """What the handle needs from the Framework (kept narrow to avoid an import cycle)."""

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]: ...

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

    def reprieve_filter(
        self, state: CycleState, *, leave_out: Collection[str]
    ) -> ReprieveFilter: ...


class FrameworkHandle:
    """Implements ``interfaces.Handle`` for one profile."""

    def __init__(
        self,
        *,
        profile_name: str,
        snapshot_provider: Callable[[], NodeInfoLister],
        listers: ObjectLister,
        client: ApiClient,
        event_recorder: EventRecorder,
        nominator: PodNominator,
        activate: Callable[[Iterable[dict[str, Any]]], None],
        clock: Callable[[], float],
        waiting_pods: WaitingPodsMap,
        metrics: SchedulerMetrics,
    ) -> None:
        self._profile_name = profile_name
        self._snapshot_provider = snapshot_provider
        self._listers = listers
        self._client = client
        self._event_recorder = event_recorder
        self._nominator = nominator
        self._activate = activate
        self._clock = clock
        self._waiting_pods = waiting_pods
        self._metrics = metrics
        self._runner: _FilterRunner | None = None

    def attach(self, runner: _FilterRunner) -> None:
        self._runner = runner

    def _framework(self) -> _FilterRunner:
        if self._runner is None:
            raise RuntimeError("the framework is still being constructed")
        return self._runner

    @property
    def profile_name(self) -> str:
        return self._profile_name

    def snapshot(self) -> NodeInfoLister:
        return self._snapshot_provider()

    @property
    def listers(self) -> ObjectLister:
        return self._listers

    @property
    def client(self) -> ApiClient:
        return self._client

    @property
    def event_recorder(self) -> EventRecorder:
        return self._event_recorder

    @property
    def nominator(self) -> PodNominator:
        return self._nominator

    @property
    def waiting_pods(self) -> WaitingPodsMap:
        return self._waiting_pods

    @property
    def metrics(self) -> SchedulerMetrics:
        return self._metrics

    def clock(self) -> float:
        return self._clock()

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]:
        return self._waiting_pods.iterate()

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting_pod = self._waiting_pods.get(uid)
        if waiting_pod is None:
            return False
        waiting_pod.reject("", "removed")
        return True

    def activate(self, pods: Iterable[dict[str, Any]]) -> None:
        self._activate(pods)

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """PreFilter for another pod than the cycle's (a gang's preemption plans for every
        member: a member of another shape needs its own state)."""
        return self._framework().run_pre_filter_plugins(state, pod_info, nodes)

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._framework().run_filter_plugins_with_nominated_pods(state, pod_info, node_info)

    def reprieve_filter(
        self, state: CycleState, *, leave_out: Collection[str]
    ) -> ReprieveFilter:
        """Preemption's Filters for its dry run (``FilterSteps.reprieve_filter``)."""
        return self._framework().reprieve_filter(state, leave_out=leave_out)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._framework().run_pre_filter_extension_add_pod(
            state, pod_to_schedule, pod_to_add, node_info
        )

    def run_pre_filter_extension_remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        return self._framework().run_pre_filter_extension_remove_pod(
            state, pod_to_schedule, pod_to_remove, node_info
        )


if TYPE_CHECKING:
    from scheduler.framework.interfaces import Handle
    from scheduler.framework.interfaces import WaitingPod as WaitingPodProtocol

    def _implements_handle(handle: FrameworkHandle) -> Handle:
        return handle

    def _implements_waiting_pod(waiting_pod: WaitingPod) -> WaitingPodProtocol:
        return waiting_pod
