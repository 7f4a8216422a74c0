"""The one Skip status every PreFilter/PreScore plugin returns (and the one Success of the
scheduling cycle): nothing can change them, and a scheduling cycle leaves them as they were
(so sharing them between calls and pods is safe)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.bench import workloads
from scheduler.framework.status import SKIP, SUCCESS, Code, FrozenStatus, Status
from tests.offline import cache_with, default_framework, place, scheduling_cycle


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i}"
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"n{i}", "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "ab"[i % 2]}},
            "spec": {}, "status": {"allocatable": capacity, "capacity": dict(capacity),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _unchanged(status: Status) -> bool:
    return (status.code, status.reasons, status.plugin, status.error) == (Code.SKIP, [], "", None)


def test_shared_skip_reads_as_a_fresh_one() -> None:
    assert SKIP == Status(Code.SKIP) and hash(SKIP) == hash(Status(Code.SKIP))
    assert SKIP.is_skip() and not SKIP.is_rejected() and SKIP.message() == ""
    assert repr(SKIP) == repr(Status(Code.SKIP))


@pytest.mark.parametrize("field, value", [
    ("code", Code.UNSCHEDULABLE), ("plugin", "NodePorts"), ("reasons", ["x"]),
    ("error", ValueError("x")),
])
def test_fields_refuse_to_change(field: str, value: object) -> None:
    with pytest.raises(AttributeError):
        setattr(SKIP, field, value)
    assert _unchanged(SKIP)


@pytest.mark.parametrize("change", [
    lambda r: r.append("x"), lambda r: r.extend(["x"]), lambda r: r.insert(0, "x"),
    lambda r: r.remove("x"), lambda r: r.pop(), lambda r: r.clear(), lambda r: r.sort(),
    lambda r: r.reverse(), lambda r: r.__setitem__(slice(0, 0), ["x"]),
    lambda r: r.__delitem__(slice(None)), lambda r: r.__iadd__(["x"]), lambda r: r.__imul__(2),
])
def test_reasons_refuse_to_change(change: Callable[[list[str]], object]) -> None:
    with pytest.raises(TypeError):
        change(SKIP.reasons)
    assert _unchanged(SKIP)


def test_shared_success_refuses_change_too() -> None:
    assert SUCCESS == Status(Code.SUCCESS) and SUCCESS.is_success()
    with pytest.raises(AttributeError):
        SUCCESS.plugin = "X"
    with pytest.raises(TypeError):
        SUCCESS.reasons.append("x")
    assert (SUCCESS.code, SUCCESS.reasons, SUCCESS.plugin) == (Code.SUCCESS, [], "")


def test_with_plugin_answers_a_copy() -> None:
    named = SKIP.with_plugin("NodeAffinity")
    assert named is not SKIP and named == Status(Code.SKIP, plugin="NodeAffinity")
    named.reasons.append("its own list")  # the copy is an ordinary status
    assert _unchanged(SKIP)
    assert FrozenStatus(Code.SKIP, plugin="A").with_plugin("B").plugin == "A"


def test_every_skip_of_a_cycle_is_the_shared_one_and_unchanged_after_it() -> None:
    cache, snapshot = cache_with(_node(i) for i in range(6))
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot)
    returned: list[Status] = []

    def recording(call: Callable[..., Any], *, pre_filter: bool) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            answer = call(*args)
            status = answer[1] if pre_filter else answer
            if status is not None and status.code == Code.SKIP:
                returned.append(status)
            return answer
        return wrapper

    fwk._pre_filter_calls = [(name, recording(call, pre_filter=True), evaluations)
                             for name, call, evaluations in fwk._pre_filter_calls]
    fwk._pre_score_calls = [(name, recording(call, pre_filter=False), evaluations)
                            for name, call, evaluations in fwk._pre_score_calls]
    hosts = []
    for i in range(4):
        pod = workloads.pod(f"p{i}", namespace="ns", scheduler_name="default-scheduler")
        pod["metadata"]["uid"] = f"u{i}"
        hosts.append(place(cache, snapshot, fwk, cycle, pod))
    assert all(hosts)
    assert len(returned) >= 4 * 10  # ten or more plugins skip a plain pod at each point pair
    assert all(status is SKIP for status in returned)
    assert _unchanged(SKIP)
