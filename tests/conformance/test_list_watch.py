"""LIST (selectors, limit/continue) and WATCH (replay, 410, bookmarks, transitions)."""

from __future__ import annotations

import asyncio

import pytest
from sbhelpers import Http, pod

from scheduler.sandbox import Sandbox

PODS = "/api/v1/namespaces/default/pods"


async def _names(http: Http, path: str, **params: str) -> list[str]:
    s, lst = await http.get(path, params=params)
    assert s == 200, lst
    return [i["metadata"]["name"] for i in lst["items"]]


async def test_list_envelope(http: Http) -> None:
    await http.post(PODS, pod("a"))
    s, lst = await http.get(PODS)
    assert lst["kind"] == "PodList" and lst["apiVersion"] == "v1"
    assert int(lst["metadata"]["resourceVersion"]) >= int(lst["items"][0]["metadata"]["resourceVersion"])


async def test_label_selector_full_syntax(http: Http) -> None:
    specs = {"p1": {"env": "prod", "tier": "web"}, "p2": {"env": "dev", "tier": "web"},
             "p3": {"env": "prod"}, "p4": {"n": "5"}}
    for name, labels in specs.items():
        await http.post(PODS, pod(name, labels=labels))
    cases = {
        "env=prod": ["p1", "p3"], "env==prod": ["p1", "p3"], "env!=prod": ["p2", "p4"],
        "env in (dev, prod),tier": ["p1", "p2"], "env notin (prod)": ["p2", "p4"],
        "tier": ["p1", "p2"], "!tier": ["p3", "p4"], "n>4": ["p4"], "n<5": [],
        "env=prod,!tier": ["p3"],
    }
    for sel, want in cases.items():
        assert await _names(http, PODS, labelSelector=sel) == want, sel


async def test_field_selectors(http: Http) -> None:
    await http.post(PODS, pod("f1", schedulerName="mine"))
    await http.post(PODS, pod("f2", nodeName="node-0000"))
    assert await _names(http, PODS, fieldSelector="spec.schedulerName=mine") == ["f1"]
    assert await _names(http, PODS, fieldSelector="spec.nodeName=") == ["f1"]
    assert await _names(http, PODS, fieldSelector="spec.nodeName!=") == ["f2"]
    assert await _names(http, PODS, fieldSelector="metadata.name==f2,metadata.namespace=default") == ["f2"]
    assert await _names(http, PODS, fieldSelector="status.phase=Pending,spec.nodeName=") == ["f1"]
    s, st = await http.get(PODS, params={"fieldSelector": "spec.bogus=x"})
    assert s == 400 and "field label not supported" in st["message"]


async def test_all_namespaces_and_per_namespace(http: Http) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "other"}})
    await http.post(PODS, pod("x"))
    await http.post("/api/v1/namespaces/other/pods", pod("x"))
    s, lst = await http.get("/api/v1/pods")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in lst["items"]] == [("default", "x"), ("other", "x")]
    assert await _names(http, "/api/v1/namespaces/other/pods") == ["x"]


async def test_limit_and_continue(http: Http, sandbox: Sandbox) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "aaa"}})
    for i in range(5):
        await http.post(PODS, pod(f"p{i}", labels={"odd": str(i % 2)}))
        await http.post("/api/v1/namespaces/aaa/pods", pod(f"q{i}"))
    seen: list[str] = []
    token = ""
    pages = 0
    first_rv = None
    while True:
        params = {"limit": "3"}
        if token:
            params["continue"] = token
        s, lst = await http.get("/api/v1/pods", params=params)
        assert s == 200
        first_rv = first_rv or lst["metadata"]["resourceVersion"]
        assert lst["metadata"]["resourceVersion"] == first_rv
        seen += [f'{i["metadata"]["namespace"]}/{i["metadata"]["name"]}' for i in lst["items"]]
        pages += 1
        token = lst["metadata"].get("continue", "")
        if not token:
            break
        assert lst["metadata"]["remainingItemCount"] == 10 - len(seen)
    assert pages == 4 and len(seen) == 10 and seen == sorted(seen)
    # with a selector
    s, lst = await http.get(PODS, params={"limit": "2", "labelSelector": "odd=0"})
    assert [i["metadata"]["name"] for i in lst["items"]] == ["p0", "p2"]
    s, lst = await http.get(PODS, params={"limit": "2", "labelSelector": "odd=0", "continue": lst["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in lst["items"]] == ["p4"] and "continue" not in lst["metadata"]
    # resourceVersion=0 is served from the cache: limit ignored
    s, lst = await http.get(PODS, params={"limit": "2", "resourceVersion": "0"})
    assert len(lst["items"]) == 5
    # tokens from before a compaction are expired
    s, lst = await http.get(PODS, params={"limit": "2"})
    await http.post(PODS, pod("late"))
    sandbox.compact()
    s, st = await http.get(PODS, params={"limit": "2", "continue": lst["metadata"]["continue"]})
    assert s == 410 and st["reason"] == "Expired"


async def test_watch_replays_exactly_after_resource_version(http: Http) -> None:
    _, a = await http.post(PODS, pod("w1"))
    rv = a["metadata"]["resourceVersion"]
    await http.patch(f"{PODS}/w1", {"metadata": {"labels": {"x": "1"}}})
    await http.post(PODS, pod("w2"))
    await http.delete(f"{PODS}/w1", params={"gracePeriodSeconds": "0"})
    evs = await http.watch(PODS, {"resourceVersion": rv}, until=3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("MODIFIED", "w1"), ("ADDED", "w2"), ("DELETED", "w1")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_watch_without_rv_sends_current_state_then_streams(http: Http) -> None:
    await http.post(PODS, pod("s1"))
    await http.post(PODS, pod("s2"))

    async def later() -> None:
        await asyncio.sleep(0.1)
        await http.post(PODS, pod("s3"))

    t = asyncio.create_task(later())
    for rv in ("", "0"):
        params = {"resourceVersion": rv} if rv else {}
        evs = await http.watch(PODS, params, until=3 if rv == "" else 3)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
            ("ADDED", "s1"), ("ADDED", "s2"), ("ADDED", "s3")]
    await t


async def test_watch_timeout_and_bookmarks(http: Http, sandbox: Sandbox) -> None:
    sandbox.app.bookmark_interval = 0.1
    s, lst = await http.get(PODS)
    evs = await http.watch(PODS, {"resourceVersion": lst["metadata"]["resourceVersion"],
                                  "allowWatchBookmarks": "true", "timeoutSeconds": "1"})
    assert evs and all(e["type"] == "BOOKMARK" for e in evs)
    assert evs[0]["object"]["kind"] == "Pod" and evs[0]["object"]["metadata"]["resourceVersion"]
    # without bookmarks the stream just ends at the timeout
    evs = await http.watch(PODS, {"resourceVersion": lst["metadata"]["resourceVersion"], "timeoutSeconds": "1"})
    assert evs == []


async def test_send_initial_events_ends_with_marked_bookmark(http: Http) -> None:
    await http.post(PODS, pod("i1"))
    evs = await http.watch(PODS, {"sendInitialEvents": "true", "allowWatchBookmarks": "true",
                                  "resourceVersionMatch": "NotOlderThan"}, until=2)
    assert evs[0]["type"] == "ADDED" and evs[1]["type"] == "BOOKMARK"
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


@pytest.mark.sandbox(watch_history=3)
async def test_watch_too_old_gets_410_error_event(http: Http, sandbox: Sandbox) -> None:
    _, first = await http.post(PODS, pod("o0"))
    for i in range(1, 6):
        await http.post(PODS, pod(f"o{i}"))
    evs = await http.watch(PODS, {"resourceVersion": first["metadata"]["resourceVersion"]})
    assert len(evs) == 1 and evs[0]["type"] == "ERROR"
    st = evs[0]["object"]
    assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired"
    assert st["message"].startswith("too old resource version:")
    # a forced compaction expires everything older than now
    _, cur = await http.get(PODS)
    sandbox.compact()
    evs = await http.watch(PODS, {"resourceVersion": str(int(cur["metadata"]["resourceVersion"]) - 1)})
    assert evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410


async def test_selector_transitions_are_added_and_deleted(http: Http) -> None:
    _, p = await http.post(PODS, pod("t", labels={"app": "a"}))
    rv = p["metadata"]["resourceVersion"]
    await http.patch(f"{PODS}/t", {"metadata": {"labels": {"app": "b"}}})
    await http.patch(f"{PODS}/t", {"metadata": {"labels": {"app": "a", "x": "1"}}})
    await http.patch(f"{PODS}/t", {"metadata": {"labels": {"x": "2"}}})
    evs = await http.watch(PODS, {"resourceVersion": rv, "labelSelector": "app=a"}, until=3)
    assert [e["type"] for e in evs] == ["DELETED", "ADDED", "MODIFIED"]
    # the DELETED carries the last matching state at the new resourceVersion
    assert evs[0]["object"]["metadata"]["labels"] == {"app": "a"}
    assert int(evs[0]["object"]["metadata"]["resourceVersion"]) > int(rv)
    # unscheduled-pods watch as a scheduler does it: binding makes the pod leave the selection
    _, q = await http.post(PODS, pod("u"))
    await http.post(f"{PODS}/u/binding", {"target": {"kind": "Node", "name": "node-0000"}, "metadata": {"name": "u"}})
    evs = await http.watch(PODS, {"resourceVersion": q["metadata"]["resourceVersion"],
                                  "fieldSelector": "spec.nodeName="}, until=1)
    assert evs[0]["type"] == "DELETED" and evs[0]["object"]["metadata"]["name"] == "u"


async def test_watch_single_object_and_namespace_scope(http: Http) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "ws"}})
    _, a = await http.post(PODS, pod("one"))
    rv = a["metadata"]["resourceVersion"]
    await http.post("/api/v1/namespaces/ws/pods", pod("one"))
    await http.post(PODS, pod("two"))
    await http.patch(f"{PODS}/one", {"metadata": {"labels": {"k": "v"}}})
    evs = await http.watch(PODS, {"resourceVersion": rv, "fieldSelector": "metadata.name=one"}, until=1)
    assert [(e["type"], e["object"]["metadata"]["namespace"]) for e in evs] == [("MODIFIED", "default")]
    evs = await http.watch("/api/v1/watch/namespaces/default/pods/one", {"resourceVersion": rv}, until=1)
    assert evs[0]["type"] == "MODIFIED"


async def test_drop_watches_fault_ends_streams(http: Http, sandbox: Sandbox) -> None:
    task = asyncio.create_task(http.watch(PODS, {"resourceVersion": "0"}, timeout=10))
    for _ in range(100):
        if sandbox.counters()["open_watches"]:
            break
        await asyncio.sleep(0.01)
    assert sandbox.drop_watches() == 1
    assert await asyncio.wait_for(task, 5) == []
