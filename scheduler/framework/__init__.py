"""The scheduling framework: statuses, cycle state, cluster events, plugin interfaces, runtime.

Import the vocabulary from here; plugins need nothing else from the framework.
"""

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status, code_of, is_success
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Diagnosis,
    FitError,
    NodeScore,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)

__all__ = [
    "ActionType", "BindPlugin", "ClusterEvent", "ClusterEventWithHint", "Code", "CycleState",
    "Diagnosis", "EnqueueExtensions", "EventResource", "FilterPlugin", "FitError", "Handle",
    "MAX_NODE_SCORE", "MIN_NODE_SCORE", "NodeInfo", "NodeScore", "PermitPlugin", "Plugin",
    "PostBindPlugin", "PostFilterPlugin", "PostFilterResult", "PreBindPlugin",
    "PreEnqueuePlugin", "PreFilterPlugin", "PreFilterResult", "PreScorePlugin",
    "QueueSortPlugin", "QueueingHint", "QueuedPodInfo", "ReservePlugin", "ScorePlugin",
    "Status", "code_of", "is_success",
]
