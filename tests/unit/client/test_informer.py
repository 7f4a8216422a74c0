from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from scheduler.client.api import ApiClient
from scheduler.client.informer import (
    MISSING_RESOURCE_POLL_SECONDS,
    DeletedFinalStateUnknown,
    Informer,
    InformerFactory,
)
from tests.unit.client.conftest import FakeClock, FakeSleep, until
from tests.unit.client.fake_apiserver import FakeApiServer

PODS = "/api/v1/pods"
MakeClient = Callable[..., ApiClient]


def pod(name: str, ns: str = "ns", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"}, **extra}


class Recorder:
    """Handler that logs every delivery as a tuple, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []
        self.tombstones: list[DeletedFinalStateUnknown] = []

    def add(self, obj: dict[str, Any]) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"], old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"]))

    def delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones.append(obj)
            self.events.append(("tombstone", obj.key))
        else:
            self.events.append(("delete", obj["metadata"]["name"]))

    def names(self, kind: str) -> list[str]:
        return [e[1] for e in self.events if e[0] == kind]


@pytest.fixture
async def informer_env(
    server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep
) -> AsyncIterator[Callable[..., tuple[Informer, Recorder, asyncio.Task[None]]]]:
    server.collection(PODS)
    tasks: list[tuple[Informer, asyncio.Task[None]]] = []

    def make(**kw: Any) -> tuple[Informer, Recorder, asyncio.Task[None]]:
        kw.setdefault("clock", FakeClock())
        inf = Informer(make_client(), path=PODS, resource_name="pods", sleep=fake_sleep, rng=random.Random(1), **kw)
        rec = Recorder()
        inf.add_handler(rec.add, rec.update, rec.delete)
        task = asyncio.create_task(inf.run(), name="test-informer")
        tasks.append((inf, task))
        return inf, rec, task

    yield make
    for inf, task in tasks:
        inf.stop()
        await task


async def test_list_then_watch_delivers_in_order(server: FakeApiServer, informer_env: Any) -> None:
    server.add(PODS, pod("a"))
    server.add(PODS, pod("b"))
    inf, rec, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    assert rec.names("add") == ["a", "b"]
    await until(lambda: bool(server.watchers))
    server.add(PODS, pod("c"))
    a2 = server.modify(PODS, pod("a", spec={"nodeName": "n1"}))
    server.delete(PODS, "ns/b")
    await until(lambda: len(rec.events) == 5)
    assert rec.events[2:] == [("add", "c"), ("update", "a", "101", a2["metadata"]["resourceVersion"]), ("delete", "b")]
    assert sorted(inf.store.keys()) == ["ns/a", "ns/c"]
    assert inf.store.get("a", "ns")["spec"]["nodeName"] == "n1"  # type: ignore[index]
    assert inf.store.list("ns") and inf.store.list("other") == []
    # List items get kind/apiVersion (for event references).
    assert inf.store.get("c", "ns")["kind"] == "Pod"  # type: ignore[index]
    assert inf.store.get_by_key("ns/c")["apiVersion"] == "v1"  # type: ignore[index]
    w = server.requests_for("GET", PODS)[-1].query
    assert w["watch"] == "true" and w["allowWatchBookmarks"] == "true"
    assert 300 <= int(w["timeoutSeconds"]) <= 600


async def test_list_is_paged(server: FakeApiServer, informer_env: Any) -> None:
    for i in range(7):
        server.add(PODS, pod(f"p{i}"))
    inf, rec, _ = informer_env(page_size=3)
    await asyncio.wait_for(inf.wait_synced(), 3)
    lists = [r.query for r in server.requests_for("GET", PODS) if "watch" not in r.query]
    assert [q.get("limit") for q in lists] == ["3", "3", "3"]
    assert "continue" not in lists[0] and lists[1]["continue"] and lists[2]["continue"]
    assert len(rec.names("add")) == 7 and len(inf.store) == 7


async def test_gone_relists_and_diffs_with_tombstones(server: FakeApiServer, informer_env: Any) -> None:
    for n in ("keep", "change", "vanish"):
        server.add(PODS, pod(n))
    inf, rec, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    # While the informer is disconnected things change and history is compacted away.
    server.hold()
    server.drop_watches()
    await until(lambda: server.held == 1)
    changed = server.modify(PODS, pod("change", spec={"x": 1}))
    server.delete(PODS, "ns/vanish")
    server.add(PODS, pod("new"))
    server.compact()
    server.release()
    await until(lambda: inf.list_count == 2 and bool(server.watchers))
    after = rec.events[3:]
    assert ("add", "new") in after
    assert ("update", "change", "102", changed["metadata"]["resourceVersion"]) in after
    assert ("tombstone", "ns/vanish") in after
    assert not any(e[1] == "keep" for e in after)  # unchanged RV → no update
    tomb = rec.tombstones[0]
    assert tomb.obj["metadata"]["name"] == "vanish"
    assert sorted(inf.store.keys()) == ["ns/change", "ns/keep", "ns/new"]


async def test_watch_error_event_410_relists(server: FakeApiServer, informer_env: Any) -> None:
    server.add(PODS, pod("a"))
    inf, rec, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    server.send_watch_error(PODS, 410, "Expired")
    await until(lambda: inf.list_count == 2)
    assert rec.events == [("add", "a")]  # relist of an unchanged world delivers nothing new


async def test_gone_as_event_on_watch_start(server: FakeApiServer, informer_env: Any) -> None:
    server.gone_as_event = True
    server.add(PODS, pod("a"))
    inf, rec, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    server.hold()
    server.drop_watches()
    await until(lambda: server.held == 1)
    server.delete(PODS, "ns/a")
    server.compact()
    server.release()
    await until(lambda: inf.list_count == 2)
    await until(lambda: rec.events[-1] == ("tombstone", "ns/a"))


async def test_bookmarks_advance_resource_version(server: FakeApiServer, informer_env: Any) -> None:
    server.add(PODS, pod("a"))
    inf, rec, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    server.bookmark(PODS)
    await until(lambda: inf.last_resource_version == str(server.rv))
    bookmark_rv = server.rv
    server.end_watches()
    await until(lambda: inf.watch_count == 2 and bool(server.watchers))
    assert server.requests_for("GET", PODS)[-1].query["resourceVersion"] == str(bookmark_rv)
    assert rec.events == [("add", "a")]  # bookmarks are not delivered


async def test_reconnect_after_drop_loses_no_event(server: FakeApiServer, informer_env: Any, fake_sleep: FakeSleep) -> None:
    inf, rec, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    server.add(PODS, pod("before"))
    await until(lambda: rec.names("add") == ["before"])
    server.hold()
    server.drop_watches()
    await until(lambda: server.held == 1)
    # Events while disconnected, and the first reconnect attempts fail.
    server.fail("GET", PODS, disconnect=True, times=2)
    for i in range(5):
        server.add(PODS, pod(f"during{i}"))
    server.delete(PODS, "ns/before")
    server.release()
    await until(lambda: len(rec.events) == 7)
    assert rec.names("add") == ["before"] + [f"during{i}" for i in range(5)]
    assert rec.events[-1] == ("delete", "before")
    assert inf.list_count == 1  # resumed from the last RV, no relist
    assert len(fake_sleep.calls) >= 2  # backed off between failed reconnects
    assert all(d <= 30.0 for d in fake_sleep.calls)


async def test_handler_exceptions_do_not_stop_informer(server: FakeApiServer, informer_env: Any) -> None:
    inf, rec, _ = informer_env()
    seen: list[str] = []

    def boom(obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        raise RuntimeError("handler bug")

    inf.add_handler(on_add=boom)
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    server.add(PODS, pod("x"))
    server.add(PODS, pod("y"))
    await until(lambda: rec.names("add") == ["x", "y"])
    assert seen == ["x", "y"]


async def test_filtering_handler_semantics(server: FakeApiServer, informer_env: Any) -> None:
    server.add(PODS, pod("a"))
    inf, _, _ = informer_env()
    assigned = Recorder()
    inf.add_handler(assigned.add, assigned.update, assigned.delete, filter=lambda p: bool(p.get("spec", {}).get("nodeName")))
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))
    server.modify(PODS, pod("a", spec={"nodeName": "n1"}))  # crosses the filter → add
    server.modify(PODS, pod("a", spec={"nodeName": "n1"}, status={"phase": "Running"}))  # both pass → update
    server.modify(PODS, pod("a", spec={}))  # leaves the filter → delete
    server.modify(PODS, pod("a", spec={"x": 1}))  # neither → nothing
    await until(lambda: len(assigned.events) == 3)
    await asyncio.sleep(0.01)
    assert [e[0] for e in assigned.events] == ["add", "update", "delete"]


async def test_late_handler_gets_replay_of_store(server: FakeApiServer, informer_env: Any) -> None:
    server.add(PODS, pod("a"))
    inf, _, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    late = Recorder()
    inf.add_handler(late.add)
    assert late.events == [("add", "a")]


async def test_missing_resource_counts_as_synced_and_retries(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    path = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
    inf = Informer(make_client(), path=path, resource_name="podgroups", sleep=fake_sleep, clock=FakeClock())
    rec = Recorder()
    inf.add_handler(rec.add)
    task = asyncio.create_task(inf.run())
    await asyncio.wait_for(inf.wait_synced(), 3)
    assert len(inf.store) == 0
    await until(lambda: len(server.requests_for("GET", path)) >= 3)
    # The CRD gets installed: the informer picks it up.
    server.collection(path, kind="PodGroupList", api_version="scheduling.x-k8s.io/v1alpha1")
    server.add(path, {"metadata": {"name": "pg", "namespace": "ns"}})
    await until(lambda: rec.names("add") == ["pg"])
    assert inf.store.get("pg", "ns")["kind"] == "PodGroup"  # type: ignore[index]
    # A CRD installed after the scheduler started is noticed within seconds: the missing
    # resource is polled at a short fixed interval, not the connection backoff (up to 30 s).
    assert fake_sleep.calls and all(d <= MISSING_RESOURCE_POLL_SECONDS * 1.25 for d in fake_sleep.calls)
    inf.stop()
    await task


async def test_run_iterations_bound_and_stop(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.collection(PODS)
    server.fail("GET", PODS, status=500, times=100)
    inf = Informer(make_client(), path=PODS, resource_name="pods", sleep=fake_sleep, clock=FakeClock())
    await asyncio.wait_for(inf.run(iterations=3), 3)
    assert not inf.has_synced
    assert len(fake_sleep.calls) >= 3
    # Backoff grows (jittered exponential) and is capped.
    delays = [d for d in fake_sleep.calls]
    assert max(delays) <= 30.0


async def test_resync_redelivers_updates(server: FakeApiServer, make_client: MakeClient) -> None:
    server.collection(PODS)
    server.add(PODS, pod("a"))
    gate = asyncio.Event()
    sleeps: list[float] = []

    async def sleep(d: float) -> None:
        sleeps.append(d)
        if d == 60.0:
            await gate.wait()
            gate.clear()
        await asyncio.sleep(0)

    inf = Informer(make_client(), path=PODS, resource_name="pods", sleep=sleep, resync=60.0, clock=FakeClock())
    rec = Recorder()
    inf.add_handler(rec.add, rec.update)
    task = asyncio.create_task(inf.run())
    await asyncio.wait_for(inf.wait_synced(), 3)
    gate.set()
    await until(lambda: len(rec.names("update")) == 1)
    inf.stop()
    await task


async def test_factory_runs_named_tasks_and_listers(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.collection("/api/v1/pods")
    server.collection("/api/v1/nodes", kind="NodeList")
    server.collection("/api/v1/namespaces", kind="NamespaceList")
    server.add("/api/v1/nodes", {"metadata": {"name": "n1"}})
    server.add("/api/v1/pods", pod("p", "team-a"))
    factory = InformerFactory(
        make_client(),
        resources=("pods", "nodes", "namespaces", "podgroups"),
        pod_field_selector="status.phase!=Succeeded,status.phase!=Failed",
        sleep=fake_sleep,
        clock=FakeClock(),
    )
    factory.start()
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert {"informer:pods", "informer:nodes", "informer:namespaces", "informer:podgroups"} <= names
    assert await factory.wait_for_cache_sync(3)
    assert factory.listers.get("nodes", "", "n1") is not None
    assert factory.listers.get("pods", "team-a", "p") is not None
    assert [p["metadata"]["name"] for p in factory.listers.list("pods", "team-a")] == ["p"]
    assert factory.listers.list("podgroups") == []
    with pytest.raises(KeyError):
        factory.listers.list("widgets")
    pod_lists = [r.query for r in server.requests_for("GET", "/api/v1/pods")]
    assert all(q["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed" for q in pod_lists)
    await factory.stop()
    assert not any(t.get_name().startswith("informer:") for t in asyncio.all_tasks())


async def test_factory_cache_sync_timeout(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.collection("/api/v1/nodes", kind="NodeList")
    server.fail("GET", "/api/v1/nodes", status=500, times=10_000)
    factory = InformerFactory(make_client(), resources=("nodes",), sleep=fake_sleep, clock=FakeClock())
    factory.start()
    assert not await factory.wait_for_cache_sync(0.05)
    await factory.stop()


def _labelled(name: str, group: str | None) -> dict[str, Any]:
    obj = pod(name)
    if group is not None:
        obj["metadata"]["labels"] = {"group": group}
    return obj


def _group_of(obj: dict[str, Any]) -> str | None:
    group = ((obj.get("metadata") or {}).get("labels") or {}).get("group")
    return group if isinstance(group, str) else None


async def test_store_index_follows_watch_and_relist(server: FakeApiServer, informer_env: Any) -> None:
    """The index answers what a walk over the store would, after adds, label changes,
    deletes and a relist (built on first use from what the store already holds)."""
    for name, group in (("a", "x"), ("b", "y"), ("c", None)):
        server.add(PODS, _labelled(name, group))
    inf, _, _ = informer_env()
    await asyncio.wait_for(inf.wait_synced(), 3)
    await until(lambda: bool(server.watchers))

    def indexed(group: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in inf.store.by_index("group", group, _group_of))

    def walked(group: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in inf.store.list() if _group_of(o) == group)

    def check(expected: dict[str, list[str]]) -> None:
        for group, names in expected.items():
            assert indexed(group) == walked(group) == names, group

    check({"x": ["a"], "y": ["b"], "z": []})
    server.add(PODS, _labelled("d", "x"))
    await until(lambda: "ns/d" in inf.store)
    check({"x": ["a", "d"], "y": ["b"]})
    moved = server.modify(PODS, _labelled("a", "y"))
    rv = moved["metadata"]["resourceVersion"]
    await until(lambda: (inf.store.get("a", "ns") or {}).get("metadata", {}).get("resourceVersion") == rv)
    check({"x": ["d"], "y": ["a", "b"]})
    server.delete(PODS, "ns/b")
    await until(lambda: "ns/b" not in inf.store)
    check({"x": ["d"], "y": ["a"]})
    # Changes missed while disconnected arrive through a relist's diff.
    server.hold()
    server.drop_watches()
    await until(lambda: server.held == 1)
    server.modify(PODS, _labelled("d", None))
    server.add(PODS, _labelled("e", "x"))
    server.delete(PODS, "ns/a")
    server.compact()
    server.release()
    await until(lambda: inf.list_count == 2 and "ns/e" in inf.store)
    check({"x": ["e"], "y": []})



def _failing_filter(p: dict[str, Any]) -> bool:
    if p["metadata"]["labels"].get("bad-filter"):
        raise RuntimeError("filter bug")
    return True


@pytest.mark.parametrize(("events", "logged", "delivered", "filtered"), [
    # A raising filter: logged with the key, the handler behind it skipped, the others run.
    ([("ADDED", {"bad-filter": "1"})],
     [("event filter failed", None, "ns/a")], [("add", "a")], []),
    # A raising handler of each kind: logged with its kind and the key, the others run.
    ([("ADDED", {"bad-add": "1"})],
     [("event handler failed", "add", "ns/a")], [("add", "a")], [("add", "a")]),
    ([("ADDED", {}), ("MODIFIED", {"bad-update": "1"})],
     [("event handler failed", "update", "ns/a")], [("add", "a"), ("update", "a", "1", "2")],
     [("add", "a"), ("update", "a", "1", "2")]),
    ([("ADDED", {"bad-delete": "1"}), ("DELETED", {"bad-delete": "1"})],
     [("event handler failed", "delete", "ns/a")], [("add", "a"), ("delete", "a")],
     [("add", "a"), ("delete", "a")]),
    # The filter raising on the old version only: the update crosses it, an add.
    ([("ADDED", {"bad-filter": "1"}), ("MODIFIED", {})],
     [("event filter failed", None, "ns/a")] * 2, [("add", "a"), ("update", "a", "1", "2")],
     [("add", "a")]),
])
def test_failing_filters_and_handlers_are_logged_and_skipped(
    events: list[tuple[str, dict[str, str]]], logged: list[tuple[str, str | None, str]],
    delivered: list[tuple[str, ...]], filtered: list[tuple[str, ...]],
) -> None:
    """Every handler sees every event through its own filter; a filter or handler that
    raises is logged (the filter's, or the handler's kind, and the object's key) and only
    that one is skipped (the dispatch driven directly, no server)."""
    import structlog

    inf = Informer(None, path=PODS, resource_name="pods")  # type: ignore[arg-type]

    def raising(kind: str) -> Callable[..., None]:
        def fn(*objs: Any) -> None:
            if objs[-1]["metadata"]["labels"].get(f"bad-{kind}"):
                raise RuntimeError(f"{kind} bug")
        return fn

    inf.add_handler(raising("add"), raising("update"), raising("delete"))
    crossing, plain = Recorder(), Recorder()
    inf.add_handler(crossing.add, crossing.update, crossing.delete, filter=_failing_filter)
    inf.add_handler(plain.add, plain.update, plain.delete)
    with structlog.testing.capture_logs() as logs:
        for rv, (etype, labels) in enumerate(events, start=1):
            inf._handle_event({"type": etype, "object": {"metadata": {
                "name": "a", "namespace": "ns", "resourceVersion": str(rv), "labels": labels}}})
    assert [(e["event"], e.get("handler"), e["key"]) for e in logs] == logged
    assert plain.events == delivered
    assert crossing.events == filtered
