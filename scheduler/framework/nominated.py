"""Filtering a pod with the nominated pods of a node counted in (upstream's
``RunFilterPluginsWithNominatedPods`` and ``addGENominatedPods``).

Pods that preemption nominated to a node hold the room it made for them against pods of
equal or lower priority. Kept apart from the runtime because it is one self-contained
algorithm over a node's copy and a cycle state's copy.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PodNominator
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo

log = structlog.get_logger(__name__)

RunFilter = Callable[[CycleState, PodInfo, NodeInfo], "Status | None"]
AddPodExtension = Callable[[CycleState, PodInfo, PodInfo, NodeInfo], "Status | None"]


def filter_with_nominated_pods(
    state: CycleState,
    pod_info: PodInfo,
    node_info: NodeInfo,
    *,
    nominator: PodNominator,
    run_filter: RunFilter,
    add_pod_extension: AddPodExtension,
) -> Status | None:
    """Two passes: first with the node's nominated pods of equal or higher priority added
    (they must not lose the room preemption made for them), then, if some were added and the
    first pass succeeded, without them (pod affinity may need them absent). Both must pass."""
    status: Status | None = None
    pods_added = False
    for attempt in range(2):
        state_to_use = state
        info_to_use = node_info
        if attempt == 0:
            added = _add_nominated_pods(state, pod_info, node_info, nominator=nominator,
                                        add_pod_extension=add_pod_extension)
            if isinstance(added, Status):
                return added
            pods_added, state_to_use, info_to_use = added
        elif not pods_added or status is not None:
            break
        status = run_filter(state_to_use, pod_info, info_to_use)
        if status is not None and status.code != Code.SUCCESS and not status.is_rejected():
            return status
    return status


def _add_nominated_pods(
    state: CycleState,
    pod_info: PodInfo,
    node_info: NodeInfo,
    *,
    nominator: PodNominator,
    add_pod_extension: AddPodExtension,
) -> tuple[bool, CycleState, NodeInfo] | Status:
    """Copies of the state and node with the equal-or-higher-priority nominated pods added
    (the originals when there are none)."""
    if node_info.node is None:
        return False, state, node_info
    try:
        nominated = nominator.nominated_pods_for_node(node_info.name)
    except Exception as exc:
        log.exception("nominator failed", node=node_info.name)
        return Status.from_error(exc)
    if not nominated:
        return False, state, node_info
    info_out: NodeInfo | None = None
    state_out: CycleState | None = None
    for other in nominated:
        if other.priority >= pod_info.priority and other.uid != pod_info.uid:
            if info_out is None or state_out is None:
                info_out = node_info.clone()
                state_out = state.clone()
            info_out.add_pod(other)
            status = add_pod_extension(state_out, pod_info, other, info_out)
            if status is not None and status.code != Code.SUCCESS:
                return status
    if info_out is None or state_out is None:
        return False, state, node_info
    return True, state_out, info_out
