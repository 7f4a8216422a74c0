"""The client against the real sandbox API server (in-process, over HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.client import (
    ApiClient,
    Conflict,
    DeletedFinalStateUnknown,
    EventRecorder,
    InformerFactory,
    load_connection,
    resource_path,
    update_pod_condition,
)
from scheduler.client.api import Unauthorized
from scheduler.client.connection import StaticCredentials
from scheduler.sandbox import Sandbox
from tests.unit.client.conftest import until

PODS_NS = resource_path("v1", "pods", "default")


async def short_sleep(_: float) -> None:
    await asyncio.sleep(0.001)


def new_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "py-sched", "containers": [{"name": "c", "image": "busybox"}]},
    }


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def add(self, o: dict[str, Any]) -> None:
        self.events.append(("add", o["metadata"]["name"]))

    def update(self, _: dict[str, Any], o: dict[str, Any]) -> None:
        self.events.append(("update", o["metadata"]["name"]))

    def delete(self, o: Any) -> None:
        if isinstance(o, DeletedFinalStateUnknown):
            self.events.append(("tombstone", o.obj["metadata"]["name"]))
        else:
            self.events.append(("delete", o["metadata"]["name"]))

    def of(self, kind: str) -> list[str]:
        return [n for k, n in self.events if k == kind]


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    c = ApiClient(load_connection(kubeconfig=str(kubeconfig)), qps=-1, sleep=short_sleep)
    yield c
    await c.close()


@pytest.fixture
async def factory(client: ApiClient) -> AsyncIterator[tuple[InformerFactory, Seen]]:
    f = InformerFactory(client, sleep=short_sleep)
    seen = Seen()
    f.informer("pods").add_handler(seen.add, seen.update, seen.delete)
    f.start()
    assert await f.wait_for_cache_sync(5)  # podgroups CRD missing: synced-empty
    yield f, seen
    await f.stop()


async def test_informers_sync_and_follow_changes(client: ApiClient, factory: tuple[InformerFactory, Seen]) -> None:
    f, seen = factory
    assert len(f.listers.list("namespaces")) >= 1
    assert len(f.informer("nodes").store) == 3
    assert f.listers.list("podgroups") == []
    await client.create(PODS_NS, new_pod("a"))
    await client.patch(resource_path("v1", "pods", "default", "a"), {"metadata": {"labels": {"x": "y"}}})
    await client.delete(resource_path("v1", "pods", "default", "a"), params={"gracePeriodSeconds": "0"})
    await until(lambda: seen.of("delete") == ["a"])
    assert seen.of("add") == ["a"] and seen.of("update")
    assert f.listers.get("pods", "default", "a") is None


async def test_dropped_watches_resume_without_loss(sandbox: Sandbox, client: ApiClient, factory: tuple[InformerFactory, Seen]) -> None:
    f, seen = factory
    pods = f.informer("pods")
    for i in range(3):
        await client.create(PODS_NS, new_pod(f"p{i}"))
        assert sandbox.drop_watches() >= 0
    await client.create(PODS_NS, new_pod("p3"))
    await until(lambda: sorted(seen.of("add")) == ["p0", "p1", "p2", "p3"])
    assert pods.list_count == 1  # resumed from the last resourceVersion, no relist
    assert pods.watch_count >= 2


async def test_compaction_forces_relist_with_tombstones(sandbox: Sandbox, client: ApiClient, factory: tuple[InformerFactory, Seen]) -> None:
    f, seen = factory
    pods = f.informer("pods")
    await client.create(PODS_NS, new_pod("old"))
    await until(lambda: seen.of("add") == ["old"])
    sandbox.faults.fail("watch", "pods", code=500, times=None)  # keep the informer off the stream
    sandbox.drop_watches()
    await client.delete(resource_path("v1", "pods", "default", "old"), params={"gracePeriodSeconds": "0"})
    await client.create(PODS_NS, new_pod("new"))
    sandbox.compact()
    sandbox.faults.clear()
    await until(lambda: "new" in seen.of("add") and "old" in seen.of("tombstone"))
    assert pods.list_count >= 2
    assert sorted(o["metadata"]["name"] for o in pods.store.list("default")) == ["new"]


async def test_bind_and_double_bind_conflict(client: ApiClient, factory: tuple[InformerFactory, Seen]) -> None:
    f, _ = factory
    created = await client.create(PODS_NS, new_pod("b"))
    resp = await client.bind(created, "node-0000")
    assert resp.status == 201
    await until(lambda: (f.listers.get("pods", "default", "b") or {}).get("spec", {}).get("nodeName") == "node-0000")
    with pytest.raises(Conflict):
        await client.bind(created, "node-0001")


async def test_pod_condition_and_events(client: ApiClient) -> None:
    created = await client.create(PODS_NS, new_pod("u"))
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
    updated = await update_pod_condition(client, created, condition=cond, nominated_node_name="node-0001")
    assert updated is not None
    got = next(c for c in updated["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (got["reason"], got["message"]) == ("Unschedulable", "0/3 nodes are available")
    assert updated["status"]["nominatedNodeName"] == "node-0001"
    assert await update_pod_condition(client, updated, condition=cond) is None

    rec = EventRecorder(client, scheduler_name="py-sched", hostname="h")
    rec.start()
    for _ in range(3):
        rec.event(created, type="Warning", reason="FailedScheduling", action="Scheduling", message="0/3 nodes are available")
        await until(lambda: rec.sent >= 1)
    await rec.stop(5)
    events = (await client.get(resource_path("events.k8s.io/v1", "events", "default")))["items"]
    mine = [e for e in events if e.get("reportingController") == "py-sched"]
    assert len(mine) == 1
    assert mine[0]["regarding"]["name"] == "u" and mine[0]["regarding"]["uid"] == created["metadata"]["uid"]
    assert mine[0]["series"]["count"] == 3


async def test_writes_and_reads_over_https_with_a_token(tmp_path: Path) -> None:
    """Writes take the lean HTTP/1.1 pool, reads aiohttp: both over TLS with the sandbox's
    CA and a bearer token, and a wrong token is a typed 401 on either path."""
    async with Sandbox(token="s3cret", nodes=2) as sb:
        assert sb.url.startswith("https://")
        kc = sb.write_kubeconfig(tmp_path / "kc")
        c = ApiClient(load_connection(kubeconfig=str(kc)), qps=-1, sleep=short_sleep)
        try:
            created = await c.create(PODS_NS, new_pod("tls"))
            assert (await c.bind(created, "node-0001")).status == 201
            assert c._writer is not None and c._writer.origin.tls  # the lean pool wrote them
            got = await c.get(f"{PODS_NS}/tls")
            assert got["spec"]["nodeName"] == "node-0001"
            patched = await c.patch(f"{PODS_NS}/tls", {"metadata": {"labels": {"a": "b"}}})
            assert patched["metadata"]["labels"] == {"a": "b"}
            await c.delete(f"{PODS_NS}/tls")
        finally:
            await c.close()
        connection = load_connection(kubeconfig=str(kc))
        connection.credentials = StaticCredentials("Bearer wrong")
        bad = ApiClient(connection, qps=-1, sleep=short_sleep)
        try:
            with pytest.raises(Unauthorized):
                await bad.create(PODS_NS, new_pod("nope"))
            with pytest.raises(Unauthorized):
                await bad.get(PODS_NS)
        finally:
            await bad.close()
