"""Informer events carrying malformed objects (issue 12): the handlers never raise, keep the
cache whole, tell the user about a malformed pending pod once per problem, withdraw a node
that turned malformed, account a malformed bound pod safely and log each problem once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog.testing

from scheduler.cache import Cache
from scheduler.eventhandlers import MOVE_ONLY_RESOURCES, EventHandlers
from scheduler.framework.events import ActionType, ClusterEvent, pod_update_action
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder, make_node


@dataclass
class FakeQueue:
    """Records what the handlers ask of the queue; parses like the real one."""

    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    moves: list[tuple[str, Any, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    # The action of each assigned pod update, as the real queue computes it.
    update_actions: list[ActionType] = field(default_factory=list)

    def add(self, pod: dict[str, Any]) -> None:
        info = PodInfo.from_pod(pod)
        self.pending[info.key] = pod

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.add(new)

    def delete(self, pod: dict[str, Any]) -> None:
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        self.pending.pop(key, None)
        self.deleted.append(key)

    def move_all_to_active_or_backoff_queue(self, event: ClusterEvent, old: Any,
                                            new: Any) -> None:
        self.moves.append((event.label, old, new))

    def assigned_pod_added(self, info: PodInfo) -> None:
        self.moves.append(("AssignedPodAdd", None, info.pod))

    def assigned_pod_updated(self, old: dict[str, Any], new: dict[str, Any], *,
                             same_sizing: bool = False) -> None:
        self.moves.append(("AssignedPodUpdate", old, new))
        self.update_actions.append(pod_update_action(old, new, same_sizing=same_sizing))


@dataclass
class FakeScheduler:
    cache: Cache = field(default_factory=Cache)
    queue: FakeQueue = field(default_factory=FakeQueue)
    profiles: dict[str, Any] = field(default_factory=lambda: {"py-scheduler": object()})
    reports: list[tuple[str, str]] = field(default_factory=list)
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)

    def report_malformed_pod(self, pod: dict[str, Any], error: ObjectError) -> None:
        self.reports.append((pod["metadata"]["name"], error.field))

    def reject_waiting_pod(self, uid: str) -> bool:
        return False

    def is_binding(self, uid: str) -> bool:
        return False


def _setup() -> tuple[FakeScheduler, EventHandlers]:
    sched = FakeScheduler()
    return sched, EventHandlers(sched)  # type: ignore[arg-type]


def _pod(name: str = "p", *, rv: int = 1, node: str = "") -> PodBuilder:
    b = PodBuilder(name).scheduler_name("py-scheduler").req(cpu="500m").resource_version(rv)
    return b.node(node) if node else b


def test_a_malformed_pending_pod_is_reported_once_per_problem_and_never_queued() -> None:
    sched, h = _setup()
    bad = _pod(rv=1).set("spec.schedulingGates", [5]).obj()
    h.on_pod_add(bad)
    # Our own condition patch comes back as an update with the same problem: no second report.
    h.on_pod_update(bad, _pod(rv=2).set("spec.schedulingGates", [5]).obj())
    assert sched.reports == [("p", "spec.schedulingGates[0]")]
    assert sched.queue.pending == {}
    # A different problem is reported; the fix queues the pod.
    worse = _pod(rv=3).set("spec.schedulingGates", "gate").obj()
    h.on_pod_update(bad, worse)
    assert sched.reports[-1] == ("p", "spec.schedulingGates")
    fixed = _pod(rv=4).obj()
    h.on_pod_update(worse, fixed)
    assert list(sched.queue.pending) == ["default/p"]


def test_a_queued_pod_that_turns_malformed_leaves_the_queue() -> None:
    sched, h = _setup()
    good = _pod(rv=1).obj()
    h.on_pod_add(good)
    assert list(sched.queue.pending) == ["default/p"]
    h.on_pod_update(good, _pod(rv=2).set("spec.containers[0].resources.requests.cpu",
                                         "-1").obj())
    assert sched.queue.pending == {}
    assert sched.reports == [("p", "spec.containers[0].resources.requests.cpu")]


def test_a_malformed_bound_pod_is_accounted_safely_and_logged_once() -> None:
    sched, h = _setup()
    sched.cache.add_node(make_node("n1", cpu="2"))
    bad = _pod(rv=1, node="n1").set("spec.volumes", [7]).obj()
    with structlog.testing.capture_logs() as logs:
        h.on_pod_add(bad)
        h.on_pod_update(bad, _pod(rv=2, node="n1").set("spec.volumes", [7]).obj())
    assert [e["event"] for e in logs].count(
        "bound pod is malformed; accounting it without the malformed fields") == 1
    info = sched.cache.get_node_info("n1")
    assert info is not None and info.requested.milli_cpu == 500 and len(info.pods) == 1
    # The queue's hints get the readable copy, never the garbage.
    assert sched.queue.moves and all(
        new is None or new["spec"].get("volumes") == [] for _, _, new in sched.queue.moves)
    h.on_pod_delete(_pod(rv=3, node="n1").set("spec.volumes", [7]).obj())
    info = sched.cache.get_node_info("n1")
    assert info is not None and info.requested.milli_cpu == 0 and info.pods == []


def test_a_bound_pod_without_a_name_stays_out_and_nothing_raises() -> None:
    sched, h = _setup()
    sched.cache.add_node(make_node("n1"))
    nameless = _pod(node="n1").obj()
    nameless["metadata"]["name"] = ""
    h.on_pod_add(nameless)
    h.on_pod_update(nameless, nameless | {"metadata": {**nameless["metadata"],
                                                       "resourceVersion": "9"}})
    h.on_pod_delete(nameless)
    assert sched.cache.pod_count() == 0


def test_a_node_that_turns_malformed_is_withdrawn_and_comes_back_when_fixed() -> None:
    sched, h = _setup()
    good = make_node("n1", cpu="2")
    h.on_node_add(good)
    bad = NodeBuilder("n1").capacity(cpu="2", memory="1Gi", pods=10).set(
        "spec.taints", "NoSchedule").obj()
    with structlog.testing.capture_logs() as logs:
        h.on_node_update(good, bad)
        h.on_node_update(bad, bad | {"metadata": {**bad["metadata"], "resourceVersion": "7"}})
    assert [e.get("error", "") for e in logs if e["event"].startswith("node is malformed")] == [
        "Node n1: spec.taints: must be a list"]
    assert sched.cache.get_node_info("n1") is None
    sched.queue.moves.clear()
    h.on_node_update(bad, good)
    info = sched.cache.get_node_info("n1")
    assert info is not None and info.allocatable.milli_cpu == 2000
    assert [label for label, _, _ in sched.queue.moves] == ["NodeAdd"]
    h.on_node_delete(good)
    assert sched.cache.get_node_info("n1") is None


def test_a_withdrawn_node_keeps_its_bound_pods_accounted() -> None:
    sched, h = _setup()
    good = make_node("n1", cpu="2")
    h.on_node_add(good)
    h.on_pod_add(_pod("bound", node="n1").obj())
    bad = NodeBuilder("n1").set("status.allocatable", {"cpu": "x"}).obj()
    h.on_node_update(good, bad)
    assert sched.cache.dump().deleted_nodes == ["n1"]
    h.on_node_update(bad, good)
    info = sched.cache.get_node_info("n1")
    assert info is not None and info.node is not None and info.requested.milli_cpu == 500


def test_malformed_read_only_objects_move_no_pod_and_are_logged_once() -> None:
    sched, h = _setup()
    add, update, delete = MOVE_ONLY_RESOURCES["persistentvolumes"]
    on_add, on_update, on_delete = h.mover(add, update, delete)
    bad = {"metadata": {"name": "pv", "resourceVersion": "1"},
           "spec": {"capacity": {"storage": "big"}}}
    with structlog.testing.capture_logs() as logs:
        on_add(bad)
        on_update(bad, {**bad, "metadata": {"name": "pv", "resourceVersion": "2"}})
        on_delete(bad)
    assert [e["error"] for e in logs if e["event"] == "object is malformed"] == [
        'PersistentVolume pv: spec.capacity.storage: invalid quantity "big": quantities must '
        "match the regular expression '^([+-]?[0-9.]+)([eEinumkMGTP]*[-+]?[0-9]*)$'"]
    assert sched.queue.moves == []
    good = {"metadata": {"name": "pv", "resourceVersion": "3"},
            "spec": {"capacity": {"storage": "1Gi"}}}
    on_update(bad, good)  # fixed: arrives as an add
    assert [label for label, _, _ in sched.queue.moves] == [add.label]
