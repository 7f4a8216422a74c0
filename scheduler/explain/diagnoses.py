"""The daemon's memory of why each pending pod failed its last scheduling attempt.

kube-scheduler posts one aggregated line per failure and forgets the per-node detail; this
store keeps it (node -> first rejecting plugin and reason, the plugins, the time, the attempt
count) for ``/debug/pods/{namespace}/{name}`` and ``explain --from-scheduler``.

Memory is bounded: at most ``max_pods`` pods (least recently failed dropped first) and
``max_nodes`` node entries per pod (the rest are counted, and the per-reason histogram,
bounded by the number of distinct reasons, still covers every node).  An entry is dropped
when the pod is bound or deleted, seen through the pod informer.  Recording happens only
on failure, so a pod that schedules at the first attempt costs one dict lookup.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.framework.status import Status
from scheduler.framework.types import Diagnosis, FitError, QueuedPodInfo, reason_counts

DEFAULT_MAX_PODS = 1000
DEFAULT_MAX_NODES = 100


@dataclass(slots=True)
class PodDiagnosis:
    pod: str
    uid: str
    profile: str
    time: str  # RFC 3339, wall clock
    attempts: int
    result: str  # "unschedulable" or "error"
    message: str
    num_nodes: int
    unschedulable_plugins: list[str]
    pending_plugins: list[str]
    # node -> "Plugin: reason", at most max_nodes entries
    nodes: dict[str, str] = field(default_factory=dict)
    nodes_omitted: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    nominated_node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "uid": self.uid,
            "profile": self.profile,
            "time": self.time,
            "attempts": self.attempts,
            "result": self.result,
            "message": self.message,
            "numNodes": self.num_nodes,
            "unschedulablePlugins": list(self.unschedulable_plugins),
            "pendingPlugins": list(self.pending_plugins),
            "reasons": dict(self.reasons),
            "nodes": dict(self.nodes),
            "nodesOmitted": self.nodes_omitted,
            "nominatedNode": self.nominated_node,
        }


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _now() -> datetime:
    return datetime.now(UTC)


class DiagnosisStore:
    def __init__(
        self,
        *,
        max_pods: int = DEFAULT_MAX_PODS,
        max_nodes: int = DEFAULT_MAX_NODES,
        wall_clock: Callable[[], datetime] = _now,
    ) -> None:
        if max_pods < 1 or max_nodes < 0:
            raise ValueError("max_pods must be >= 1 and max_nodes >= 0")
        self._max_pods = max_pods
        self._max_nodes = max_nodes
        self._wall_clock = wall_clock
        self._entries: OrderedDict[str, PodDiagnosis] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, namespace: str, name: str) -> PodDiagnosis | None:
        return self._entries.get(f"{namespace}/{name}")

    def record(
        self,
        qpi: QueuedPodInfo,
        status: Status,
        *,
        profile: str,
        message: str,
        diagnosis: Diagnosis | None = None,
        nominated_node: str = "",
    ) -> None:
        """The pod's latest failed attempt replaces its previous one."""
        if diagnosis is None and isinstance(status.error, FitError):
            diagnosis = status.error.diagnosis
        num_nodes = status.error.num_all_nodes if isinstance(status.error, FitError) else 0
        nodes: dict[str, str] = {}
        omitted = 0
        reasons: dict[str, int] = {}
        unschedulable = set(qpi.unschedulable_plugins)
        pending = set(qpi.pending_plugins)
        if diagnosis is not None:
            unschedulable |= diagnosis.unschedulable_plugins
            pending |= diagnosis.pending_plugins
            statuses = diagnosis.node_to_status
            # The FailedScheduling message's histogram (counted once, for the message, when
            # the failure is a FitError's), in C loops: a failed cycle at 5000 nodes records
            # 5000 statuses.
            error = status.error
            reasons = dict(error.reason_histogram() if isinstance(error, FitError)
                           and error.diagnosis is diagnosis
                           else reason_counts(statuses.values()))
            for node, node_status in itertools.islice(statuses.items(), self._max_nodes):
                nodes[node] = f"{node_status.plugin or 'PreFilter'}: {node_status.message()}"
            omitted = len(statuses) - len(nodes)
            num_nodes = num_nodes or len(statuses)
        elif status.plugin and status.reasons:
            for reason in status.reasons:
                reasons[reason] = reasons.get(reason, 0) + 1
        entry = PodDiagnosis(
            pod=qpi.pod_info.key,
            uid=qpi.pod_info.uid,
            profile=profile,
            time=self._wall_clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            attempts=qpi.attempts,
            result="unschedulable" if status.is_rejected() else "error",
            message=message,
            num_nodes=num_nodes,
            unschedulable_plugins=sorted(unschedulable),
            pending_plugins=sorted(pending),
            nodes=nodes,
            nodes_omitted=omitted,
            reasons=reasons,
            nominated_node=nominated_node,
        )
        key = entry.pod
        self._entries.pop(key, None)
        self._entries[key] = entry
        while len(self._entries) > self._max_pods:
            self._entries.popitem(last=False)

    def forget(self, pod: dict[str, Any]) -> None:
        self._entries.pop(_key(pod), None)

    # Pod informer handlers: a bound or deleted pod has nothing left to explain.

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self._entries and (new.get("spec") or {}).get("nodeName"):
            self._entries.pop(_key(new), None)

    def on_pod_delete(self, pod: Any) -> None:
        if not self._entries:
            return
        inner = getattr(pod, "obj", pod)  # DeletedFinalStateUnknown carries the last state
        if isinstance(inner, dict):
            self._entries.pop(_key(inner), None)

    def watch(self, pod_informer: Any) -> None:
        """Drop entries as the pod informer shows pods bound or deleted."""
        pod_informer.add_handler(on_update=self.on_pod_update, on_delete=self.on_pod_delete)
