"""Deployment/ReplicaSet/Job controllers, garbage collection and namespace deletion, checked
over HTTP as a client of kube-controller-manager's results would see them."""

from __future__ import annotations

from typing import Any

import pytest
from sbhelpers import Http, binding, wait_for

from scheduler.sandbox import Sandbox

NS = "/api/v1/namespaces"
PODS = "/api/v1/namespaces/default/pods"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"
RS = "/apis/apps/v1/namespaces/default/replicasets"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def deployment(name: str, replicas: int, image: str = "pause") -> dict[str, Any]:
    tmpl = {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": image}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": tmpl}}


def job(name: str, **spec: Any) -> dict[str, Any]:
    ann = spec.pop("annotations", None)
    tmpl: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}}
    if ann:
        tmpl["metadata"] = {"annotations": ann}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": tmpl, **spec}}


async def items(http: Http, path: str, selector: str = "") -> list[dict[str, Any]]:
    _, lst = await http.get(path, params={"labelSelector": selector} if selector else None)
    return list(lst["items"])


async def owned_by(http: Http, path: str, uid: str) -> list[dict[str, Any]]:
    return [o for o in await items(http, path)
            if any(r["uid"] == uid and r.get("controller") for r in o["metadata"].get("ownerReferences") or [])]


async def test_deployment_creates_replicaset_and_pods(http: Http) -> None:
    s, d = await http.post(DEPLOY, deployment("web", 3))
    assert s == 201
    uid = d["metadata"]["uid"]
    [rs] = await wait_for(lambda: owned_by(http, RS, uid))
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    ref = rs["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"], ref["blockOwnerDeletion"]) == ("Deployment", "web", True, True)
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    pods = await wait_for(lambda: _n(owned_by(http, PODS, rs["metadata"]["uid"]), 3))
    for p in pods:
        assert p["metadata"]["name"].startswith(f"web-{h}-")
        assert p["metadata"]["generateName"] == f"web-{h}-"
        assert p["metadata"]["labels"] == {"app": "web", "pod-template-hash": h}

    async def status() -> dict[str, Any] | None:
        _, o = await http.get(f"{DEPLOY}/web")
        st: dict[str, Any] = o.get("status") or {}
        return st if st.get("replicas") == 3 else None
    st = await wait_for(status)
    assert st["updatedReplicas"] == 3 and st["observedGeneration"] == 1
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds == {"Available": "False", "Progressing": "True"}


async def _n(coro: Any, n: int) -> list[dict[str, Any]] | None:
    got: list[dict[str, Any]] = await coro
    return got if len(got) == n else None


@pytest.mark.sandbox(nodes=2)
async def test_scale_subresource_scales_up_and_down_and_ready_counts(http: Http) -> None:
    _, d = await http.post(DEPLOY, deployment("sc", 1))
    [rs] = await wait_for(lambda: owned_by(http, RS, d["metadata"]["uid"]))
    s, scale = await http.get(f"{DEPLOY}/sc/scale")
    assert s == 200 and scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 1} and scale["status"]["selector"] == "app=sc"
    s, scale = await http.patch(f"{DEPLOY}/sc/scale", {"spec": {"replicas": 4}})
    assert s == 200 and scale["spec"]["replicas"] == 4
    pods = await wait_for(lambda: _n(owned_by(http, PODS, rs["metadata"]["uid"]), 4))
    # two get bound and become Running (simulated kubelet): they are kept when scaling down
    for p in pods[:2]:
        s, _ = await http.post(f"{PODS}/{p['metadata']['name']}/binding", binding(p["metadata"]["name"], "node-0000"))
        assert s == 201

    async def ready(n: int) -> bool:
        _, o = await http.get(f"{DEPLOY}/sc")
        return bool((o.get("status") or {}).get("readyReplicas") == n)
    await wait_for(lambda: ready(2))
    s, _ = await http.put(f"{DEPLOY}/sc/scale", {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                                  "metadata": {"name": "sc"}, "spec": {"replicas": 2}})
    assert s == 200

    async def kept() -> bool:
        live = [p for p in await owned_by(http, PODS, rs["metadata"]["uid"])
                if not p["metadata"].get("deletionTimestamp")]
        return {p["metadata"]["name"] for p in live} == {p["metadata"]["name"] for p in pods[:2]}
    await wait_for(kept)
    s, st = await http.patch(f"{DEPLOY}/sc/scale", {"spec": {"replicas": -1}})
    assert s == 422 and st["reason"] == "Invalid"


async def test_template_change_rolls_to_a_new_replicaset(http: Http) -> None:
    _, d = await http.post(DEPLOY, deployment("roll", 2))
    [old] = await wait_for(lambda: owned_by(http, RS, d["metadata"]["uid"]))
    s, _ = await http.patch(f"{DEPLOY}/roll", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "pause:2"}]}}}}, ct="application/strategic-merge-patch+json")
    assert s == 200
    both = await wait_for(lambda: _n(owned_by(http, RS, d["metadata"]["uid"]), 2))
    new = next(r for r in both if r["metadata"]["uid"] != old["metadata"]["uid"])
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"

    async def rolled() -> bool:
        _, o = await http.get(f"{RS}/{old['metadata']['name']}")
        pods = await owned_by(http, PODS, new["metadata"]["uid"])
        return o["spec"]["replicas"] == 0 and len(pods) == 2
    await wait_for(rolled)


@pytest.mark.parametrize(("policy", "pods_left", "orphaned"), [
    ("Background", 0, False), ("Foreground", 0, False), ("Orphan", 2, True), (None, 0, False)])
async def test_deleting_a_deployment_collects_its_replicasets_and_pods(
    http: Http, policy: str | None, pods_left: int, orphaned: bool,
) -> None:
    _, d = await http.post(DEPLOY, deployment("gc", 2))
    [rs] = await wait_for(lambda: owned_by(http, RS, d["metadata"]["uid"]))
    await wait_for(lambda: _n(owned_by(http, PODS, rs["metadata"]["uid"]), 2))
    body = {"kind": "DeleteOptions", "apiVersion": "v1", **({"propagationPolicy": policy} if policy else {})}
    s, o = await http.delete(f"{DEPLOY}/gc", body)
    assert s == 200
    if policy in ("Foreground", "Orphan"):
        assert o["metadata"]["deletionTimestamp"]
        assert o["metadata"]["finalizers"] == ["foregroundDeletion" if policy == "Foreground" else "orphan"]

    async def settled() -> bool:
        s1, _ = await http.get(f"{DEPLOY}/gc")
        s2, _ = await http.get(f"{RS}/{rs['metadata']['name']}")
        pods = await items(http, PODS, "app=gc")
        return s1 == 404 and (s2 == 200) == orphaned and len(pods) == pods_left
    await wait_for(settled)
    if orphaned:
        _, r = await http.get(f"{RS}/{rs['metadata']['name']}")
        assert "ownerReferences" not in r["metadata"]


@pytest.mark.sandbox(nodes=1)
async def test_job_runs_parallelism_pods_to_completions(http: Http) -> None:
    s, j = await http.post(JOBS, job("batch", parallelism=2, completions=3,
                                     annotations={"sandbox.kube-py-scheduler.io/run-seconds": "0"}))
    assert s == 201
    uid = j["metadata"]["uid"]
    assert j["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = j["spec"]["template"]["metadata"]["labels"]
    assert labels == {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "batch",
                      "controller-uid": uid, "job-name": "batch"}
    first = await wait_for(lambda: _n(owned_by(http, PODS, uid), 2))
    assert all(p["metadata"]["generateName"] == "batch-" and p["metadata"]["labels"] == labels for p in first)
    bound: set[str] = set()

    async def bind_new_and_check_done() -> bool:
        for p in await owned_by(http, PODS, uid):
            name = p["metadata"]["name"]
            if name not in bound:
                bound.add(name)
                await http.post(f"{PODS}/{name}/binding", binding(name, "node-0000"))
        _, o = await http.get(f"{JOBS}/batch")
        return any(c["type"] == "Complete" and c["status"] == "True" for c in (o.get("status") or {}).get("conditions") or [])
    await wait_for(bind_new_and_check_done, timeout=10)
    _, o = await http.get(f"{JOBS}/batch")
    assert o["status"]["succeeded"] == 3 and o["status"].get("active", 0) == 0
    assert {c["type"] for c in o["status"]["conditions"]} == {"SuccessCriteriaMet", "Complete"}
    assert o["status"]["startTime"] and o["status"]["completionTime"]
    assert len(bound) == 3


@pytest.mark.sandbox(nodes=1)
async def test_job_fails_after_backoff_limit(http: Http) -> None:
    _, j = await http.post(JOBS, job("bad", backoffLimit=1, annotations={
        "sandbox.kube-py-scheduler.io/run-seconds": "0", "sandbox.kube-py-scheduler.io/exit-code": "1"}))
    uid = j["metadata"]["uid"]

    async def failed() -> bool:
        for p in await owned_by(http, PODS, uid):
            if not (p.get("spec") or {}).get("nodeName"):
                await http.post(f"{PODS}/{p['metadata']['name']}/binding", binding(p["metadata"]["name"], "node-0000"))
        _, o = await http.get(f"{JOBS}/bad")
        return any(c["type"] == "Failed" for c in (o.get("status") or {}).get("conditions") or [])
    await wait_for(failed, timeout=10)
    _, o = await http.get(f"{JOBS}/bad")
    assert o["status"]["failed"] == 2
    cond = next(c for c in o["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "BackoffLimitExceeded"


async def test_indexed_job_pods_carry_their_index(http: Http) -> None:
    _, j = await http.post(JOBS, job("idx", parallelism=3, completions=3, completionMode="Indexed"))
    pods = await wait_for(lambda: _n(owned_by(http, PODS, j["metadata"]["uid"]), 3))
    idx = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert idx == ["0", "1", "2"]


async def test_job_deleted_without_policy_orphans_its_pods(http: Http) -> None:
    _, j = await http.post(JOBS, job("orph"))
    [p] = await wait_for(lambda: owned_by(http, PODS, j["metadata"]["uid"]))
    s, _ = await http.delete(f"{JOBS}/orph")
    assert s == 200

    async def released() -> bool:
        s, pod = await http.get(f"{PODS}/{p['metadata']['name']}")
        gone, _ = await http.get(f"{JOBS}/orph")
        return s == 200 and "ownerReferences" not in pod["metadata"] and gone == 404
    await wait_for(released)


@pytest.mark.sandbox(simulate_controllers=False)
async def test_controllers_can_be_turned_off(http: Http, sandbox: Sandbox) -> None:
    _, d = await http.post(DEPLOY, deployment("still", 2))
    assert sandbox.controllers is None
    assert await items(http, RS) == []


# ------------------------------------------------------------------ namespaces


@pytest.mark.sandbox(nodes=1)
async def test_namespace_deletion_goes_through_terminating(http: Http) -> None:
    s, ns = await http.post(NS, {"metadata": {"name": "team"}})
    assert s == 201 and ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}
    await http.post(f"{NS}/team/configmaps", {"metadata": {"name": "c"}})
    await http.post("/apis/apps/v1/namespaces/team/deployments", deployment("w", 2))
    _, p = await http.post(f"{NS}/team/pods", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "pause"}], "terminationGracePeriodSeconds": 1}})
    await http.post(f"{NS}/team/pods/p/binding", binding("p", "node-0000"))

    async def running() -> bool:
        _, o = await http.get(f"{NS}/team/pods/p")
        return bool(o["status"]["phase"] == "Running")
    await wait_for(running)
    s, o = await http.delete(f"{NS}/team")
    assert s == 200 and o["status"]["phase"] == "Terminating" and o["metadata"]["deletionTimestamp"]
    assert o["spec"]["finalizers"] == ["kubernetes"]
    # the running pod terminates gracefully, so the namespace is still there, Terminating
    s, o = await http.get(f"{NS}/team")
    assert s == 200 and o["status"]["phase"] == "Terminating"
    s, st = await http.post(f"{NS}/team/configmaps", {"metadata": {"name": "late"}})
    assert s == 403 and st["reason"] == "Forbidden"
    assert st["message"] == ('configmaps "late" is forbidden: unable to create new content in namespace team '
                             "because it is being terminated")

    async def gone() -> bool:
        s, _ = await http.get(f"{NS}/team")
        return s == 404
    await wait_for(gone)
    for path in (f"{NS}/team/configmaps/c", f"{NS}/team/pods/p", "/apis/apps/v1/namespaces/team/deployments/w"):
        s, _ = await http.get(path)
        assert s == 404


async def test_namespace_waits_for_other_spec_finalizers_until_finalize(http: Http) -> None:
    await http.post(NS, {"metadata": {"name": "held"}})
    _, ns = await http.get(f"{NS}/held")
    s, ns = await http.put(f"{NS}/held/finalize", {**ns, "spec": {"finalizers": ["kubernetes", "example.com/x"]}})
    assert s == 200 and ns["spec"]["finalizers"] == ["kubernetes", "example.com/x"]
    await http.delete(f"{NS}/held")

    async def only_ours_left() -> dict[str, Any] | None:
        _, o = await http.get(f"{NS}/held")
        return o if o["spec"].get("finalizers") == ["example.com/x"] else None
    ns = await wait_for(only_ours_left)
    assert ns["status"]["phase"] == "Terminating"
    s, _ = await http.put(f"{NS}/held/finalize", {**ns, "spec": {"finalizers": []}})
    assert s == 200
    s, _ = await http.get(f"{NS}/held")
    assert s == 404


_NOT_QUALIFIED = "name is neither a standard finalizer name nor is it fully qualified"


@pytest.mark.parametrize("change, code, want", [
    # an update whose spec is taken too: only the status is kept (namespaceFinalizeStrategy)
    ({"spec": {"finalizers": ["kubernetes", "example.com/x", "orphan"]},
      "metadata": {"labels": {"taken": "yes"}}, "status": {"phase": "Terminating"}},
     200, ["kubernetes", "example.com/x", "orphan"]),
    ({"spec": {}}, 200, []),
    ({"spec": {"finalizers": []}}, 200, []),
    ({"spec": {"finalizers": ["mine"]}}, 422, [("spec.finalizers[0]", _NOT_QUALIFIED)]),
    ({"spec": {"finalizers": ["kubernetes", "example.com/a b"]}}, 422,
     [("spec.finalizers[1]", "name part must consist of")]),
    ({"spec": {"finalizers": ["Example.com/x"]}}, 422, [("spec.finalizers[0]", "prefix part a lowercase")]),
    ({"spec": {"finalizers": "kubernetes"}}, 400, None),
    ({"metadata": {"resourceVersion": "1"}}, 409, None),  # stale
    ({"metadata": {"name": "other"}}, 400, None),
])
async def test_finalize_subresource(http: Http, change: dict[str, Any], code: int, want: Any) -> None:
    """PUT namespaces/{name}/finalize: spec.finalizers as given (omitted when empty),
    validated as upstream's ValidateNamespaceFinalizeUpdate (qualified names, unprefixed ones
    standard: 422); the metadata as any update takes it; the status kept."""
    _, ns = await http.post(NS, {"metadata": {"name": "fin"}})
    body = {**ns, **change, "metadata": {**ns["metadata"], **change.get("metadata", {})}}
    s, o = await http.put(f"{NS}/fin/finalize", body)
    assert s == code, o
    _, now = await http.get(f"{NS}/fin")
    if code == 200:
        assert o["spec"].get("finalizers", []) == want == now["spec"].get("finalizers", [])
        assert now["status"] == {"phase": "Active"}
        assert (now["metadata"]["labels"].get("taken") == "yes") == ("labels" in change.get("metadata", {}))
    else:
        assert now["spec"]["finalizers"] == ["kubernetes"]
    if code == 422:
        assert [(c["field"], c["message"].split(": ", 2)[-1][:len(m)]) for c, (_, m) in
                zip(o["details"]["causes"], want, strict=True)] == want


@pytest.mark.parametrize("sub", ["", "/finalize"])
async def test_a_namespace_update_keeps_its_name_label(http: Http, sub: str) -> None:
    """The namespace strategy's Canonicalize sets kubernetes.io/metadata.name on every update
    (the finalize subresource's too): labels replaced without it get it back."""
    _, ns = await http.post(NS, {"metadata": {"name": "labelled"}})
    s, o = await http.put(f"{NS}/labelled{sub}", {**ns, "metadata": {**ns["metadata"], "labels": {"team": "a"}}})
    assert s == 200 and o["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "labelled"}
    s, o = await http.patch(f"{NS}/labelled", [{"op": "remove", "path": "/metadata/labels"}],
                            ct="application/json-patch+json")
    assert s == 200 and o["metadata"]["labels"] == {"kubernetes.io/metadata.name": "labelled"}


async def test_finalize_of_a_missing_namespace_is_not_found(http: Http) -> None:
    s, o = await http.put(f"{NS}/nowhere/finalize", {"metadata": {"name": "nowhere"}, "spec": {"finalizers": []}})
    assert s == 404 and o["reason"] == "NotFound"


@pytest.mark.parametrize("method", ["GET", "PATCH", "POST", "DELETE"])
async def test_finalize_serves_update_only(http: Http, method: str) -> None:
    """The subresource's one verb is update (discovery says so): the others are 405."""
    body = {"spec": {"finalizers": []}} if method in ("PATCH", "POST") else None
    s, o = await http.req(method, f"{NS}/default/finalize", body, ct="application/merge-patch+json")
    assert s == 405 and o["reason"] == "MethodNotAllowed"
    _, ns = await http.get(f"{NS}/default")
    assert ns["spec"]["finalizers"] == ["kubernetes"]


CM = "/api/v1/namespaces/default/configmaps"


def configmap(name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if owners:
        md["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"],
                                  "uid": o["metadata"]["uid"]} for o in owners]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}


async def test_garbage_collector_follows_owner_references_written_before_and_after_a_removal(
    http: Http,
) -> None:
    """An owner's removal collects exactly the dependents whose every owner is gone, whether
    they were written before the collector's first removal or after it; a dependent
    released by an update, or with another owner alive, stays."""
    _, a = await http.post(CM, configmap("owner-a"))
    _, b = await http.post(CM, configmap("owner-b"))
    await http.post(CM, configmap("only-a", a))
    await http.post(CM, configmap("a-and-b", a, b))
    _, released = await http.post(CM, configmap("released", a))
    released["metadata"].pop("ownerReferences")
    assert (await http.put(f"{CM}/released", released))[0] == 200

    async def gone(name: str) -> bool:
        return (await http.get(f"{CM}/{name}"))[0] == 404

    assert (await http.delete(f"{CM}/owner-a"))[0] == 200
    await wait_for(lambda: gone("only-a"))
    assert (await http.get(f"{CM}/a-and-b"))[0] == 200
    assert (await http.get(f"{CM}/released"))[0] == 200

    _, c = await http.post(CM, configmap("owner-c"))
    await http.post(CM, configmap("only-c", c))
    assert (await http.delete(f"{CM}/owner-b"))[0] == 200
    await wait_for(lambda: gone("a-and-b"))
    assert (await http.get(f"{CM}/only-c"))[0] == 200
    assert (await http.delete(f"{CM}/owner-c"))[0] == 200
    await wait_for(lambda: gone("only-c"))
    assert (await http.get(f"{CM}/released"))[0] == 200
