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
    """Pods POSTed are 'scheduled' (a MODIFIED event with a node, sent twice: seen once)
    unless their name is in ``stuck``; DELETE of one pod removes it.  The clock advances
    1 s per request; ``most`` is the most pods the namespace ever held."""

    def __init__(self, *, stuck: frozenset[str] = frozenset(), delete_status: int = 200,
                 ) -> None:
        self.now = 0.0
        self.pods: dict[str, dict[str, Any]] = {}
        self.log: list[str] = []
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.stuck = stuck
        self.delete_status = delete_status
        self.bound: set[str] = set()
        self.deleted_unbound: list[str] = []
        self.most = 0

    def clock(self) -> float:
        return self.now

    async def request(self, method: str, path: str, *, body: Any = None,
                      params: dict[str, str] | None = None) -> ApiResponse:
        self.now += 1.0
        for _ in range(5):  # a round trip: other tasks run meanwhile
            await asyncio.sleep(0)
        if method == "GET":
            return ApiResponse(200, {"metadata": {"resourceVersion": "7"}, "items": []})
        if method == "DELETE":
            assert params == {"gracePeriodSeconds": "0"}
            name = path.rsplit("/", 1)[1]
            assert path == f"/api/v1/namespaces/ns/pods/{name}"
            self.log.append(f"delete {name}")
            if self.delete_status != 200:
                return ApiResponse(self.delete_status, {})
            if name not in self.bound:
                self.deleted_unbound.append(name)
            del self.pods[name]
            return ApiResponse(200, {})
        assert method == "POST" and path == "/api/v1/namespaces/ns/pods"
        body = orjson.loads(body)  # encoded once, as the creator sends them
        name = body["metadata"]["name"]
        assert name not in self.pods
        pod = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}
        self.pods[name] = pod
        self.most = max(self.most, len(self.pods))
        self.log.append(f"create {name}")
        await self.events.put({"type": "ADDED", "object": pod})
        if name not in self.stuck:
            self.bound.add(name)
            bound = {**pod, "spec": {**pod["spec"], "nodeName": "n1"}}
            await self.events.put({"type": "MODIFIED", "object": bound})
            await self.events.put({"type": "MODIFIED", "object": bound})  # seen once
        return ApiResponse(201, pod)

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        assert params == {"resourceVersion": "7"}
        while True:
            yield await self.events.get()


@pytest.mark.parametrize(
    ("batch", "max_pods", "stuck", "scheduled"),
    [
        pytest.param(2, 4, frozenset(), 4, id="two-pods-kept-until-the-cap"),
        pytest.param(3, 7, frozenset(), 7, id="cap-between-batches"),
        pytest.param(1, 5, frozenset(), 5, id="one-pod-at-a-time"),
        # upstream's lock-step batches would wait for p-1 until the duration is over; a
        # pipelined driver keeps replacing the others around it
        pytest.param(2, 6, frozenset({"p-1"}), 6, id="an-unscheduled-pod-holds-nothing-up"),
    ],
)
async def test_each_scheduled_pod_is_deleted_and_replaced_at_once(
        batch: int, max_pods: int, stuck: frozenset[str], scheduled: int) -> None:
    api = _Api(stuck=stuck)
    template = make_pod("p", "ns")
    report = await drive(api, template, batch=batch, duration=1000.0, max_pods=max_pods,
                         clock=api.clock)
    assert report.scheduled == scheduled
    assert api.log[:batch] == [f"create p-{i}" for i in range(batch)]
    assert api.most == batch, "the namespace holds the same number of pods all along"
    assert api.deleted_unbound == [], "only scheduled pods are deleted"
    created = [x for x in api.log if x.startswith("create")]
    deleted = [x for x in api.log if x.startswith("delete")]
    assert report.created == batch + report.replaced
    # the run ends when the cap is seen: replacements still under way are dropped
    assert report.replaced <= len(deleted) <= scheduled - 1
    assert len(created) - batch <= len(deleted), "a successor only after a deletion"
    assert (report.failed, report.error) == (0, "")
    assert template["metadata"]["name"] == "p", "the template is not changed"


async def test_replacements_overlap() -> None:
    api = _Api()
    report = await drive(api, make_pod("p", "ns"), batch=10, duration=1000.0, max_pods=50,
                         clock=api.clock)
    assert report.scheduled == 50
    assert report.in_flight_max > 1, "replacements are pipelined, not one after another"


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
    assert report.error.startswith("DELETE /api/v1/namespaces/ns/pods/p-0: HTTP 500")


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
