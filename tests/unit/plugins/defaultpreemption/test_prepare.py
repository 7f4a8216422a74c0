"""Carrying a preemption out: the DisruptionTarget patch, the DELETE, the Preempted event,
clearing lower-priority nominations, and the in-flight bookkeeping that keeps a preemptor
from deleting the same victims twice."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler.framework.status import Code, Status
from scheduler.framework.types import PostFilterResult
from scheduler.plugins.defaultpreemption.plugin import VICTIM_MARK_SECONDS
from tests.fakes import FakeResponse
from tests.unit.plugins.defaultpreemption.harness import (
    HIGH,
    LOW,
    MID,
    VERY_HIGH,
    Scenario,
    node,
    pod,
)

STRATEGIC = "application/strategic-merge-patch+json"
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def _scenario(**kw: Any) -> Scenario:
    s = Scenario(
        kw.pop("preemptor", pod("p", priority=HIGH, cpu="600m")),
        nodes=kw.pop("nodes", [node("n1")]),
        pods=kw.pop("pods", [pod("v1", priority=LOW, cpu="400m", node_name="n1"),
                             pod("v2", priority=MID, cpu="400m", node_name="n1")]),
        **kw,
    )
    s.plugin._wall_clock = lambda: NOW
    return s


class _Metrics:
    def __init__(self) -> None:
        self.attempts = 0.0
        self.victims: list[float] = []
        outer = self

        class _C:
            def inc(self, amount: float = 1) -> None:
                outer.attempts += amount

        class _H:
            def observe(self, amount: float) -> None:
                outer.victims.append(amount)

        self.preemption_attempts = _C()
        self.preemption_victims = _H()


async def test_victims_patched_deleted_and_evented() -> None:
    s = _scenario()
    metrics = _Metrics()
    s.plugin.metrics = metrics
    result, status = s.post_filter()
    assert (result, status) == (PostFilterResult("n1"), Status(Code.SUCCESS))
    # The cycle returns before any API call: they run in a named task.
    assert s.handle.client.requests == []
    (task,) = s.plugin.tasks
    assert task.get_name() == "preemption:default/p@n1"
    assert s.plugin.is_pod_running_preemption("uid-p")
    await s.plugin.wait_idle()

    condition = {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
        "lastTransitionTime": "2024-05-01T12:00:00Z",
    }
    assert s.handle.client.requests == [
        ("PATCH", "/api/v1/namespaces/default/pods/v1/status",
         {"status": {"conditions": [condition]}}),
        ("DELETE", "/api/v1/namespaces/default/pods/v1", None),
    ]
    (event,) = s.handle.event_recorder.events
    assert event["regarding"]["metadata"]["name"] == "v1"
    assert (event["type"], event["reason"], event["action"], event["message"]) == (
        "Normal", "Preempted", "Preempting", "Preempted by pod uid-p on node n1")
    # upstream prepareCandidateAsync activates the preemptor only when an API call failed;
    # the victims' deletions move it as any pod.
    assert s.handle.activated == []
    assert not s.plugin.is_pod_running_preemption("uid-p")
    assert s.plugin.last_victims == 1
    assert (metrics.attempts, metrics.victims) == (1, [1])


async def test_patch_uses_strategic_merge_and_preemptor_scheduler_name() -> None:
    preemptor = pod("p", priority=HIGH, cpu="600m")
    preemptor["spec"]["schedulerName"] = "py-scheduler"
    s = _scenario(preemptor=preemptor)
    content_types: list[str] = []
    original = s.handle.client.request

    async def spy(method: str, path: str, **kw: Any) -> FakeResponse:
        content_types.append(kw.get("content_type", ""))
        response: FakeResponse = await original(method, path, **kw)
        return response

    s.handle.client.request = spy
    s.post_filter()
    await s.plugin.wait_idle()
    patch_body = s.handle.client.requests[0][2]
    assert patch_body["status"]["conditions"][0]["message"] == (
        "py-scheduler: preempting to accommodate a higher priority pod")
    assert content_types[0] == STRATEGIC


async def test_condition_already_present_skips_patch() -> None:
    victim = pod("v1", priority=LOW, cpu="900m", node_name="n1", preempted=True)
    s = _scenario(pods=[victim])
    s.post_filter()
    await s.plugin.wait_idle()
    assert s.handle.client.requests == [("DELETE", "/api/v1/namespaces/default/pods/v1", None)]


@pytest.mark.parametrize(
    ("responses", "want_methods"),
    [
        pytest.param({("PATCH", "/api/v1/namespaces/default/pods/v1/status"):
                      [FakeResponse(404, {"reason": "NotFound"})]},
                     ["PATCH"], id="gone-before-patch"),
        pytest.param({("DELETE", "/api/v1/namespaces/default/pods/v1"):
                      [FakeResponse(404, {"reason": "NotFound"})]},
                     ["PATCH", "DELETE"], id="gone-before-delete"),
    ],
)
async def test_victim_already_gone_is_not_an_error(
    responses: dict[tuple[str, str], list[FakeResponse]], want_methods: list[str]
) -> None:
    s = _scenario()
    s.handle.client.responses = responses
    s.post_filter()
    await s.plugin.wait_idle()
    assert [m for m, _, _ in s.handle.client.requests] == want_methods
    assert s.handle.event_recorder.events == []  # nothing was preempted by us
    assert s.plugin._marked_victims  # still counts as going away


@pytest.mark.parametrize(
    "failing",
    [("PATCH", "/api/v1/namespaces/default/pods/v1/status"),
     ("DELETE", "/api/v1/namespaces/default/pods/v1")],
    ids=["patch-fails", "delete-fails"],
)
async def test_api_failure_releases_the_victim_and_retries_the_preemptor(
    failing: tuple[str, str]
) -> None:
    s = _scenario()
    s.handle.client.responses = {failing: [FakeResponse(500, {"message": "etcd down"})]}
    s.post_filter()
    await s.plugin.wait_idle()
    assert s.handle.event_recorder.events == []
    assert [p["metadata"]["name"] for p in s.handle.activated] == ["p"]
    assert "uid-v1" not in s.plugin._marked_victims
    assert not s.plugin.is_pod_running_preemption("uid-p")
    # A later attempt chooses and deletes the same victim again.
    s.handle.client.requests.clear()
    s.plugin._preemptions.clear()
    result, _ = s.post_filter()
    await s.plugin.wait_idle()
    assert result == PostFilterResult("n1")
    assert ("DELETE", "/api/v1/namespaces/default/pods/v1", None) in s.handle.client.requests


async def test_connection_error_is_contained() -> None:
    s = _scenario()

    async def broken(method: str, path: str, **kw: Any) -> FakeResponse:
        raise ConnectionError("refused")

    s.handle.client.request = broken
    s.post_filter()
    await s.plugin.wait_idle()
    assert [p["metadata"]["name"] for p in s.handle.activated] == ["p"]


async def test_terminating_victims_are_not_deleted_again() -> None:
    victim = pod("v1", priority=LOW, cpu="900m", node_name="n1", deleting=True)
    s = _scenario(pods=[victim])
    result, status = s.post_filter()
    assert (result, status) == (PostFilterResult("n1"), Status(Code.SUCCESS))
    assert s.plugin.tasks == frozenset()
    await s.plugin.wait_idle()
    assert s.handle.client.requests == [] and s.handle.activated == []
    assert s.plugin.last_victims == 1


async def test_waiting_pod_victim_is_rejected_not_deleted() -> None:
    rejected: list[tuple[str, str]] = []

    class Waiting:
        def reject(self, plugin: str, message: str) -> None:
            rejected.append((plugin, message))

    s = _scenario(pods=[pod("v1", priority=LOW, cpu="900m", node_name="n1")])
    s.handle.waiting["uid-v1"] = Waiting()
    s.post_filter()
    await s.plugin.wait_idle()
    assert rejected == [("DefaultPreemption", "preempted")]
    assert s.handle.client.requests == []
    (event,) = s.handle.event_recorder.events
    assert event["reason"] == "Preempted"


async def test_lower_priority_nominations_on_the_node_are_cleared() -> None:
    s = _scenario(nominated={"n1": [pod("low", priority=LOW, nominated="n1"),
                                    pod("high", priority=VERY_HIGH, nominated="n1")]},
                  nodes=[node("n1", cpu="2")],
                  pods=[pod("v1", priority=LOW, cpu="1800m", node_name="n1")],
                  preemptor=pod("p", priority=HIGH, cpu="400m"))
    s.post_filter()
    await s.plugin.wait_idle()
    assert s.handle.client.requests[0] == (
        "PATCH", "/api/v1/namespaces/default/pods/low/status",
        {"status": {"nominatedNodeName": None}})
    patched = [p for m, p, _ in s.handle.client.requests if m == "PATCH"]
    assert "/api/v1/namespaces/default/pods/high/status" not in patched


async def test_in_flight_preemption_is_not_repeated() -> None:
    s = _scenario()
    gate = asyncio.Event()
    original = s.handle.client.request

    async def slow(method: str, path: str, **kw: Any) -> FakeResponse:
        await gate.wait()
        response: FakeResponse = await original(method, path, **kw)
        return response

    s.handle.client.request = slow
    s.post_filter()
    await asyncio.sleep(0)
    assert s.plugin.is_pod_running_preemption("uid-p")
    # upstream DefaultPreemption.PreEnqueue: held out of the queue meanwhile.
    assert s.plugin.pre_enqueue(s.pod_info) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "waiting for the preemption for this pod to be finished")

    # Should it come back all the same, it must wait.
    result, status = s.post_filter()
    assert result is None
    assert status == Status(Code.UNSCHEDULABLE,
                            "preemption: waiting for the preemption for this pod to be finished",
                            plugin="DefaultPreemption")

    # A more important pod finds the same node: the victim is already on its way out, so no
    # second DELETE is sent for it.
    result, status = s.attempt(pod("q", priority=VERY_HIGH, cpu="600m"))
    assert result == PostFilterResult("n1")
    assert len(s.plugin.tasks) == 1

    gate.set()
    await s.plugin.wait_idle()
    deletes = [p for m, p, _ in s.handle.client.requests if m == "DELETE"]
    assert deletes == ["/api/v1/namespaces/default/pods/v1"]
    assert s.plugin.pre_enqueue(s.pod_info) is None


async def test_finished_preemption_waits_for_victims_to_terminate() -> None:
    s = _scenario()
    s.post_filter()
    await s.plugin.wait_idle()
    # Before the informer reports v1 terminating, the snapshot still shows it running and
    # the preemptor's status has no nominatedNodeName yet: it still must not preempt again.
    requests = len(s.handle.client.requests)
    result, status = s.post_filter()
    assert result is None and status is not None
    assert status.message() == (
        "preemption: not eligible due to a terminating pod on the nominated node.")
    assert len(s.handle.client.requests) == requests

    # Once the mark expires (the informer has long caught up), preemption is possible again.
    s.handle.now += VICTIM_MARK_SECONDS + 1
    result, status = s.post_filter()
    await s.plugin.wait_idle()
    assert result == PostFilterResult("n1")


async def test_stop_cancels_in_flight_preemptions() -> None:
    s = _scenario()
    started = asyncio.Event()

    async def hang(method: str, path: str, **kw: Any) -> FakeResponse:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    s.handle.client.request = hang
    s.post_filter()
    await started.wait()
    (task,) = s.plugin.tasks
    await s.plugin.stop()
    assert task.cancelled()
    assert s.plugin.tasks == frozenset()
    assert s.handle.activated == []  # shutting down: nothing to retry
    assert not s.plugin.is_pod_running_preemption("uid-p")


def test_without_event_loop_reports_an_error() -> None:
    s = _scenario()
    result, status = s.post_filter()
    assert result is None and status is not None and status.code == Code.ERROR
    assert "running event loop" in status.message()
    assert not s.plugin.is_pod_running_preemption("uid-p")


async def test_last_victim_seen_terminating_ends_the_hold_before_the_call_returns() -> None:
    """upstream Executor.IsPodRunningPreemption: once only the last victim is left, the
    preemption counts as done as soon as the informer shows that victim terminating or gone,
    so its deletion event (which may arrive before the DELETE returns) is not ignored."""
    s = _scenario(nodes=[node("n1", cpu="1")],
                  pods=[pod("v1", priority=LOW, cpu="400m", node_name="n1"),
                        pod("v2", priority=LOW, cpu="400m", node_name="n1")],
                  preemptor=pod("p", priority=HIGH, cpu="1"))
    gate = asyncio.Event()
    deletes: list[str] = []
    original = s.handle.client.request

    async def hold_second_delete(method: str, path: str, **kw: Any) -> FakeResponse:
        if method == "DELETE":
            deletes.append(path)
            if len(deletes) == 2:
                await gate.wait()
        response: FakeResponse = await original(method, path, **kw)
        return response

    s.handle.client.request = hold_second_delete
    result, _ = s.post_filter()
    assert result == PostFilterResult("n1")
    assert s.plugin.is_pod_running_preemption("uid-p")
    for _ in range(50):
        if len(deletes) == 2:
            break
        await asyncio.sleep(0)
    record = s.plugin._preemptions["uid-p"]
    assert record.last_victim is not None and record.running
    # The last victim's DELETE is in flight and the informer still shows it running.
    assert s.plugin.is_pod_running_preemption("uid-p")
    # The informer shows it terminating: the preemptor may come back.
    namespace, name = record.last_victim
    assert deletes[-1] == f"/api/v1/namespaces/{namespace}/pods/{name}"
    [victim] = [p for p in s.handle.listers.objects["pods"]
                if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace]
    victim["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    assert not s.plugin.is_pod_running_preemption("uid-p")
    assert s.plugin.pre_enqueue(s.pod_info) is None
    gate.set()
    await s.plugin.wait_idle()
