"""PATCH in every media type, server-side apply, and status subresource separation."""

from __future__ import annotations

from typing import Any

import pytest

from sbhelpers import Http, pod

PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


async def test_merge_patch(http: Http) -> None:
    await http.post(PODS, pod("m", labels={"a": "1", "b": "2"}))
    s, o = await http.patch(f"{PODS}/m", {"metadata": {"labels": {"a": None, "c": "3"}}}, MERGE)
    assert s == 200 and o["metadata"]["labels"] == {"b": "2", "c": "3"}


async def test_json_patch(http: Http) -> None:
    await http.post(PODS, pod("j", labels={"a": "1"}))
    ops = [{"op": "test", "path": "/metadata/labels/a", "value": "1"},
           {"op": "add", "path": "/metadata/labels/b", "value": "2"},
           {"op": "remove", "path": "/metadata/labels/a"}]
    s, o = await http.patch(f"{PODS}/j", ops, JSONP)
    assert s == 200 and o["metadata"]["labels"] == {"b": "2"}
    s, st = await http.patch(f"{PODS}/j", [{"op": "test", "path": "/metadata/labels/b", "value": "x"}], JSONP)
    assert s == 422
    s, st = await http.patch(f"{PODS}/j", {"not": "a list"}, JSONP)
    assert s == 400


async def test_strategic_merge_patch_list_merge_keys(http: Http) -> None:
    spec = {"containers": [{"name": "a", "image": "x", "env": [{"name": "E1", "value": "1"}],
                            "ports": [{"containerPort": 80}]},
                           {"name": "b", "image": "y"}],
            "tolerations": [{"key": "k1", "operator": "Exists"}],
            "volumes": [{"name": "v1", "emptyDir": {}}]}
    s, o = await http.post(PODS, {"metadata": {"name": "s", "finalizers": ["f/one"],
                                               "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u1"}]},
                                  "spec": spec})
    assert s == 201
    patch = {
        "metadata": {"finalizers": ["f/two"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Y", "name": "o2", "uid": "u2"}]},
        "spec": {"containers": [{"name": "a", "image": "x2", "env": [{"name": "E2", "value": "2"}],
                                 "ports": [{"containerPort": 81}]}],
                 "tolerations": [{"key": "k2", "operator": "Exists"}],
                 "volumes": [{"name": "v2", "emptyDir": {}}]},
    }
    # pod spec is immutable except images/tolerations: patch the mutable bits on the pod...
    s, st = await http.patch(f"{PODS}/s", patch, SMP)
    assert s == 422  # env/ports/volumes changes are forbidden on pods, as upstream
    ok = {"metadata": patch["metadata"],
          "spec": {"containers": [{"name": "a", "image": "x2"}],
                   "tolerations": [{"key": "k2", "operator": "Exists"}, {"key": "k1", "operator": "Exists"}]}}
    s, o = await http.patch(f"{PODS}/s", ok, SMP)
    assert s == 200, o
    assert o["metadata"]["finalizers"] == ["f/one", "f/two"]
    assert [r["uid"] for r in o["metadata"]["ownerReferences"]] == ["u1", "u2"]
    assert [(c["name"], c["image"]) for c in o["spec"]["containers"]] == [("a", "x2"), ("b", "y")]
    assert o["spec"]["containers"][0]["env"] == [{"name": "E1", "value": "1"}]
    # replaced, no merge key (existing tolerations must stay, as upstream; DefaultTolerationSeconds re-adds its own)
    assert [t["key"] for t in o["spec"]["tolerations"]] == [
        "k2", "k1", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
    # ...and the full list semantics on a Deployment template, where everything is mutable
    dep = {"metadata": {"name": "d"}, "spec": {"selector": {}, "template": {"spec": spec}}}
    await http.post("/apis/apps/v1/namespaces/default/deployments", dep)
    s, d = await http.patch("/apis/apps/v1/namespaces/default/deployments/d",
                            {"spec": {"template": {"spec": patch["spec"]}}}, SMP)
    assert s == 200
    t = d["spec"]["template"]["spec"]
    a = t["containers"][0]
    assert [e["name"] for e in a["env"]] == ["E1", "E2"]
    assert [p["containerPort"] for p in a["ports"]] == [80, 81]
    assert [v["name"] for v in t["volumes"]] == ["v1", "v2"]
    assert d["metadata"]["generation"] == 2
    s, d = await http.patch("/apis/apps/v1/namespaces/default/deployments/d",
                            {"spec": {"template": {"spec": {
                                "containers": [{"name": "b", "$patch": "delete"}],
                                "$setElementOrder/volumes": [{"name": "v2"}, {"name": "v1"}],
                                "volumes": [{"name": "v2", "emptyDir": {}}]}}},
                             "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}, SMP)
    assert s == 200
    t = d["spec"]["template"]["spec"]
    assert [c["name"] for c in t["containers"]] == ["a"]
    assert [v["name"] for v in t["volumes"]] == ["v2", "v1"]


async def test_strategic_merge_of_pod_conditions_on_status(http: Http) -> None:
    await http.post(PODS, pod("c"))
    cond1 = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
    s, o = await http.patch(f"{PODS}/c/status", {"status": {"conditions": [cond1]}}, SMP)
    assert s == 200 and o["status"]["conditions"] == [cond1]
    cond2 = {"type": "Custom", "status": "True"}
    s, o = await http.patch(f"{PODS}/c/status", {"status": {"conditions": [cond2], "nominatedNodeName": "node-0001"}}, SMP)
    assert [c["type"] for c in o["status"]["conditions"]] == ["PodScheduled", "Custom"]
    assert o["status"]["nominatedNodeName"] == "node-0001"
    s, o = await http.patch(f"{PODS}/c/status", {"status": {"conditions": [{"type": "PodScheduled", "message": "1/3"}]}}, SMP)
    assert o["status"]["conditions"][0] == {**cond1, "message": "1/3"}


async def test_patch_resource_version_precondition(http: Http) -> None:
    _, o = await http.post(PODS, pod("rv"))
    s, st = await http.patch(f"{PODS}/rv", {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}}, MERGE)
    assert s == 409 and st["reason"] == "Conflict"
    s, _ = await http.patch(f"{PODS}/rv", {"metadata": {"resourceVersion": o["metadata"]["resourceVersion"],
                                                         "labels": {"a": "b"}}}, MERGE)
    assert s == 200
    s, st = await http.patch(f"{PODS}/nope", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert s == 404
    s, st = await http.patch(f"{PODS}/rv", {}, "text/plain")
    assert s == 415 and st["reason"] == "UnsupportedMediaType"


async def test_server_side_apply_creates_then_merges(http: Http) -> None:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: '1'\n"
    path = "/api/v1/namespaces/default/configmaps/ssa"
    s, st = await http.patch(path, cm, APPLY)
    assert s == 422  # fieldManager is required for apply
    s, o = await http.patch(path, cm, APPLY, params={"fieldManager": "t"})
    assert s == 201 and o["data"] == {"a": "1"}
    s, o = await http.patch(path, cm.replace("a: '1'", "b: '2'"), APPLY, params={"fieldManager": "t"})
    assert s == 200 and o["data"] == {"a": "1", "b": "2"}


async def test_status_subresource_separation(http: Http) -> None:
    _, p = await http.post(PODS, {**pod("st"), "status": {"phase": "Running"}})
    assert p["status"]["phase"] == "Pending"  # status is reset on create
    # main resource write: status changes are ignored
    p["status"]["phase"] = "Failed"
    p["metadata"]["labels"] = {"x": "y"}
    s, p2 = await http.put(f"{PODS}/st", p)
    assert s == 200 and p2["status"]["phase"] == "Pending" and p2["metadata"]["labels"] == {"x": "y"}
    # status write: everything else is ignored
    p2["status"]["phase"] = "Running"
    p2["metadata"]["labels"] = {"x": "z"}
    s, p3 = await http.put(f"{PODS}/st/status", p2)
    assert s == 200 and p3["status"]["phase"] == "Running" and p3["metadata"]["labels"] == {"x": "y"}
    s, p4 = await http.patch(f"{PODS}/st", {"status": {"phase": "Unknown"}, "metadata": {"labels": {"q": "1"}}})
    assert p4["status"]["phase"] == "Running" and p4["metadata"]["labels"]["q"] == "1"
    s, got = await http.get(f"{PODS}/st/status")
    assert s == 200 and got["status"]["phase"] == "Running"
    # nodes/status too; nodes keep the status they are created with
    s, n = await http.patch("/api/v1/nodes/node-0000/status", {"status": {"allocatable": {"cpu": "8"}}})
    assert s == 200 and n["status"]["allocatable"]["cpu"] == "8"
    s, n = await http.patch("/api/v1/nodes/node-0000", {"spec": {"unschedulable": True}, "status": {"allocatable": {"cpu": "1"}}})
    assert n["spec"]["unschedulable"] is True and n["status"]["allocatable"]["cpu"] == "8"


async def test_pod_status_write_does_not_revalidate_the_spec(sandbox: Any) -> None:
    """kube-apiserver's pod status strategy validates metadata and status only: a pod whose spec
    a looser server stored (the raw-write fault) can still have its conditions patched."""
    import aiohttp

    bad = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "loose", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "x",
                                    "resources": {"requests": {"cpu": "abc"}}}]}}
    sandbox.raw_put(bad)
    patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                        "reason": "SchedulerError"}]}}
    async with aiohttp.ClientSession() as session:
        async with session.patch(
            f"{sandbox.url}/api/v1/namespaces/default/pods/loose/status", json=patch,
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        ) as resp:
            assert resp.status == 200, await resp.text()
        async with session.patch(
            f"{sandbox.url}/api/v1/namespaces/default/pods/loose",
            json={"metadata": {"labels": {"a": "b"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        ) as resp:
            assert resp.status == 422, "a write to the main resource still validates the spec"


@pytest.mark.parametrize(("ops", "code"), [
    ([{"op": "remove", "path": "/metadata/labels/missing"}], 422),
    ([{"op": "replace", "path": "/spec/nope/x", "value": 1}], 422),
    ([{"op": "add", "path": "/spec/containers/9", "value": {}}], 422),
    ([{"op": "frobnicate", "path": "/metadata"}], 422),
    ([{"path": "/metadata"}], 422),
    ([{"op": "add", "path": "no-slash", "value": 1}], 422),
    ({"op": "add"}, 400),
    ("[", 400),
])
async def test_json_patch_failures_keep_upstream_codes(http: Http, ops: Any, code: int) -> None:
    await http.post(PODS, pod("jf", labels={"a": "1"}))
    s, st = await http.patch(f"{PODS}/jf", ops if not isinstance(ops, str) else ops.encode(), JSONP)
    assert s == code and st["kind"] == "Status", st
    s, o = await http.get(f"{PODS}/jf")
    assert o["metadata"]["labels"] == {"a": "1"}  # nothing half-applied
    await http.delete(f"{PODS}/jf", params={"gracePeriodSeconds": "0"})


async def test_json_patch_move_copy_and_append(http: Http) -> None:
    await http.post(PODS, pod("jm", labels={"a": "1"}))
    ops = [{"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/b"},
           {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/c"},
           {"op": "add", "path": "/metadata/finalizers", "value": []},
           {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/f"}]
    s, o = await http.patch(f"{PODS}/jm", ops, JSONP)
    assert s == 200 and o["metadata"]["labels"] == {"b": "1", "c": "1"}
    assert o["metadata"]["finalizers"] == ["example.com/f"]
