"""The resourceclaim controller simulation: claims from templates (name, owner, annotation,
pod status), reservations of pods that are gone or done dropped, deallocation and the
delete-protection finalizer, generated claims deleted with their pod; every write arrives like
any other (watch events, validation)."""

from __future__ import annotations

from typing import Any

import pytest
from sbhelpers import Http, binding, pod, wait_for

from scheduler.sandbox.claimcontroller import generate_name, is_pod_done
from scheduler.sandbox.kubelet import EXIT_CODE, RUN_SECONDS
from tests.builders import (
    dra_allocation,
    dra_claim,
    dra_claim_template,
    dra_consumer,
    with_pod_claims,
)

G = "/apis/resource.k8s.io/v1/namespaces/default"
CLAIMS = f"{G}/resourceclaims"
TEMPLATES = f"{G}/resourceclaimtemplates"
PODS = "/api/v1/namespaces/default/pods"
FINALIZER = "resource.kubernetes.io/delete-protection"
NODE = "node-0001"


@pytest.mark.parametrize(("pod_name", "claim", "want"), [
    ("train", "gpu", "train-gpu-"),
    ("p" * 50, "c" * 10, "p" * 45 + "-" + "c" * 9),
    ("a" * 63, "b" * 63, "a" * 28 + "-" + "b" * 28),
])
def test_generate_name(pod_name: str, claim: str, want: str) -> None:
    assert generate_name(pod_name, claim) == want


@pytest.mark.parametrize(("phase", "deleting", "node", "done"), [
    ("Succeeded", False, "n", True),
    ("Failed", False, "", True),
    ("Running", True, "n", False),  # still terminating on its node
    ("Pending", True, "", True),  # deleted before it was bound
    ("Pending", False, "", False),
])
def test_is_pod_done(phase: str, deleting: bool, node: str, done: bool) -> None:
    p: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"nodeName": node}, "status": {"phase": phase}}
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert is_pod_done(p) is done


async def _claims(http: Http) -> list[dict[str, Any]]:
    _, lst = await http.get(CLAIMS)
    return list(lst["items"])


async def _generated(http: Http, pod_name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        _, p = await http.get(f"{PODS}/{pod_name}")
        sts = (p.get("status") or {}).get("resourceClaimStatuses")
        if not sts:
            return None
        _, c = await http.get(f"{CLAIMS}/{sts[0]['resourceClaimName']}")
        return c if c.get("kind") == "ResourceClaim" else None
    return dict(await wait_for(check, timeout=3))


async def _bind_like_the_scheduler(http: Http, claim: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """PreBind: finalizer, then allocation + reservedFor; then the pod's binding."""
    name = claim["metadata"]["name"]
    s, c = await http.patch(f"{CLAIMS}/{name}", {"metadata": {"finalizers": [FINALIZER]}})
    assert s == 200, c
    status = {"allocation": dra_allocation(NODE, [("gpu", "gpu.example.com", NODE, "gpu-0")]),
              "reservedFor": [dra_consumer(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods]}
    s, c = await http.put(f"{CLAIMS}/{name}/status", {**c, "status": status})
    assert s == 200, c
    for p in pods:
        s, _ = await http.post(f"{PODS}/{p['metadata']['name']}/binding", binding(p["metadata"]["name"], NODE))
        assert s == 201
    return dict(c)


async def test_claim_from_template_then_released_and_collected(http: Http) -> None:
    s, _ = await http.post(TEMPLATES, dra_claim_template("gpu-template", labels={"app": "train"}) | {
        "spec": {"metadata": {"labels": {"app": "train"}, "annotations": {"team": "ml"}},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})
    assert s == 201
    s, p = await http.post(PODS, with_pod_claims(pod("train"), ("gpu", "template", "gpu-template")))
    assert s == 201
    c = await _generated(http, "train")
    md = c["metadata"]
    assert md["name"].startswith("train-gpu-") and len(md["name"]) == len("train-gpu-") + 5
    assert md["generateName"] == "train-gpu-"
    assert md["annotations"] == {"team": "ml", "resource.kubernetes.io/pod-claim-name": "gpu"}
    assert md["labels"] == {"app": "train"}
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "train", "uid": p["metadata"]["uid"],
                                      "controller": True, "blockOwnerDeletion": True}]
    assert c["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}
    _, p = await http.get(f"{PODS}/train")
    assert p["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": md["name"]}]
    assert len(await _claims(http)) == 1  # once, however many events the pod gets

    await _bind_like_the_scheduler(http, c, [p])
    s, _ = await http.delete(f"{PODS}/train")
    assert s == 200

    async def claim_gone() -> bool:
        return not await _claims(http)
    assert await wait_for(claim_gone, timeout=5)


async def test_missing_template_is_an_event_and_is_retried(http: Http) -> None:
    s, _ = await http.post(PODS, with_pod_claims(pod("waits"), ("gpu", "template", "later")))
    assert s == 201

    async def event() -> dict[str, Any] | None:
        _, evs = await http.get("/api/v1/namespaces/default/events",
                                params={"fieldSelector": "involvedObject.name=waits,reason=FailedResourceClaimCreation"})
        return evs["items"][0] if evs["items"] else None
    ev = await wait_for(event, timeout=3)
    assert ev["type"] == "Warning" and ev["source"]["component"] == "resource_claim"
    assert ev["message"] == ('PodResourceClaim gpu: resource claim template "later": '
                             'resourceclaimtemplates.resource.k8s.io "later" not found')
    assert not await _claims(http)
    s, _ = await http.post(TEMPLATES, dra_claim_template("later"))
    assert s == 201
    c = await _generated(http, "waits")
    assert c["metadata"]["name"].startswith("waits-gpu-")


async def test_shared_claim_released_pod_by_pod(http: Http) -> None:
    s, c = await http.post(CLAIMS, dra_claim("shared"))
    assert s == 201
    ann = {RUN_SECONDS: "0", EXIT_CODE: "0"}
    s, a = await http.post(PODS, with_pod_claims(pod("a", annotations=ann), ("gpu", "claim", "shared")))
    s, b = await http.post(PODS, with_pod_claims(pod("b"), ("gpu", "claim", "shared")))
    await _bind_like_the_scheduler(http, c, [a, b])

    async def reserved(names: list[str]) -> dict[str, Any] | None:
        _, cur = await http.get(f"{CLAIMS}/shared")
        got = [r["name"] for r in (cur.get("status") or {}).get("reservedFor") or []]
        return cur if got == names else None
    # a completes: its entry goes, the claim stays allocated for b
    cur = await wait_for(lambda: reserved(["b"]), timeout=5)
    assert cur["status"]["allocation"] and cur["metadata"]["finalizers"] == [FINALIZER]
    # b is deleted: the claim is deallocated and unprotected, but not deleted (not generated)
    s, _ = await http.delete(f"{PODS}/b", {"gracePeriodSeconds": 0})
    assert s == 200

    async def released() -> dict[str, Any] | None:
        _, cur = await http.get(f"{CLAIMS}/shared")
        return cur if not cur.get("status") and not cur["metadata"].get("finalizers") else None
    cur = await wait_for(released, timeout=5)
    assert cur["metadata"]["name"] == "shared"


async def test_bound_pod_gets_reserved(http: Http) -> None:
    """A pod bound by someone else than the scheduler (nodeName set) is reserved in an
    allocated claim with room."""
    s, c = await http.post(CLAIMS, dra_claim("pre"))
    s, c = await http.put(f"{CLAIMS}/pre/status", {**c, "status": {
        "allocation": dra_allocation(NODE, [("gpu", "gpu.example.com", NODE, "gpu-0")])}})
    assert s == 200
    s, p = await http.post(PODS, with_pod_claims(pod("direct", nodeName=NODE), ("gpu", "claim", "pre")))
    assert s == 201

    async def check() -> dict[str, Any] | None:
        _, cur = await http.get(f"{CLAIMS}/pre")
        return cur if (cur.get("status") or {}).get("reservedFor") else None
    cur = await wait_for(check, timeout=3)
    assert cur["status"]["reservedFor"] == [{"resource": "pods", "name": "direct", "uid": p["metadata"]["uid"]}]


async def test_generated_claim_of_a_finished_pod_is_deleted(http: Http) -> None:
    await http.post(TEMPLATES, dra_claim_template("once"))
    ann = {RUN_SECONDS: "0", EXIT_CODE: "1"}
    s, p = await http.post(PODS, with_pod_claims(pod("job", annotations=ann), ("gpu", "template", "once")))
    c = await _generated(http, "job")
    await _bind_like_the_scheduler(http, c, [p])

    async def gone() -> bool:
        _, cur = await http.get(f"{PODS}/job")
        return cur["status"]["phase"] == "Failed" and not await _claims(http)
    assert await wait_for(gone, timeout=5)
    s, cur = await http.get(f"{PODS}/job")
    assert s == 200  # the pod stays; its claim went


async def test_deleted_claim_waits_for_its_consumers(http: Http) -> None:
    s, c = await http.post(CLAIMS, dra_claim("held"))
    s, p = await http.post(PODS, with_pod_claims(pod("user"), ("gpu", "claim", "held")))
    await _bind_like_the_scheduler(http, c, [p])
    s, d = await http.delete(f"{CLAIMS}/held")
    assert s == 200 and d["metadata"]["deletionTimestamp"]
    _, cur = await http.get(f"{CLAIMS}/held")
    assert cur["status"]["reservedFor"]  # in use: it stays
    s, _ = await http.delete(f"{PODS}/user", {"gracePeriodSeconds": 0})

    async def gone() -> bool:
        s, _ = await http.get(f"{CLAIMS}/held")
        return s == 404
    assert await wait_for(gone, timeout=5)


async def test_client_watch_fault_leaves_the_controller_working(http: Http, sandbox: Any) -> None:
    """The drop-watches fault ends client connections; the in-process controller's watches
    are not among them (nor counted)."""
    await http.post(TEMPLATES, dra_claim_template("after-drop"))
    assert sandbox.drop_watches() == 0
    s, _ = await http.post(PODS, with_pod_claims(pod("late"), ("gpu", "template", "after-drop")))
    assert s == 201
    c = await _generated(http, "late")
    assert c["metadata"]["name"].startswith("late-gpu-")


async def test_malformed_objects_are_skipped(http: Http, sandbox: Any,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Objects written around validation (the raw-put fault) are skipped (a malformed entry is
    not the controller's to fix; one that breaks its reading is logged by name): the
    controller never fails and keeps serving everything else."""
    bad_claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "broken", "namespace": "default",
                              "ownerReferences": "not-a-list"},
                 "spec": 5, "status": {"reservedFor": "oops"}}
    bad_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken-pod", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}], "resourceClaims": ["x", 3]},
               "status": {"resourceClaimStatuses": "no"}}
    with caplog.at_level("WARNING", logger="scheduler.sandbox"):
        sandbox.raw_put(bad_claim)
        sandbox.raw_put(bad_pod)
        await http.post(TEMPLATES, dra_claim_template("fine"))
        s, _ = await http.post(PODS, with_pod_claims(pod("fine"), ("gpu", "template", "fine")))
        assert s == 201
        c = await _generated(http, "fine")
    assert c["metadata"]["name"].startswith("fine-gpu-")
    assert not [r for r in caplog.records if "simulation failed" in r.getMessage()]
    _, broken = await http.get(f"{CLAIMS}/broken")
    assert broken["status"] == {"reservedFor": "oops"}  # left as it was


async def test_deallocation_takes_the_drivers_device_status_along(http: Http) -> None:
    # a driver reported on the allocated device (status.devices); when the claim's last pod
    # goes, the report goes with the allocation (it may only name allocated devices)
    s, c = await http.post(CLAIMS, dra_claim("reported"))
    assert s == 201
    s, p = await http.post(PODS, with_pod_claims(pod("user"), ("gpu", "claim", "reported")))
    c = await _bind_like_the_scheduler(http, c, [p])
    report = [{"driver": "gpu.example.com", "pool": NODE, "device": "gpu-0",
               "networkData": {"interfaceName": "net1"}}]
    s, c = await http.put(f"{CLAIMS}/reported/status",
                          {**c, "status": {**c["status"], "devices": report}})
    assert s == 200, c
    s, _ = await http.delete(f"{PODS}/user", {"gracePeriodSeconds": 0})
    assert s == 200

    async def released() -> dict[str, Any] | None:
        _, cur = await http.get(f"{CLAIMS}/reported")
        return cur if not cur.get("status") and not cur["metadata"].get("finalizers") else None
    assert await wait_for(released, timeout=5)
