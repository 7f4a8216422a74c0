"""Builders and fakes shared by the Coscheduling tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.cache.snapshot import Snapshot
from scheduler.framework.types import QueuedPodInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL
from scheduler.plugins.coscheduling.plugin import Coscheduling
from tests.builders import PodBuilder, make_node
from tests.fakes import FakeHandle

WALL_EPOCH = 1_700_000_000.0  # the fake wall clock at plugin construction


def pod_group(name: str = "g", min_member: int | Any = 3, *, namespace: str = "default",
              min_resources: Mapping[str, Any] | None = None, timeout: int | None = None,
              created: str = "2023-11-14T22:13:20Z", rv: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created,
                     "resourceVersion": rv, "uid": f"pg-{namespace}-{name}"},
        "spec": spec,
    }


def member(name: str, group: str | None = "g", *, namespace: str = "default",
           node: str | None = None, cpu: str | None = None, phase: str | None = None,
           priority: int | None = None) -> dict[str, Any]:
    b = PodBuilder(name, namespace)
    if group:
        b.labels({POD_GROUP_LABEL: group})
    if cpu:
        b.req(cpu=cpu)
    else:
        b.container()
    if node:
        b.node(node)
    if phase:
        b.phase(phase)
    if priority is not None:
        b.priority(priority)
    return b.obj()


class FakeWaitingPod:
    """A pod parked at Permit: records allow/reject."""

    def __init__(self, pod: dict[str, Any], plugins: Sequence[str] = ("Coscheduling",)) -> None:
        self._pod_info = PodInfo.from_pod(pod)
        self.pending = list(plugins)
        self.allowed_by: list[str] = []
        self.rejected: tuple[str, str] | None = None

    @property
    def pod_info(self) -> PodInfo:
        return self._pod_info

    def pending_plugins(self) -> list[str]:
        return list(self.pending)

    def allow(self, plugin: str) -> None:
        self.allowed_by.append(plugin)
        if plugin in self.pending:
            self.pending.remove(plugin)

    def reject(self, plugin: str, message: str) -> None:
        if self.rejected is None:
            self.rejected = (plugin, message)


class Cluster:
    """A FakeHandle over a real Snapshot (so snapshot generations work), with listers of
    PodGroups and pods, waiting pods and a controllable clock."""

    def __init__(
        self,
        *,
        nodes: Sequence[dict[str, Any]] = (),
        pods: Sequence[dict[str, Any]] = (),
        groups: Sequence[dict[str, Any]] = (),
        waiting: Sequence[dict[str, Any]] = (),
        args: Mapping[str, Any] | None = None,
        list_assigned: bool = True,
    ) -> None:
        if not nodes:
            nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
        self.nodes = list(nodes)
        self.pods = list(pods)
        self.handle = FakeHandle(objects={"podgroups": list(groups), "pods": []})
        self.handle.now = 1000.0
        self.list_assigned = list_assigned
        self.refresh()
        for pod in waiting:
            self.park(pod)
        self.plugin = Coscheduling(dict(args or {}), self.handle,
                                   wall_clock=lambda: WALL_EPOCH)

    def refresh(self) -> None:
        """Rebuild the snapshot and the pod lister from ``self.pods``."""
        assigned = [p for p in self.pods if (p.get("spec") or {}).get("nodeName")]
        self.handle._snapshot = Snapshot.from_objects(self.nodes, assigned)  # type: ignore[assignment]
        listed = self.pods if self.list_assigned else [
            p for p in self.pods if p not in assigned]
        self.handle.listers.objects["pods"] = list(listed)

    def park(self, pod: dict[str, Any]) -> FakeWaitingPod:
        wp = FakeWaitingPod(pod)
        self.handle.waiting[wp.pod_info.uid] = wp
        return wp

    def set_groups(self, *groups: dict[str, Any]) -> None:
        self.handle.listers.objects["podgroups"] = list(groups)

    def advance(self, seconds: float) -> None:
        self.handle.now += seconds


def qpi(pod: dict[str, Any], *, ts: float = 0.0, initial: float | None = None) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo.from_pod(pod), timestamp=ts,
                         initial_attempt_timestamp=ts if initial is None else initial)
