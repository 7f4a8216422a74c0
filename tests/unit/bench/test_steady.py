"""The steady-state driver (upstream's createPods ``steadyState: true``) against a fake API
that schedules what it is given, and the devices the pre-allocated claims take."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from scheduler.bench.steady import drive, pick_devices
from scheduler.bench.workloads import (
    DRA_DEVICE_CLASS,
    EXISTING_NAMESPACE,
    WORKLOADS,
    allocated_claim,
)
from scheduler.client.api import ApiResponse
from tests.builders import make_pod


class _Api:
    """Pods POSTed are 'scheduled' (a MODIFIED event with a node) unless ``schedule`` stops;
    DELETE of the collection removes them.  The clock advances 1 s per request."""

    def __init__(self, *, schedule: int | None = None, delete_status: int = 200) -> None:
        self.now = 0.0
        self.pods: dict[str, dict[str, Any]] = {}
        self.log: list[str] = []
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.schedule = schedule  # how many pods get a node; None: all
        self.delete_status = delete_status
        self.scheduled = 0

    def clock(self) -> float:
        return self.now

    async def request(self, method: str, path: str, *, body: Any = None,
                      params: dict[str, str] | None = None) -> ApiResponse:
        self.now += 1.0
        if method == "GET":
            return ApiResponse(200, {"metadata": {"resourceVersion": "7"}, "items": []})
        if method == "DELETE":
            assert params == {"gracePeriodSeconds": "0"}
            self.log.append(f"delete {len(self.pods)}")
            self.pods.clear()
            return ApiResponse(self.delete_status, {})
        assert method == "POST" and path == "/api/v1/namespaces/ns/pods"
        body = orjson.loads(body)  # encoded once, as the creator sends them
        name = body["metadata"]["name"]
        assert name not in self.pods
        pod = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}
        self.pods[name] = pod
        self.log.append(f"create {name}")
        await self.events.put({"type": "ADDED", "object": pod})
        if self.schedule is None or self.scheduled < self.schedule:
            self.scheduled += 1
            bound = {**pod, "spec": {**pod["spec"], "nodeName": "n1"}}
            await self.events.put({"type": "MODIFIED", "object": bound})
            await self.events.put({"type": "MODIFIED", "object": bound})  # seen once
        return ApiResponse(201, pod)

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        assert params == {"resourceVersion": "7"}
        while True:
            yield await self.events.get()


@pytest.mark.parametrize(
    ("batch", "max_pods", "schedule", "duration", "log_tail", "scheduled"),
    [
        pytest.param(2, 4, None, 50.0, ["create p-0", "create p-1", "delete 2", "create p-2",
                                        "create p-3"], 4, id="two-batches-then-the-cap"),
        pytest.param(3, 5, None, 50.0, ["delete 3", "create p-3", "create p-4", "create p-5"],
                     5, id="cap-inside-a-batch-ends-it-undeleted"),
        # The fake clock reads 6 s once the second batch is created (GET, 2 POSTs, DELETE,
        # 2 POSTs from 0 s); the run ends at 1 + 5.5 s, so the wait for the pod that is never
        # scheduled is the half second left (real time: asyncio.wait_for), not 45 s.
        pytest.param(2, 100, 3, 5.5, ["delete 2", "create p-2", "create p-3"], 3,
                     id="an-unscheduled-pod-holds-the-batch-until-the-duration"),
    ],
)
async def test_a_batch_is_deleted_once_scheduled_and_the_next_created(
        batch: int, max_pods: int, schedule: int | None, duration: float,
        log_tail: list[str], scheduled: int) -> None:
    api = _Api(schedule=schedule)
    template = make_pod("p", "ns")
    report = await drive(api, template, batch=batch, duration=duration, max_pods=max_pods,
                         clock=api.clock)
    assert api.log[-len(log_tail):] == log_tail
    assert report.scheduled == scheduled
    assert report.created == len([x for x in api.log if x.startswith("create")])
    assert (report.failed, report.error) == (0, "")
    assert report.batches == -(-report.created // batch)
    assert template["metadata"]["name"] == "p", "the template is not changed"


async def test_the_duration_ends_the_run() -> None:
    api = _Api()
    report = await drive(api, make_pod("p", "ns"), batch=1, duration=6.0, max_pods=1000,
                         clock=api.clock)
    # each round is a DELETE and a POST (1 s each): the clock passes 6 s after 3 rounds
    assert report.scheduled < 10
    assert report.finished - report.started >= 6.0


async def test_a_failed_delete_is_reported_and_stops_the_run() -> None:
    api = _Api(delete_status=500)
    report = await drive(api, make_pod("p", "ns"), batch=1, duration=50.0, max_pods=10,
                         clock=api.clock)
    assert (report.scheduled, report.failed) == (1, 1)
    assert report.error.startswith("DELETE /api/v1/namespaces/ns/pods: HTTP 500")


@pytest.mark.parametrize(("count", "nodes", "per_node"), [(0, 3, 2), (5, 3, 2), (6, 3, 2),
                                                           (4990, 500, 10)])
def test_claims_take_distinct_devices_lowest_first_on_each_node(
        count: int, nodes: int, per_node: int) -> None:
    names = [f"node-{i}" for i in range(nodes)]
    picks = pick_devices(count, nodes=names, per_node=per_node, rng=random.Random(0))
    assert len(picks) == len(set(picks)) == count
    per = Counter(node for node, _ in picks)
    assert max(per.values(), default=0) <= per_node
    for node, used in per.items():
        assert sorted(d for n, d in picks if n == node) == list(range(used))


def test_more_claims_than_devices_is_an_error() -> None:
    with pytest.raises(ValueError, match="7 claims do not fit 3 nodes of 2 devices"):
        pick_devices(7, nodes=["a", "b", "c"], per_node=2, rng=random.Random(0))


def test_picks_spread_over_nodes_at_random() -> None:
    names = [f"node-{i}" for i in range(50)]
    picks = pick_devices(100, nodes=names, per_node=10, rng=random.Random(1))
    assert len({node for node, _ in picks}) > 20  # not filled node by node


@pytest.mark.parametrize(("fill", "floor", "claims_at_500"), [
    ("empty", 64, None), ("half", 70, 2500), ("full", 60, 4990)])
def test_steady_shapes_follow_upstreams_params(fill: str, floor: int,
                                               claims_at_500: int | None) -> None:
    w = WORKLOADS[f"SteadyStateClusterResourceClaimTemplate/{fill}"]
    assert (w.upstream_floor, w.steady_batch, w.steady_duration_s, w.dra_devices) == (
        floor, 10, 10.0, "gpu=10")
    got = w.allocated_claims(5000) if w.allocated_claims is not None else None
    assert got == claims_at_500


def test_an_allocated_claim_holds_one_device_of_its_node_for_nobody() -> None:
    claim = allocated_claim(3, node="node-7", device="gpu-2")
    assert claim["metadata"] == {"name": "init-claim-3", "namespace": EXISTING_NAMESPACE}
    alloc = claim["status"]["allocation"]
    assert alloc["devices"]["results"] == [{"request": "req-0", "driver": DRA_DEVICE_CLASS,
                                            "pool": "node-7", "device": "gpu-2"}]
    [term] = alloc["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"][0]["values"] == ["node-7"]
    assert "reservedFor" not in claim["status"]
