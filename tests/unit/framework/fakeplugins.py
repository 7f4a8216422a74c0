"""Configurable fake plugins and a Framework factory for runtime tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ClusterEventWithHint
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
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.framework.types import NodeScore, QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.framework.registry import Registry
from tests.fakes import FakeApiClient, FakeEventRecorder, FakeNominator, SnapshotLister

ALL_KINDS: tuple[type[Plugin], ...] = (
    PreEnqueuePlugin,
    QueueSortPlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    BindPlugin,
    PostBindPlugin,
)

Log = list[tuple[str, str]]


class _Normalizer:
    def __init__(self, fn: Callable[[list[NodeScore]], Status | None]) -> None:
        self.fn = fn

    def normalize_score(
        self, state: CycleState, pod_info: Any, scores: list[NodeScore]
    ) -> Status | None:
        return self.fn(scores)


class _Ext:
    def __init__(self, plugin: FakeBase) -> None:
        self.plugin = plugin

    def add_pod(
        self, state: CycleState, pod_to_schedule: Any, pod_to_add: Any, node_info: NodeInfo
    ) -> Status | None:
        return self.plugin.call("add_pod", state, pod_to_add, node_info, default=None)

    def remove_pod(
        self, state: CycleState, pod_to_schedule: Any, pod_to_remove: Any, node_info: NodeInfo
    ) -> Status | None:
        return self.plugin.call("remove_pod", state, pod_to_remove, node_info, default=None)


class FakeBase(Plugin):
    """Implements every method; which extension points it *is* depends on its bases.

    ``behaviour[point]`` is a value to return, an exception to raise, or a callable taking
    the call's arguments.
    """

    def __init__(self, name: str, log: Log, handle: Handle, behaviour: Mapping[str, Any]) -> None:
        self.NAME = name
        self.log = log
        self.handle = handle
        self.behaviour = dict(behaviour)

    def call(self, point: str, *args: Any, default: Any) -> Any:
        self.log.append((self.NAME, point))
        if point not in self.behaviour:
            return default
        b = self.behaviour[point]
        if isinstance(b, BaseException):
            raise b
        if callable(b) and not isinstance(b, Status):
            return b(*args)
        return b

    def pre_enqueue(self, pod_info: Any) -> Status | None:
        return self.call("pre_enqueue", pod_info, default=None)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp

    def pre_filter(self, state: CycleState, pod_info: Any, nodes: list[NodeInfo]) -> Any:
        return self.call("pre_filter", state, pod_info, nodes, default=(None, None))

    def pre_filter_extensions(self) -> Any:
        return _Ext(self) if self.behaviour.get("extensions") else None

    def filter(self, state: CycleState, pod_info: Any, node_info: NodeInfo) -> Status | None:
        return self.call("filter", state, pod_info, node_info, default=None)

    def post_filter(self, state: CycleState, pod_info: Any, node_to_status: Any) -> Any:
        return self.call("post_filter", state, pod_info, node_to_status, default=(None, None))

    def pre_score(self, state: CycleState, pod_info: Any, nodes: list[NodeInfo]) -> Status | None:
        return self.call("pre_score", state, pod_info, nodes, default=None)

    def score(self, state: CycleState, pod_info: Any, node_info: NodeInfo) -> Any:
        return self.call("score", state, pod_info, node_info, default=(0, None))

    def score_extensions(self) -> Any:
        fn = self.behaviour.get("normalize")
        return _Normalizer(fn) if fn is not None else None

    def reserve(self, state: CycleState, pod_info: Any, node_name: str) -> Status | None:
        return self.call("reserve", state, pod_info, node_name, default=None)

    def unreserve(self, state: CycleState, pod_info: Any, node_name: str) -> None:
        self.call("unreserve", state, pod_info, node_name, default=None)

    def permit(self, state: CycleState, pod_info: Any, node_name: str) -> Any:
        return self.call("permit", state, pod_info, node_name, default=(None, 0.0))

    def pre_bind_pre_flight(self, state: CycleState, pod_info: Any, node_name: str) -> Any:
        if "pre_bind_pre_flight" not in self.behaviour:  # the interface's default
            return PreBindPlugin.pre_bind_pre_flight(self, state, pod_info, node_name)  # type: ignore[arg-type]
        return self.call("pre_bind_pre_flight", state, pod_info, node_name, default=None)

    async def pre_bind(self, state: CycleState, pod_info: Any, node_name: str) -> Status | None:
        return self.call("pre_bind", state, pod_info, node_name, default=None)

    async def bind(self, state: CycleState, pod_info: Any, node_name: str) -> Status | None:
        return self.call("bind", state, pod_info, node_name, default=None)

    def post_bind(self, state: CycleState, pod_info: Any, node_name: str) -> None:
        self.call("post_bind", state, pod_info, node_name, default=None)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        events: list[ClusterEventWithHint] = self.behaviour.get("events", [])
        return events


def plugin_class(kinds: Sequence[type[Plugin]], *, enqueue: bool = False) -> type[FakeBase]:
    bases: tuple[type, ...] = (FakeBase, *kinds)
    if enqueue:
        bases = (*bases, EnqueueExtensions)
    return type("Fake" + "".join(k.__name__.replace("Plugin", "") for k in kinds), bases, {})


class Env:
    """A registry of fake plugins plus everything a Framework needs."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.log: Log = []
        self.instances: dict[str, FakeBase] = {}
        self.nominator = FakeNominator()
        self.snapshot = SnapshotLister([])
        self.client = FakeApiClient()
        self.recorder = FakeEventRecorder()
        self.activated: list[dict[str, Any]] = []
        self.metrics: SchedulerMetrics | None = None
        # A queue sort and a binder so every profile is valid unless a test says otherwise.
        self.add("Sort", [QueueSortPlugin])
        self.add("Binder", [BindPlugin])

    def add(
        self,
        name: str,
        kinds: Sequence[type[Plugin]] = ALL_KINDS,
        *,
        enqueue: bool = False,
        **behaviour: Any,
    ) -> None:
        cls = plugin_class(kinds, enqueue=enqueue)

        def factory(args: Mapping[str, Any], handle: Handle) -> Plugin:
            if "raise" in behaviour:
                raise behaviour["raise"]
            plugin = cls(name, self.log, handle, behaviour)
            self.instances[name] = plugin
            return plugin

        self.registry.register(name, factory)

    def framework(
        self,
        *,
        multi: Iterable[str | tuple[str, int]] = (),
        sort: bool = True,
        binder: bool = True,
        plugin_config: Mapping[str, Mapping[str, Any]] | None = None,
        metrics: SchedulerMetrics | None = None,
        **points: PluginSet,
    ) -> Framework:
        refs = [PluginRef(m) if isinstance(m, str) else PluginRef(*m) for m in multi]
        if sort:
            refs.insert(0, PluginRef("Sort"))
        if binder:
            refs.append(PluginRef("Binder"))
        plugins = Plugins(multi_point=PluginSet(enabled=refs, disabled=[PluginRef("*")]))
        for point, ps in points.items():
            setattr(plugins, point, ps)
        profile = Profile(
            scheduler_name="test-profile",
            plugins=plugins,
            plugin_config={k: dict(v) for k, v in (plugin_config or {}).items()},
        )
        return Framework(
            profile=profile,
            registry=self.registry,
            snapshot_provider=lambda: self.snapshot,
            listers=None,  # type: ignore[arg-type]
            client=self.client,
            event_recorder=self.recorder,
            nominator=self.nominator,
            activate=self.activated.extend,
            clock=lambda: 1000.0,
            metrics=metrics,
        )

    def calls(self, point: str) -> list[str]:
        return [name for name, p in self.log if p == point]


def ps(*enabled: str | tuple[str, int], disabled: Sequence[str] = ()) -> PluginSet:
    return PluginSet(
        enabled=[PluginRef(e) if isinstance(e, str) else PluginRef(*e) for e in enabled],
        disabled=[PluginRef(d) for d in disabled],
    )
