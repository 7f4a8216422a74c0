"""The official ``kubernetes`` client, sync (threaded sandbox) and ``kubernetes.aio``."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from scheduler.sandbox import Sandbox, SandboxThread


@pytest.fixture(scope="module")
def core(threaded: SandboxThread, tmp_path_factory: pytest.TempPathFactory) -> client.CoreV1Api:
    kc = threaded.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kc)))


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_sync_crud_and_errors(core: client.CoreV1Api, namespace: str) -> None:
    p = core.create_namespaced_pod(namespace, _pod("a", {"app": "x"}))
    assert p.metadata.uid and p.spec.scheduler_name == "default-scheduler"
    with pytest.raises(ApiException) as ei:
        core.create_namespaced_pod(namespace, _pod("a"))
    assert ei.value.status == 409 and orjson.loads(ei.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as ei:
        core.read_namespaced_pod("zzz", namespace)
    assert ei.value.status == 404
    p.metadata.labels["app"] = "y"
    p2 = core.replace_namespaced_pod("a", namespace, p)
    assert p2.metadata.labels["app"] == "y"
    with pytest.raises(ApiException) as ei:
        core.replace_namespaced_pod("a", namespace, p)  # stale resourceVersion
    assert ei.value.status == 409 and orjson.loads(ei.value.body)["reason"] == "Conflict"
    p3 = core.patch_namespaced_pod("a", namespace, {"metadata": {"labels": {"b": "1"}}})
    assert p3.metadata.labels == {"app": "y", "b": "1"}
    lst = core.list_namespaced_pod(namespace, label_selector="b=1")
    assert [i.metadata.name for i in lst.items] == ["a"]
    core.delete_namespaced_pod("a", namespace)
    assert core.list_namespaced_pod(namespace).items == []


def test_sync_namespace_finalize(core: client.CoreV1Api) -> None:
    """replace_namespace_finalize (PUT namespaces/{name}/finalize), as a namespace controller
    calls it: a Terminating namespace held by another spec finalizer goes once it is dropped."""
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="fin-client")))
    ns = core.read_namespace("fin-client")
    ns.spec.finalizers = ["kubernetes", "example.com/hold"]
    assert core.replace_namespace_finalize("fin-client", ns).spec.finalizers == ["kubernetes", "example.com/hold"]
    ns.spec.finalizers = ["not-qualified"]
    with pytest.raises(ApiException) as ei:
        core.replace_namespace_finalize("fin-client", ns)  # stale: the precondition comes first
    assert ei.value.status == 409
    ns = core.read_namespace("fin-client")
    ns.spec.finalizers = ["not-qualified"]
    with pytest.raises(ApiException) as ei:
        core.replace_namespace_finalize("fin-client", ns)
    assert ei.value.status == 422 and orjson.loads(ei.value.body)["reason"] == "Invalid"
    core.delete_namespace("fin-client")
    for _ in range(200):  # the namespace controller drops its own finalizer
        ns = core.read_namespace("fin-client")
        if ns.spec.finalizers == ["example.com/hold"]:
            break
        time.sleep(0.02)
    assert ns.spec.finalizers == ["example.com/hold"] and ns.status.phase == "Terminating"
    ns.spec.finalizers = []
    core.replace_namespace_finalize("fin-client", ns)
    with pytest.raises(ApiException) as ei:
        core.read_namespace("fin-client")
    assert ei.value.status == 404


def test_sync_binding_via_raw_response(core: client.CoreV1Api, namespace: str) -> None:
    p = core.create_namespaced_pod(namespace, _pod("b"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="b", uid=p.metadata.uid),
                            target=client.V1ObjectReference(kind="Node", name="node-0000"))
    resp = core.create_namespaced_pod_binding("b", namespace, body, _preload_content=False)
    assert resp.status == 201
    assert core.read_namespaced_pod("b", namespace).spec.node_name == "node-0000"
    with pytest.raises(ApiException) as ei:
        core.create_namespaced_pod_binding("b", namespace, body, _preload_content=False)
    assert ei.value.status == 409


def test_sync_watch_resumes_from_resource_version(core: client.CoreV1Api, namespace: str) -> None:
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    for i in range(3):
        core.create_namespaced_pod(namespace, _pod(f"w{i}"))
    w = watch.Watch()
    seen = []
    for ev in w.stream(core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=2):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    assert seen == [("ADDED", "w0"), ("ADDED", "w1"), ("ADDED", "w2")]


def test_sync_paginated_list(core: client.CoreV1Api, namespace: str) -> None:
    for i in range(7):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"c{i}"}})
    names, token = [], None
    while True:
        lst = core.list_namespaced_config_map(namespace, limit=3, _continue=token)
        names += [i.metadata.name for i in lst.items]
        token = lst.metadata._continue
        if not token:
            break
    assert names == [f"c{i}" for i in range(7)]


def test_load_kube_config_with_token(tmp_path: Path) -> None:
    h = Sandbox.start_in_thread(token="tok", nodes=1)
    try:
        kc = h.write_kubeconfig(tmp_path / "kc")
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(kc)))
        assert [n.metadata.name for n in api.list_node().items] == ["node-0000"]
        assert h.url.startswith("https://")  # a token means TLS, with the CA in the kubeconfig
        assert h.sandbox.certs is not None
        (tmp_path / "ca.crt").write_bytes(h.sandbox.certs.ca_pem)
        cfg = client.Configuration()
        cfg.host = h.url
        cfg.ssl_ca_cert = str(tmp_path / "ca.crt")  # trusts the server, sends no token
        with pytest.raises(ApiException) as ei:
            client.CoreV1Api(client.ApiClient(cfg)).list_node()
        assert ei.value.status == 401
        assert h.admin.counters()["requests"]["list nodes"] == 1  # 401s are not served
    finally:
        h.stop()
    assert not h._thread.is_alive()


async def test_aio_client(sandbox: Sandbox, tmp_path: Path) -> None:
    from kubernetes.aio import client as aclient
    from kubernetes.aio import config as aconfig
    from kubernetes.aio import watch as awatch

    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    api_client = await aconfig.new_client_from_config(config_file=str(kc))
    async with api_client:
        core = aclient.CoreV1Api(api_client)
        rv = (await core.list_namespaced_pod("default")).metadata.resource_version
        await core.create_namespaced_pod("default", _pod("x"))
        resp = await core.create_namespaced_pod_binding_without_preload_content(
            "x", "default", aclient.V1Binding(metadata=aclient.V1ObjectMeta(name="x"),
                                              target=aclient.V1ObjectReference(kind="Node", name="node-0001")))
        assert resp.status == 201
        resp.release()
        w = awatch.Watch()
        types = []
        async with w.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2) as stream:
            async for ev in stream:
                types.append((ev["type"], ev["object"].spec.node_name, ev["object"].status.phase))
                if len(types) == 3:
                    w.stop()
        assert types[0] == ("ADDED", None, "Pending")
        assert types[1] == ("MODIFIED", "node-0001", "Pending")
        assert types[2] == ("MODIFIED", "node-0001", "Running")
