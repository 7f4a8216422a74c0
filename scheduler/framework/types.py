"""Values passed between the queue, the framework and the scheduling cycle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import TYPE_CHECKING

from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.framework.cycle_state import CycleState
    from scheduler.framework.node_info import NodeInfo

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


class Diagnosis:
    """Why a pod did not fit: per-node statuses plus the plugins that rejected it.

    The Filter walk records its rejections in bulk (``add_rejected``: a chunk of nodes and
    their statuses, None where the node passed) and they are expanded into
    ``node_to_status`` and the plugin sets only when one of them is read: a cycle that
    finds a host reads none of them (only ``num_rejected``), so the ~130 nodes a
    TopologySpreading pod is rejected on cost no per-node bookkeeping.  A Diagnosis must be
    read within the cycle that filled it (the failure path does): its chunks hold the
    snapshot's NodeInfos, not copies.
    """

    __slots__ = ("_node_to_status", "_unschedulable_plugins", "_pending_plugins", "_chunks",
                 "_pending_count", "pre_filter_msg", "post_filter_msg", "pre_filter_status")

    def __init__(
        self,
        *,
        node_to_status: dict[str, Status] | None = None,
        unschedulable_plugins: set[str] | None = None,
        pending_plugins: set[str] | None = None,
        pre_filter_msg: str = "",
        post_filter_msg: str = "",
        pre_filter_status: Status | None = None,
    ) -> None:
        self._node_to_status: dict[str, Status] = (
            {} if node_to_status is None else node_to_status)
        self._unschedulable_plugins: set[str] = (
            set() if unschedulable_plugins is None else unschedulable_plugins)
        self._pending_plugins: set[str] = set() if pending_plugins is None else pending_plugins
        # Rejections not expanded yet: (nodes, their statuses (None: passed)), in walk order.
        self._chunks: list[tuple[Sequence[NodeInfo], Sequence[Status | None] | _Repeat]] = []
        self._pending_count = 0
        self.pre_filter_msg = pre_filter_msg
        self.post_filter_msg = post_filter_msg
        # Set when PreFilter rejected the pod for every node at once.
        self.pre_filter_status = pre_filter_status

    def add_rejected(self, nodes: Sequence[NodeInfo], statuses: Sequence[Status | None],
                     count: int) -> None:
        """Record the rejections among ``nodes`` (``statuses[i]`` is node i's; None where
        it passed), ``count`` of them, for expansion when read.  Nodes not already in the
        diagnosis (a walk examines a node once); no status is an Error (the walk raises
        those)."""
        if count:
            self._chunks.append((nodes, statuses))
            self._pending_count += count

    def reject_all(self, nodes: Sequence[NodeInfo], status: Status) -> None:
        """Every one of ``nodes`` rejected with the same ``status`` (a PreFilter
        rejection: upstream's status for absent nodes)."""
        self._chunks.append((nodes, _Repeat(status, len(nodes))))
        self._pending_count += len(nodes)

    @property
    def num_rejected(self) -> int:
        """How many nodes have a status (without expanding the bulk rejections)."""
        return len(self._node_to_status) + self._pending_count

    def _expand(self) -> None:
        chunks = self._chunks
        self._chunks = []
        self._pending_count = 0
        out = self._node_to_status
        plugins = self._unschedulable_plugins
        for nodes, statuses in chunks:
            if isinstance(statuses, _Repeat):
                status = statuses.status
                out.update(dict.fromkeys(map(_NAME, nodes), status))
                rejected: list[Status] = [status]
            else:
                keep = list(map(is_not, statuses, repeat(None)))
                if all(keep):  # a failed cycle's chunk: every node rejected, no compress
                    rejected = statuses  # type: ignore[assignment]
                    out.update(zip(map(_NAME, nodes), rejected))
                else:
                    rejected = list(compress(statuses, keep))  # type: ignore[arg-type]
                    out.update(zip(map(_NAME, compress(nodes, keep)), rejected))
            plugins.update(filter(None, map(_PLUGIN, rejected)))
            if Code.PENDING in map(_CODE, rejected):
                self._pending_plugins.update(
                    s.plugin for s in rejected if s.code == Code.PENDING and s.plugin)

    @property
    def node_to_status(self) -> dict[str, Status]:
        if self._chunks:
            self._expand()
        return self._node_to_status

    @node_to_status.setter
    def node_to_status(self, value: dict[str, Status]) -> None:
        self._chunks = []
        self._pending_count = 0
        self._node_to_status = value

    @property
    def unschedulable_plugins(self) -> set[str]:
        if self._chunks:
            self._expand()
        return self._unschedulable_plugins

    @property
    def pending_plugins(self) -> set[str]:
        # Read-only, as unschedulable_plugins: written through the set (``.add``) only.
        if self._chunks:
            self._expand()
        return self._pending_plugins

    def __repr__(self) -> str:
        return (f"Diagnosis(node_to_status={self.node_to_status!r}, "
                f"unschedulable_plugins={self.unschedulable_plugins!r}, "
                f"pending_plugins={self.pending_plugins!r}, "
                f"pre_filter_msg={self.pre_filter_msg!r}, "
                f"post_filter_msg={self.post_filter_msg!r})")


class _Repeat:
    """One status for every node of a chunk (``Diagnosis.reject_all``)."""

    __slots__ = ("status", "size")

    def __init__(self, status: Status, size: int) -> None:
        self.status = status
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Status:
        if not -self.size <= index < self.size:
            raise IndexError(index)
        return self.status


_NAME = attrgetter("name")
_PLUGIN = attrgetter("plugin")
_CODE = attrgetter("code")
_REASONS = attrgetter("reasons")


def reason_counts(statuses: Iterable[Status]) -> dict[str, int]:
    """How many statuses give each reason (a status counts once per reason it gives):
    upstream FitError's histogram.  Statuses are grouped by their reasons in C loops
    (a failed cycle at 5000 nodes has 5000 statuses, nearly all alike), then each
    distinct group adds its count to its reasons."""
    counts: dict[str, int] = {}
    for reasons, count in Counter(map(tuple, map(_REASONS, statuses))).items():
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + count
    return counts


class FitError(Exception):
    """No node fits the pod.  ``str()`` is the upstream FailedScheduling message."""

    def __init__(self, *, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        # (the statuses counted, how many there were, the counts): reason_histogram's.
        self._counted: tuple[dict[str, Status], int, dict[str, int]] | None = None

    def reason_histogram(self) -> dict[str, int]:
        """``reason_counts`` of the diagnosis' statuses: the message's histogram, which the
        diagnosis store records too.  Counted once for both (5000 statuses at 5000 nodes);
        counted again if the statuses were replaced or added to since (the Filter walk
        writes them before the FitError is made, a caller may set new ones)."""
        statuses = self.diagnosis.node_to_status
        counted = self._counted
        if counted is None or counted[0] is not statuses or counted[1] != len(statuses):
            counted = self._counted = (statuses, len(statuses), reason_counts(statuses.values()))
        return counted[2]

    def __str__(self) -> str:
        message = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        pre_filter_msg = self.diagnosis.pre_filter_msg
        if pre_filter_msg:
            message += f" {pre_filter_msg}."
        else:
            # PreFilter rejections are copied to every node; counting them again would repeat
            # the same sentence N times, so the histogram is built only when PreFilter passed.
            histogram = self.reason_histogram()
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
    ``nominated_nodes``: a live view of the nodes holding nominated pods (None: unknown);
    ``after_independent``: the plan's plugins placed after every plugin of ``independent``
    (a node the cycle's Filter rejected with one of these passed ``independent`` already:
    Filter stops at the first plugin that rejects).
    """

    dependent: Callable[[CycleState, PodInfo, NodeInfo], Status | None]
    independent: Callable[[CycleState, PodInfo, NodeInfo], Status | None]
    dependent_names: tuple[str, ...]
    extensions: bool
    nominated_nodes: Collection[str] | None
    after_independent: frozenset[str] = frozenset()
