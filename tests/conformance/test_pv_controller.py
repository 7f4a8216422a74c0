"""The PV controller simulation: static binding, Immediate matching, provisioning, release.

Everything the controller writes must arrive like any other write: new resourceVersions and
watch events, so a scheduler's informers see PVCs become Bound.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sbhelpers import Http, wait_for

from scheduler.sandbox import Sandbox

PVS = "/api/v1/persistentvolumes"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
SCS = "/apis/storage.k8s.io/v1/storageclasses"


def pv(name: str, size: str, *, cls: str = "", modes: tuple[str, ...] = ("ReadWriteOnce",),
       labels: dict[str, str] | None = None, reclaim: str = "Retain", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
                     "persistentVolumeReclaimPolicy": reclaim, "hostPath": {"path": f"/tmp/{name}"}, **spec}}


def pvc(name: str, size: str, *, cls: str | None = "", modes: tuple[str, ...] = ("ReadWriteOnce",),
        **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec}
    if cls is not None:
        s["storageClassName"] = cls
    return {"metadata": {"name": name}, "spec": s}


async def phase(http: Http, path: str, want: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        _, o = await http.get(path)
        return o if (o.get("status") or {}).get("phase") == want else None
    return dict(await wait_for(check, timeout=3))


async def test_static_binding_from_claim_ref(http: Http) -> None:
    # a WaitForFirstConsumer class without provisioner: nothing happens until claimRef is set
    await http.post(SCS, {"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
                          "volumeBindingMode": "WaitForFirstConsumer"})
    s, v = await http.post(PVS, pv("local-1", "10Gi", cls="local"))
    assert s == 201 and v["status"]["phase"] == "Available"
    s, c = await http.post(PVCS, pvc("data", "5Gi", cls="local"))
    assert s == 201 and c["status"]["phase"] == "Pending"
    rv = c["metadata"]["resourceVersion"]
    watch = asyncio.create_task(http.watch(PVCS, {"resourceVersion": rv}, until=2))
    # what the scheduler's VolumeBinding does in PreBind
    ref = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data", "uid": c["metadata"]["uid"]}
    s, _ = await http.patch(f"{PVS}/local-1", {"spec": {"claimRef": ref}})
    assert s == 200
    bound = await phase(http, f"{PVCS}/data", "Bound")
    assert bound["spec"]["volumeName"] == "local-1"
    ann = bound["metadata"]["annotations"]
    assert ann["pv.kubernetes.io/bind-completed"] == "yes" and ann["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert bound["status"]["capacity"] == {"storage": "10Gi"}
    assert bound["status"]["accessModes"] == ["ReadWriteOnce"]
    assert int(bound["metadata"]["resourceVersion"]) > int(rv)
    vol = await phase(http, f"{PVS}/local-1", "Bound")
    assert vol["spec"]["claimRef"]["uid"] == c["metadata"]["uid"]
    assert "pv.kubernetes.io/bound-by-controller" not in (vol["metadata"].get("annotations") or {})
    events = await asyncio.wait_for(watch, 5)
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED"]
    assert events[0]["object"]["spec"]["volumeName"] == "local-1"  # spec, then status, like upstream
    assert events[1]["object"]["status"]["phase"] == "Bound"


async def test_immediate_binding_picks_smallest_fitting_volume(http: Http) -> None:
    await http.post(PVS, pv("big", "50Gi"))
    await http.post(PVS, pv("small", "2Gi"))
    await http.post(PVS, pv("rox", "1Gi", modes=("ReadOnlyMany",)))
    await http.post(PVS, pv("tiny", "500Mi"))
    await http.post(PVS, pv("labelled", "1Gi", labels={"tier": "gold"}))
    s, _ = await http.post(PVCS, pvc("c1", "1Gi", selector={"matchLabels": {"tier": "silver"}}))
    assert s == 201
    s, _ = await http.post(PVCS, pvc("c2", "1Gi"))
    bound = await phase(http, f"{PVCS}/c2", "Bound")
    # labelled (1Gi) is not excluded for c2: it has no selector; smallest fitting is 1Gi
    assert bound["spec"]["volumeName"] == "labelled"
    s, _ = await http.post(PVCS, pvc("c3", "1Gi"))
    bound = await phase(http, f"{PVCS}/c3", "Bound")
    assert bound["spec"]["volumeName"] == "small"
    _, v = await http.get(f"{PVS}/small")
    assert v["spec"]["claimRef"]["name"] == "c3" and v["status"]["phase"] == "Bound"
    assert v["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    _, c1 = await http.get(f"{PVCS}/c1")
    assert c1["status"]["phase"] == "Pending" and not c1["spec"].get("volumeName")  # selector matches nothing
    for name in ("rox", "tiny", "big"):
        _, v = await http.get(f"{PVS}/{name}")
        assert v["status"]["phase"] == "Available" and "claimRef" not in v["spec"]


@pytest.mark.parametrize("on_claim, on_volume", [(True, False), (False, True), (True, True)])
async def test_the_beta_class_annotation_is_a_class(http: Http, on_claim: bool, on_volume: bool) -> None:
    """GetPersistentVolumeClaimClass / GetPersistentVolumeClass: the beta annotation
    ``volume.beta.kubernetes.io/storage-class`` names the class, before the field; a claim
    carrying it is not given the default class either."""
    beta = "volume.beta.kubernetes.io/storage-class"
    await http.post(SCS, {"metadata": {"name": "std", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "kubernetes.io/no-provisioner"})
    plain = pv("plain", "1Gi")
    old = pv("old", "2Gi", cls="" if on_volume else "old")
    if on_volume:
        old["metadata"]["annotations"] = {beta: "old"}
    await http.post(PVS, plain)
    await http.post(PVS, old)
    claim = pvc("c", "1Gi", cls=None if on_claim else "old")
    if on_claim:
        claim["metadata"]["annotations"] = {beta: "old"}
    s, c = await http.post(PVCS, claim)
    assert s == 201 and c["spec"].get("storageClassName") == (None if on_claim else "old")
    bound = await phase(http, f"{PVCS}/c", "Bound")
    assert bound["spec"]["volumeName"] == "old"


async def test_provisioning_on_selected_node_then_release_and_delete(http: Http) -> None:
    await http.post(SCS, {"metadata": {"name": "csi"}, "provisioner": "csi.example.com",
                          "volumeBindingMode": "WaitForFirstConsumer"})
    s, c = await http.post(PVCS, pvc("vol", "3Gi", cls="csi", modes=("ReadWriteOncePod",)))
    assert s == 201
    rv = c["metadata"]["resourceVersion"]
    # no node selected yet: the controller waits for the first consumer
    await http.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "barrier"}})
    _, lst = await http.get(PVS)
    assert lst["items"] == []
    # what the scheduler does for WaitForFirstConsumer provisioning
    s, _ = await http.patch(f"{PVCS}/vol", {"metadata": {"annotations": {
        "volume.kubernetes.io/selected-node": "node-0001"}}})
    assert s == 200
    bound = await phase(http, f"{PVCS}/vol", "Bound")
    name = f"pvc-{c['metadata']['uid']}"
    assert bound["spec"]["volumeName"] == name
    assert bound["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "csi.example.com"
    assert bound["status"]["capacity"] == {"storage": "3Gi"}
    s, v = await http.get(f"{PVS}/{name}")
    assert s == 200 and v["status"]["phase"] == "Bound"
    spec = v["spec"]
    assert spec["storageClassName"] == "csi" and spec["capacity"] == {"storage": "3Gi"}
    assert spec["accessModes"] == ["ReadWriteOncePod"] and spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["claimRef"]["uid"] == c["metadata"]["uid"] and spec["claimRef"]["name"] == "vol"
    assert spec["csi"]["driver"] == "csi.example.com" and spec["csi"]["volumeHandle"]
    assert v["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "csi.example.com"
    assert spec["nodeAffinity"]["required"]["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}]
    # deleting the claim releases the volume; reclaim policy Delete removes it
    rv = v["metadata"]["resourceVersion"]
    watch = asyncio.create_task(http.watch(PVS, {"resourceVersion": rv}, until=2))
    await http.delete(f"{PVCS}/vol")
    events = await asyncio.wait_for(watch, 5)
    assert [(e["type"], e["object"]["status"]["phase"]) for e in events] == [
        ("MODIFIED", "Released"), ("DELETED", "Released")]


async def test_retained_volume_stays_released_and_hostname_affinity(http: Http) -> None:
    await http.post("/api/v1/nodes", {"metadata": {"name": "zoneless", "labels": {"kubernetes.io/hostname": "zl"}}})
    await http.post(SCS, {"metadata": {"name": "keep", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain"})
    s, c = await http.post(PVCS, {**pvc("r", "1Gi", cls=None), "metadata": {"name": "r", "annotations": {
        "volume.kubernetes.io/selected-node": "zoneless"}}})
    assert s == 201 and c["spec"]["storageClassName"] == "keep"  # DefaultStorageClass admission
    await phase(http, f"{PVCS}/r", "Bound")
    name = f"pvc-{c['metadata']['uid']}"
    _, v = await http.get(f"{PVS}/{name}")
    assert v["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0] == {
        "key": "kubernetes.io/hostname", "operator": "In", "values": ["zl"]}
    await http.delete(f"{PVCS}/r")
    released = await phase(http, f"{PVS}/{name}", "Released")
    assert released["spec"]["claimRef"]["name"] == "r"


@pytest.mark.sandbox(nodes=1, simulate_pv_controller=False)
async def test_controller_can_be_disabled(sandbox: Sandbox, http: Http) -> None:
    assert sandbox.pv_controller is None
    await http.post(PVS, pv("a", "1Gi"))
    s, c = await http.post(PVCS, pvc("a", "1Gi"))
    assert s == 201
    # a later write is served after anything the controller would have done by then
    await http.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "barrier"}})
    _, c = await http.get(f"{PVCS}/a")
    assert c["status"]["phase"] == "Pending" and not c["spec"].get("volumeName")
