"""Metadata semantics, optimistic concurrency, error Status objects, namespaces, finalizers."""

from __future__ import annotations

import pytest
from sbhelpers import Http, pod, wait_for

from scheduler.sandbox import Sandbox

PODS = "/api/v1/namespaces/default/pods"
CM = "/api/v1/namespaces/default/configmaps"


async def test_create_sets_metadata_and_global_resource_version(http: Http) -> None:
    s1, a = await http.post(CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    s2, b = await http.post(PODS, pod("p"))
    assert (s1, s2) == (201, 201)
    for o in (a, b):
        md = o["metadata"]
        assert md["uid"] and md["creationTimestamp"].endswith("Z") and md["namespace"] == "default"
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    assert a["kind"] == "ConfigMap" and a["apiVersion"] == "v1"
    assert b["metadata"]["generation"] == 1
    s, got = await http.get(f"{PODS}/p")
    assert s == 200 and got == b


async def test_generate_name(http: Http) -> None:
    s, o = await http.post(CM, {"metadata": {"generateName": "cfg-"}})
    assert s == 201 and o["metadata"]["name"].startswith("cfg-") and len(o["metadata"]["name"]) == 9


async def test_pod_defaults_that_schedulers_read(http: Http) -> None:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}
    s, o = await http.post(PODS, {"metadata": {"name": "g"}, "spec": spec})
    assert s == 201
    assert o["spec"]["schedulerName"] == "default-scheduler"
    assert o["spec"]["priority"] == 0
    assert o["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert o["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    assert {t["key"] for t in o["spec"]["tolerations"]} == {
        "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


async def test_priority_class_admission(http: Http) -> None:
    await http.post("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "high"}, "value": 1000})
    s, o = await http.post(PODS, pod("hp", priorityClassName="high"))
    assert s == 201 and o["spec"]["priority"] == 1000
    s, st = await http.post(PODS, pod("np", priorityClassName="nope"))
    assert s == 403 and st["reason"] == "Forbidden"


async def test_not_found_and_already_exists(http: Http) -> None:
    s, st = await http.get(f"{PODS}/missing")
    assert s == 404
    assert st["kind"] == "Status" and st["status"] == "Failure" and st["reason"] == "NotFound"
    assert st["message"] == 'pods "missing" not found'
    assert st["details"] == {"name": "missing", "kind": "pods"}
    await http.post(PODS, pod("dup"))
    s, st = await http.post(PODS, pod("dup"))
    assert s == 409 and st["reason"] == "AlreadyExists" and st["message"] == 'pods "dup" already exists'
    s, st = await http.post("/api/v1/namespaces/nowhere/pods", pod("x"))
    assert s == 404 and st["message"] == 'namespaces "nowhere" not found'
    s, st = await http.get("/apis/nogroup.io/v1/things")
    assert s == 404 and st["reason"] == "NotFound"


async def test_invalid_names_labels_quantities_are_422_with_causes(http: Http) -> None:
    s, st = await http.post(PODS, {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert s == 422 and st["reason"] == "Invalid"
    assert st["details"]["causes"][0]["field"] == "metadata.name"
    assert st["details"]["causes"][0]["reason"] == "FieldValueRequired"
    s, st = await http.post(PODS, pod("Bad_Name"))
    assert s == 422 and st["details"]["causes"][0]["field"] == "metadata.name"
    assert st["message"].startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value')
    s, st = await http.post(PODS, pod("l", labels={"a b": "c"}))
    assert s == 422 and st["details"]["causes"][0]["field"] == "metadata.labels"
    neg = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "-1"}}}]}
    s, st = await http.post(PODS, {"metadata": {"name": "neg"}, "spec": neg})
    assert s == 422
    assert st["details"]["causes"][0]["field"] == "spec.containers[0].resources.requests[cpu]"
    assert "must be greater than or equal to 0" in st["message"]
    s, st = await http.post(PODS, {"metadata": {"name": "nocont"}, "spec": {}})
    assert s == 422 and st["details"]["causes"][0]["field"] == "spec.containers"


async def test_bad_request_and_method_not_allowed(http: Http) -> None:
    s, st = await http.post(PODS, b"{not json")
    assert s == 400 and st["reason"] == "BadRequest"
    s, st = await http.post("/api/v1/namespaces/other/pods", {**pod("x"), "metadata": {"name": "x", "namespace": "default"}})
    assert s == 400
    s, st = await http.put(PODS, pod("x"))
    assert s == 405 and st["reason"] == "MethodNotAllowed"
    s, st = await http.get(PODS, params={"labelSelector": "a in (b"})
    assert s == 400 and st["reason"] == "BadRequest"


@pytest.mark.sandbox(simulate_controllers=False)  # no status writes racing the PUTs
async def test_put_optimistic_concurrency_and_generation(http: Http) -> None:
    _, o = await http.post("/apis/apps/v1/namespaces/default/deployments",
                           {"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {}, "template": {}}})
    path = "/apis/apps/v1/namespaces/default/deployments/d"
    o["metadata"]["labels"] = {"x": "y"}
    s, o2 = await http.put(path, o)
    assert s == 200 and o2["metadata"]["generation"] == 1  # metadata-only: no bump
    stale = dict(o)
    s, st = await http.put(path, stale)
    assert s == 409 and st["reason"] == "Conflict"
    assert st["message"] == ('Operation cannot be fulfilled on deployments.apps "d": the object has been '
                             "modified; please apply your changes to the latest version and try again")
    o2["spec"]["replicas"] = 3
    s, o3 = await http.put(path, o2)
    assert s == 200 and o3["metadata"]["generation"] == 2
    assert int(o3["metadata"]["resourceVersion"]) > int(o2["metadata"]["resourceVersion"])
    # unconditional update (no resourceVersion) is allowed
    del o3["metadata"]["resourceVersion"]
    o3["spec"]["replicas"] = 4
    s, o4 = await http.put(path, o3)
    assert s == 200 and o4["metadata"]["generation"] == 3
    # a no-op update keeps the resourceVersion
    s, o5 = await http.put(path, o4)
    assert s == 200 and o5["metadata"]["resourceVersion"] == o4["metadata"]["resourceVersion"]
    s, st = await http.put("/apis/apps/v1/namespaces/default/deployments/zzz", {**o4, "metadata": {"name": "zzz"}})
    assert s == 404


async def test_pod_spec_is_mostly_immutable(http: Http) -> None:
    _, p = await http.post(PODS, pod("im"))
    p["spec"]["restartPolicy"] = "Never"
    s, st = await http.put(f"{PODS}/im", p)
    assert s == 422 and st["details"]["causes"][0]["field"] == "spec"
    p["spec"]["restartPolicy"] = "Always"
    p["spec"]["containers"][0]["image"] = "busybox:2"
    s, _ = await http.put(f"{PODS}/im", p)
    assert s == 200


async def test_finalizers_hold_deletion(http: Http) -> None:
    await http.post(CM, {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}})
    s, o = await http.delete(f"{CM}/f")
    assert s == 200 and o["metadata"]["deletionTimestamp"]
    s, o = await http.get(f"{CM}/f")
    assert s == 200 and o["metadata"]["deletionTimestamp"]
    s, o = await http.patch(f"{CM}/f", {"metadata": {"finalizers": None}})
    assert s == 200
    s, _ = await http.get(f"{CM}/f")
    assert s == 404


async def test_delete_returns_status_or_object_and_preconditions(http: Http) -> None:
    _, c = await http.post(CM, {"metadata": {"name": "d1"}})
    s, st = await http.delete(f"{CM}/d1", {"preconditions": {"uid": "wrong"}})
    assert s == 409 and st["reason"] == "Conflict"
    s, st = await http.delete(f"{CM}/d1")
    assert s == 200 and st["kind"] == "Status" and st["status"] == "Success"
    assert st["details"]["uid"] == c["metadata"]["uid"]
    s, st = await http.delete(f"{CM}/d1")
    assert s == 404


@pytest.mark.sandbox(simulate_kubelet=False)
async def test_namespace_lifecycle(http: Http) -> None:
    s, ns = await http.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
    assert s == 201 and ns["status"]["phase"] == "Active"
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team"
    await http.post("/api/v1/namespaces/team/pods", pod("p"))
    await http.post("/api/v1/namespaces/team/configmaps", {"metadata": {"name": "c"}})
    s, _ = await http.delete("/api/v1/namespaces/team")
    assert s == 200

    async def gone() -> bool:  # the namespace controller empties it, then it goes
        s1, _ = await http.get("/api/v1/namespaces/team/pods/p")
        s2, _ = await http.get("/api/v1/namespaces/team")
        return s1 == 404 and s2 == 404
    await wait_for(gone)


async def test_initial_namespaces_and_nodes(http: Http, sandbox: Sandbox) -> None:
    _, nsl = await http.get("/api/v1/namespaces")
    assert {n["metadata"]["name"] for n in nsl["items"]} >= {"default", "kube-system", "kube-public", "kube-node-lease"}
    _, nodes = await http.get("/api/v1/nodes")
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["node-0000", "node-0001", "node-0002"]
    n = nodes["items"][1]
    labels = n["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "node-0001"
    assert labels["topology.kubernetes.io/zone"] == "zone-b"
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64"
    assert n["status"]["allocatable"] == {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    assert {c["type"]: c["status"] for c in n["status"]["conditions"]}["Ready"] == "True"
    assert n["status"]["nodeInfo"]["kubeletVersion"]


@pytest.mark.sandbox(nodes=2, node_cpu="4", node_memory="8Gi", node_pods="10", node_labels={"pool": "gpu"})
async def test_node_flags(http: Http) -> None:
    _, n = await http.get("/api/v1/nodes/node-0001")
    assert n["status"]["capacity"]["cpu"] == "4" and n["status"]["capacity"]["pods"] == "10"
    assert n["metadata"]["labels"]["pool"] == "gpu"


@pytest.mark.sandbox(token="s3cret")
async def test_token_auth(http: Http, sandbox: Sandbox) -> None:
    s, _ = await http.get("/api/v1/pods")
    assert s == 200
    anon = Http(http.s, sandbox.url)
    s, st = await anon.get("/api/v1/pods")
    assert s == 401 and st["reason"] == "Unauthorized" and st["kind"] == "Status"
    wrong = Http(http.s, sandbox.url, "nope")
    s, _ = await wrong.get("/sandbox/v1/counters")
    assert s == 401
    s, body = await anon.get("/healthz")
    assert s == 200 and body == "ok"


async def test_health_version_and_discovery(http: Http) -> None:
    for p in ("/healthz", "/livez", "/readyz"):
        s, body = await http.get(p)
        assert (s, body) == (200, "ok")
    s, v = await http.get("/version")
    assert s == 200 and v["major"] == "1" and v["gitVersion"].startswith("v1.")
    _, api = await http.get("/api")
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    _, v1 = await http.get("/api/v1")
    names = {r["name"]: r for r in v1["resources"]}
    assert {"pods", "pods/binding", "pods/status", "pods/eviction", "nodes/status", "events",
            "persistentvolumeclaims/status", "services", "configmaps", "namespaces"} <= set(names)
    assert names["pods"]["shortNames"] == ["po"] and names["pods"]["namespaced"] is True
    assert names["pods/eviction"]["group"] == "policy"
    _, groups = await http.get("/apis")
    gnames = {g["name"] for g in groups["groups"]}
    assert {"apps", "policy", "storage.k8s.io", "coordination.k8s.io", "events.k8s.io",
            "apiextensions.k8s.io"} <= gnames
    _, storage = await http.get("/apis/storage.k8s.io/v1")
    assert {r["name"] for r in storage["resources"]} >= {"storageclasses", "csinodes", "csidrivers"}
    s, _ = await http.get("/openapi/v2", headers={"Accept": "application/json"})
    assert s == 200
    s, _ = await http.get("/apis/apps/v9")
    assert s == 404


async def test_pvc_status_subresource_and_other_builtins(http: Http) -> None:
    base = "/api/v1/namespaces/default/persistentvolumeclaims"
    s, pvc = await http.post(base, {"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                        "resources": {"requests": {"storage": "1Gi"}}}})
    assert s == 201 and pvc["status"]["phase"] == "Pending"
    s, pvc = await http.patch(f"{base}/c/status", {"status": {"phase": "Bound"}})
    assert s == 200 and pvc["status"]["phase"] == "Bound"
    for path, body in (
        ("/apis/storage.k8s.io/v1/storageclasses", {"metadata": {"name": "sc"}, "provisioner": "x"}),
        ("/apis/storage.k8s.io/v1/csinodes", {"metadata": {"name": "node-0000"}, "spec": {"drivers": []}}),
        ("/apis/storage.k8s.io/v1/csidrivers", {"metadata": {"name": "d"}, "spec": {}}),
        ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", {"metadata": {"name": "l"}, "spec": {}}),
        ("/api/v1/persistentvolumes", {"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}}}),
        ("/api/v1/namespaces/default/services", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
        ("/apis/apps/v1/namespaces/default/replicasets", {"metadata": {"name": "rs"}, "spec": {"selector": {}}}),
        ("/apis/events.k8s.io/v1/namespaces/default/events", {"metadata": {"name": "e"}, "reason": "X",
                                                              "eventTime": "2026-01-01T00:00:00.000000Z",
                                                              "type": "Normal", "action": "A",
                                                              "reportingController": "c", "reportingInstance": "i"}),
    ):
        s, o = await http.post(path, body)
        assert s == 201, (path, o)
        s, lst = await http.get(path)
        assert s == 200 and lst["kind"].endswith("List") and len(lst["items"]) == 1


async def test_deletecollection(http: Http) -> None:
    for i in range(3):
        await http.post(CM, {"metadata": {"name": f"dc{i}", "labels": {"g": "x" if i < 2 else "y"}}})
    s, out = await http.delete(CM, params={"labelSelector": "g=x"})
    assert s == 200 and len(out["items"]) == 2
    _, left = await http.get(CM)
    assert [c["metadata"]["name"] for c in left["items"]] == ["dc2"]


async def test_dry_run_does_not_persist(http: Http) -> None:
    s, o = await http.post(CM, {"metadata": {"name": "dry"}}, params={"dryRun": "All"})
    assert s == 201 and o["metadata"]["name"] == "dry"
    s, _ = await http.get(f"{CM}/dry")
    assert s == 404


async def test_events_field_selectors_for_describe(http: Http) -> None:
    _, p = await http.post(PODS, pod("ev"))
    uid = p["metadata"]["uid"]
    for i, (name, puid) in enumerate((("ev", uid), ("other", "u2"))):
        await http.post("/api/v1/namespaces/default/events", {
            "metadata": {"name": f"e{i}"}, "reason": "Scheduled", "type": "Normal", "message": "m",
            "involvedObject": {"kind": "Pod", "name": name, "namespace": "default", "uid": puid}})
    fs = f"involvedObject.name=ev,involvedObject.namespace=default,involvedObject.uid={uid},involvedObject.kind=Pod"
    _, lst = await http.get("/api/v1/namespaces/default/events", params={"fieldSelector": fs})
    assert [e["metadata"]["name"] for e in lst["items"]] == ["e0"]


async def test_wait_for_helper_fails_on_timeout() -> None:
    async def never() -> bool:
        return False

    with pytest.raises(AssertionError):
        await wait_for(never, timeout=0.05)
