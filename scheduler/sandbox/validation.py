"""Validation answering 422 Invalid with ``details.causes`` naming the field, as upstream.

Only the checks that catch real client bugs are implemented: names, labels, annotations,
container resources as kube-apiserver checks them (well-formed non-negative quantities,
requests <= limits; extended resources whole and requests equal to limits, hugepages in
whole pages), required pod fields, pod spec
immutability, and a structural subset of CRD OpenAPI schemas (type, required, enum,
minimum/maximum, pattern, nested properties/items) plus pruning of unknown fields.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any

from scheduler.objects.labels import validate_label_key as label_key_error
from scheduler.objects.labels import validate_label_value as label_value_error
from scheduler.objects.quantity import QuantityError
from scheduler.objects.quantity import parse_quantity as _parse_quantity
from scheduler.objects.resources import (
    is_extended_resource_name,
    is_hugepage_resource_name,
    is_native_resource,
)

from . import crds, dra
from .errors import ApiError, invalid
from .resources import ResourceType

Cause = tuple[str, str, str]  # field, reason, message

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_NAMES = {"namespaces", "services"}


_PARSED: dict[str, Fraction | None] = {}
_PARSED_MAX = 4096


def parse_quantity(v: Any) -> Fraction | None:
    """The value of a resource quantity, or None if malformed (``scheduler.objects.quantity``
    is the one parser, with upstream's grammar). Strings are remembered (a bounded cache:
    pods repeat a handful of quantities, and a Fraction is immutable)."""
    if type(v) is str:
        try:
            return _PARSED[v]
        except KeyError:
            pass
        try:
            val: Fraction | None = _parse_quantity(v)
        except QuantityError:
            val = None
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[v] = val
        return val
    try:
        return _parse_quantity(v)
    except QuantityError:
        return None


def _name_causes(name: Any, rt: ResourceType, path: str = "metadata.name") -> list[Cause]:
    if not isinstance(name, str) or not name:
        return [(path, "FieldValueRequired", "Required value: name or generateName is required")]
    if rt.plural in _DNS_LABEL_NAMES and rt.group == "":
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [(path, "FieldValueInvalid",
                     f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower '
                     "case alphanumeric characters or '-', and must start and end with an "
                     "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return [(path, "FieldValueInvalid",
                 f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                 "case alphanumeric characters, '-' or '.', and must start and end with an "
                 "alphanumeric character (e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")]
    return []


def validate_metadata(obj: dict[str, Any], rt: ResourceType) -> list[Cause]:
    md = obj.get("metadata")
    if not isinstance(md, dict):
        return [("metadata", "FieldValueRequired", "Required value")]
    causes = _name_causes(md.get("name"), rt)
    labels = md.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(("metadata.labels", "FieldValueInvalid", "Invalid value: must be a map"))
        else:
            for k, v in labels.items():
                kerr = label_key_error(k)
                if kerr:
                    causes.append((f"metadata.labels", "FieldValueInvalid",
                                   f'Invalid value: "{k}": {kerr}'))
                if not isinstance(v, str):
                    causes.append((f"metadata.labels", "FieldValueInvalid",
                                   f"Invalid value: {v!r}: must be a string"))
                    continue
                verr = label_value_error(v)
                if verr:
                    causes.append((f"metadata.labels", "FieldValueInvalid",
                                   f'Invalid value: "{v}": {verr}'))
    ann = md.get("annotations")
    if ann is not None:
        if not isinstance(ann, dict):
            causes.append(("metadata.annotations", "FieldValueInvalid", "Invalid value: must be a map"))
        else:
            total = 0
            for k, v in ann.items():
                kerr = label_key_error(k)
                if kerr:
                    causes.append(("metadata.annotations", "FieldValueInvalid",
                                   f'Invalid value: "{k}": {kerr}'))
                if not isinstance(v, str):
                    causes.append((f"metadata.annotations", "FieldValueInvalid",
                                   f"Invalid value: {v!r}: must be a string"))
                    continue
                total += len(k) + len(v)
            if total > 256 * 1024:
                causes.append(("metadata.annotations", "FieldValueTooLong",
                               "Too long: may not be more than 262144 bytes"))
    fins = md.get("finalizers")
    if fins is not None and not (isinstance(fins, list) and all(isinstance(f, str) for f in fins)):
        causes.append(("metadata.finalizers", "FieldValueInvalid", "Invalid value: must be a list of strings"))
    return causes


_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T",
                     15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def canonical_quantity(text: Any, value: Fraction) -> str:
    """resource.Quantity's String() (its canonical form) for a parsed quantity: the input's
    format kept (binary ``Ki``..., decimal exponent ``e3``, or decimal SI), the largest
    suffix that leaves an integer (``0.5`` is ``500m``, ``2048Ki`` is ``2Mi``), sub-nano
    rounded up."""
    raw = str(text).strip()
    sign = "-" if value < 0 else ""
    v = abs(value)
    if v.denominator != 1 and (v * 10**9).denominator != 1:
        v = Fraction(-(-v.numerator * 10**9 // v.denominator), 10**9)
    binary = raw.endswith(_BINARY_SUFFIXES[1:])
    if binary and v.denominator == 1 and v >= 1024:
        power = 0
        while power < 6 and v.numerator % 1024 ** (power + 1) == 0:
            power += 1
        return f"{sign}{v.numerator // 1024 ** power}{_BINARY_SUFFIXES[power]}"
    exponent_form = bool(re.search(r"[eE][-+]?[0-9]+$", raw))
    if v == 0:
        return "0"
    best = -9
    for exp in sorted(_DECIMAL_SUFFIXES):
        if (v / Fraction(10) ** exp).denominator == 1:
            best = exp
    mantissa = v / Fraction(10) ** best
    if exponent_form:
        return f"{sign}{mantissa}" + (f"e{best}" if best else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIXES[best]}"


# Unprefixed resource names a container may use, and every standard (quota) name
# (pkg/apis/core/helper: standardContainerResources, standardResources).
_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_RESOURCES = _CONTAINER_RESOURCES | {
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu",
    "limits.memory", "limits.ephemeral-storage", "pods", "services",
    "replicationcontrollers", "resourcequotas", "secrets", "persistentvolumeclaims",
    "configmaps", "services.loadbalancers", "services.nodeports", "requests.storage",
}
_QOS_RESOURCES = frozenset({"cpu", "memory"})


def _resource_name_causes(name: str, path: str) -> list[Cause]:
    """validateContainerResourceName: unprefixed names must be a container's standard
    resources, prefixed ones native (kubernetes.io/) or well-formed extended resources."""
    causes: list[Cause] = []
    if "/" not in name:
        hugepages = is_hugepage_resource_name(name) or name.startswith("requests.hugepages-")
        if name not in _STANDARD_RESOURCES and not hugepages:
            causes.append((path, "FieldValueInvalid", f'Invalid value: "{name}": must be a '
                           "standard resource type or fully qualified"))
        if name not in _CONTAINER_RESOURCES and not is_hugepage_resource_name(name):
            causes.append((path, "FieldValueInvalid",
                           f'Invalid value: "{name}": must be a standard resource for containers'))
    elif not is_native_resource(name) and not is_extended_resource_name(name):
        causes.append((path, "FieldValueInvalid",
                       f'Invalid value: "{name}": doesn\'t follow extended resource name standard'))
    return causes


_INTEGER_STANDARD_RESOURCES = _STANDARD_RESOURCES - _CONTAINER_RESOURCES - {
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu",
    "limits.memory", "limits.ephemeral-storage", "requests.storage"}


def _integer_resource(name: str) -> bool:
    """helper.IsIntegerResourceName: extended resources (and quota counts) are whole."""
    return is_extended_resource_name(name) or name in _INTEGER_STANDARD_RESOURCES


def _overcommit_allowed(name: str) -> bool:
    """helper.IsOvercommitAllowed: native resources but hugepages; never extended ones."""
    return is_native_resource(name) and not is_hugepage_resource_name(name)


def _hugepage_error(name: str, text: Any, value: Fraction) -> str | None:
    """validateResourceQuantityHugePageValue: a whole number of pages of the name's size."""
    if not is_hugepage_resource_name(name):
        return None
    page = parse_quantity(name[len("hugepages-"):])
    # Quantity.Value() rounds up: a fractional byte count is the next whole one
    if page is not None and page > 0 and page.denominator == 1 and value >= 0 and \
            -(-value.numerator // value.denominator) % page.numerator == 0:
        return None
    shown = canonical_quantity(text, value)
    return f"{shown} is not positive integer multiple of {name}"


# What _resources_causes found for a container's resources, by their exact contents (in order)
# and path: a stream of pods made from one template asks the same question each time.
_RESOURCES_SEEN: dict[tuple[Any, ...], tuple[Cause, ...]] = {}
_RESOURCES_SEEN_MAX = 4096
_HASHABLE_SCALARS = (str, int, float, bool, type(None))


def _resources_key(res: Any, path: str) -> tuple[Any, ...] | None:
    """A key naming exactly what ``_resources_causes_of`` reads of ``res`` (its limits and
    requests, items in order, each value with its type: 1, 1.0 and True hash alike), or None
    when that is not maps of scalars."""
    if type(res) is not dict:
        return None
    key: list[Any] = [path]
    for part in ("limits", "requests"):
        vals = res.get(part)
        if vals is None:
            key.append(None)
            continue
        if type(vals) is not dict:
            return None
        items = []
        for k, v in vals.items():
            if type(k) is not str or not isinstance(v, _HASHABLE_SCALARS):
                return None
            items.append((k, type(v), v))
        key.append(tuple(items))
    return tuple(key)


def _resources_causes(res: Any, path: str) -> list[Cause]:
    """``_resources_causes_of``, remembered for resources seen before (it is a pure function
    of them)."""
    key = _resources_key(res, path)
    if key is None:
        return _resources_causes_of(res, path)
    seen = _RESOURCES_SEEN.get(key)
    if seen is None:
        if len(_RESOURCES_SEEN) >= _RESOURCES_SEEN_MAX:
            _RESOURCES_SEEN.clear()
        seen = _RESOURCES_SEEN[key] = tuple(_resources_causes_of(res, path))
    return list(seen)


def _resources_causes_of(res: Any, path: str) -> list[Cause]:
    """ValidateResourceRequirements (pkg/apis/core/validation), with upstream's messages:
    well-formed non-negative quantities; resource names a container may use; extended
    resources whole numbers that cannot be overcommitted (a request needs a limit and must
    equal it; hugepages too, in whole pages, and only beside cpu or memory); other requests
    at most their limit."""
    causes: list[Cause] = []
    if res is None:
        return causes
    if not isinstance(res, dict):
        return [(path, "FieldValueInvalid", "Invalid value: must be an object")]
    parsed: dict[str, dict[str, Fraction]] = {}
    hugepages = cpu_or_memory = False
    for part in ("limits", "requests"):
        vals = res.get(part) or {}
        if not isinstance(vals, dict):
            causes.append((f"{path}.{part}", "FieldValueInvalid", "Invalid value: must be a map"))
            continue
        parsed[part] = {}
        for rname, q in vals.items():
            fpath = f"{path}.{part}[{rname}]"
            causes.extend(_resource_name_causes(str(rname), fpath))
            hugepages = hugepages or is_hugepage_resource_name(str(rname))
            cpu_or_memory = cpu_or_memory or rname in _QOS_RESOURCES
            val = parse_quantity(q)
            if val is None:
                causes.append((fpath, "FieldValueInvalid",
                               f"Invalid value: \"{q}\": quantities must match the regular "
                               "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
                continue
            # the canonical form (shown in messages) only where a message is written
            if val < 0:
                causes.append((fpath, "FieldValueInvalid",
                               f'Invalid value: "{canonical_quantity(q, val)}": must be greater than or equal to 0'))
                continue
            if _integer_resource(str(rname)) and (val * 1000).__ceil__() % 1000 != 0:
                causes.append((fpath, "FieldValueInvalid",
                               f'Invalid value: "{canonical_quantity(q, val)}": must be an integer'))
            hugepage_error = _hugepage_error(str(rname), q, val)
            if hugepage_error is not None:
                causes.append((fpath, "FieldValueInvalid",
                               f'Invalid value: "{canonical_quantity(q, val)}": {hugepage_error}'))
            parsed[part][rname] = val
    limits = parsed.get("limits", {})
    for rname, req in parsed.get("requests", {}).items():
        lim = limits.get(rname)
        if lim is not None:
            if req != lim and not _overcommit_allowed(str(rname)):
                must = "must be equal to"
            elif req > lim:
                must = "must be less than or equal to"
            else:
                continue
            shown = canonical_quantity(res["requests"][rname], req)
            lim_shown = canonical_quantity(res["limits"][rname], lim)
            causes.append((f"{path}.requests", "FieldValueInvalid",
                           f'Invalid value: "{shown}": {must} {rname} limit of {lim_shown}'))
        elif not _overcommit_allowed(str(rname)) and rname not in (res.get("limits") or {}):
            causes.append((f"{path}.limits", "FieldValueRequired",
                           "Required value: Limit must be set for non overcommitable resources"))
    if hugepages and not cpu_or_memory:
        causes.append((path, "FieldValueForbidden", "Forbidden: HugePages require cpu or memory"))
    return causes


def validate_pod(pod: dict[str, Any]) -> list[Cause]:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "FieldValueRequired", "Required value")]
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.containers", "FieldValueRequired", "Required value"))
        containers = []
    seen: set[str] = set()
    for kind, lst in (("containers", containers), ("initContainers", spec.get("initContainers") or [])):
        for i, c in enumerate(lst):
            p = f"spec.{kind}[{i}]"
            if not isinstance(c, dict):
                causes.append((p, "FieldValueInvalid", "Invalid value: must be an object"))
                continue
            name = c.get("name")
            if not name:
                causes.append((f"{p}.name", "FieldValueRequired", "Required value"))
            elif name in seen:
                causes.append((f"{p}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            else:
                seen.add(name)
            if not c.get("image"):
                causes.append((f"{p}.image", "FieldValueRequired", "Required value"))
            causes.extend(_resources_causes(c.get("resources"), f"{p}.resources"))
    prio = spec.get("priority")
    if prio is not None and (not isinstance(prio, int) or isinstance(prio, bool)):
        causes.append(("spec.priority", "FieldValueInvalid", f"Invalid value: {prio!r}: must be an integer"))
    for i, t in enumerate(spec.get("tolerations") or []):
        op = t.get("operator", "Equal") if isinstance(t, dict) else None
        if op not in ("Equal", "Exists"):
            causes.append((f"spec.tolerations[{i}].operator", "FieldValueNotSupported",
                           f'Unsupported value: "{op}": supported values: "Equal", "Exists"'))
    return causes


# Pod spec fields an update may change outright; the checks on what each may become follow.
_POD_MUTABLE = {"activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"}
_POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)")


def _go_json(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), sort_keys=True)


def _tolerations_update_causes(old: Any, new: Any) -> list[Cause]:
    """Existing tolerations stay (only their tolerationSeconds may change); new ones may be added."""
    olds = [t for t in old or [] if isinstance(t, dict)]
    news = [t for t in new or [] if isinstance(t, dict)]
    for o in olds:
        base = {k: v for k, v in o.items() if k != "tolerationSeconds"}
        if not any({k: v for k, v in n.items() if k != "tolerationSeconds"} == base for n in news):
            return [("spec.tolerations", "FieldValueForbidden",
                     "Forbidden: existing toleration can not be modified except its tolerationSeconds")]
    return []


def _gates_update_causes(old: Any, new: Any) -> list[Cause]:
    names_old = {g.get("name") for g in old or [] if isinstance(g, dict)}
    for i, g in enumerate(new or []):
        name = g.get("name") if isinstance(g, dict) else g
        if name not in names_old:
            return [(f"spec.schedulingGates[{i}].name", "FieldValueForbidden",
                     f"Forbidden: only deletion is allowed, but found new scheduling gate '{name}'")]
    return []


def _required_terms(affinity: Any) -> list[Any] | None:
    """The required node-affinity terms, or None when there is no required part at all."""
    na = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(na, dict) else None
    if not isinstance(req, dict):
        return None
    terms = req.get("nodeSelectorTerms")
    return list(terms) if isinstance(terms, list) else []


def _term_only_adds(new: Any, old: Any) -> bool:
    """A term may gain requirements after its existing ones (narrowing), never lose or change one."""
    n = new if isinstance(new, dict) else {}
    o = old if isinstance(old, dict) else {}
    o_expr, o_fields = o.get("matchExpressions") or [], o.get("matchFields") or []
    n_expr, n_fields = n.get("matchExpressions") or [], n.get("matchFields") or []
    if not o_expr and not o_fields and (n_expr or n_fields):
        return False  # an empty term matches nothing; giving it requirements would widen the pod
    return n_expr[:len(o_expr)] == o_expr and n_fields[:len(o_fields)] == o_fields


def _gated_directive_causes(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """KEP-3838: a gated pod's nodeSelector and required node affinity may only narrow."""
    causes: list[Cause] = []
    o_sel, n_sel = old.get("nodeSelector") or {}, new.get("nodeSelector") or {}
    if o_sel != n_sel and any(k not in n_sel or n_sel[k] != v for k, v in o_sel.items()):
        causes.append(("spec.nodeSelector", "FieldValueInvalid",
                       f"Invalid value: {_go_json(n_sel)}: only additions to spec.nodeSelector are "
                       "allowed (no mutations or deletions)"))
    o_terms = _required_terms(old.get("affinity"))
    if o_terms:
        n_terms = _required_terms(new.get("affinity")) or []
        path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        if len(n_terms) != len(o_terms):
            causes.append((path, "FieldValueInvalid",
                           f"Invalid value: {_go_json(n_terms)}: no additions/deletions to non-empty "
                           "NodeSelectorTerms list are allowed"))
        else:
            for i, (n, o) in enumerate(zip(n_terms, o_terms)):
                if not _term_only_adds(n, o):
                    causes.append((f"{path}[{i}]", "FieldValueInvalid",
                                   f"Invalid value: {_go_json(n)}: only additions are allowed "
                                   "(no mutations or deletions)"))
    return causes


def pod_update_causes(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """kube-apiserver's ValidatePodUpdate for the spec.

    Images, activeDeadlineSeconds, tolerations (additions) and gate removal are allowed on any
    pod. While the old pod is scheduling-gated (KEP-3838, GA in 1.30), nodeSelector may gain
    keys and node affinity may narrow (required terms gain requirements; preferred terms are
    free): what Kueue's admission patch does before it removes its gate.
    """
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    o = dict(old_spec)
    n = dict(new_spec)
    for f in _POD_MUTABLE:
        o.pop(f, None)
        n.pop(f, None)

    def strip_images(spec: dict[str, Any]) -> None:
        for k in ("containers", "initContainers"):
            if isinstance(spec.get(k), list):
                spec[k] = [{**c, "image": None} if isinstance(c, dict) else c for c in spec[k]]

    strip_images(o)
    strip_images(n)
    causes = _tolerations_update_causes(old_spec.get("tolerations"), new_spec.get("tolerations"))
    if old_spec.get("schedulingGates"):
        causes += _gated_directive_causes(old_spec, new_spec)
        # What the directive checks judged is set aside before the whole-spec comparison.
        o.pop("nodeSelector", None)
        n.pop("nodeSelector", None)
        for spec in (o, n):
            aff = spec.get("affinity")
            if isinstance(aff, dict):
                rest = {k: v for k, v in aff.items() if k != "nodeAffinity"}
                if rest:
                    spec["affinity"] = rest
                else:
                    spec.pop("affinity")
    if o != n:
        return causes + [("spec", "FieldValueForbidden", _POD_UPDATE_FORBIDDEN)]
    return causes + _gates_update_causes(old_spec.get("schedulingGates"), new_spec.get("schedulingGates"))


def validate_node(node: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    status = node.get("status") or {}
    for part in ("capacity", "allocatable"):
        for rname, q in (status.get(part) or {}).items():
            val = parse_quantity(q)
            if val is None or val < 0:
                causes.append((f"status.{part}[{rname}]", "FieldValueInvalid",
                               f'Invalid value: "{q}": must be a non-negative quantity'))
    for i, t in enumerate((node.get("spec") or {}).get("taints") or []):
        if t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            causes.append((f"spec.taints[{i}].effect", "FieldValueNotSupported",
                           f'Unsupported value: "{t.get("effect")}": supported values: '
                           '"NoSchedule", "PreferNoSchedule", "NoExecute"'))
    return causes


def validate_crd(crd: dict[str, Any]) -> list[Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[Cause] = []
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    if not group:
        causes.append(("spec.group", "FieldValueRequired", "Required value"))
    if not plural:
        causes.append(("spec.names.plural", "FieldValueRequired", "Required value"))
    if not names.get("kind"):
        causes.append(("spec.names.kind", "FieldValueRequired", "Required value"))
    name = (crd.get("metadata") or {}).get("name")
    if group and plural and name != f"{plural}.{group}":
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(("spec.scope", "FieldValueNotSupported",
                       f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(("spec.versions", "FieldValueRequired", "Required value: must have exactly one version marked as storage version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(("spec.versions", "FieldValueInvalid", "Invalid value: must have exactly one version marked as storage version"))
    return causes


# ------------------------------------------------------------------ CRD schemas

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _type_ok(value: Any, typ: str) -> bool:
    if typ in ("integer", "number") and isinstance(value, bool):
        return False
    if typ == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(typ, (object,)))


def schema_validate(value: Any, schema: dict[str, Any], path: str, causes: list[Cause]) -> Any:
    """Validate and prune ``value`` against a structural schema; returns the pruned value."""
    if value is None:
        if not schema.get("nullable"):
            pass
        return value
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            causes.append((path, "FieldValueTypeInvalid",
                           f"Invalid value: {_show(value)}: {path} in body must be of type integer-or-string"))
        return value
    typ = schema.get("type")
    if typ and not _type_ok(value, typ):
        causes.append((path, "FieldValueTypeInvalid",
                       f'Invalid value: "{_type_name(value)}": {path} in body must be of type {typ}: "{_type_name(value)}"'))
        return value
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{e}"' if isinstance(e, str) else str(e) for e in schema["enum"])
        causes.append((path, "FieldValueNotSupported", f"Unsupported value: {_show(value)}: supported values: {allowed}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append((path, "FieldValueInvalid",
                           f"Invalid value: {value}: {path} in body should be greater than or equal to {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            causes.append((path, "FieldValueInvalid",
                           f"Invalid value: {value}: {path} in body should be less than or equal to {schema['maximum']}"))
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append((path, "FieldValueInvalid",
                           f'Invalid value: "{value}": {path} in body should match \'{schema["pattern"]}\''))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append((path, "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes"))
    if isinstance(value, dict):
        for req in schema.get("required") or []:
            if req not in value:
                causes.append((f"{path}.{req}", "FieldValueRequired", "Required value"))
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        if props is not None or isinstance(addl, dict) or (typ == "object" and not preserve and props is None and addl is None):
            out: dict[str, Any] = {}
            for k, v in value.items():
                if props is not None and k in props:
                    out[k] = schema_validate(v, props[k], f"{path}.{k}", causes)
                elif isinstance(addl, dict):
                    out[k] = schema_validate(v, addl, f"{path}.{k}", causes)
                elif preserve or addl is True:
                    out[k] = v
                elif props is None and addl is None and not preserve and not schema.get("x-kubernetes-embedded-resource"):
                    # an object without properties prunes everything
                    continue
            return out
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [schema_validate(v, schema["items"], f"{path}[{i}]", causes) for i, v in enumerate(value)]
    return value


def _type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def _show(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else str(v)


def validate_custom(obj: dict[str, Any], rt: ResourceType) -> tuple[dict[str, Any], list[Cause]]:
    """Prune and validate a custom resource against its version's openAPIV3Schema."""
    schema = ((rt.crd_version or {}).get("schema") or {}).get("openAPIV3Schema")
    if not isinstance(schema, dict):
        return obj, []
    causes: list[Cause] = []
    props = schema.get("properties") or {}
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                           "metadata": obj.get("metadata")}
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "metadata"):
            continue
        if k in props:
            out[k] = schema_validate(v, props[k], k, causes)
        elif preserve:
            out[k] = v
    for req in schema.get("required") or []:
        if req not in obj:
            causes.append((req, "FieldValueRequired", "Required value"))
    return out, causes


def raise_if(causes: list[Cause], rt: ResourceType, name: str) -> None:
    if causes:
        raise invalid(rt.kind, name, causes, group=rt.group)


def check(obj: dict[str, Any], rt: ResourceType, *, old: dict[str, Any] | None = None) -> None:
    """Validate a full object about to be stored (``old``: the version it replaces, on an
    update); raises 422."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    causes = validate_metadata(obj, rt)
    if rt.group == "" and rt.plural == "pods":
        causes += validate_pod(obj)
        causes += dra.pod_claim_causes(obj)
    elif rt.group == "" and rt.plural == "nodes":
        causes += validate_node(obj)
    elif rt.plural == "customresourcedefinitions" and not rt.is_custom:
        causes += validate_crd(obj)
        causes += crds.api_approval_causes(obj, old)
    elif dra.is_dra(rt.group, rt.plural):
        causes += dra.causes(obj, rt.plural)
    raise_if(causes, rt, name)


def binding_error(binding: dict[str, Any], name: str) -> ApiError | None:
    target = binding.get("target") or {}
    kind = target.get("kind", "")
    if kind and kind != "Node":
        return invalid("Binding", name, [("target.kind", "FieldValueNotSupported",
                                          f'Unsupported value: "{kind}": supported values: "Node", "<empty>"')])
    if not target.get("name"):
        return invalid("Binding", name, [("target.name", "FieldValueRequired", "Required value")])
    return None
