"""Raw writes (fault: an object stored without validation) and TokenReview /
SubjectAccessReview for delegated authn/authz, with the official client and the CLI flags."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from sbhelpers import Http, pod, wait_for

from scheduler.sandbox import Sandbox, SandboxThread
from scheduler.sandbox.cli import main as cli_main
from scheduler.sandbox.testing import SandboxAdmin, SandboxProcess

PODS = "/api/v1/namespaces/default/pods"


def bad_pod(name: str, **spec: Any) -> dict[str, Any]:
    p = pod(name, **spec)
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "abc"}}
    return p


# ---------------------------------------------------------------- raw writes


async def test_raw_put_in_process_stores_invalid_pod_and_emits_watch_events(sandbox: Sandbox, http: Http) -> None:
    s, err = await http.post(PODS, bad_pod("bad"))
    assert s == 422  # what validation says through the API
    rv = str(sandbox.store.rv)
    watch = asyncio.create_task(http.watch(PODS, {"resourceVersion": rv}, until=2))
    stored = sandbox.faults.raw_put(bad_pod("bad"))
    md = stored["metadata"]
    assert md["uid"] and md["creationTimestamp"] and md["namespace"] == "default"
    assert int(md["resourceVersion"]) > int(rv)
    # no defaulting either: what was sent is what is stored
    assert "schedulerName" not in stored["spec"] and "status" not in stored
    s, got = await http.get(f"{PODS}/bad")
    assert s == 200 and got["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "abc"
    again = sandbox.raw_put({**bad_pod("bad"), "metadata": {"name": "bad", "labels": {"v": "2"}}})
    assert again["metadata"]["uid"] == md["uid"] and again["metadata"]["labels"] == {"v": "2"}
    assert again["metadata"]["creationTimestamp"] == md["creationTimestamp"]
    events = await asyncio.wait_for(watch, 5)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]
    assert events[0]["object"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "abc"
    # ordinary writes still validate the object as a whole
    _, got = await http.get(f"{PODS}/bad")
    got["metadata"]["labels"] = {"v": "3"}
    s, err = await http.put(f"{PODS}/bad", got)
    assert s == 422 and "cpu" in err["message"]


async def test_raw_put_over_http_and_simulations_survive(sandbox: Sandbox, http: Http) -> None:
    admin = SandboxAdmin(sandbox.url, sandbox.token)
    stored = await admin.araw_put(bad_pod("b2", nodeName="node-0000"))
    assert stored["kind"] == "Pod" and stored["metadata"]["resourceVersion"]

    async def running() -> bool:
        _, p = await http.get(f"{PODS}/b2")
        return bool((p.get("status") or {}).get("phase") == "Running")

    await wait_for(running)  # the simulated kubelet copes with the malformed pod
    ev = await admin.araw_put({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                               "metadata": {"name": "e", "namespace": "default"}, "note": "n", "type": "Odd"})
    assert ev["apiVersion"] == "events.k8s.io/v1" and ev["note"] == "n"
    _, core = await http.get("/api/v1/namespaces/default/events/e")
    assert core["message"] == "n" and core["type"] == "Odd"
    with pytest.raises(RuntimeError, match="400"):
        await admin.araw_put({"apiVersion": "v1", "kind": "Nope", "metadata": {"name": "x"}})
    with pytest.raises(RuntimeError, match="metadata.name"):
        await admin.araw_put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})


# ---------------------------------------------------------------- TokenReview / SubjectAccessReview

USERS = {"tok-alice": ("alice", ["metrics-readers"]), "tok-sa": ("system:serviceaccount:mon:prom", [])}
ALLOW = [("alice", "get", "/metrics"), ("system:serviceaccount:mon:prom", "*", "/debug/*"),
         ("alice", "list", "pods")]


@pytest.fixture(scope="module")
def authed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SandboxThread, client.ApiClient]]:
    h = Sandbox.start_in_thread(nodes=0, token="api-token", auth_users=USERS, auth_allow=ALLOW)
    kc = h.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    yield h, config.new_client_from_config(config_file=str(kc))
    h.stop()


def test_token_review_with_official_client(authed: tuple[SandboxThread, client.ApiClient]) -> None:
    authn = client.AuthenticationV1Api(authed[1])
    r = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="tok-alice")))
    assert r.status.authenticated is True
    assert r.status.user.username == "alice" and r.status.user.uid
    assert r.status.user.groups == ["metrics-readers", "system:authenticated"]
    assert r.status.audiences == ["https://kubernetes.default.svc.cluster.local"]
    assert r.spec.token == "tok-alice" and r.kind == "TokenReview"
    r = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="nope")))
    assert not r.status.authenticated and r.status.user.username is None
    # the API's own --token is not a user of the table
    r = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="api-token")))
    assert not r.status.authenticated
    # a token for another audience than the API server's is not accepted
    r = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(
        token="tok-alice", audiences=["vault"])))
    assert not r.status.authenticated
    with pytest.raises(ApiException) as ei:
        authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="")))
    assert ei.value.status == 400
    assert orjson.loads(ei.value.body)["message"] == "token is required for TokenReview in authentication"


def test_subject_access_review_with_official_client(authed: tuple[SandboxThread, client.ApiClient]) -> None:
    authz = client.AuthorizationV1Api(authed[1])

    def sar(user: str, path: str, verb: str = "get") -> client.V1SubjectAccessReviewStatus:
        r = authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user, non_resource_attributes=client.V1NonResourceAttributes(path=path, verb=verb))))
        return r.status

    ok = sar("alice", "/metrics")
    assert ok.allowed is True and "alice:get:/metrics" in ok.reason
    assert sar("alice", "/metrics", "post").allowed is False
    assert sar("bob", "/metrics").allowed is False
    assert sar("system:serviceaccount:mon:prom", "/debug/pprof/heap", "post").allowed is True
    assert sar("system:serviceaccount:mon:prom", "/metrics").allowed is False
    r = authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user="alice", resource_attributes=client.V1ResourceAttributes(verb="list", resource="pods"))))
    assert r.status.allowed is True
    r = authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user="alice", resource_attributes=client.V1ResourceAttributes(verb="delete", resource="pods"))))
    assert r.status.allowed is False
    with pytest.raises(ApiException) as ei:
        authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user="alice")))
    body = orjson.loads(ei.value.body)
    assert ei.value.status == 422 and body["details"]["causes"][0]["field"] == "spec.resourceAttributes"


def test_reviews_discovery_and_create_only(authed: tuple[SandboxThread, client.ApiClient]) -> None:
    h, api = authed
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"authentication.k8s.io", "authorization.k8s.io"} <= groups
    res = client.AuthenticationV1Api(api).get_api_resources().resources
    assert [(r.name, r.verbs, r.namespaced) for r in res] == [("tokenreviews", ["create"], False)]
    res = client.AuthorizationV1Api(api).get_api_resources().resources
    assert [(r.name, r.verbs) for r in res] == [("subjectaccessreviews", ["create"])]
    req = urllib.request.Request(f"{h.url}/apis/authentication.k8s.io/v1/tokenreviews",
                                 headers={"Authorization": "Bearer api-token"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, context=h.sandbox.client_ssl_context())
    assert ei.value.code == 405
    req = urllib.request.Request(f"{h.url}/apis/authentication.k8s.io/v1/tokenreviews", method="POST",
                                 data=b'{"spec":{"token":"tok-alice"}}')
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, context=h.sandbox.client_ssl_context())
    assert ei.value.code == 401  # the API's own bearer auth still applies


def test_auth_flags_on_the_command_line(tmp_path: Path) -> None:
    assert cli_main(["--auth-allow", "nocolons"]) == 2
    assert cli_main(["--auth-user", "novalue"]) == 2
    with SandboxProcess(auth_user=["t1=alice:g1;g2", "t2=system:serviceaccount:ns:sa:"],
                        auth_allow=["alice:get:/metrics"], simulate_pv_controller=False) as sp:
        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            req = urllib.request.Request(sp.url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req) as resp:
                assert resp.status == 201
                return dict(json.loads(resp.read()))

        st = post("/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": "t1"}})["status"]
        assert st["user"]["username"] == "alice" and st["user"]["groups"] == ["g1", "g2", "system:authenticated"]
        st = post("/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": "t2"}})["status"]
        assert st["user"]["username"] == "system:serviceaccount:ns:sa"
        st = post("/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": "t3"}})["status"]
        assert "authenticated" not in st and st["user"] == {}  # Go's omitempty
        st = post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {"spec": {
            "user": "alice", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})["status"]
        assert st["allowed"] is True
        # --no-simulate-pv-controller: a matching claim stays Pending
        post("/api/v1/persistentvolumes", {"metadata": {"name": "v"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}})
        c = post("/api/v1/namespaces/default/persistentvolumeclaims", {"metadata": {"name": "c"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}})
        assert c["status"]["phase"] == "Pending"
        stored = sp.admin.raw_put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "raw"},
                                   "data": {"k": 1}})
        assert stored["data"] == {"k": 1}  # not a string map: only a raw write can store that
