"""kube-apiserver's API approval policy for CRDs (KEP 1111, apiextensions' validateAPIApproval):
a CRD in a group the Kubernetes community owns (k8s.io, kubernetes.io and their subdomains,
built-in groups such as events.k8s.io among them) needs the ``api-approved.kubernetes.io``
annotation, with a URL or a reason starting with "unapproved"; its status carries the
KubernetesAPIApprovalPolicyConformant condition; an approved CRD never shadows a built-in
resource."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from sbhelpers import KUBECTL, Http, kubectl

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPROVED = "api-approved.kubernetes.io"
KEP = "see https://github.com/kubernetes/enhancements/pull/1111"
MISSING = (f'metadata.annotations[{APPROVED}]: Required value: protected groups must have '
           f'approval annotation "{APPROVED}", {KEP}')


def crd(group: str, plural: str = "widgets", *, approval: str | None = None,
        version: str = "v1", kind: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{plural}.{group}"}
    if approval is not None:
        meta["annotations"] = {APPROVED: approval}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": meta,
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural,
                               "kind": kind or plural.capitalize().rstrip("s")},
                     "versions": [{"name": version, "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.mark.parametrize("group", ["events.k8s.io", "k8s.io", "sigs.k8s.io", "kubernetes.io",
                                   "example.kubernetes.io"])
async def test_a_protected_group_needs_the_approval_annotation(http: Http, group: str) -> None:
    s, st = await http.post(CRDS, crd(group))
    assert (s, st["reason"]) == (422, "Invalid")
    assert st["message"] == (f'CustomResourceDefinition.apiextensions.k8s.io "widgets.{group}" '
                             f"is invalid: {MISSING}")
    assert st["details"]["causes"] == [{"reason": "FieldValueRequired", "field":
                                        f"metadata.annotations[{APPROVED}]",
                                        "message": MISSING.split(": ", 1)[1]}]
    assert st["details"]["group"] == "apiextensions.k8s.io"


@pytest.mark.parametrize("group", ["x-k8s.io", "scheduling.x-k8s.io", "k8s.io.example.com",
                                   "notkubernetes.io"])
async def test_other_groups_need_no_annotation(http: Http, group: str) -> None:
    s, made = await http.post(CRDS, crd(group))
    assert s == 201, made
    types = {c["type"] for c in made["status"]["conditions"]}
    assert types == {"NamesAccepted", "Established"}


async def test_an_annotation_neither_url_nor_unapproved_is_invalid(http: Http) -> None:
    s, st = await http.post(CRDS, crd("events.k8s.io", approval="bad value"))
    assert s == 422
    assert st["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "widgets.events.k8s.io" is invalid: '
        f'metadata.annotations[{APPROVED}]: Invalid value: "bad value": protected groups must '
        f'have approval annotation "{APPROVED}" with either a URL or a reason starting with '
        f'"unapproved", {KEP}')


def _approval(made: dict[str, Any]) -> tuple[str, str, str]:
    (cond,) = [c for c in made["status"]["conditions"]
               if c["type"] == "KubernetesAPIApprovalPolicyConformant"]
    return cond["status"], cond["reason"], cond["message"]


async def test_the_status_says_whether_the_crd_conforms_and_follows_the_annotation(
        http: Http) -> None:
    s, made = await http.post(CRDS, crd("sigs.k8s.io", approval="unapproved, testing only"))
    assert s == 201
    assert _approval(made) == ("False", "UnapprovedAnnotation",
                               'not approved: "unapproved, testing only"')
    path = f"{CRDS}/widgets.sigs.k8s.io"
    # an update that moves the approval state is validated; one that keeps it is not
    s, st = await http.patch(path, {"metadata": {"annotations": {APPROVED: "bad value"}}})
    assert s == 422 and "Invalid value: \"bad value\"" in st["message"]
    s, st = await http.patch(path, {"metadata": {"annotations": {APPROVED: None}}})
    assert s == 422 and st["message"].endswith(MISSING)
    s, st = await http.patch(path, {"metadata": {"labels": {"team": "a"}}})
    assert s == 200, st
    url = "https://github.com/kubernetes/kubernetes/pull/78458"
    s, made = await http.patch(path, {"metadata": {"annotations": {APPROVED: url}}})
    assert s == 200
    assert _approval(made) == ("True", "ApprovedAnnotation", f"approved in {url}")


async def test_an_approved_crd_does_not_shadow_a_builtin_resource(http: Http) -> None:
    # events.k8s.io/v1 events is built in: the CRD is stored, the built-in keeps serving
    s, _ = await http.post(CRDS, crd("events.k8s.io", "events", version="v1", kind="Shadow",
                                     approval="unapproved, shadowing test"))
    assert s == 201
    s, lst = await http.get("/apis/events.k8s.io/v1/events")
    assert s == 200 and lst["kind"] == "EventList"
    s, res = await http.get("/apis/events.k8s.io/v1")
    assert [r["kind"] for r in res["resources"] if r["name"] == "events"] == ["Event"]
    s, made = await http.post("/apis/events.k8s.io/v1/namespaces/default/events", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
        "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "test",
        "reportingInstance": "test-1", "action": "Test", "reason": "Tested", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p"}})
    assert s == 201 and made["kind"] == "Event", made
    s, core = await http.get("/api/v1/namespaces/default/events/e")
    assert s == 200 and core["reason"] == "Tested"  # one store behind both: the built-in
    # a new plural in the built-in group is served from the CRD
    s, _ = await http.post(CRDS, crd("events.k8s.io", "widgets",
                                     approval="unapproved, testing"))
    assert s == 201
    s, made = await http.post("/apis/events.k8s.io/v1/namespaces/default/widgets",
                              {"apiVersion": "events.k8s.io/v1", "kind": "Widget",
                               "metadata": {"name": "w"}})
    assert s == 201 and made["kind"] == "Widget"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_apply_says_why(kube_env: dict[str, str], tmp_path: Path) -> None:
    manifest = tmp_path / "crd.yaml"
    manifest.write_text(yaml.safe_dump(crd("events.k8s.io", "gadgets")))
    r = kubectl(kube_env, "apply", "-f", str(manifest), check=False)
    assert r.returncode != 0
    assert (f'The CustomResourceDefinition "gadgets.events.k8s.io" is invalid: {MISSING}'
            in r.stderr), r.stderr
    approved = crd("events.k8s.io", "gadgets",
                   approval="https://github.com/kubernetes/kubernetes/pull/78458")
    manifest.write_text(yaml.safe_dump(approved))
    r = kubectl(kube_env, "apply", "-f", str(manifest))
    assert "customresourcedefinition.apiextensions.k8s.io/gadgets.events.k8s.io created" in r.stdout
