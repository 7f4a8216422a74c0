"""Shared scenario builders for the DefaultPreemption tests.

``Scenario`` wires real Filter plugins (NodeResourcesFit, TaintToleration) into a FakeHandle
whose nominated-pod filter runs the upstream two passes, so victim selection is checked
against the same plugins the scheduler runs.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.config.defaults import default_plugin_args
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.plugins.noderesources.fit import Fit
from scheduler.plugins.tainttoleration import TaintToleration
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos

LOW, MID, HIGH, VERY_HIGH = 0, 100, 1000, 10000


class NominatingHandle(FakeHandle):
    """FakeHandle whose nominated-pod filter counts nominated pods of equal or higher
    priority, as the runtime does (first pass with them, second without)."""

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        others = [
            p for p in self.nominator.nominated_pods_for_node(node_info.name)
            if p.priority >= pod_info.priority and p.uid != pod_info.uid
        ]
        if others:
            state_copy, info_copy = state.clone(), node_info.clone()
            for other in others:
                info_copy.add_pod(other)
                added = self.run_pre_filter_extension_add_pod(state_copy, pod_info, other, info_copy)
                if added is not None and not added.is_success():
                    return added
            status = super().run_filter_plugins_with_nominated_pods(state_copy, pod_info, info_copy)
            if status is not None and not status.is_success():
                return status
        return super().run_filter_plugins_with_nominated_pods(state, pod_info, node_info)


def node(name: str, *, pods: int = 110, cpu: str = "1", memory: str = "1Gi",
         taint: tuple[str, str] | None = None) -> dict[str, Any]:
    b = NodeBuilder(name).capacity(cpu=cpu, memory=memory, pods=pods)
    if taint is not None:
        b.taint(taint[0], taint[1], "NoSchedule")
    return b.obj()


def pod(name: str, *, priority: int | None = None, node_name: str = "", cpu: str | None = None,
        labels: Mapping[str, str] | None = None, start: str | None = None,
        namespace: str = "default", nominated: str = "", policy: str = "",
        deleting: bool = False, preempted: bool = False, memory: str | None = None,
        port: int = 0, tolerate: bool = False) -> dict[str, Any]:
    b = PodBuilder(name, namespace).uid(f"uid-{name}")
    if cpu is not None or memory is not None:
        b.req(cpu=cpu, memory=memory)
    else:
        b.container()
    if priority is not None:
        b.priority(priority)
    if node_name:
        b.node(node_name)
    if labels:
        b.labels(labels)
    if start:
        b.set("status.startTime", start)
    if nominated:
        b.nominated_node(nominated)
    if policy:
        b.preemption_policy(policy)
    if deleting:
        b.deletion_timestamp()
    if preempted:
        b.condition("DisruptionTarget", "True", "PreemptionByScheduler")
    if port:
        b.host_port(port)
    if tolerate:
        b.toleration("dedicated", "Equal", "x", "NoSchedule")
    return b.obj()


def pdb(name: str, *, match: Mapping[str, str] | None, allowed: int = 0,
        namespace: str = "default", disrupted: Sequence[str] = (),
        selector: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    elif match is not None:
        spec["selector"] = {"matchLabels": dict(match)}
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = {p: "2024-01-01T00:00:00Z" for p in disrupted}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}


class Scenario:
    """A cluster snapshot, the preemptor's cycle state and node statuses, and the plugin."""

    def __init__(
        self,
        preemptor: dict[str, Any],
        *,
        nodes: Sequence[dict[str, Any]],
        pods: Sequence[dict[str, Any]] = (),
        pdbs: Sequence[dict[str, Any]] = (),
        nominated: Mapping[str, Sequence[dict[str, Any]]] | None = None,
        args: Mapping[str, Any] | None = None,
        seed: int = 0,
        objects: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    ) -> None:
        self.infos = node_infos(nodes, pods)
        # The informer's pods: what the plugin reads to see a victim terminating or gone.
        self.handle = NominatingHandle(
            self.infos, objects={"poddisruptionbudgets": list(pdbs), "pods": list(pods),
                                 **{k: list(v) for k, v in (objects or {}).items()}}
        )
        for node_name, nominated_pods in (nominated or {}).items():
            self.handle.nominator.nominated[node_name] = [
                PodInfo.from_pod(p) for p in nominated_pods
            ]
        self.fit = Fit(default_plugin_args(names.NODE_RESOURCES_FIT), self.handle)
        self.taints = TaintToleration({}, self.handle)
        self.handle.filter_plugins = [self.taints, self.fit]
        self.handle.pre_filter_plugins = [self.fit]
        self.plugin = DefaultPreemption(args or {}, self.handle, rng=random.Random(seed))
        self.pod_info = PodInfo.from_pod(preemptor)
        self.state = CycleState()
        self.fit.pre_filter(self.state, self.pod_info, self.infos)

    def filter_statuses(self) -> dict[str, Status]:
        """What the scheduling cycle would hand PostFilter: every node that failed Filter."""
        out: dict[str, Status] = {}
        for info in self.infos:
            status = self.handle.run_filter_plugins_with_nominated_pods(
                self.state, self.pod_info, info
            )
            if status is not None and status.code != Code.SUCCESS:
                out[info.name] = status
        return out

    def post_filter(
        self, node_to_status: Mapping[str, Status] | None = None
    ) -> tuple[Any, Status | None]:
        statuses = self.filter_statuses() if node_to_status is None else node_to_status
        return self.plugin.post_filter(self.state, self.pod_info, statuses)

    def attempt(self, preemptor: dict[str, Any]) -> tuple[Any, Status | None]:
        """Run PostFilter for another pod against the same cluster and plugin."""
        self.pod_info = PodInfo.from_pod(preemptor)
        self.state = CycleState()
        self.fit.pre_filter(self.state, self.pod_info, self.infos)
        return self.post_filter()

    def info(self, name: str) -> NodeInfo:
        return next(i for i in self.infos if i.name == name)
