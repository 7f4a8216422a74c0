"""pods/binding, the simulated kubelet, graceful deletion, and eviction with PDBs."""

from __future__ import annotations

from typing import Any

import pytest
from sbhelpers import Http, binding, pod, wait_for

from scheduler.sandbox import Sandbox

PODS = "/api/v1/namespaces/default/pods"


async def _get(http: Http, name: str) -> dict[str, Any] | None:
    s, o = await http.get(f"{PODS}/{name}")
    return o if s == 200 else None


async def test_binding_sets_node_and_condition(http: Http, sandbox: Sandbox) -> None:
    _, p = await http.post(PODS, pod("b"))
    s, st = await http.post(f"{PODS}/b/binding", binding("b", "node-0001", p["metadata"]["uid"]))
    assert s == 201 and st == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    o = await _get(http, "b")
    assert o is not None and o["spec"]["nodeName"] == "node-0001"
    sched = [c for c in o["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert sched and sched[0]["status"] == "True"
    s, st = await http.post(f"{PODS}/b/binding", binding("b", "node-0002"))
    assert s == 409 and st["reason"] == "Conflict"
    assert st["message"] == 'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "node-0001"'
    assert sandbox.counters()["requests"]["create pods/binding"] == 2
    assert sandbox.counters()["bindings"] == 1


async def test_binding_clears_the_nomination(http: Http) -> None:
    """kube-apiserver since 1.35 (ClearingNominatedNodeNameAfterBinding): binding clears
    status.nominatedNodeName, whichever component set it."""
    _, p = await http.post(PODS, pod("n"))
    s, _ = await http.patch(f"{PODS}/n/status", {"status": {"nominatedNodeName": "node-0002"}})
    assert s == 200
    o = await _get(http, "n")
    assert o is not None and o["status"]["nominatedNodeName"] == "node-0002"
    s, _ = await http.post(f"{PODS}/n/binding", binding("n", "node-0001", p["metadata"]["uid"]))
    assert s == 201
    o = await _get(http, "n")
    assert o is not None and o["spec"]["nodeName"] == "node-0001"
    assert "nominatedNodeName" not in o["status"]


async def test_binding_uid_precondition_and_missing_pod(http: Http) -> None:
    await http.post(PODS, pod("u"))
    s, st = await http.post(f"{PODS}/u/binding", binding("u", "node-0000", "not-the-uid"))
    assert s == 409 and st["reason"] == "Conflict" and "Precondition failed: UID in precondition" in st["message"]
    s, st = await http.post(f"{PODS}/gone/binding", binding("gone", "node-0000"))
    assert s == 404 and st["reason"] == "NotFound" and st["message"] == 'pods "gone" not found'
    s, st = await http.post(f"{PODS}/u/binding", {"metadata": {"name": "u"}, "target": {"kind": "Pod", "name": "x"}})
    assert s == 422
    # the legacy bindings collection works too
    s, _ = await http.post("/api/v1/namespaces/default/bindings", binding("u", "node-0000"))
    assert s == 201


async def test_gated_pod_cannot_be_bound(http: Http) -> None:
    await http.post(PODS, pod("g", schedulingGates=[{"name": "wait"}]))
    s, st = await http.post(f"{PODS}/g/binding", binding("g", "node-0000"))
    assert s == 409 and "schedulingGates" in st["message"]
    s, o = await http.patch(f"{PODS}/g", {"spec": {"schedulingGates": None}})
    assert s == 200
    s, _ = await http.post(f"{PODS}/g/binding", binding("g", "node-0000"))
    assert s == 201


async def test_kubelet_runs_bound_pods(http: Http) -> None:
    await http.post(PODS, pod("r"))
    await http.post(f"{PODS}/r/binding", binding("r", "node-0002"))

    async def running() -> dict[str, Any] | None:
        o = await _get(http, "r")
        return o if o and o["status"]["phase"] == "Running" else None

    o = await wait_for(running)
    st = o["status"]
    assert st["podIP"] and st["hostIP"] and st["startTime"]
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert all(conds[t] == "True" for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled"))
    assert st["containerStatuses"][0]["ready"] is True and "running" in st["containerStatuses"][0]["state"]


async def test_kubelet_finishes_annotated_pods(http: Http) -> None:
    ann = "sandbox.kube-py-scheduler.io/"
    await http.post(PODS, pod("ok", annotations={ann + "run-seconds": "0.1"}))
    await http.post(PODS, pod("bad", annotations={ann + "run-seconds": "0", ann + "exit-code": "3"}))
    for n in ("ok", "bad"):
        await http.post(f"{PODS}/{n}/binding", binding(n, "node-0000"))

    async def phase(name: str, want: str) -> bool:
        o = await _get(http, name)
        return bool(o and o["status"]["phase"] == want)

    await wait_for(lambda: phase("ok", "Succeeded"))
    await wait_for(lambda: phase("bad", "Failed"))
    o = await _get(http, "bad")
    assert o is not None
    assert o["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


async def test_kubelet_ignores_unsimulated_nodes(http: Http) -> None:
    await http.post("/api/v1/nodes", {"metadata": {"name": "real", "annotations": {
        "sandbox.kube-py-scheduler.io/simulated": "false"}}})
    await http.post(PODS, pod("n", nodeName="real"))
    await http.post(PODS, pod("m", nodeName="node-0000"))

    async def m_running() -> bool:
        o = await _get(http, "m")
        return bool(o and o["status"]["phase"] == "Running")

    await wait_for(m_running)
    o = await _get(http, "n")
    assert o is not None and o["status"]["phase"] == "Pending"


async def test_graceful_deletion_on_simulated_node(http: Http) -> None:
    await http.post(PODS, pod("d"))
    await http.post(f"{PODS}/d/binding", binding("d", "node-0000"))

    async def running() -> bool:
        o = await _get(http, "d")
        return bool(o and o["status"]["phase"] == "Running")

    await wait_for(running)
    s, o = await http.delete(f"{PODS}/d", params={"gracePeriodSeconds": "5"})
    assert s == 200 and o["metadata"]["deletionTimestamp"] and o["metadata"]["deletionGracePeriodSeconds"] == 5
    assert await _get(http, "d") is not None  # still terminating

    async def gone() -> bool:
        return await _get(http, "d") is None

    await wait_for(gone, timeout=3)  # grace capped at ~1 s of real time


async def test_grace_zero_and_unbound_pods_go_at_once(http: Http) -> None:
    await http.post(PODS, pod("z", nodeName="node-0000"))
    s, _ = await http.delete(f"{PODS}/z", params={"gracePeriodSeconds": "0"})
    assert s == 200 and await _get(http, "z") is None
    await http.post(PODS, pod("unbound"))
    s, _ = await http.delete(f"{PODS}/unbound")
    assert s == 200 and await _get(http, "unbound") is None


@pytest.mark.sandbox(simulate_kubelet=False)
async def test_without_kubelet_pods_stay_pending_and_delete_immediately(http: Http) -> None:
    await http.post(PODS, pod("k", nodeName="node-0000"))
    o = await _get(http, "k")
    assert o is not None and o["status"]["phase"] == "Pending"
    s, _ = await http.delete(f"{PODS}/k")
    assert s == 200 and await _get(http, "k") is None


async def _running_pods(http: Http, n: int, labels: dict[str, str]) -> None:
    for i in range(n):
        await http.post(PODS, pod(f"e{i}", labels=labels, nodeName=f"node-000{i % 3}"))

    async def all_running() -> bool:
        _, lst = await http.get(PODS, params={"labelSelector": "app=e", "fieldSelector": "status.phase=Running"})
        return len(lst["items"]) == n

    await wait_for(all_running)


async def test_eviction_respects_pod_disruption_budget(http: Http, sandbox: Sandbox) -> None:
    await _running_pods(http, 3, {"app": "e"})
    s, _ = await http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                           {"metadata": {"name": "pdb"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "e"}}}})
    assert s == 201
    ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e0", "namespace": "default"}}
    s, st = await http.post(f"{PODS}/e0/eviction", ev)
    assert s == 201 and st["status"] == "Success"
    ev["metadata"]["name"] = "e1"
    s, st = await http.post(f"{PODS}/e1/eviction", ev)
    assert s == 429 and st["reason"] == "TooManyRequests"
    assert st["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert st["details"]["causes"][0] == {"reason": "DisruptionBudget",
                                          "message": "The disruption budget pdb needs 2 healthy pods and has 2 currently"}
    s, st = await http.post(f"{PODS}/nope/eviction", {**ev, "metadata": {"name": "nope"}})
    assert s == 404
    assert sandbox.counters()["evictions"] == 1


async def test_eviction_with_max_unavailable_percent(http: Http) -> None:
    await _running_pods(http, 4, {"app": "e"})
    await http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                    {"metadata": {"name": "pdb"}, "spec": {"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "e"}}}})
    ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e0"}}
    s, _ = await http.post(f"{PODS}/e0/eviction", ev)
    assert s == 201
    s, _ = await http.post(f"{PODS}/e1/eviction", {**ev, "metadata": {"name": "e1"}})
    assert s == 429


def _resources(**resources: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}


R = "spec.containers[0].resources"
GPU = "example.com/gpu"


@pytest.mark.parametrize(("resources", "causes"), [
    pytest.param({"limits": {GPU: "0.5"}},  # requests default to limits
                 [(f"{R}.limits[{GPU}]", 'Invalid value: "500m": must be an integer'),
                  (f"{R}.requests[{GPU}]", 'Invalid value: "500m": must be an integer')],
                 id="fractional-extended-resource"),
    pytest.param({"requests": {GPU: "1500m"}, "limits": {GPU: "2"}},
                 [(f"{R}.requests[{GPU}]", 'Invalid value: "1500m": must be an integer'),
                  (f"{R}.requests", f'Invalid value: "1500m": must be equal to {GPU} limit of 2')],
                 id="fractional-request-below-limit"),
    pytest.param({"requests": {GPU: "1"}, "limits": {GPU: "2"}},
                 [(f"{R}.requests", f'Invalid value: "1": must be equal to {GPU} limit of 2')],
                 id="extended-request-must-equal-limit"),
    pytest.param({"requests": {GPU: "1"}},
                 [(f"{R}.limits",
                   "Required value: Limit must be set for non overcommitable resources")],
                 id="extended-request-needs-a-limit"),
    pytest.param({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
                 [(f"{R}.requests", 'Invalid value: "2": must be less than or equal to cpu '
                                    'limit of 1')], id="cpu-above-limit"),
    pytest.param({"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}},
                 [(f"{R}.limits[hugepages-2Mi]",
                   'Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi'),
                  (f"{R}.requests[hugepages-2Mi]",
                   'Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi')],
                 id="hugepages-whole-pages"),
    pytest.param({"limits": {"hugepages-2Mi": "4Mi"}},
                 [(R, "Forbidden: HugePages require cpu or memory")], id="hugepages-alone"),
    pytest.param({"requests": {"hugepages-2Mi": "2Mi", "cpu": "1"},
                  "limits": {"hugepages-2Mi": "4Mi"}},
                 [(f"{R}.requests", 'Invalid value: "2Mi": must be equal to hugepages-2Mi '
                                    'limit of 4Mi')], id="hugepages-request-equals-limit"),
    pytest.param({"requests": {"gpu": "1"}},
                 [(f"{R}.requests[gpu]", 'Invalid value: "gpu": must be a standard resource '
                                         'type or fully qualified'),
                  (f"{R}.requests[gpu]", 'Invalid value: "gpu": must be a standard resource '
                                         'for containers')], id="unprefixed-unknown-name"),
    pytest.param({"limits": {GPU: "2", "hugepages-1Gi": "2Gi", "memory": "4Gi"},
                  "requests": {"cpu": "500m"}}, [], id="accepted"),
])
async def test_container_resources_are_validated_as_kube_apiserver_does(
        http: Http, resources: dict[str, Any], causes: list[tuple[str, str]]) -> None:
    """pkg/apis/core/validation's ValidateResourceRequirements, with its messages."""
    name = f"r-{len(causes)}-{abs(hash(str(resources))) % 10**6}"
    s, st = await http.post(PODS, pod(name, **_resources(**resources)))
    if not causes:
        assert s == 201, st
        return
    assert s == 422, st
    got = [(c["field"], c["message"]) for c in st["details"]["causes"]]
    assert sorted(got) == sorted(causes)
