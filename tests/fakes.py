"""In-memory fakes of what the framework hands plugins, for unit tests.

Integration tests use the real pieces against the sandbox; unit tests of a plugin need only a
snapshot of NodeInfos, listers of other objects and a client that records what it was asked.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.metrics import SchedulerMetrics
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Status
from scheduler.objects.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.snapshot import Snapshot
    from scheduler.config.types import Profile
    from scheduler.framework.registry import Registry
    from scheduler.framework.runtime import Framework


def node_infos(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]] = ()) -> list[NodeInfo]:
    """NodeInfos for ``nodes`` holding every pod whose spec.nodeName names one of them (a
    malformed one as the informer path accounts it: ``PodInfo.from_assigned_pod``)."""
    by_name = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name in by_name:
            by_name[node_name].add_pod(PodInfo.from_assigned_pod(pod)[0])
    return list(by_name.values())


class SnapshotLister:
    def __init__(self, infos: Iterable[NodeInfo]) -> None:
        self._infos = list(infos)
        self._by_name = {i.name: i for i in self._infos}

    def list(self) -> list[NodeInfo]:
        return self._infos

    def get(self, node_name: str) -> NodeInfo | None:
        return self._by_name.get(node_name)

    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]:
        return [i for i in self._infos if i.pods_with_affinity]

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]:
        return [i for i in self._infos if i.pods_with_required_anti_affinity]


class DictListers:
    """Object listers over dicts: ``DictListers({"persistentvolumes": [pv, ...]})``."""

    def __init__(self, objects: Mapping[str, Iterable[dict[str, Any]]] | None = None) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {
            k: list(v) for k, v in (objects or {}).items()
        }

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        for obj in self.objects.get(resource, []):
            meta = obj.get("metadata") or {}
            if meta.get("name") == name and (meta.get("namespace") or "") == (namespace or ""):
                return obj
        return None

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        items = self.objects.get(resource, [])
        if namespace is None:
            return list(items)
        return [o for o in items if (o.get("metadata") or {}).get("namespace") == namespace]

    def by_index(self, resource: str, index: str, value: str,
                 key: Callable[[dict[str, Any]], str | None]) -> builtins.list[dict[str, Any]]:
        return [o for o in self.objects.get(resource, []) if key(o) == value]


def _object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class WatchingListers(DictListers):
    """DictListers that deliver their objects' events right after changing them, as the
    informer-backed listers do: ``watch`` replays the objects held as adds, then ``put`` and
    ``delete`` call the handlers. A resource absent from ``objects`` has no informer
    (``watch`` raises KeyError); ``listed`` records the resource of every ``list`` call."""

    def __init__(self, objects: Mapping[str, Iterable[dict[str, Any]]] | None = None) -> None:
        super().__init__(objects)
        self.handlers: dict[str, builtins.list[tuple[Callable[..., None], ...]]] = {}
        self.listed: builtins.list[str] = []

    def list(self, resource: str, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        self.listed.append(resource)
        return super().list(resource, namespace)

    def watch(self, resource: str, *, on_add: Callable[[dict[str, Any]], None],
              on_update: Callable[[dict[str, Any], dict[str, Any]], None],
              on_delete: Callable[[dict[str, Any]], None]) -> None:
        if resource not in self.objects:
            raise KeyError(resource)
        self.handlers.setdefault(resource, []).append((on_add, on_update, on_delete))
        for obj in self.objects[resource]:
            on_add(obj)

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        """Create or replace ``obj`` (by namespace and name), then tell the handlers."""
        items = self.objects[resource]
        for i, current in enumerate(items):
            if _object_key(current) == _object_key(obj):
                items[i] = obj
                for _add, update, _delete in self.handlers.get(resource, []):
                    update(current, obj)
                return
        items.append(obj)
        for add, _update, _delete in self.handlers.get(resource, []):
            add(obj)

    def delete(self, resource: str, obj: dict[str, Any]) -> None:
        key = _object_key(obj)
        self.objects[resource] = [o for o in self.objects[resource] if _object_key(o) != key]
        for _add, _update, delete in self.handlers.get(resource, []):
            delete(obj)


@dataclass
class FakeResponse:
    status: int
    body: Any


@dataclass
class FakeApiClient:
    """Records requests; answers from ``responses[(method, path)]`` (a list consumed in order) or 200 {}."""

    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    responses: dict[tuple[str, str], list[FakeResponse]] = field(default_factory=dict)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        discard_ok_body: bool = False,
    ) -> FakeResponse:
        self.requests.append((method, path, body))
        queued = self.responses.get((method, path))
        if queued:
            return queued.pop(0)
        return FakeResponse(200 if method != "POST" else 201, {})


@dataclass
class FakeEventRecorder:
    events: list[dict[str, Any]] = field(default_factory=list)

    def event(
        self,
        regarding: Mapping[str, Any],
        *,
        type: str,
        reason: str,
        action: str,
        message: str,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        self.events.append(
            {"regarding": regarding, "type": type, "reason": reason, "action": action,
             "message": message}
        )


class FakeNominator:
    def __init__(self, nominated: Mapping[str, list[PodInfo]] | None = None) -> None:
        self.nominated = dict(nominated or {})

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.nominated.get(node_name, []))

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str | None = None) -> None:
        for pods in self.nominated.values():
            pods[:] = [p for p in pods if p.uid != pod_info.uid]
        if node_name:
            self.nominated.setdefault(node_name, []).append(pod_info)


class FakeHandle:
    """A Handle over fixed NodeInfos and object lists.  Filter helpers run the given plugins."""

    def __init__(
        self,
        infos: Iterable[NodeInfo] = (),
        *,
        objects: Mapping[str, Iterable[dict[str, Any]]] | None = None,
        profile_name: str = "py-scheduler",
        filter_plugins: Sequence[Any] = (),
        pre_filter_plugins: Sequence[Any] = (),
        client: Any = None,
    ) -> None:
        self._snapshot = SnapshotLister(infos)
        self._listers = DictListers(objects)
        self._client = client if client is not None else FakeApiClient()
        self._recorder = FakeEventRecorder()
        self._nominator = FakeNominator()
        self._profile_name = profile_name
        self.filter_plugins = list(filter_plugins)
        self.pre_filter_plugins = list(pre_filter_plugins)
        self.activated: list[dict[str, Any]] = []
        self.waiting: dict[str, Any] = {}
        self.now = time.monotonic()
        self.metrics = SchedulerMetrics()

    @property
    def profile_name(self) -> str:
        return self._profile_name

    def snapshot(self) -> SnapshotLister:
        return self._snapshot

    def set_snapshot(self, infos: Iterable[NodeInfo]) -> None:
        self._snapshot = SnapshotLister(infos)

    @property
    def listers(self) -> DictListers:
        return self._listers

    @property
    def client(self) -> Any:
        return self._client

    @property
    def event_recorder(self) -> FakeEventRecorder:
        return self._recorder

    @property
    def nominator(self) -> FakeNominator:
        return self._nominator

    def clock(self) -> float:
        return self.now

    def iterate_waiting_pods(self) -> list[Any]:
        return list(self.waiting.values())

    def get_waiting_pod(self, uid: str) -> Any:
        return self.waiting.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        wp = self.waiting.get(uid)
        if wp is None:
            return False
        wp.reject("", "rejected")
        return True

    def activate(self, pods: Iterable[dict[str, Any]]) -> None:
        self.activated.extend(pods)

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[Any, Status | None, set[str]]:
        """The given PreFilter plugins in turn (the first rejection ends it)."""
        result: Any = None
        for plugin in self.pre_filter_plugins:
            r, status = plugin.pre_filter(state, pod_info, nodes)
            if status is not None and not status.is_success():
                return None, status.with_plugin(plugin.name), {plugin.name}
            if r is not None:
                result = r if result is None else result.merge(r)
        return result, None, set()

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        for plugin in self.filter_plugins:
            status: Status | None = plugin.filter(state, pod_info, node_info)
            if status is not None and not status.is_success():
                return status.with_plugin(plugin.name)
        return None

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        for plugin in self.pre_filter_plugins:
            ext = plugin.pre_filter_extensions()
            if ext is not None:
                status: Status | None = ext.add_pod(state, pod_to_schedule, pod_to_add, node_info)
                if status is not None and not status.is_success():
                    return status
        return None

    def run_pre_filter_extension_remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: PodInfo,
        pod_to_remove: PodInfo,
        node_info: NodeInfo,
    ) -> Status | None:
        for plugin in self.pre_filter_plugins:
            ext = plugin.pre_filter_extensions()
            if ext is not None:
                status: Status | None = ext.remove_pod(
                    state, pod_to_schedule, pod_to_remove, node_info
                )
                if status is not None and not status.is_success():
                    return status
        return None



class SnapshotHandle(FakeHandle):
    """A FakeHandle whose snapshot is a real cache ``Snapshot`` (with its change log), for
    plugins that keep per-node state across cycles through it."""

    def __init__(self, snapshot: Snapshot, *,
                 objects: Mapping[str, Iterable[dict[str, Any]]] | None = None) -> None:
        super().__init__(objects=objects)
        self.real_snapshot = snapshot

    def snapshot(self) -> Any:
        return self.real_snapshot


def in_tree_framework(
    profile: Profile,
    *,
    snapshot_provider: Callable[[], Any],
    listers: Any,
    nominator: Any,
    client: Any = None,
    event_recorder: Any = None,
    registry: Registry | None = None,
    activate: Callable[[Iterable[dict[str, Any]]], None] | None = None,
) -> Framework:
    """A Framework of ``profile``'s plugins (the in-tree ones unless a ``registry`` is
    given) over these fakes (a recording client unless one is given, events recorded
    (into ``event_recorder`` when given),
    activations dropped unless ``activate`` takes them, the clock at 1000 s): what a
    plugin's unit harness drives."""
    from scheduler.framework.runtime import Framework
    from scheduler.plugins.registry import in_tree_registry

    return Framework(
        profile=profile,
        registry=registry if registry is not None else in_tree_registry(),
        snapshot_provider=snapshot_provider,
        listers=listers,
        client=client if client is not None else FakeApiClient(),
        event_recorder=event_recorder if event_recorder is not None else FakeEventRecorder(),
        nominator=nominator,
        activate=activate if activate is not None else lambda pods: None,
        clock=lambda: 1000.0,
    )
