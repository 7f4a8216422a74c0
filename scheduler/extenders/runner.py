"""The configured extenders as the scheduling cycle uses them (upstream's generic scheduler).

Filter runs after the Filter plugins, extender by extender in config order, each seeing only
the nodes the previous ones kept; Prioritize calls run concurrently after Score and add
``score × weight × MaxNodeScore / MaxExtenderPriority`` to each node's total; Preempt narrows
the preemption candidates; Bind lets the first interested binder extender bind instead of the
Bind plugins.  Filter, Preempt and Bind errors fail the attempt unless the extender is
``ignorable``; Prioritize errors are always ignored.  Every call is a coroutine: the
scheduling loop awaits the cycle only for pods some extender is interested in, so other
tasks (informers, binding) run while an extender answers, and pods no extender cares about
never leave the synchronous path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from scheduler.config.types import Extender
from scheduler.extenders.http import (
    MAX_EXTENDER_PRIORITY,
    ExtenderError,
    ExtenderMetrics,
    HTTPExtender,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, Diagnosis
from scheduler.objects.pod import PodInfo

__all__ = ["EXTENDER_NAME", "ExtenderError", "Extenders", "PreemptionVictims"]

log = structlog.get_logger(__name__)

# The name a pod rejected by an extender carries among its unschedulable plugins (upstream's
# framework.ExtenderName); the queue requeues it on any cluster event.
EXTENDER_NAME = "Extender"

_SCALE = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY

# node name -> (victims, PDB violations): the preemption candidates as extenders see them
PreemptionVictims = dict[str, tuple[list[PodInfo], int]]


class Extenders:
    """All configured extenders, in config order."""

    def __init__(
        self, configs: Sequence[Extender], *, metrics: ExtenderMetrics | None = None
    ) -> None:
        self.all = [HTTPExtender(c, metrics=metrics) for c in configs]
        self._cycle = [e for e in self.all if e.is_filter() or e.is_prioritizer()]

    def __bool__(self) -> bool:
        return bool(self.all)

    def in_cycle_for(self, pod: Mapping[str, Any]) -> bool:
        """Whether any extender filters or scores this pod (its cycle must then await)."""
        return any(e.is_interested(pod) for e in self._cycle)

    def preempts_for(self, pod: Mapping[str, Any]) -> bool:
        return any(e.supports_preemption() and e.is_interested(pod) for e in self.all)

    async def filter(
        self, pod_info: PodInfo, feasible: list[NodeInfo], diagnosis: Diagnosis
    ) -> list[NodeInfo]:
        """Narrow ``feasible`` through every interested filter extender; rejections go into
        ``diagnosis``.  Raises ExtenderError for a failed, non-ignorable extender."""
        pod = pod_info.pod
        before = len(feasible)
        for ext in self.all:
            if not feasible:
                break
            if not ext.is_filter() or not ext.is_interested(pod):
                continue
            try:
                result = await ext.filter(pod, feasible)
            except ExtenderError:
                if ext.ignorable:
                    continue
                raise
            statuses = diagnosis.node_to_status
            for name, reason in result.failed_and_unresolvable.items():
                statuses[name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)
            for name, reason in result.failed.items():
                if name not in result.failed_and_unresolvable:
                    statuses[name] = Status(Code.UNSCHEDULABLE, reason)
            feasible = result.nodes
        if len(feasible) != before:
            # Extenders have no cluster events: a pod they rejected retries on any event.
            diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
        return feasible

    async def prioritize(self, pod_info: PodInfo, nodes: list[NodeInfo]) -> list[int] | None:
        """Per node (aligned with ``nodes``), the weighted sum of every interested
        prioritizer's score; None when none is interested.  Failed calls add nothing."""
        pod = pod_info.pod
        prioritizers = [e for e in self.all if e.is_prioritizer() and e.is_interested(pod)]
        if not prioritizers:
            return None
        results = await asyncio.gather(
            *(e.prioritize(pod, nodes) for e in prioritizers), return_exceptions=True
        )
        totals = [0] * len(nodes)
        for ext, result in zip(prioritizers, results):
            if isinstance(result, BaseException):
                if not isinstance(result, ExtenderError):
                    log.error("extender prioritize raised", extender=ext.name,
                              error=repr(result))
                continue
            factor = ext.weight * _SCALE
            for i, node_info in enumerate(nodes):
                score = result.get(node_info.name)
                if score is not None:
                    totals[i] += score * factor
        return totals

    async def process_preemption(
        self, pod_info: PodInfo, victims: PreemptionVictims, nodes: Mapping[str, NodeInfo]
    ) -> PreemptionVictims:
        """Let every interested preempting extender narrow the candidates (node ->
        victims); victims come back as UIDs and are resolved against ``nodes``."""
        pod = pod_info.pod
        for ext in self.all:
            if not victims:
                break
            if not ext.supports_preemption() or not ext.is_interested(pod):
                continue
            try:
                meta = await ext.process_preemption(
                    pod, {n: ([p.pod for p in pods], pdb) for n, (pods, pdb) in victims.items()}
                )
                narrowed = _resolve_victims(ext, meta, nodes)
            except ExtenderError:
                if ext.ignorable:
                    continue
                raise
            victims = narrowed
        return victims

    async def bind(self, pod_info: PodInfo, node_name: str) -> Status | None:
        """The first interested binder extender binds; None when no extender took it."""
        for ext in self.all:
            if not ext.is_binder() or not ext.is_interested(pod_info.pod):
                continue
            try:
                await ext.bind(pod_info.pod, node_name)
            except ExtenderError as exc:
                if ext.ignorable:
                    continue
                return Status(Code.ERROR, str(exc), error=exc)
            return Status(Code.SUCCESS)
        return None

    async def close(self) -> None:
        for ext in self.all:
            await ext.close()


def _resolve_victims(
    ext: HTTPExtender,
    meta: Mapping[str, tuple[list[str], int]],
    nodes: Mapping[str, NodeInfo],
) -> PreemptionVictims:
    out: PreemptionVictims = {}
    for node_name, (uids, pdb) in meta.items():
        node_info = nodes.get(node_name)
        if node_info is None:
            raise ExtenderError(ext.name, "preempt",
                                f"the result names node {node_name!r}, which is not known")
        if not uids:
            # Upstream: a candidate must keep at least one victim; an ignorable extender
            # only loses that node.
            if ext.ignorable:
                continue
            raise ExtenderError(ext.name, "preempt",
                                f"expected at least one victim pod on node {node_name!r}")
        by_uid = {p.uid: p for p in node_info.pods}
        pods: list[PodInfo] = []
        for uid in uids:
            victim = by_uid.get(uid)
            if victim is None:
                raise ExtenderError(ext.name, "preempt",
                                    f"claims to preempt pod (UID {uid}) on node {node_name!r}, "
                                    "but the pod is not found on that node")
            pods.append(victim)
        out[node_name] = (pods, pdb)
    return out
