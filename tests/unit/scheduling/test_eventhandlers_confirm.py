"""The informer's confirmation of a pod we assumed: the assumed PodInfo (parsed when the pod
was queued) is reused for the bound pod only when a fresh parse would give the same answer."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.eventhandlers import EventHandlers
from scheduler.objects.pod import PodInfo
from scheduler.schedule_one import assumed_pod_info
from tests.builders import PodBuilder, make_node
from tests.unit.scheduling.test_eventhandlers_malformed import FakeQueue, FakeScheduler


@dataclass
class _Queue(FakeQueue):
    def delete(self, pod: dict[str, Any], *, bound: bool = False) -> None:
        super().delete(pod)


def _fields(value: Any) -> Any:
    """A comparable form of a parsed value (some parsed types have no __eq__)."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, dict):
        return {k: _fields(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value).__name__, [_fields(v) for v in value]
    slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ())]
    names = slots or list(getattr(value, "__dict__", {}))
    if not names:
        return repr(value)
    return type(value).__name__, {n: _fields(getattr(value, n)) for n in names
                                  if hasattr(value, n)}


def _parsed(info: PodInfo) -> dict[str, Any]:
    return {slot: _fields(getattr(info, slot)) for slot in PodInfo.__slots__ if slot != "pod"}


def _pending() -> PodBuilder:
    return (PodBuilder("p").scheduler_name("py-scheduler").uid("u-p").resource_version(1)
            .labels(app="web").req(cpu="500m", memory="1Gi").toleration("k", "Exists")
            .host_port(8080))


def _bind(pending: dict[str, Any], node: str, *, rv: int = 2) -> dict[str, Any]:
    """The pod as the API server returns it bound: nodeName, a condition, a new rv."""
    bound = copy.deepcopy(pending)  # a new object from the wire, sharing nothing
    bound["metadata"]["resourceVersion"] = str(rv)
    bound["spec"]["nodeName"] = node
    bound["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    return bound


@pytest.mark.parametrize(("change", "reused"), [
    (None, True),
    # Anything a PodInfo is parsed from changed meanwhile: parse the bound pod afresh.
    (lambda b: b["metadata"].__setitem__("labels", {"app": "db"}), False),
    (lambda b: b["spec"]["containers"][0]["resources"]["requests"].__setitem__("cpu", "2"),
     False),
    (lambda b: b["spec"].__setitem__("priority", 7), False),
    # Bound elsewhere (a rival scheduler won the race): not the assumed node.
    (lambda b: b["spec"].__setitem__("nodeName", "n2"), False),
])
def test_confirmation_reuses_the_assumed_parse_only_when_a_fresh_one_would_agree(
    change: Any, reused: bool
) -> None:
    sched = FakeScheduler(queue=_Queue())
    h = EventHandlers(sched)  # type: ignore[arg-type]
    for name in ("n1", "n2"):
        sched.cache.add_node(make_node(name, cpu="4"))
    pending = _pending().obj()
    queued = PodInfo.from_pod(pending)
    assumed = assumed_pod_info(queued, "n1")
    sched.cache.assume_pod(assumed)
    bound = _bind(pending, "n1")
    if change is not None:
        change(bound)
    h.on_pod_update(pending, bound)

    info = sched.cache.get_pod_info(bound)
    assert info is not None and info.pod is bound
    assert not sched.cache.is_assumed_pod(bound)
    fresh, problems = PodInfo.from_assigned_pod(bound)
    assert problems == []
    assert _parsed(info) == _parsed(fresh)
    # Parses of equal specs are shared (objects.pod's memo), so the requests may be the
    # same object either way; the labels map is the pod's own: the assumed pod's if reused.
    assert (info.labels is assumed.labels) is reused
    node = sched.cache.get_node_info(bound["spec"]["nodeName"])
    assert node is not None and [p.pod for p in node.pods] == [bound]
    assert node.requested.milli_cpu == fresh.requests.milli_cpu


def _started(pod: dict[str, Any]) -> None:
    pod["status"] = {"phase": "Running", "podIP": "10.0.0.9", "containerStatuses": [
        {"name": "c0", "containerID": "x://1", "ready": True, "state": {"running": {}}}]}


@pytest.mark.parametrize(("change", "reused"), [
    (None, True),
    (_started, True),  # the kubelet's status write: nothing parsed changes
    (lambda b: b["metadata"].__setitem__("labels", {"app": "db"}), False),
    (lambda b: b.__setitem__("status", {"containerStatuses": [
        {"name": "c0", "allocatedResources": {"cpu": "2"}}]}), False),  # a resize reported
    (lambda b: b["spec"].__setitem__("priority", 7), False),
])
def test_a_bound_pods_update_reuses_the_cached_parse_only_when_a_fresh_one_would_agree(
    change: Any, reused: bool
) -> None:
    sched = FakeScheduler(queue=_Queue())
    h = EventHandlers(sched)  # type: ignore[arg-type]
    sched.cache.add_node(make_node("n1", cpu="4"))
    bound = _bind(_pending().obj(), "n1")
    h.on_pod_add(bound)
    cached = sched.cache.get_pod_info(bound)
    assert cached is not None
    newer = copy.deepcopy(bound)
    newer["metadata"]["resourceVersion"] = "3"
    if change is not None:
        change(newer)
    h.on_pod_update(bound, newer)

    info = sched.cache.get_pod_info(newer)
    assert info is not None and info.pod is newer and info.resource_version == "3"
    fresh, problems = PodInfo.from_assigned_pod(newer)
    assert problems == []
    assert _parsed(info) == _parsed(fresh)
    assert (info.labels is cached.labels) is reused
    node = sched.cache.get_node_info("n1")
    assert node is not None and [p.pod for p in node.pods] == [newer]
    assert node.requested.milli_cpu == fresh.requests.milli_cpu
