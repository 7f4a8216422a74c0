"""CRD registration: a created, updated or deleted CRD changes what the catalog serves; and
kube-apiserver's API approval policy (KEP 1111): a CRD in a group the Kubernetes community
owns (``k8s.io``, ``kubernetes.io`` and their subdomains, built-in groups such as
``events.k8s.io`` among them) needs the ``api-approved.kubernetes.io`` annotation, and its
status says whether it conforms.  An approved CRD never shadows a built-in resource: as in
kube-apiserver, the built-in handler keeps serving its group/version/plural."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .resources import storage_version, types_from_crd
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]

API_APPROVED = "api-approved.kubernetes.io"
APPROVAL_CONDITION = "KubernetesAPIApprovalPolicyConformant"
_APPROVAL_FIELD = f"metadata.annotations[{API_APPROVED}]"
_APPROVAL_KEP = "see https://github.com/kubernetes/enhancements/pull/1111"
# upstream apihelpers.APIApprovalState, with its condition's status and reason
MISSING, BYPASSED, APPROVED, INVALID = "missing", "bypassed", "approved", "invalid"
_CONDITION = {MISSING: ("False", "MissingAnnotation"), BYPASSED: ("False", "UnapprovedAnnotation"),
              APPROVED: ("True", "ApprovedAnnotation"), INVALID: ("False", "InvalidAnnotation")}


def is_protected_group(group: str) -> bool:
    """upstream IsProtectedCommunityGroup."""
    return (group in ("k8s.io", "kubernetes.io")
            or group.endswith(".k8s.io") or group.endswith(".kubernetes.io"))


def approval_state(annotations: Any) -> tuple[str, str]:
    """upstream GetAPIApprovalState: (state, reason) of the annotation's value."""
    value = annotations.get(API_APPROVED, "") if isinstance(annotations, dict) else ""
    value = value if isinstance(value, str) else ""
    if not value:
        return MISSING, f'protected groups must have approval annotation "{API_APPROVED}", {_APPROVAL_KEP}'
    if value.startswith("unapproved"):
        return BYPASSED, f"not approved: {_go_quote(value)}"
    if _is_request_uri_with_host(value):
        return APPROVED, f"approved in {value}"
    return INVALID, (f'protected groups must have approval annotation "{API_APPROVED}" with either '
                     f'a URL or a reason starting with "unapproved", {_APPROVAL_KEP}')


def _is_request_uri_with_host(value: str) -> bool:
    """url.ParseRequestURI succeeds with a scheme and a host (no whitespace or control
    character, which Go's parser refuses)."""
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return bool(parts.scheme and parts.netloc)


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def api_approval_causes(crd: Obj, old: Obj | None) -> list[tuple[str, str, str]]:
    """upstream validateAPIApproval: a CRD in a protected group needs a valid approval
    annotation, unless an update leaves the approval state as it was."""
    group = (crd.get("spec") or {}).get("group")
    if not isinstance(group, str) or not is_protected_group(group):
        return []
    state, reason = approval_state((crd.get("metadata") or {}).get("annotations"))
    if old is not None and approval_state((old.get("metadata") or {}).get("annotations"))[0] == state:
        return []
    if state == MISSING:
        return [(_APPROVAL_FIELD, "FieldValueRequired", f"Required value: {reason}")]
    if state == INVALID:
        value = crd["metadata"]["annotations"][API_APPROVED]
        return [(_APPROVAL_FIELD, "FieldValueInvalid", f"Invalid value: {_go_quote(str(value))}: {reason}")]
    return []


def with_approval_condition(status: Obj, crd: Obj) -> Obj:
    """``status`` with the KubernetesAPIApprovalPolicyConformant condition the apiapproval
    controller keeps on a CRD of a protected group (none for another group)."""
    group = (crd.get("spec") or {}).get("group")
    if not isinstance(group, str) or not is_protected_group(group):
        return status
    state, reason = approval_state((crd.get("metadata") or {}).get("annotations"))
    cond_status, cond_reason = _CONDITION[state]
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != APPROVAL_CONDITION]
    previous = next((c for c in status.get("conditions") or []
                     if c.get("type") == APPROVAL_CONDITION), None)
    since = (previous.get("lastTransitionTime") if previous is not None
             and previous.get("status") == cond_status else None) or now_iso()
    conditions.append({"type": APPROVAL_CONDITION, "status": cond_status, "reason": cond_reason,
                       "message": reason, "lastTransitionTime": since})
    return {**status, "conditions": conditions}


def register_crd(reg: Registry, crd: Obj, prev: Obj | None) -> None:
    name = crd["metadata"]["name"]
    for old in reg.catalog.crd_types.pop(name, []):
        reg.catalog.by_gvr.pop((old.group, old.version, old.plural), None)
    # a built-in resource of the same group/version/plural keeps being served
    new_types = [rt for rt in types_from_crd(crd)
                 if not _is_builtin(reg.catalog.get(rt.group, rt.version, rt.plural))]
    for rt in new_types:
        reg.catalog.add(rt)
    reg.catalog.crd_types[name] = new_types
    if new_types:
        ts = reg.store.types.get(new_types[0].key)
        if ts is not None:
            ts.rt = next((t for t in new_types if t.version == storage_version(crd)), new_types[0])
    if reg.on_crd_change:
        reg.on_crd_change()


def drop_crd(reg: Registry, crd: Obj) -> None:
    name = crd["metadata"]["name"]
    types = reg.catalog.crd_types.pop(name, [])
    for rt in types:
        reg.catalog.by_gvr.pop((rt.group, rt.version, rt.plural), None)
    if types:
        ts = reg.store.types.get(types[0].key)
        if ts is not None:
            for e in list(ts.entries()):
                reg.store.remove(ts, e)
            reg.store.drop_type(types[0])
    if reg.on_crd_change:
        reg.on_crd_change()


def _is_builtin(rt: Any) -> bool:
    return rt is not None and not rt.is_custom
