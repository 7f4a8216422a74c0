"""The checker feeds the invariants from what it watches: each flow (a bind, an event, the
lease, the logs, time passing) raises its invariant on a crafted violation, and stays quiet
on the clean version of the same flow."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.client.informer import object_key
from scheduler.soak import invariants as inv
from scheduler.soak.checker import Checker, Limits
from scheduler.soak.mix import EXPECT
from tests.builders import PodBuilder, make_node


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _checker(clock: Clock) -> Checker:
    # The informers are never started: the test plays their events.
    return Checker(object(), limits=Limits(), lease_namespace="kube-system",  # type: ignore[arg-type]
                   lease_name="py-scheduler", instance_of={"a": "py-scheduler-a",
                                                            "b": "py-scheduler-b"},
                   clock=clock)


def _pod(name: str, *, uid: str, cpu: str = "1", node: str = "", expect: str = "bound"
         ) -> dict[str, Any]:
    b = PodBuilder(name, "soak").uid(uid).labels({EXPECT: expect}).req(cpu=cpu)
    if node:
        b.node(node)
    return b.obj()


def _store(checker: Checker, resource: str, *objs: dict[str, Any]) -> None:
    store = checker.factory.informer(resource).store
    for obj in objs:
        store._put(object_key(obj), obj)


def _lease(holder: str) -> dict[str, Any]:
    return {"metadata": {"name": "py-scheduler", "namespace": "kube-system"},
            "spec": {"holderIdentity": holder}}


def _scheduled(pod: dict[str, Any], instance: str) -> dict[str, Any]:
    return {"reason": "Scheduled", "reportingInstance": instance,
            "regarding": {"uid": pod["metadata"]["uid"], "name": pod["metadata"]["name"]}}


def _bind(checker: Checker, pod: dict[str, Any], node: str) -> dict[str, Any]:
    bound = json.loads(json.dumps(pod))
    bound["spec"]["nodeName"] = node
    _store(checker, "pods", bound)
    checker._pod_updated(pod, bound)
    return bound


def overcommit(checker: Checker, clock: Clock, broken: bool) -> None:
    _store(checker, "nodes", make_node("n1", cpu="2"))
    a = _pod("a", uid="ua", cpu="1500m", node="n1")
    _store(checker, "pods", a)
    checker._pod_added(a)
    b = _pod("b", uid="ub", cpu="1" if broken else "500m")
    _store(checker, "pods", b)
    checker._pod_added(b)
    _bind(checker, b, "n1")


def rebound(checker: Checker, clock: Clock, broken: bool) -> None:
    _store(checker, "nodes", make_node("n1", cpu="8"), make_node("n2", cpu="8"))
    a = _pod("a", uid="ua")
    checker._pod_added(a)
    bound = _bind(checker, a, "n1")
    _bind(checker, bound, "n2" if broken else "n1")


def standby(checker: Checker, clock: Clock, broken: bool) -> None:
    checker._lease(_lease("a"))
    clock.now += 10
    checker._lease(_lease("b"))
    clock.now += 5
    a = _pod("a", uid="ua")
    checker._pod_added(a)
    _bind(checker, a, "n1")
    checker._event(_scheduled(a, "py-scheduler-a" if broken else "py-scheduler-b"))


def pending(checker: Checker, clock: Clock, broken: bool) -> None:
    a = _pod("a", uid="ua", expect="bound" if broken else "any")
    checker._pod_added(a)
    clock.now += checker.limits.pending_bound + 1
    checker.periodic()


def attempts(checker: Checker, clock: Clock, broken: bool) -> None:
    line = json.dumps({"event": "unable to schedule pod; waiting", "pod": "soak/a",
                       "level": "info"})
    for _ in range(40):
        checker.log_lines("r", [line] * (2 if broken else 1), recent_faults=set())
        clock.now += 1.0
    checker.periodic()


def log_line(checker: Checker, clock: Clock, broken: bool) -> None:
    line = json.dumps({"event": "lost the leader lease; stopping at once", "level": "error"})
    checker.log_lines("r", [line], recent_faults=set() if broken else {"pause"})


@pytest.mark.parametrize(("flow", "invariant"), [
    (overcommit, inv.OVERCOMMIT), (rebound, inv.REBOUND), (standby, inv.STANDBY_BIND),
    (pending, inv.PENDING_TOO_LONG), (attempts, inv.ATTEMPTS), (log_line, inv.LOG_LINE),
])
@pytest.mark.parametrize("broken", [False, True])
def test_flow(flow: Any, invariant: str, broken: bool) -> None:
    clock = Clock()
    checker = _checker(clock)
    flow(checker, clock, broken)
    found = {v.invariant for v in checker.violations}
    assert found == ({invariant} if broken else set()), checker.violations


def test_restart_clock_keeps_the_holder_at_time_zero() -> None:
    clock = Clock()
    checker = _checker(clock)
    checker._lease(_lease("a"))
    clock.now += 30
    checker.restart_clock()
    assert checker.now() == 0 and checker.lease_history == [(0.0, "a")]
    checker._lease(_lease("b"))
    assert checker.leader() == "b" and checker.leader_changes() == 1
