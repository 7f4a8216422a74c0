"""Pod update validation as kube-apiserver's ValidatePodUpdate, with KEP-3838's mutable
scheduling directives on gated pods (what Kueue's admission patch relies on)."""

from __future__ import annotations

from typing import Any

import pytest
from sbhelpers import Http, pod

from scheduler.sandbox.validation import pod_update_causes

PODS = "/api/v1/namespaces/default/pods"
GATE = [{"name": "kueue.x-k8s.io/admission"}]
TOL = {"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}
EXPR_A = {"key": "a", "operator": "In", "values": ["x"]}
EXPR_B = {"key": "b", "operator": "Exists"}


def _spec(**extra: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "busybox"}], **extra}}


def _required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}


def _preferred(key: str) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": key, "operator": "Exists"}]}}]}}


NODE_TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"

# (case, old spec extras, new spec extras, fields of the expected causes; [] = accepted)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("gated: nodeSelector gains a key", {"schedulingGates": GATE}, {"schedulingGates": GATE, "nodeSelector": {"k": "v"}}, []),
    ("kueue admission: ungate + selector + toleration",
     {"schedulingGates": GATE, "nodeSelector": {"a": "b"}},
     {"nodeSelector": {"a": "b", "pool": "gpu"}, "tolerations": [TOL]}, []),
    ("gated: nodeSelector value changed", {"schedulingGates": GATE, "nodeSelector": {"a": "b"}},
     {"schedulingGates": GATE, "nodeSelector": {"a": "z"}}, ["spec.nodeSelector"]),
    ("gated: nodeSelector key removed", {"schedulingGates": GATE, "nodeSelector": {"a": "b"}},
     {"schedulingGates": GATE}, ["spec.nodeSelector"]),
    ("not gated: nodeSelector gains a key", {}, {"nodeSelector": {"k": "v"}}, ["spec"]),
    ("gate removed and selector added in one update of a pod gated before", {"schedulingGates": GATE},
     {"nodeSelector": {"k": "v"}}, []),
    ("gated: node affinity set where there was none", {"schedulingGates": GATE},
     {"schedulingGates": GATE, "affinity": _required([EXPR_A])}, []),
    ("gated: required term gains a requirement", {"schedulingGates": GATE, "affinity": _required([EXPR_A])},
     {"schedulingGates": GATE, "affinity": _required([EXPR_A, EXPR_B])}, []),
    ("gated: required term's requirement changed", {"schedulingGates": GATE, "affinity": _required([EXPR_A])},
     {"schedulingGates": GATE, "affinity": _required([EXPR_B])}, [f"{NODE_TERMS}[0]"]),
    ("gated: a required term added (widening)", {"schedulingGates": GATE, "affinity": _required([EXPR_A])},
     {"schedulingGates": GATE, "affinity": _required([EXPR_A], [EXPR_B])}, [NODE_TERMS]),
    ("gated: required affinity dropped", {"schedulingGates": GATE, "affinity": _required([EXPR_A])},
     {"schedulingGates": GATE}, [NODE_TERMS]),
    ("gated: preferred terms are free", {"schedulingGates": GATE, "affinity": _preferred("x")},
     {"schedulingGates": GATE, "affinity": _preferred("y")}, []),
    ("gated: pod affinity stays immutable", {"schedulingGates": GATE},
     {"schedulingGates": GATE, "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}},
     ["spec"]),
    ("not gated: node affinity changed", {"affinity": _required([EXPR_A])},
     {"affinity": _required([EXPR_A, EXPR_B])}, ["spec"]),
    ("toleration added", {}, {"tolerations": [TOL]}, []),
    ("toleration's seconds changed", {"tolerations": [{**TOL, "effect": "NoExecute", "tolerationSeconds": 5}]},
     {"tolerations": [{**TOL, "effect": "NoExecute", "tolerationSeconds": 9}]}, []),
    ("toleration removed", {"tolerations": [TOL]}, {}, ["spec.tolerations"]),
    ("toleration's value changed", {"tolerations": [TOL]}, {"tolerations": [{**TOL, "value": "b"}]},
     ["spec.tolerations"]),
    ("scheduling gate added", {"schedulingGates": GATE},
     {"schedulingGates": [*GATE, {"name": "other"}]}, ["spec.schedulingGates[1].name"]),
]


@pytest.mark.parametrize(("old", "new", "fields"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pod_update_causes(old: dict[str, Any], new: dict[str, Any], fields: list[str]) -> None:
    assert [c[0] for c in pod_update_causes(_spec(**old), _spec(**new))] == fields


def test_messages_name_what_upstream_names() -> None:
    (cause,) = pod_update_causes(_spec(schedulingGates=GATE, nodeSelector={"a": "b"}),
                                 _spec(schedulingGates=GATE, nodeSelector={"a": "z", "c": "d"}))
    assert cause[2] == ('Invalid value: {"a":"z","c":"d"}: only additions to spec.nodeSelector are allowed '
                        "(no mutations or deletions)")
    (cause,) = pod_update_causes(_spec(schedulingGates=GATE), _spec(schedulingGates=[*GATE, {"name": "g2"}]))
    assert cause[2] == "Forbidden: only deletion is allowed, but found new scheduling gate 'g2'"


async def test_kueue_admission_merge_patch_over_http(http: Http) -> None:
    await http.post(PODS, pod("w", schedulingGates=GATE, nodeSelector={"team": "a"}))
    s, o = await http.patch(f"{PODS}/w", {"spec": {
        "schedulingGates": None, "nodeSelector": {"pool": "gpu"}, "tolerations": [TOL]}})
    assert s == 200, o["details"]
    assert o["spec"]["nodeSelector"] == {"team": "a", "pool": "gpu"}
    assert TOL in o["spec"]["tolerations"] and "schedulingGates" not in o["spec"]
    keys = {t["key"] for t in o["spec"]["tolerations"]}  # DefaultTolerationSeconds runs on update too
    assert {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} <= keys
    # once ungated, the directives are frozen again
    s, st = await http.patch(f"{PODS}/w", {"spec": {"nodeSelector": {"more": "x"}}})
    assert s == 422 and st["details"]["causes"][0]["field"] == "spec"
