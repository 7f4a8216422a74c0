"""DeviceTaintRules (resource.k8s.io/v1, DRADeviceTaintRules GA in 1.37) served as
kube-apiserver serves them: cluster-scoped, in discovery and OpenAPI, ``timeAdded`` stamped by
the registry, validation naming the field, a status subresource whose conditions are
validated, watch, and ``kubectl get devicetaintrules`` through discovery."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest
from sbhelpers import KUBECTL, Http

from tests.builders import dra_taint_rule

pytestmark = pytest.mark.sandbox(simulate_controllers=False)

G = "/apis/resource.k8s.io/v1"
RULES = f"{G}/devicetaintrules"


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


async def test_discovery_and_openapi_list_device_taint_rules(http: Http) -> None:
    s, rl = await http.get(G)
    assert s == 200
    by_name = {r["name"]: r for r in rl["resources"]}
    assert by_name["devicetaintrules"]["namespaced"] is False
    assert by_name["devicetaintrules"]["kind"] == "DeviceTaintRule"
    assert "devicetaintrules/status" in by_name
    s, oa = await http.get("/openapi/v3/apis/resource.k8s.io/v1")
    assert s == 200
    kinds = {op["patch"]["x-kubernetes-group-version-kind"]["kind"] for op in oa["paths"].values()}
    assert "DeviceTaintRule" in kinds


def _rule(**kw: Any) -> dict[str, Any]:
    return dra_taint_rule("bad", **kw)


INVALID: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("no taint", {**_rule(), "spec": {"deviceSelector": {}}}, [("spec.taint", "FieldValueRequired")]),
    ("no spec", {**_rule(), "spec": None}, [("spec", "FieldValueRequired")]),
    ("bad driver", _rule(driver="GPU_"), [("spec.deviceSelector.driver", "FieldValueInvalid")]),
    ("bad pool", _rule(pool="a//b"), [("spec.deviceSelector.pool", "FieldValueInvalid")]),
    ("bad device", _rule(device="Gpu.0"), [("spec.deviceSelector.device", "FieldValueInvalid")]),
    ("effect PreferNoSchedule", _rule(effect="PreferNoSchedule"),
     [("spec.taint.effect", "FieldValueNotSupported")]),
    ("no effect", _rule(effect=""), [("spec.taint.effect", "FieldValueRequired")]),
    ("bad key", _rule(key="a b"), [("spec.taint.key", "FieldValueInvalid")]),
    ("no key", _rule(key=""), [("spec.taint.key", "FieldValueRequired")]),
    ("bad value", _rule(value="-x-"), [("spec.taint.value", "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("body", "want"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
async def test_invalid_rules_name_the_field(http: Http, body: dict[str, Any],
                                            want: list[tuple[str, str]]) -> None:
    s, st = await http.post(RULES, body)
    assert s == 422, st
    assert st["details"]["kind"] == "DeviceTaintRule" and st["details"]["group"] == "resource.k8s.io"
    assert _causes(st) == want


async def test_rule_gets_time_added_and_keeps_a_given_one(http: Http) -> None:
    s, r = await http.post(RULES, dra_taint_rule("stamped", driver="gpu.example.com", pool="node-1",
                                                 device="gpu-0", effect="NoExecute"))
    assert s == 201, r
    assert r["spec"]["taint"]["timeAdded"].endswith("Z")
    assert r["metadata"]["generation"] == 1 and "namespace" not in r["metadata"]
    given = dra_taint_rule("given", effect="None", selector=False)
    given["spec"]["taint"]["timeAdded"] = "2026-01-02T03:04:05Z"
    s, r = await http.post(RULES, given)
    assert s == 201 and r["spec"]["taint"]["timeAdded"] == "2026-01-02T03:04:05Z"
    r["spec"]["taint"]["effect"] = "NoSchedule"
    s, r2 = await http.put(f"{RULES}/given", r)
    assert s == 200 and r2["metadata"]["generation"] == 2


COND = {"type": "EvictionInProgress", "status": "False", "reason": "NoEffect",
        "lastTransitionTime": "2026-01-02T03:04:05Z", "message": "", "observedGeneration": 1}


@pytest.mark.parametrize(("conditions", "want"), [
    ([COND], []),
    ([{**COND, "status": "Maybe"}], [("status.conditions[0].status", "FieldValueNotSupported")]),
    ([{**COND, "reason": ""}], [("status.conditions[0].reason", "FieldValueRequired")]),
    ([{**COND, "reason": "no spaces allowed"}], [("status.conditions[0].reason", "FieldValueInvalid")]),
    ([{**COND, "lastTransitionTime": None}], [("status.conditions[0].lastTransitionTime", "FieldValueRequired")]),
    ([COND, COND], [("status.conditions[1]", "FieldValueDuplicate")]),
], ids=["ok", "bad status", "no reason", "bad reason", "no time", "duplicate type"])
async def test_status_conditions_are_validated(http: Http, conditions: list[dict[str, Any]],
                                               want: list[tuple[str, str]]) -> None:
    name = f"st-{len(conditions)}-{abs(hash(str(conditions))) % 10**6}"
    s, r = await http.post(RULES, dra_taint_rule(name))
    assert s == 201
    s, out = await http.put(f"{RULES}/{name}/status", {**r, "status": {"conditions": conditions}})
    if not want:
        assert s == 200 and out["status"]["conditions"][0]["type"] == "EvictionInProgress"
        assert out["metadata"]["generation"] == 1  # a status write is not a spec change
    else:
        assert s == 422, out
        assert _causes(out) == want


async def test_watch_sees_rule_lifecycle(http: Http) -> None:
    s, lst = await http.get(RULES)
    assert s == 200
    watch = asyncio.create_task(http.watch(RULES, {"resourceVersion": lst["metadata"]["resourceVersion"]},
                                           until=3))
    await asyncio.sleep(0.05)
    s, r = await http.post(RULES, dra_taint_rule("w", driver="gpu.example.com"))
    r["spec"]["taint"]["effect"] = "NoExecute"
    await http.put(f"{RULES}/w", r)
    await http.delete(f"{RULES}/w")
    events = await watch
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["spec"]["taint"]["effect"] == "NoExecute"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_gets_device_taint_rules(kube_env: dict[str, str], tmp_path: Any) -> None:
    import yaml

    f = tmp_path / "rule.yaml"
    f.write_text(yaml.safe_dump(dra_taint_rule("kc-rule", driver="gpu.example.com", pool="node-1")))
    run = [KUBECTL or "kubectl"]
    r = subprocess.run([*run, "apply", "-f", str(f)], env=kube_env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == "devicetaintrule.resource.k8s.io/kc-rule created", r.stderr
    r = subprocess.run([*run, "get", "devicetaintrules"], env=kube_env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "AGE"] and lines[1].split()[0] == "kc-rule"
