"""The soak's invariants: each one holds on a clean observation and fails on a crafted
violation (table-driven: one row per invariant and case)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.soak import invariants as inv
from tests.builders import PodBuilder, make_node, make_pod


def _claim(name: str, *devices: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "soak"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-0", "device": d}
                for d in devices]}}}}


def _uid(pod: dict[str, Any], uid: str) -> dict[str, Any]:
    pod["metadata"]["uid"] = uid
    return pod


NODE = make_node("n1", cpu="2", memory="4Gi", pods=3, **{"example.com/gpu": "2"})
LOG_ERROR = json.dumps({"event": "binding task crashed", "level": "error"})
LOG_TRACEBACK = json.dumps({"event": "forget failed", "level": "error",
                            "exception": "Traceback (most recent call last):\n  ..."})
LOG_LEASE = json.dumps({"event": "lost the leader lease; stopping at once", "level": "error"})
LOG_INJECTED = json.dumps({"event": "preemption of a victim failed", "level": "error",
                           "error": "adding the DisruptionTarget condition to pod soak/f: "
                                    "HTTP 500 injected fault: InternalError"})
LOG_INFO = json.dumps({"event": "unable to schedule pod; waiting", "level": "info"})

# (invariant, case, check -> violations); clean cases expect none.
Check = Callable[[], list[inv.Violation]]
CASES: list[tuple[str, str, Check, bool]] = [
    (inv.OVERCOMMIT, "within allocatable", lambda: inv.node_overcommit(
        NODE, [make_pod("a", cpu="1", node="n1"), make_pod("b", cpu="1", node="n1")], at=1),
     False),
    (inv.OVERCOMMIT, "cpu", lambda: inv.node_overcommit(
        NODE, [make_pod("a", cpu="1500m", node="n1"), make_pod("b", cpu="1", node="n1")],
        at=1), True),
    (inv.OVERCOMMIT, "memory", lambda: inv.node_overcommit(
        NODE, [make_pod("a", memory="3Gi", node="n1"), make_pod("b", memory="2Gi",
                                                                node="n1")], at=1), True),
    (inv.OVERCOMMIT, "pods", lambda: inv.node_overcommit(
        NODE, [make_pod(f"p{i}", node="n1") for i in range(4)], at=1), True),
    (inv.OVERCOMMIT, "extended resource", lambda: inv.node_overcommit(
        NODE, [make_pod("a", node="n1", **{"example.com/gpu": "3"})], at=1), True),
    (inv.OVERCOMMIT, "terminal pods hold nothing", lambda: inv.node_overcommit(
        NODE, [PodBuilder("done").req(cpu="2").node("n1").phase("Succeeded").obj(),
               make_pod("b", cpu="2", node="n1")], at=1), False),
    (inv.OVERCOMMIT, "pods on other nodes", lambda: inv.node_overcommit(
        NODE, [make_pod("a", cpu="2", node="n1"), make_pod("b", cpu="2", node="n2")], at=1),
     False),
    (inv.DEVICE_SHARED, "distinct devices", lambda: inv.shared_devices(
        [_claim("a", "gpu-0"), _claim("b", "gpu-1")], at=1), False),
    (inv.DEVICE_SHARED, "one device in two claims", lambda: inv.shared_devices(
        [_claim("a", "gpu-0"), _claim("b", "gpu-1", "gpu-0")], at=1), True),
    (inv.REBOUND, "same node again", lambda: inv.rebinding(
        {"u1": "n1"}, _uid(make_pod("a", node="n1"), "u1"), at=1), False),
    (inv.REBOUND, "a new pod of the same name", lambda: inv.rebinding(
        {"u1": "n1"}, _uid(make_pod("a", node="n2"), "u2"), at=1), False),
    (inv.REBOUND, "another node", lambda: inv.rebinding(
        {"u1": "n1"}, _uid(make_pod("a", node="n2"), "u1"), at=1), True),
    (inv.STANDBY_BIND, "bound by the holder", lambda: inv.standby_binds(
        [inv.Bind(5.0, "soak/a", "n1", "i-a")], [(0.0, "a"), (10.0, "b")],
        {"a": "i-a", "b": "i-b"}, slack=1.0, at=5), False),
    (inv.STANDBY_BIND, "in flight at the hand-over", lambda: inv.standby_binds(
        [inv.Bind(10.5, "soak/a", "n1", "i-a")], [(0.0, "a"), (10.0, "b")],
        {"a": "i-a", "b": "i-b"}, slack=1.0, at=11), False),
    (inv.STANDBY_BIND, "by the old leader after the hand-over", lambda: inv.standby_binds(
        [inv.Bind(14.0, "soak/a", "n1", "i-a")], [(0.0, "a"), (10.0, "b")],
        {"a": "i-a", "b": "i-b"}, slack=1.0, at=14), True),
    (inv.STANDBY_BIND, "by a replica that never led", lambda: inv.standby_binds(
        [inv.Bind(3.0, "soak/a", "n1", "i-b")], [(0.0, "a")],
        {"a": "i-a", "b": "i-b"}, slack=1.0, at=3), True),
    (inv.PENDING_TOO_LONG, "within the bound", lambda: inv.overdue_pending(
        {"soak/a": 10.0}, now=60.0, bound=60.0, at=60), False),
    (inv.PENDING_TOO_LONG, "over the bound", lambda: inv.overdue_pending(
        {"soak/a": 10.0, "soak/b": 50.0}, now=71.0, bound=60.0, at=71), True),
    (inv.ATTEMPTS, "one per backoff period", lambda: inv.attempt_violations(
        {"soak/a": [float(t) for t in range(0, 60)]}, window=60.0, initial_backoff=1.0, at=60),
     False),
    (inv.ATTEMPTS, "a spin", lambda: inv.attempt_violations(
        {"soak/a": [t / 100 for t in range(0, 300)]}, window=60.0, initial_backoff=1.0,
        at=3), True),
    (inv.CACHE_DIFF, "equal", lambda: inv.cache_differences(
        {"differences": [], "nodes": 3, "pods": 10}, replica="r", at=1), False),
    (inv.CACHE_DIFF, "a difference", lambda: inv.cache_differences(
        {"differences": ["pod soak/a: cache node-1, cluster node-2"], "nodes": 3,
         "pods": 10}, replica="r", at=1), True),
    (inv.RSS_GROWTH, "within 10 %", lambda: inv.rss_growth(
        [(100.0, 109 * 2**20)], baseline=100 * 2**20, tolerance=0.10, replica="r", at=100),
     False),
    (inv.RSS_GROWTH, "over 10 %", lambda: inv.rss_growth(
        [(100.0, 111 * 2**20)], baseline=100 * 2**20, tolerance=0.10, replica="r", at=100),
     True),
    (inv.CPU_BUSY, "idle", lambda: inv.cpu_busy(0.1, 5.0, threshold=0.25, replica="r", at=1),
     False),
    (inv.CPU_BUSY, "spinning", lambda: inv.cpu_busy(4.5, 5.0, threshold=0.25, replica="r",
                                                    at=1), True),
]


@pytest.mark.parametrize(("invariant", "case", "check", "broken"), CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_invariant(invariant: str, case: str, check: Check, broken: bool) -> None:
    found = check()
    if broken:
        assert found, case
        assert {v.invariant for v in found} == {invariant}
        assert all(v.message for v in found)
        json.dumps([v.as_dict() for v in found])  # the evidence goes into the JSON report
    else:
        assert found == [], case


def test_every_invariant_has_a_crafted_violation() -> None:
    broken = {invariant for invariant, _, _, b in CASES if b}
    # The log and replica-exit invariants are tested below / by the run loop's reaping.
    assert broken | {inv.LOG_LINE, inv.REPLICA_EXIT} == set(inv.INVARIANTS)


@pytest.mark.parametrize(("line", "recent", "reason"), [
    (LOG_INFO, set(), None),
    (LOG_ERROR, set(), "error without a cause"),
    (LOG_ERROR, {"pause"}, "error without a cause"),  # a cause, but not of this line
    (LOG_TRACEBACK, {"pause", "api-errors"}, "traceback"),
    (LOG_LEASE, set(), "error without a cause"),
    (LOG_LEASE, {"pause"}, None),
    (LOG_INJECTED, {"api-errors"}, None),  # names the injected failure, injected lately
    (LOG_INJECTED, {"pause"}, "error without a cause"),
    (LOG_INJECTED, set(), "error without a cause"),
    ("Traceback (most recent call last):", set(), "traceback"),
    ("plain text", set(), None),
])
def test_log_lines(line: str, recent: set[str], reason: str | None) -> None:
    assert inv.unexplained_log_line(line, recent_faults=recent) == reason


@pytest.mark.parametrize(("times", "expected"), [
    ([], None),
    ([0.0, 1.0, 2.0, 3.0], None),
    ([0.0, 0.1, 0.2, 0.3, 0.4], (4, 0.0)),  # window 1 s, backoff 1 s: at most 3; the 4th
    ([0.0, 5.0, 5.1, 5.2, 9.0], None),
    ([0.0, 5.0, 5.1, 5.2, 5.3], (4, 5.0)),
])
def test_attempts_sliding_window(times: list[float], expected: tuple[int, float] | None
                                 ) -> None:
    assert inv.attempts_over_backoff(times, window=1.0, initial_backoff=1.0) == expected


def test_holder_at_follows_the_lease_history() -> None:
    history = [(0.0, "a"), (10.0, ""), (11.0, "b")]
    assert [inv.holder_at(history, t) for t in (-1, 0, 5, 10.5, 11, 99)] == [
        "", "a", "a", "", "b", "b"]
