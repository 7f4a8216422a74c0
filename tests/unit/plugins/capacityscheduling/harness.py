"""A cluster for CapacityScheduling tests: the real Framework of the shipped profile (so the
PreFilter rules, NodeResourcesFit and the preemption dry run all run), quotas and PDBs in
the listers, the scheduling cycle's order (PreFilter, Filter, PostFilter) in ``schedule``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.config.defaults import shipped_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult
from scheduler.objects.pod import PodInfo
from scheduler.plugins.capacityscheduling.plugin import CapacityScheduling
from scheduler.queue.nominator import Nominator
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import DictListers, FakeApiClient, SnapshotLister, in_tree_framework, node_infos

LOW, MID, HIGH = 0, 100, 1000


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return NodeBuilder(name).capacity(cpu=cpu, memory="64Gi", pods=110).obj()


def pod(name: str, ns: str, cpu: str, *, node_name: str = "", priority: int = LOW,
        labels: Mapping[str, str] | None = None, phase: str = "") -> dict[str, Any]:
    b = PodBuilder(name, ns).uid(f"uid-{ns}-{name}").req(cpu=cpu).priority(priority)
    if node_name:
        b.node(node_name)
    if labels:
        b.labels(labels)
    if phase:
        b.phase(phase)
    return b.obj()


def quota(ns: str, *, min: Mapping[str, Any] | None = None, max: Mapping[str, Any] | None = None,
          name: str = "quota", rv: str = "1", annotations: Mapping[str, str] | None = None,
          ) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if min is not None:
        spec["min"] = dict(min)
    if max is not None:
        spec["max"] = dict(max)
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": meta, "spec": spec}


class Cluster:
    def __init__(self, nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], *,
                 quotas: Sequence[dict[str, Any]] = (), pdbs: Sequence[dict[str, Any]] = (),
                 namespaces: Sequence[dict[str, Any]] = (),
                 podgroups: Sequence[dict[str, Any]] = (),
                 claims: Sequence[dict[str, Any]] = ()) -> None:
        self.pods = list(pods)
        self.snapshot = SnapshotLister(node_infos(nodes, pods))
        self.listers = DictListers({"elasticquotas": list(quotas), "poddisruptionbudgets": list(pdbs),
                                    "pods": list(pods), "namespaces": list(namespaces),
                                    "podgroups": list(podgroups),
                                    "resourceclaims": list(claims)})
        self.client = FakeApiClient()
        self.nominator = Nominator()
        self.fwk = in_tree_framework(shipped_config().profiles[0], snapshot_provider=lambda: self.snapshot,
                                     listers=self.listers, nominator=self.nominator, client=self.client)
        plugin = self.fwk.plugins["CapacityScheduling"]
        assert isinstance(plugin, CapacityScheduling)
        self.plugin = plugin

    def pre_filter(self, p: dict[str, Any]) -> Status | None:
        _, status, _ = self.fwk.run_pre_filter_plugins(CycleState(), PodInfo.from_pod(p),
                                                        self.snapshot.list())
        return status

    def schedule(self, p: dict[str, Any]) -> tuple[PostFilterResult | None, Status | None,
                                                    Status | None]:
        """(PostFilter result, its status, the PreFilter/Filter status that led there);
        PostFilter runs only when no node fits, as in the scheduling cycle."""
        pod_info = PodInfo.from_pod(p)
        state = CycleState()
        infos = self.snapshot.list()
        _, pre, _ = self.fwk.run_pre_filter_plugins(state, pod_info, infos)
        node_to_status: dict[str, Status] = {}
        if pre is not None and not pre.is_success():
            node_to_status = {i.name: pre for i in infos}
            first = pre
        else:
            first = None
            for info in infos:
                s = self.fwk.run_filter_plugins_with_nominated_pods(state, pod_info, info)
                if s is not None and not s.is_success():
                    node_to_status[info.name] = s
                    first = first or s
            if len(node_to_status) < len(infos):
                return None, None, None  # some node fits
        result, post = self.fwk.run_post_filter_plugins(state, pod_info, node_to_status)
        return result, post, first

    async def victims(self) -> list[str]:
        """Names of the pods the preemption deleted."""
        await self.plugin.wait_idle()
        return sorted(path.rsplit("/", 1)[-1] for m, path, _ in self.client.requests
                      if m == "DELETE")


def code(status: Status | None) -> Code:
    return Code.SUCCESS if status is None else status.code
