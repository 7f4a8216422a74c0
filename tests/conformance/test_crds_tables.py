"""CRDs become served resources; server-side Tables for kubectl."""

from __future__ import annotations

import re
from typing import Any

import pytest
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


def _types() -> dict[tuple[str, str], Any]:
    from scheduler.sandbox.resources import builtin_types

    return {(rt.group, rt.plural): rt for rt in builtin_types()}


_TEMPLATE = {"spec": {"containers": [{"name": "a", "image": "busybox"},
                                     {"name": "b", "image": "nginx:1"}]}}
_SELECTOR = {"matchLabels": {"app": "x"},
             "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
_PAST = "2020-01-01T00:00:00Z"


def _obj(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": _PAST}, **fields}


# kube-apiserver's printers (pkg/printers/internalversion) for the built-ins users look at:
# the column names and each row's cells but the ages (computed from "now").
BUILTIN_TABLES = [
    pytest.param(("batch", "jobs"), _obj("done", spec={"completions": 3, "selector": _SELECTOR,
                                                       "template": _TEMPLATE},
                                         status={"succeeded": 3, "startTime": _PAST,
                                                 "completionTime": "2020-01-01T00:02:05Z",
                                                 "conditions": [{"type": "Complete",
                                                                 "status": "True"}]}),
                 ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images",
                  "Selector"],
                 ["done", "Complete", "3/3", "2m5s", None, "a,b", "busybox,nginx:1",
                  "app=x,tier in (a,b)"], id="job-complete"),
    pytest.param(("batch", "jobs"), _obj("wide", spec={"parallelism": 4, "template": _TEMPLATE},
                                         status={"conditions": [{"type": "Suspended",
                                                                 "status": "True"}]}),
                 None, ["wide", "Suspended", "0/1 of 4", "", None, "a,b", "busybox,nginx:1",
                        "<none>"], id="job-suspended-parallel"),
    pytest.param(("batch", "jobs"), _obj("failed", spec={},
                                         status={"failed": 2, "conditions": [
                                             {"type": "Failed", "status": "True"}]}),
                 None, ["failed", "Failed", "0/1", "", None, "", "", "<none>"], id="job-failed"),
    pytest.param(("batch", "cronjobs"), _obj("nightly", spec={"schedule": "0 3 * * *",
                                                              "jobTemplate": {"spec": {
                                                                  "template": _TEMPLATE}}},
                                             status={"active": [{"name": "j"}]}),
                 ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age",
                  "Containers", "Images", "Selector"],
                 ["nightly", "0 3 * * *", "<none>", "<unset>", 1, "<none>", None, "a,b",
                  "busybox,nginx:1", "<none>"], id="cronjob"),
    pytest.param(("apps", "deployments"), _obj("web", spec={"replicas": 3, "selector": _SELECTOR,
                                                            "template": _TEMPLATE},
                                               status={"readyReplicas": 2, "updatedReplicas": 3,
                                                       "availableReplicas": 2}),
                 ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images",
                  "Selector"],
                 ["web", "2/3", 3, 2, None, "a,b", "busybox,nginx:1", "app=x,tier in (a,b)"],
                 id="deployment"),
    pytest.param(("apps", "replicasets"), _obj("web-1", spec={"replicas": 2, "template": _TEMPLATE,
                                                              "selector": {"matchLabels":
                                                                           {"app": "x"}}},
                                               status={"replicas": 2, "readyReplicas": 1}),
                 ["Name", "Desired", "Current", "Ready", "Age", "Containers", "Images",
                  "Selector"],
                 ["web-1", 2, 2, 1, None, "a,b", "busybox,nginx:1", "app=x"], id="replicaset"),
    pytest.param(("apps", "statefulsets"), _obj("db", spec={"replicas": 2, "template": _TEMPLATE},
                                                status={"readyReplicas": 2}),
                 ["Name", "Ready", "Age", "Containers", "Images"],
                 ["db", "2/2", None, "a,b", "busybox,nginx:1"], id="statefulset"),
    pytest.param(("", "replicationcontrollers"), _obj("rc", spec={"replicas": 1, "selector":
                                                                  {"b": "2", "a": "1"},
                                                                  "template": _TEMPLATE}),
                 None, ["rc", 1, 0, 0, None, "a,b", "busybox,nginx:1", "a=1,b=2"], id="rc"),
    pytest.param(("", "services"), _obj("svc", spec={"type": "NodePort", "clusterIP": "10.0.0.1",
                                                     "selector": {"app": "x"},
                                                     "ports": [{"port": 80, "nodePort": 30080},
                                                               {"port": 53,
                                                                "protocol": "UDP"}]}),
                 ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"],
                 ["svc", "NodePort", "10.0.0.1", "<none>", "80:30080/TCP,53/UDP", None, "app=x"],
                 id="service"),
    pytest.param(("", "services"), _obj("lb", spec={"type": "LoadBalancer", "clusterIP": "10.0.0.2",
                                                    "ports": [{"port": 443}]}),
                 None, ["lb", "LoadBalancer", "10.0.0.2", "<pending>", "443/TCP", None, "<none>"],
                 id="service-lb-pending"),
    pytest.param(("", "secrets"), _obj("s", type="kubernetes.io/tls", data={"tls.crt": "", "tls.key": ""}),
                 ["Name", "Type", "Data", "Age"], ["s", "kubernetes.io/tls", 2, None], id="secret"),
    pytest.param(("", "serviceaccounts"), _obj("sa"), ["Name", "Secrets", "Age"],
                 ["sa", 0, None], id="serviceaccount"),
    pytest.param(("", "persistentvolumes"),
                 _obj("pv", spec={"capacity": {"storage": "1Gi"},
                                  "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                                  "persistentVolumeReclaimPolicy": "Retain",
                                  "claimRef": {"namespace": "ns", "name": "c"},
                                  "storageClassName": "manual", "volumeMode": "Filesystem"},
                      status={"phase": "Bound"}),
                 ["Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim",
                  "StorageClass", "VolumeAttributesClass", "Reason", "Age", "VolumeMode"],
                 ["pv", "1Gi", "RWO,RWX", "Retain", "Bound", "ns/c", "manual", "<unset>", "",
                  None, "Filesystem"], id="pv"),
    pytest.param(("", "persistentvolumeclaims"),
                 _obj("c", spec={"volumeName": "pv", "storageClassName": "manual"},
                      status={"phase": "Bound", "capacity": {"storage": "1Gi"},
                              "accessModes": ["ReadWriteOnce"]}),
                 ["Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass",
                  "VolumeAttributesClass", "Age", "VolumeMode"],
                 ["c", "Bound", "pv", "1Gi", "RWO", "manual", "<unset>", None, ""], id="pvc"),
    pytest.param(("storage.k8s.io", "storageclasses"),
                 {**_obj("fast", provisioner="x.csi", volumeBindingMode="WaitForFirstConsumer"),
                  "metadata": {"name": "fast", "creationTimestamp": _PAST, "annotations": {
                      "storageclass.kubernetes.io/is-default-class": "true"}}},
                 ["Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode",
                  "AllowVolumeExpansion", "Age"],
                 ["fast (default)", "x.csi", "Delete", "WaitForFirstConsumer", False, None],
                 id="storageclass"),
]


@pytest.mark.parametrize(("resource", "obj", "columns", "cells"), BUILTIN_TABLES)
def test_builtin_printers_are_kube_apiservers(
        resource: tuple[str, str], obj: dict[str, Any], columns: list[str] | None,
        cells: list[Any]) -> None:
    from scheduler.sandbox.tables import table

    t = table(_types()[resource], [obj])
    names = [c["name"] for c in t["columnDefinitions"]]
    if columns is not None:
        assert names == columns
    assert len(names) == len(cells)
    row = t["rows"][0]["cells"]
    assert [None if n == "Age" else c for n, c in zip(names, row, strict=True)] == cells
    assert re.match(r"^\d+y", row[names.index("Age")])  # created in 2020
