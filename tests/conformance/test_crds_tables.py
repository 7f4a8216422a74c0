"""CRDs become served resources; server-side Tables for kubectl."""

from __future__ import annotations

from typing import Any

import yaml
from sbhelpers import Http, crd_path, pod

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PG = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}


def podgroup_crd() -> dict[str, Any]:
    return dict(yaml.safe_load(crd_path().read_text()))


async def test_crd_is_served_with_status_and_short_names(http: Http) -> None:
    s, crd = await http.post(CRDS, podgroup_crd())
    assert s == 201
    conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conds == {"NamesAccepted": "True", "Established": "True"}
    _, groups = await http.get("/apis")
    assert "scheduling.x-k8s.io" in {g["name"] for g in groups["groups"]}
    _, res = await http.get("/apis/scheduling.x-k8s.io/v1alpha1")
    by = {r["name"]: r for r in res["resources"]}
    assert by["podgroups"]["shortNames"] == ["pg", "pgs"] and by["podgroups"]["namespaced"] is True
    assert by["podgroups"]["kind"] == "PodGroup" and "podgroups/status" in by
    s, pg = await http.post(PG, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                 "metadata": {"name": "g"}, "spec": {"minMember": 2, "junk": 1},
                                 "status": {"phase": "Running"}})
    assert s == 201
    assert pg["spec"] == {"minMember": 2}  # unknown fields pruned
    assert "status" not in pg  # status ignored on create
    s, pg = await http.patch(f"{PG}/g/status", {"status": {"phase": "Scheduling", "running": 1}})
    assert s == 200 and pg["status"] == {"phase": "Scheduling", "running": 1}
    assert pg["metadata"]["generation"] == 1
    s, pg = await http.patch(f"{PG}/g", {"spec": {"minMember": 3}, "status": {"phase": "Failed"}})
    assert pg["metadata"]["generation"] == 2 and pg["status"]["phase"] == "Scheduling"
    s, st = await http.patch(f"{PG}/g", {"spec": {"minMember": 0}})
    assert s == 422 and st["details"]["causes"][0]["field"] == "spec.minMember"
    assert st["message"].startswith('PodGroup.scheduling.x-k8s.io "g" is invalid')
    s, st = await http.patch(f"{PG}/g", {"spec": {"minMember": 4}}, ct="application/strategic-merge-patch+json")
    assert s == 415
    s, st = await http.get(f"{PG}/missing")
    assert s == 404 and st["message"] == 'podgroups.scheduling.x-k8s.io "missing" not found'
    s, lst = await http.get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups")
    assert lst["kind"] == "PodGroupList" and lst["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"


async def test_crd_table_uses_printer_columns(http: Http) -> None:
    await http.post(CRDS, podgroup_crd())
    await http.post(PG, {"metadata": {"name": "g"}, "spec": {"minMember": 2}})
    await http.patch(f"{PG}/g/status", {"status": {"phase": "Running", "running": 2}})
    s, t = await http.get(PG, headers=TABLE)
    assert s == 200 and t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1"
    crd = podgroup_crd()
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    printer = [c["name"] for c in version["additionalPrinterColumns"]]
    names = [c["name"] for c in t["columnDefinitions"]]
    assert names == ["Name", *printer]
    assert {"Phase", "Age"} <= set(printer)
    cells = dict(zip(names, t["rows"][0]["cells"]))
    assert cells["Name"] == "g" and cells["Phase"] == "Running" and cells["Age"].endswith("s")
    # kube-apiserver prints columns of type string (scheduler-plugins' Running) as text
    assert cells["MinMember"] == 2 and cells["Running"] == "2"
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_cluster_scoped_crd_and_deletion(http: Http) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster",
                    "names": {"plural": "widgets", "kind": "Widget", "categories": ["all"]},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    s, _ = await http.post(CRDS, crd)
    assert s == 201
    s, w = await http.post("/apis/example.com/v1/widgets", {"metadata": {"name": "w"}, "spec": {"any": {"thing": 1}}})
    assert s == 201 and w["spec"] == {"any": {"thing": 1}} and "namespace" not in w["metadata"]
    s, t = await http.get("/apis/example.com/v1/widgets", headers=TABLE)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Age"]
    s, _ = await http.delete(f"{CRDS}/widgets.example.com")
    assert s == 200
    s, _ = await http.get("/apis/example.com/v1/widgets")
    assert s == 404
    s, crd_bad = await http.post(CRDS, {**crd, "metadata": {"name": "wrong.example.com"}})
    assert s == 422


async def test_builtin_tables(http: Http) -> None:
    await http.post("/api/v1/namespaces/default/pods", pod("p", nodeName="node-0000"))
    s, t = await http.get("/api/v1/namespaces/default/pods", headers=TABLE)
    assert [c["name"] for c in t["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert {c["name"] for c in t["columnDefinitions"] if c["priority"] == 1} >= {"IP", "Node"}
    assert t["rows"][0]["cells"][0] == "p" and t["rows"][0]["cells"][6] == "node-0000"
    s, t = await http.get("/api/v1/nodes", headers=TABLE, params={"includeObject": "Object"})
    assert [c["name"] for c in t["columnDefinitions"]][:5] == ["Name", "Status", "Roles", "Age", "Version"]
    assert t["rows"][0]["cells"][1] == "Ready" and t["rows"][0]["object"]["kind"] == "Node"
    s, t = await http.get("/api/v1/namespaces/default/pods/p", headers=TABLE)
    assert len(t["rows"]) == 1
    s, t = await http.get("/api/v1/namespaces/default/configmaps", headers=TABLE)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Data", "Age"]
