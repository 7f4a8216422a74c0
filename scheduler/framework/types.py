"""Values passed between the queue, the framework and the scheduling cycle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from itertools import chain

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Status
from scheduler.objects.pod import PodInfo

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue, with the bookkeeping backoff and requeueing need."""

    pod_info: PodInfo
    # When the pod was last added to a queue (ordering ties, backoff start).
    timestamp: float
    # Scheduling attempts so far (backoff doubles with each).
    attempts: int = 0
    # When the pod was first added; the SLI histogram measures from here.
    initial_attempt_timestamp: float | None = None
    # Plugins that rejected the pod in its last attempt: only their events move it.
    unschedulable_plugins: set[str] = field(default_factory=set)
    # Plugins that answered Pending: the pod waits for their events, with no backoff.
    pending_plugins: set[str] = field(default_factory=set)
    # PreEnqueue rejected the pod (scheduling gates, a missing PodGroup ...).
    gated: bool = False
    gating_plugin: str = ""
    consecutive_errors: int = 0
    # Moved out of the unschedulable pool by the leftover flush (not by an event), counted
    # in scheduler_pod_scheduled_after_flush_total if its next attempt succeeds.
    flushed: bool = False

    @property
    def pod(self) -> dict[str, object]:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key


@dataclass(slots=True)
class NodeScore:
    name: str
    score: int


@dataclass(slots=True)
class NodeScoreResult:
    """One node's scores after normalization and weighting (upstream NodePluginScores)."""

    name: str
    total_score: int = 0
    # plugin name -> weighted score, in the order the score plugins ran
    scores: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class PreFilterResult:
    """A PreFilter may narrow the nodes worth filtering (None = all nodes)."""

    node_names: set[str] | None = None
    # the nodes left out are ones the plugin's own Filter would reject (DynamicResources'
    # free-device index): when none of the others fits, they are filtered too, so that each
    # gets the status the filters give it (not "node(s) didn't satisfy plugin(s)")
    shortcut: bool = False

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return PreFilterResult(None if self.node_names is None else set(self.node_names),
                                   shortcut=self.shortcut)
        if self.all_nodes():
            return PreFilterResult(set(other.node_names or ()), shortcut=other.shortcut)
        return PreFilterResult((self.node_names or set()) & (other.node_names or set()),
                               shortcut=self.shortcut and other.shortcut)


@dataclass(slots=True)
class PostFilterResult:
    """A PostFilter plugin's nomination for the pod: a node, or "" to clear the pod's
    nomination (return None for no opinion)."""

    nominated_node_name: str = ""


@dataclass(slots=True)
class Diagnosis:
    """Why a pod did not fit: per-node statuses plus the plugins that rejected it."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    # Set when PreFilter rejected the pod for every node at once.
    pre_filter_status: Status | None = None


class FitError(Exception):
    """No node fits the pod.  ``str()`` is the upstream FailedScheduling message."""

    def __init__(self, *, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        message = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        pre_filter_msg = self.diagnosis.pre_filter_msg
        if pre_filter_msg:
            message += f" {pre_filter_msg}."
        else:
            # PreFilter rejections are copied to every node; counting them again would repeat
            # the same sentence N times, so the histogram is built only when PreFilter passed.
            # One C-level count over every node's reasons (a preemptor fails on every node).
            histogram: Counter[str] = Counter(chain.from_iterable(
                status.reasons for status in self.diagnosis.node_to_status.values()))
            if histogram:
                parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
                message += f" {', '.join(parts)}."
        if self.diagnosis.post_filter_msg:
            # Appended as is: PostFilter messages (preemption's) end with their own period.
            message += f" {self.diagnosis.post_filter_msg}"
        return message


@dataclass(slots=True)
class ScoreTable:
    """Per-node scores as columns: node names, weighted totals, weighted scores per plugin."""

    names: list[str]
    totals: list[int]
    by_plugin: dict[str, list[int]]
    # (the highest total, how many nodes have it) when the table's maker kept them (a
    # batched window's scores, updated with its changed nodes); None: the host pick counts.
    best: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class ReprieveFilter:
    """What preemption's dry run needs of the runtime for one attempt (``reprieve_filter``).

    ``dependent``: Filter with the node's nominated pods, running only the plan's plugins
    that may answer differently as pods leave or join a node; ``independent``: the plan's
    other plugins (their answer depends on the node object and the pod only), without
    nominated pods; ``dependent_names``: the first's plugins in plan order;
    ``extensions``: whether any PreFilter extension (AddPod/RemovePod) is active;
    ``nominated_nodes``: a live view of the nodes holding nominated pods (None: unknown).
    """

    dependent: Callable[[CycleState, PodInfo, NodeInfo], Status | None]
    independent: Callable[[CycleState, PodInfo, NodeInfo], Status | None]
    dependent_names: tuple[str, ...]
    extensions: bool
    nominated_nodes: Collection[str] | None
