"""Where the scheduler core observes kube-scheduler's operational series: the scheduling
algorithm's duration once per cycle that found a host (upstream observes no failure), and
each informer event's handling time under upstream's event label."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.config.defaults import default_config
from scheduler.eventhandlers import EventHandlers
from scheduler.framework.types import QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.queue.nominator import Nominator
from scheduler.schedule_one import SchedulingCycle
from tests.builders import PodBuilder, make_node
from tests.offline import cache_with, default_framework, scheduling_cycle
from tests.unit.scheduling.test_eventhandlers_confirm import _Queue
from tests.unit.scheduling.test_eventhandlers_malformed import FakeScheduler

ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds_count"
HANDLING = "scheduler_event_handling_duration_seconds_count"


def _value(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize(
    ("cpu", "observed"),
    [
        pytest.param("1", 1.0, id="a-host-found"),
        pytest.param("64", 0.0, id="no-node-fits"),
    ],
)
def test_the_algorithm_duration_is_observed_when_a_host_is_found(cpu: str,
                                                                 observed: float) -> None:
    metrics = SchedulerMetrics()
    cache, snapshot = cache_with([make_node("n1", cpu="4")])
    cache.update_snapshot(snapshot)
    profile = default_config().profiles[0]
    profile.plugins.post_filter.disabled = [SimpleNamespace(name="*", weight=None)]
    fwk = default_framework(snapshot, profile=profile)
    cycle = scheduling_cycle(cache, snapshot, metrics=metrics, nominator=Nominator())
    qpi = QueuedPodInfo(PodInfo.from_pod(PodBuilder("p").req(cpu=cpu).obj()), timestamp=0.0)
    _result, _assumed, status = cycle.scheduling_cycle(fwk, fwk.new_cycle_state(), qpi)
    assert status.is_success() is (observed == 1.0)
    assert _value(metrics, ALGORITHM) == observed


def _pending(rv: int = 1) -> PodBuilder:
    return PodBuilder("p").scheduler_name("py-scheduler").req(cpu="100m").resource_version(rv)


def _bound(rv: int = 3) -> dict[str, Any]:
    return _pending(rv).node("n1").obj()


@pytest.mark.parametrize(
    ("deliver", "label"),
    [
        pytest.param(lambda h: h.on_pod_add(_pending().obj()), "UnschedulablePodAdd",
                     id="pending-pod-add"),
        pytest.param(lambda h: h.on_pod_update(_pending().obj(), _pending(2).obj()),
                     "UnschedulablePodUpdate", id="pending-pod-update"),
        pytest.param(lambda h: h.on_pod_delete(_pending().obj()), "UnschedulablePodDelete",
                     id="pending-pod-delete"),
        pytest.param(lambda h: h.on_pod_add(_bound()), "AssignedPodAdd", id="bound-pod-add"),
        pytest.param(lambda h: h.on_pod_update(_pending().obj(), _bound()), "AssignedPodAdd",
                     id="pod-bound"),
        pytest.param(lambda h: h.on_pod_update(_bound(3), _bound(4)), "AssignedPodUpdate",
                     id="bound-pod-update"),
        pytest.param(lambda h: h.on_pod_delete(_bound()), "AssignedPodDelete",
                     id="bound-pod-delete"),
        pytest.param(lambda h: h.on_node_add(make_node("n2")), "NodeAdd", id="node-add"),
        pytest.param(lambda h: h.on_node_update(make_node("n1"), make_node("n1", cpu="8")),
                     "NodeUpdate", id="node-update"),
        pytest.param(lambda h: h.on_node_delete(make_node("n1")), "NodeDelete",
                     id="node-delete"),
        pytest.param(lambda h: h.mover_add({"metadata": {"name": "pv", "resourceVersion": "1"},
                                            "spec": {}}),
                     "PersistentVolumeAdd", id="move-only-resource"),
    ],
)
def test_each_event_handled_is_timed_under_upstreams_label(deliver: Any, label: str) -> None:
    from scheduler.eventhandlers import MOVE_ONLY_RESOURCES

    sched = FakeScheduler(queue=_Queue())
    sched.cache.add_node(make_node("n1", cpu="4"))
    handlers = EventHandlers(sched)  # type: ignore[arg-type]
    handlers.on_pod_add(_bound(3))  # a bound pod in the cache, for updates and deletes
    before = {s.labels["event"]: s.value for f in sched.metrics.registry.collect()
              for s in f.samples if s.name == HANDLING}
    add, _update, _delete = handlers.mover(*MOVE_ONLY_RESOURCES["persistentvolumes"])
    handlers.mover_add = add  # type: ignore[attr-defined]  # the PV informer's add handler
    deliver(handlers)
    after = {s.labels["event"]: s.value for f in sched.metrics.registry.collect()
             for s in f.samples if s.name == HANDLING}
    changed = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
    assert changed == {label: 1.0}


@pytest.mark.parametrize(("flushed", "counted"), [(True, 1.0), (False, 0.0)])
def test_a_pod_the_flush_moved_counts_once_its_attempt_succeeds(flushed: bool,
                                                                  counted: float) -> None:
    from scheduler.framework.status import Code, Status
    from scheduler.schedule_one import Attempt, ScheduleResult

    metrics = SchedulerMetrics()
    started: list[str] = []

    def start_binding(coro: Any, *, uid: str, name: str) -> None:
        coro.close()  # the binding cycle is not under test
        started.append(name)

    sched = SimpleNamespace(metrics=metrics, start_binding=start_binding)
    cycle = SchedulingCycle(sched)  # type: ignore[arg-type]  # the cycle's collaborators
    info = PodInfo.from_pod(PodBuilder("p").obj())
    qpi = QueuedPodInfo(info, timestamp=0.0, flushed=flushed)
    cycle._finish_scheduling_cycle(
        SimpleNamespace(), SimpleNamespace(), qpi,  # type: ignore[arg-type]
        result=ScheduleResult(suggested_host="n1"), assumed_info=info,
        status=Status(Code.SUCCESS), attempt=Attempt(started=0.0, pod_scheduling_cycle=1))
    assert started == ["bind:default/p"]
    assert _value(metrics, "scheduler_pod_scheduled_after_flush_total") == counted
