"""resource.k8s.io/v1 (Dynamic Resource Allocation) as kube-apiserver serves it.

Why: DRA is GA since Kubernetes 1.34 and the scheduler's DynamicResources plugin, the
resourceclaim controller and the simulated driver all talk to these four types (and the
scheduler reads DeviceTaintRules, which add a taint to the devices they select). What a real
API server accepts or refuses decides what they can ever see, so this module reproduces the
registry strategies (``pkg/registry/resource/*``) and the validation
(``pkg/apis/resource/validation``) of DeviceClasses, ResourceClaims, ResourceClaimTemplates
and ResourceSlices: v1 defaulting (``allocationMode: ExactCount`` with ``count: 1``, toleration
operator ``Equal``), required fields and their formats, list size limits and uniqueness,
``allocationMode``/``count`` rules, request references in constraints, config and allocation
results, the claim spec and template spec being immutable, a slice's driver, pool name and
node name being immutable, and the status rules a scheduler's writes must follow
(``reservedFor`` at most 256 distinct consumers and only with an allocation, no new consumer
once the claim is being deleted, an allocation immutable once set). Errors name the field
with upstream's reasons and wording.

CEL selectors are compiled with the scheduler's CEL environment (``scheduler.dra.cel``): a
syntax error is refused as upstream; type errors (which upstream's checker also refuses) are
not caught here and reach the scheduler as the claim's or class's error.

Not reproduced: admin access authorization (namespace label), cost estimation, and fields
behind alpha feature gates are kept, not dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from scheduler.objects.quantity import QuantityError, parse_quantity
from scheduler.objects.resources import is_extended_resource_name

Obj = dict[str, Any]
Cause = tuple[str, str, str]  # field, reason, message

GROUP = "resource.k8s.io"
DRA_PLURALS = frozenset({"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices",
                         "devicetaintrules"})

# Limits of the v1 API (pkg/apis/resource/types.go).
RESERVED_FOR_MAX = 256
DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
SELECTORS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
ALLOCATION_RESULTS_MAX = 32
SLICE_DEVICES_MAX = 128
SLICE_DEVICES_MAX_ADVANCED = 64
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUE_MAX = 64
CEL_EXPRESSION_MAX = 10 * 1024
POOL_NAME_MAX = 253
DRIVER_NAME_MAX = 63
DOMAIN_MAX = 63
ID_MAX = 32
TAINTS_MAX = 16
# status.devices (resource.k8s.io/v1 AllocatedDeviceStatus)
DEVICE_STATUS_CONDITIONS_MAX = 8
DEVICE_STATUS_INTERFACE_NAME_MAX = 256
DEVICE_STATUS_HARDWARE_ADDRESS_MAX = 128
DEVICE_STATUS_IPS_MAX = 16
# partitionable devices (resource.k8s.io/v1): counters in all of a slice's sets; counter
# consumption entries of a device
SHARED_COUNTERS_MAX = 32
COUNTERS_PER_SET_MAX = 32
DEVICE_COUNTER_CONSUMPTIONS_MAX = 32
TOLERATIONS_MAX = 16
TAINT_RULE_CONDITIONS_MAX = 8  # a DeviceTaintRule's status.conditions
BINDING_CONDITIONS_MAX = 4  # a device's (and a result's) bindingConditions, bindingFailureConditions
OPAQUE_PARAMETERS_MAX = 10 * 1024

ALLOCATION_MODES = ("All", "ExactCount")
CONFIG_SOURCES = ("FromClaim", "FromClass")
TAINT_EFFECTS = ("NoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CSI_DRIVER = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
REQUEST_REF_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)


def is_dra(group: str, plural: str) -> bool:
    return group == GROUP and plural in DRA_PLURALS


# ------------------------------------------------------------------ error constructors


def _show(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)) or v is None:
        return "null" if v is None else str(v)
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def required(path: str, detail: str = "") -> Cause:
    return (path, "FieldValueRequired", f"Required value: {detail}" if detail else "Required value")


def invalid_value(path: str, value: Any, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {detail}")


def not_supported(path: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    vals = ", ".join(f'"{a}"' for a in allowed)
    return (path, "FieldValueNotSupported", f"Unsupported value: {_show(value)}: supported values: {vals}")


def duplicate(path: str, value: Any) -> Cause:
    return (path, "FieldValueDuplicate", f"Duplicate value: {_show(value)}")


def too_many(path: str, n: int, limit: int) -> Cause:
    return (path, "FieldValueTooMany", f"Too many: {n}: must have at most {limit} items")


def too_long(path: str, limit: int) -> Cause:
    return (path, "FieldValueTooLong", f"Too long: may not be more than {limit} bytes")


def forbidden(path: str, detail: str) -> Cause:
    return (path, "FieldValueForbidden", f"Forbidden: {detail}")


def immutable(path: str, value: Any) -> Cause:
    return invalid_value(path, value, "field is immutable")


# ------------------------------------------------------------------ helpers


def _dict(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _type_causes(value: Any, path: str, want: type, what: str) -> list[Cause]:
    if value is None or isinstance(value, want):
        return []
    return [invalid_value(path, value, f"must be {what}")]


def dns_label(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return [required(path)]
    out: list[Cause] = []
    if len(value) > 63:
        out.append(invalid_value(path, value, "must be no more than 63 characters"))
    if not _DNS_LABEL.match(value):
        out.append(invalid_value(path, value, DNS_LABEL_MSG))
    return out


def dns_subdomain(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return [required(path)]
    out: list[Cause] = []
    if len(value) > 253:
        out.append(invalid_value(path, value, "must be no more than 253 characters"))
    if not _DNS_SUBDOMAIN.match(value):
        out.append(invalid_value(path, value, DNS_SUBDOMAIN_MSG))
    return out


def driver_name(value: Any, path: str) -> list[Cause]:
    """A driver name is validated like a CSI driver name (upstream reuses that check)."""
    if not isinstance(value, str) or not value:
        return [required(path)]
    out: list[Cause] = []
    if len(value) > DRIVER_NAME_MAX:
        out.append(too_long(path, DRIVER_NAME_MAX))
    if not _CSI_DRIVER.match(value):
        out.append(invalid_value(path, value, DNS_SUBDOMAIN_MSG))
    return out


def pool_name(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return [required(path)]
    out: list[Cause] = []
    if len(value) > POOL_NAME_MAX:
        out.append(too_long(path, POOL_NAME_MAX))
    for part in value.split("/"):
        if not part or not _DNS_SUBDOMAIN.match(part) or len(part) > 253:
            out.append(invalid_value(path, part, DNS_SUBDOMAIN_MSG))
    return out


def qualified_name(value: Any, path: str) -> list[Cause]:
    """An attribute or capacity name: ``<domain>/<C identifier>`` or a bare identifier."""
    if not isinstance(value, str) or not value:
        return [required(path)]
    domain, sep, ident = value.rpartition("/")
    out: list[Cause] = []
    if sep:
        if not domain:
            out.append(required(path, "the domain must not be empty"))
        else:
            if len(domain) > DOMAIN_MAX:
                out.append(too_long(path, DOMAIN_MAX))
            if not _DNS_SUBDOMAIN.match(domain):
                out.append(invalid_value(path, domain, DNS_SUBDOMAIN_MSG))
    if not ident:
        out.append(required(path, "the name must not be empty"))
    else:
        if len(ident) > ID_MAX:
            out.append(too_long(path, ID_MAX))
        if not _C_IDENTIFIER.match(ident):
            out.append(invalid_value(path, ident,
                                     "a valid C identifier must start with alphabetic character or '_', "
                                     "followed by a string of alphanumeric characters or '_' "
                                     "(e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
                                     "validation is '[A-Za-z_][A-Za-z0-9_]*')"))
    return out


def fully_qualified_name(value: Any, path: str) -> list[Cause]:
    """A constraint's attribute: the domain is required."""
    out = qualified_name(value, path)
    if isinstance(value, str) and value and "/" not in value:
        out.append(required(path, "a fully qualified name must be a domain and a name separated by a slash"))
    return out


def _sized(items: Any, path: str, limit: int) -> tuple[list[Any], list[Cause]]:
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], [invalid_value(path, items, "must be a list")]
    if limit >= 0 and len(items) > limit:
        return items, [too_many(path, len(items), limit)]
    return items, []


def _unique(keys: list[tuple[int, Any]], path: str) -> list[Cause]:
    seen: set[str] = set()
    out: list[Cause] = []
    for i, k in keys:
        key = _show(k)
        if key in seen:
            out.append(duplicate(f"{path}[{i}]", k))
        seen.add(key)
    return out


def _quantity(value: Any, path: str) -> list[Cause]:
    if value is None:
        return [required(path)]
    try:
        parse_quantity(value)
    except QuantityError:
        return [invalid_value(path, value, "quantities must match the regular expression "
                              "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    return []


# ------------------------------------------------------------------ defaulting (v1)


def _default_exact(req: Obj) -> Obj:
    req = dict(req)
    req.setdefault("allocationMode", "ExactCount")
    if req.get("allocationMode") == "ExactCount" and req.get("count") in (None, 0):
        req["count"] = 1
    if isinstance(req.get("tolerations"), list):
        req["tolerations"] = [{**t, "operator": t.get("operator") or "Equal"} if isinstance(t, dict) else t
                              for t in req["tolerations"]]
    return req


def default_claim_spec(spec: Any) -> Any:
    """v1 defaults of a ResourceClaimSpec (SetDefaults_ExactDeviceRequest and the like)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), dict):
        return spec
    devices = dict(spec["devices"])
    reqs = devices.get("requests")
    if isinstance(reqs, list):
        out = []
        for r in reqs:
            if isinstance(r, dict):
                r = dict(r)
                if isinstance(r.get("exactly"), dict):
                    r["exactly"] = _default_exact(r["exactly"])
                if isinstance(r.get("firstAvailable"), list):
                    r["firstAvailable"] = [_default_exact(s) if isinstance(s, dict) else s
                                           for s in r["firstAvailable"]]
            out.append(r)
        devices["requests"] = out
    return {**spec, "devices": devices}


def default(obj: Obj, plural: str) -> Obj:
    """Apply v1 defaulting to a resource.k8s.io object (on create and on every update, as the
    decoder does)."""
    if plural == "resourceclaims":
        if "spec" in obj:
            obj = {**obj, "spec": default_claim_spec(obj["spec"])}
    elif plural == "resourceclaimtemplates":
        spec = obj.get("spec")
        if isinstance(spec, dict) and "spec" in spec:
            obj = {**obj, "spec": {**spec, "spec": default_claim_spec(spec["spec"])}}
    elif plural == "devicetaintrules":
        # the registry strategy stamps a taint without timeAdded (on create and update)
        spec = obj.get("spec")
        taint = spec.get("taint") if isinstance(spec, dict) else None
        if isinstance(spec, dict) and isinstance(taint, dict) and not taint.get("timeAdded"):
            from .util import now_iso

            obj = {**obj, "spec": {**spec, "taint": {**taint, "timeAdded": now_iso()}}}
    return obj


# ------------------------------------------------------------------ claims and templates


def _request_names(devices: Obj) -> dict[str, set[str] | None]:
    names: dict[str, set[str] | None] = {}
    for r in _list(devices.get("requests")):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            continue
        subs = _list(r.get("firstAvailable"))
        names[r["name"]] = ({s["name"] for s in subs if isinstance(s, dict) and isinstance(s.get("name"), str)}
                            if subs else None)
    return names


def _has_request(names: dict[str, set[str] | None], ref: str) -> bool:
    parts = ref.split("/")
    if len(parts) > 2 or parts[0] not in names:
        return False
    if len(parts) == 1:
        return True
    subs = names[parts[0]]
    return subs is not None and parts[1] in subs


def request_ref(ref: Any, path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    if not isinstance(ref, str):
        return [invalid_value(path, ref, REQUEST_REF_MSG)]
    parts = ref.split("/")
    if len(parts) > 2:
        return [invalid_value(path, ref, REQUEST_REF_MSG)]
    out: list[Cause] = []
    for p in parts:
        out += dns_label(p, path)
    if not _has_request(names, ref):
        out.append(invalid_value(path, ref, REQUEST_REF_MSG))
    return out


def _request_refs(refs: Any, path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    items, out = _sized(refs, path, DEVICE_REQUESTS_MAX)
    for i, r in enumerate(items):
        out += request_ref(r, f"{path}[{i}]", names)
    out += _unique(list(enumerate(items)), path)
    return out


def _selectors(sels: Any, path: str) -> list[Cause]:
    items, out = _sized(sels, path, SELECTORS_MAX)
    for i, s in enumerate(items):
        p = f"{path}[{i}]"
        cel = _dict(s).get("cel")
        if not isinstance(cel, dict):
            out.append(required(f"{p}.cel"))
            continue
        expr = cel.get("expression")
        if not isinstance(expr, str) or not expr.strip():
            out.append(required(f"{p}.cel.expression", "expression must not be empty"))
        elif len(expr) > CEL_EXPRESSION_MAX:
            out.append(too_long(f"{p}.cel.expression", CEL_EXPRESSION_MAX))
        else:
            err = cel_error(expr)
            if err:
                out.append(invalid_value(f"{p}.cel.expression", expr, err))
    return out


def cel_error(expression: str) -> str:
    """Why a selector does not compile ("" if it does), worded as kube-apiserver's
    ``compilation failed: ERROR: <input>:line:col: ...``; through the scheduler's own CEL
    environment (``scheduler.dra.cel``), which checks syntax, not types."""
    from scheduler.dra.cel import CelError, compile_selector

    try:
        compile_selector(expression)
    except CelError as e:
        msg = str(e)
        return "compilation failed: " + (msg[msg.index("ERROR:"):] if "ERROR:" in msg else msg)
    return ""


def _toleration(t: Any, path: str) -> list[Cause]:
    if not isinstance(t, dict):
        return [invalid_value(path, t, "must be an object")]
    out: list[Cause] = []
    key = t.get("key")
    if key:
        out += qualified_label_key(key, f"{path}.key")
    op = t.get("operator") or "Equal"
    if op not in TOLERATION_OPERATORS:
        out.append(not_supported(f"{path}.operator", op, TOLERATION_OPERATORS))
    elif op == "Exists" and t.get("value"):
        out.append(invalid_value(f"{path}.operator", op, "value must be empty when `operator` is 'Exists'"))
    elif op == "Equal" and not key and t.get("value"):
        out.append(invalid_value(f"{path}.operator", op, "operator must be Exists when `key` is empty"))
    eff = t.get("effect")
    if eff and eff not in TAINT_EFFECTS:
        out.append(not_supported(f"{path}.effect", eff, TAINT_EFFECTS))
    return out


def qualified_label_key(key: Any, path: str) -> list[Cause]:
    from scheduler.objects.labels import validate_label_key

    if not isinstance(key, str):
        return [invalid_value(path, key, "must be a string")]
    err = validate_label_key(key)
    return [invalid_value(path, key, err)] if err else []


# ------------------------------------------------------------------ consumable capacity
# (DRAConsumableCapacity, DRAFractionalCapacityRange): a device's requestPolicy, a request's
# capacity.requests, a result's consumedCapacity.

VALID_VALUES_MAX = 10


def _q(value: Any) -> Any:
    """A parsed quantity, or None when it does not parse (reported by ``_quantity``)."""
    try:
        return parse_quantity(value) if value is not None else None
    except (QuantityError, ValueError, TypeError):
        return None


def _request_policy(policy: Any, path: str, value: Any) -> list[Cause]:
    if not isinstance(policy, dict):
        return [invalid_value(path, policy, "must be an object")]
    out: list[Cause] = []
    total = _q(value)
    default = policy.get("default")
    if default is not None:
        out += _quantity(default, f"{path}.default")
    d = _q(default)
    if d is not None and d < 0:
        out.append(invalid_value(f"{path}.default", default, "must be greater than or equal "
                                 "to zero"))
    if d is not None and total is not None and d > total:
        out.append(invalid_value(f"{path}.default", default, "must be less than or equal to "
                                 "the capacity value"))
    values, rng = policy.get("validValues"), policy.get("validRange")
    if values is not None and rng is not None:
        out.append(forbidden(path, "only one of validValues or validRange may be set"))
        return out
    if values is not None:
        vp = f"{path}.validValues"
        items, vc = _sized(values, vp, VALID_VALUES_MAX)
        out += vc
        parsed: list[Any] = []
        for i, v in enumerate(items):
            out += _quantity(v, f"{vp}[{i}]")
            q = _q(v)
            if q is None:
                continue
            if parsed and q <= parsed[-1]:
                out.append(invalid_value(f"{vp}[{i}]", v, "values must be unique and sorted "
                                         "in ascending order"))
            if total is not None and q > total:
                out.append(invalid_value(f"{vp}[{i}]", v, "must be less than or equal to "
                                         "the capacity value"))
            parsed.append(q)
        if default is None:
            out.append(required(f"{path}.default", "required when validValues is set"))
        elif d is not None and parsed and d not in parsed:
            out.append(invalid_value(f"{path}.default", default, "must be one of validValues"))
    if rng is not None:
        rp = f"{path}.validRange"
        if not isinstance(rng, dict):
            return out + [invalid_value(rp, rng, "must be an object")]
        out += _quantity(rng.get("min"), f"{rp}.min")
        lo = _q(rng.get("min"))
        hi = _q(rng.get("max")) if rng.get("max") is not None else None
        if rng.get("max") is not None:
            out += _quantity(rng["max"], f"{rp}.max")
        if lo is not None and hi is not None and hi < lo:
            out.append(invalid_value(f"{rp}.max", rng["max"], "must be greater than or equal "
                                     "to min"))
        if hi is not None and total is not None and hi > total:
            out.append(invalid_value(f"{rp}.max", rng["max"], "must be less than or equal to "
                                     "the capacity value"))
        if lo is not None and total is not None and lo > total:
            out.append(invalid_value(f"{rp}.min", rng["min"], "must be less than or equal to "
                                     "the capacity value"))
        if rng.get("step") is not None:
            out += _quantity(rng["step"], f"{rp}.step")
            step = _q(rng["step"])
            if step is not None and step <= 0:
                out.append(invalid_value(f"{rp}.step", rng["step"], "must be greater than zero"))
        if default is None:
            out.append(required(f"{path}.default", "required when validRange is set"))
        elif d is not None and lo is not None and (d < lo or (hi is not None and d > hi)):
            out.append(invalid_value(f"{path}.default", default, "must be within validRange"))
    return out


def _capacity_requests(raw: Any, path: str) -> list[Cause]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [invalid_value(path, raw, "must be an object")]
    reqs = raw.get("requests")
    if reqs is None:
        return []
    if not isinstance(reqs, dict):
        return [invalid_value(f"{path}.requests", reqs, "must be a map")]
    out: list[Cause] = []
    for k, v in reqs.items():
        out += qualified_name(k, f"{path}.requests")
        out += _quantity(v, f"{path}.requests[{k}]")
        q = _q(v)
        if q is not None and q < 0:
            out.append(invalid_value(f"{path}.requests[{k}]", v, "must be greater than or "
                                     "equal to zero"))
    return out


def _consumed_capacity(raw: Any, path: str) -> list[Cause]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [invalid_value(path, raw, "must be a map")]
    out: list[Cause] = []
    for k, v in raw.items():
        out += qualified_name(k, path)
        out += _quantity(v, f"{path}[{k}]")
    return out


def _exact(req: Any, path: str) -> list[Cause]:
    if not isinstance(req, dict):
        return [invalid_value(path, req, "must be an object")]
    out: list[Cause] = []
    cls = req.get("deviceClassName")
    out += [required(f"{path}.deviceClassName")] if not cls else dns_subdomain(cls, f"{path}.deviceClassName")
    out += _selectors(req.get("selectors"), f"{path}.selectors")
    mode = req.get("allocationMode")
    count = req.get("count")
    out += _type_causes(count, f"{path}.count", int, "an integer")
    if mode == "All":
        if count not in (None, 0):
            out.append(invalid_value(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            out.append(invalid_value(f"{path}.count", count, "must be greater than zero"))
    else:
        out.append(not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES))
    aa = req.get("adminAccess")
    out += _type_causes(aa, f"{path}.adminAccess", bool, "a boolean")
    out += _capacity_requests(req.get("capacity"), f"{path}.capacity")
    tols, tc = _sized(req.get("tolerations"), f"{path}.tolerations", TOLERATIONS_MAX)
    out += tc
    for i, t in enumerate(tols):
        out += _toleration(t, f"{path}.tolerations[{i}]")
    return out


def _device_request(r: Any, path: str) -> list[Cause]:
    if not isinstance(r, dict):
        return [invalid_value(path, r, "must be an object")]
    out = dns_label(r.get("name"), f"{path}.name")
    fa = r.get("firstAvailable")
    has_fa = isinstance(fa, list) and len(fa) > 0
    has_exact = r.get("exactly") is not None
    if has_fa and has_exact:
        out.append(invalid_value(path, None, "exactly one of `exactly` or `firstAvailable` is required, "
                                 "but multiple fields are set"))
    elif not has_fa and not has_exact:
        out.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif has_exact:
        out += _exact(r["exactly"], f"{path}.exactly")
    else:
        subs, sc = _sized(fa, f"{path}.firstAvailable", FIRST_AVAILABLE_MAX)
        out += sc
        keys = []
        for i, s in enumerate(subs):
            sp = f"{path}.firstAvailable[{i}]"
            out += dns_label(_dict(s).get("name"), f"{sp}.name")
            out += _exact(s, sp) if isinstance(s, dict) else []
            keys.append((i, _dict(s).get("name")))
        out += _unique(keys, f"{path}.firstAvailable")
    return out


def _opaque(cfg: Any, path: str) -> list[Cause]:
    op = _dict(cfg).get("opaque")
    if not isinstance(op, dict):
        return [required(f"{path}.opaque")]
    out = driver_name(op.get("driver"), f"{path}.opaque.driver")
    params = op.get("parameters")
    if params is None:
        out.append(required(f"{path}.opaque.parameters"))
    elif not isinstance(params, dict):
        out.append(invalid_value(f"{path}.opaque.parameters", params, "parameters must be a valid JSON object"))
    elif len(json.dumps(params)) > OPAQUE_PARAMETERS_MAX:
        out.append(too_long(f"{path}.opaque.parameters", OPAQUE_PARAMETERS_MAX))
    return out


def claim_spec_causes(spec: Any, path: str) -> list[Cause]:
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        return [invalid_value(path, spec, "must be an object")]
    devices = spec.get("devices")
    if devices is None:
        return []
    if not isinstance(devices, dict):
        return [invalid_value(f"{path}.devices", devices, "must be an object")]
    dp = f"{path}.devices"
    out: list[Cause] = []
    names = _request_names(devices)
    reqs, rc = _sized(devices.get("requests"), f"{dp}.requests", DEVICE_REQUESTS_MAX)
    out += rc
    for i, r in enumerate(reqs):
        out += _device_request(r, f"{dp}.requests[{i}]")
    out += _unique([(i, _dict(r).get("name")) for i, r in enumerate(reqs)], f"{dp}.requests")
    cons, cc = _sized(devices.get("constraints"), f"{dp}.constraints", CONSTRAINTS_MAX)
    out += cc
    for i, c in enumerate(cons):
        cp = f"{dp}.constraints[{i}]"
        c = _dict(c)
        out += _request_refs(c.get("requests"), f"{cp}.requests", names)
        if c.get("matchAttribute") is not None:
            out += fully_qualified_name(c["matchAttribute"], f"{cp}.matchAttribute")
        elif c.get("distinctAttribute") is not None:
            out += fully_qualified_name(c["distinctAttribute"], f"{cp}.distinctAttribute")
        else:
            out.append(required(cp, 'exactly one of "matchAttribute" or "distinctAttribute" is required, '
                                "but multiple fields are set"))
    cfgs, fc = _sized(devices.get("config"), f"{dp}.config", CONFIG_MAX)
    out += fc
    for i, c in enumerate(cfgs):
        cp = f"{dp}.config[{i}]"
        out += _request_refs(_dict(c).get("requests"), f"{cp}.requests", names)
        out += _opaque(c, cp)
    return out


def _template_meta(md: Any, path: str) -> list[Cause]:
    """A template's embedded metadata: labels and annotations are what it may carry."""
    from scheduler.objects.labels import validate_label_value

    if md is None:
        return []
    if not isinstance(md, dict):
        return [invalid_value(path, md, "must be an object")]
    out: list[Cause] = []
    for k, v in _dict(md.get("labels")).items():
        out += qualified_label_key(k, f"{path}.labels")
        err = validate_label_value(v) if isinstance(v, str) else "must be a string"
        if err:
            out.append(invalid_value(f"{path}.labels", v, err))
    for k in _dict(md.get("annotations")):
        out += qualified_label_key(k.lower() if isinstance(k, str) else k, f"{path}.annotations")
    return out


# ------------------------------------------------------------------ device classes


def class_spec_causes(spec: Any) -> list[Cause]:
    spec = _dict(spec)
    out = _selectors(spec.get("selectors"), "spec.selectors")
    cfgs, cc = _sized(spec.get("config"), "spec.config", CONFIG_MAX)
    out += cc
    for i, c in enumerate(cfgs):
        out += _opaque(c, f"spec.config[{i}]")
    ern = spec.get("extendedResourceName")
    # v1helper.IsExtendedResourceName: a qualified name outside kubernetes.io (so never a
    # class's implicit deviceclass.resource.kubernetes.io/<class>), not under "requests."
    if ern is not None and (not isinstance(ern, str) or not is_extended_resource_name(ern)):
        out.append(invalid_value("spec.extendedResourceName", ern, "must be a valid extended resource name"))
    return out


# ------------------------------------------------------------------ resource slices


def _node_selector(sel: Any, path: str) -> list[Cause]:
    if not isinstance(sel, dict):
        return [invalid_value(path, sel, "must be an object")]
    terms = sel.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return [required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    out: list[Cause] = []
    ops = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    for i, t in enumerate(terms):
        tp = f"{path}.nodeSelectorTerms[{i}]"
        for j, e in enumerate(_list(_dict(t).get("matchExpressions"))):
            ep = f"{tp}.matchExpressions[{j}]"
            e = _dict(e)
            op = e.get("operator")
            vals = _list(e.get("values"))
            out += qualified_label_key(e.get("key", ""), f"{ep}.key") if e.get("key") else [required(f"{ep}.key")]
            if op in ("In", "NotIn") and not vals:
                out.append(required(f"{ep}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
            elif op in ("Exists", "DoesNotExist") and vals:
                out.append(forbidden(f"{ep}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
            elif op in ("Gt", "Lt") and len(vals) != 1:
                out.append(required(f"{ep}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
            elif op not in ops:
                out.append(not_supported(f"{ep}.operator", op, ops))
        for j, f in enumerate(_list(_dict(t).get("matchFields"))):
            fp = f"{tp}.matchFields[{j}]"
            f = _dict(f)
            if f.get("key") != "metadata.name":
                out.append(invalid_value(f"{fp}.key", f.get("key"), "not a valid field selector key"))
            if f.get("operator") not in ("In", "NotIn"):
                out.append(not_supported(f"{fp}.operator", f.get("operator"), ("In", "NotIn")))
            elif len(_list(f.get("values"))) != 1:
                out.append(required(f"{fp}.values", "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    return out


def _attribute(a: Any, path: str) -> list[Cause]:
    if not isinstance(a, dict):
        return [invalid_value(path, a, "must be an object")]
    out: list[Cause] = []
    n = 0
    for k, typ in (("bool", bool), ("int", int), ("string", str), ("version", str)):
        if a.get(k) is None:
            continue
        n += 1
        v = a[k]
        if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
            out.append(invalid_value(f"{path}.{k}", v, f"must be of type {k}"))
            continue
        if not isinstance(v, str):
            continue
        if len(v) > ATTRIBUTE_VALUE_MAX:
            out.append(too_long(f"{path}.{k}", ATTRIBUTE_VALUE_MAX))
        if k == "version" and not _SEMVER.match(v):
            out.append(invalid_value(f"{path}.version", v, "must be a string compatible with semver.org spec 2.0.0"))
    for k in ("bools", "ints", "strings", "versions"):
        if a.get(k) is None:
            continue
        n += 1
        vals = a[k]
        if not isinstance(vals, list) or not vals:
            out.append(invalid_value(f"{path}.{k}", vals, "must not be empty if specified"))
            continue
        for i, v in enumerate(vals):
            if k in ("strings", "versions") and isinstance(v, str) and len(v) > ATTRIBUTE_VALUE_MAX:
                out.append(too_long(f"{path}.{k}[{i}]", ATTRIBUTE_VALUE_MAX))
            if k == "versions" and (not isinstance(v, str) or not _SEMVER.match(v)):
                out.append(invalid_value(f"{path}.{k}[{i}]", v, "must be a string compatible with semver.org spec 2.0.0"))
    if n != 1:
        out.append(invalid_value(path, "" if n == 0 else a, "exactly one value must be specified"))
    return out


def _taint(t: Any, path: str) -> list[Cause]:
    if not isinstance(t, dict):
        return [invalid_value(path, t, "must be an object")]
    out = qualified_label_key(t.get("key"), f"{path}.key") if t.get("key") else [required(f"{path}.key")]
    v = t.get("value")
    if v:
        from scheduler.objects.labels import validate_label_value

        err = validate_label_value(v) if isinstance(v, str) else "must be a string"
        if err:
            out.append(invalid_value(f"{path}.value", v, err))
    eff = t.get("effect")
    if not eff:
        out.append(required(f"{path}.effect"))
    elif eff not in (*TAINT_EFFECTS, "None"):
        out.append(not_supported(f"{path}.effect", eff, (*TAINT_EFFECTS, "None")))
    return out


def _counters(raw: Any, path: str) -> list[Cause]:
    """A map of counters (a counter set's, or what a device consumes of one)."""
    if not isinstance(raw, dict) or not raw:
        return [required(path)] if not raw else [invalid_value(path, raw, "must be a map")]
    out: list[Cause] = []
    if len(raw) > COUNTERS_PER_SET_MAX:
        out.append(too_many(path, len(raw), COUNTERS_PER_SET_MAX))
    for k, c in raw.items():
        out += dns_label(k, path)
        if not isinstance(c, dict):
            out.append(invalid_value(f"{path}[{k}]", c, "must be an object"))
            continue
        out += _quantity(c.get("value"), f"{path}[{k}].value")
    return out


def _counter_entries(entries: list[Any], path: str, key: str) -> list[Cause]:
    """A list of named counter maps, each entry named by ``key`` (unique, a DNS label): a
    slice's ``sharedCounters`` (``name``) or a device's ``consumesCounters`` (``counterSet``)."""
    out: list[Cause] = []
    for i, entry in enumerate(entries):
        ep = f"{path}[{i}]"
        if not isinstance(entry, dict):
            out.append(invalid_value(ep, entry, "must be an object"))
            continue
        out += dns_label(entry.get(key), f"{ep}.{key}")
        out += _counters(entry.get("counters"), f"{ep}.counters")
    out += _unique([(i, _dict(e).get(key)) for i, e in enumerate(entries)], path)
    return out


def _shared_counters(raw: Any, path: str) -> list[Cause]:
    sets, out = _sized(raw, path, -1)
    total = sum(len(_dict(_dict(cs).get("counters"))) for cs in sets)
    if total > SHARED_COUNTERS_MAX:
        out.append(invalid_value(path, total, "the total number of counters must not exceed "
                                 f"{SHARED_COUNTERS_MAX}"))
    return out + _counter_entries(sets, path, "name")


def _binding_conditions(obj: Obj, path: str) -> list[Cause]:
    """``bindingConditions`` and ``bindingFailureConditions`` (DRADeviceBindingConditions) of a
    device or of an allocation result: at most 4 condition types each, unique."""
    out: list[Cause] = []
    for fld in ("bindingConditions", "bindingFailureConditions"):
        items, ic = _sized(obj.get(fld), f"{path}.{fld}", BINDING_CONDITIONS_MAX)
        out += ic
        for i, t in enumerate(items):
            out += qualified_label_key(t, f"{path}.{fld}[{i}]")
        out += _unique(list(enumerate(items)), f"{path}.{fld}")
    return out


def _device(d: Any, path: str, per_device: bool) -> list[Cause]:
    if not isinstance(d, dict):
        return [invalid_value(path, d, "must be an object")]
    out = dns_label(d.get("name"), f"{path}.name")
    attrs = d.get("attributes")
    caps = d.get("capacity")
    for fld, v in (("attributes", attrs), ("capacity", caps)):
        if v is not None and not isinstance(v, dict):
            out.append(invalid_value(f"{path}.{fld}", v, "must be a map"))
    attrs, caps = _dict(attrs), _dict(caps)
    total = len(attrs) + len(caps)
    if total > ATTRIBUTES_AND_CAPACITIES_MAX:
        out.append(invalid_value(path, total, "the total number of attributes and capacities must not exceed "
                                 f"{ATTRIBUTES_AND_CAPACITIES_MAX}"))
    for k, a in attrs.items():
        out += qualified_name(k, f"{path}.attributes")
        out += _attribute(a, f"{path}.attributes[{k}]")
    for k, c in caps.items():
        out += qualified_name(k, f"{path}.capacity")
        cp = f"{path}.capacity[{k}]"
        if not isinstance(c, dict):
            out.append(invalid_value(cp, c, "must be an object"))
            continue
        out += _quantity(c.get("value"), f"{cp}.value")
        if c.get("requestPolicy") is not None and not d.get("allowMultipleAllocations"):
            out.append(forbidden(f"{cp}.requestPolicy", "allowMultipleAllocations must be true"))
        elif c.get("requestPolicy") is not None:
            out += _request_policy(c["requestPolicy"], f"{cp}.requestPolicy", c.get("value"))
    out += _type_causes(d.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations",
                        bool, "a boolean")
    consumes, cc = _sized(d.get("consumesCounters"), f"{path}.consumesCounters",
                          DEVICE_COUNTER_CONSUMPTIONS_MAX)
    out += cc
    out += _counter_entries(consumes, f"{path}.consumesCounters", "counterSet")
    out += _binding_conditions(d, path)
    if d.get("bindsToNode") is not None and not isinstance(d.get("bindsToNode"), bool):
        out.append(invalid_value(f"{path}.bindsToNode", d["bindsToNode"], "must be a boolean"))
    taints, tc = _sized(d.get("taints"), f"{path}.taints", TAINTS_MAX)
    out += tc
    for i, t in enumerate(taints):
        out += _taint(t, f"{path}.taints[{i}]")
    placement = [f for f in ("nodeName", "nodeSelector", "allNodes") if d.get(f) not in (None, False, "")]
    if per_device:
        if len(placement) != 1:
            msg = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                   "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
            out.append(required(path, msg) if not placement else
                       invalid_value(path, "{" + ", ".join(f"`{f}`" for f in placement) + "}", msg))
    elif any(d.get(f) is not None for f in ("nodeName", "nodeSelector", "allNodes")):
        out.append(invalid_value(path, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                                 "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
    return out


def slice_spec_causes(spec: Any) -> list[Cause]:
    if not isinstance(spec, dict):
        return [required("spec")]
    out = driver_name(spec.get("driver"), "spec.driver")
    pool = spec.get("pool")
    if not isinstance(pool, dict):
        out.append(required("spec.pool.name"))
        out.append(invalid_value("spec.pool.resourceSliceCount", 0, "must be greater than zero"))
    else:
        out += pool_name(pool.get("name"), "spec.pool.name")
        cnt = pool.get("resourceSliceCount")
        if not isinstance(cnt, int) or isinstance(cnt, bool) or cnt <= 0:
            out.append(invalid_value("spec.pool.resourceSliceCount", cnt if cnt is not None else 0,
                                     "must be greater than zero"))
        gen = pool.get("generation", 0)
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            out.append(invalid_value("spec.pool.generation", gen, "must be greater than or equal to zero"))
    set_fields: list[str] = []
    node = spec.get("nodeName")
    if node is not None:
        if node == "":
            out.append(invalid_value("spec.nodeName", "", "must be either unset or set to a non-empty string"))
        else:
            set_fields.append("`nodeName`")
            out += dns_subdomain(node, "spec.nodeName")
    if spec.get("nodeSelector") is not None:
        set_fields.append("`nodeSelector`")
        ns = spec["nodeSelector"]
        out += _node_selector(ns, "spec.nodeSelector")
        terms = _dict(ns).get("nodeSelectorTerms")
        if isinstance(terms, list) and len(terms) > 1:
            out.append(invalid_value("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term"))
    for f in ("allNodes", "perDeviceNodeSelection"):
        v = spec.get(f)
        if v is None:
            continue
        if v is True:
            set_fields.append(f"`{f}`")
        else:
            out.append(invalid_value(f"spec.{f}", v, "must be either unset or set to true"))
    if not set_fields:
        out.append(required("spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                            "`perDeviceNodeSelection` is required"))
    elif len(set_fields) > 1:
        out.append(invalid_value("spec", "{" + ", ".join(set_fields) + "}",
                                 "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
                                 "is required, but multiple fields are set"))
    if spec.get("sharedCounters") and spec.get("devices"):
        out.append(invalid_value("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    out += _shared_counters(spec.get("sharedCounters"), "spec.sharedCounters")
    devs_raw = _list(spec.get("devices"))
    advanced = any(isinstance(d, dict) and (d.get("taints") or d.get("consumesCounters")) for d in devs_raw)
    devs, dc = _sized(spec.get("devices"), "spec.devices",
                      SLICE_DEVICES_MAX_ADVANCED if advanced else SLICE_DEVICES_MAX)
    out += dc
    per_device = spec.get("perDeviceNodeSelection") is True
    for i, d in enumerate(devs):
        out += _device(d, f"spec.devices[{i}]", per_device)
    out += _unique([(i, _dict(d).get("name")) for i, d in enumerate(devs)], "spec.devices")
    return out


# ------------------------------------------------------------------ claim status


def _allocation_causes(alloc: Any, path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    if not isinstance(alloc, dict):
        return [invalid_value(path, alloc, "must be an object")]
    out: list[Cause] = []
    devices = _dict(alloc.get("devices"))
    dp = f"{path}.devices"
    results, rc = _sized(devices.get("results"), f"{dp}.results", ALLOCATION_RESULTS_MAX)
    out += rc
    for i, r in enumerate(results):
        rp = f"{dp}.results[{i}]"
        r = _dict(r)
        out += request_ref(r.get("request"), f"{rp}.request", names)
        out += driver_name(r.get("driver"), f"{rp}.driver")
        out += pool_name(r.get("pool"), f"{rp}.pool")
        out += dns_label(r.get("device"), f"{rp}.device")
        share = r.get("shareID")
        if share is not None and (not isinstance(share, str) or not _UUID.match(share)):
            out.append(invalid_value(f"{rp}.shareID", share, "uid must be in RFC 4122 normalized form, "
                                     "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters"))
        for j, t in enumerate(_list(r.get("tolerations"))):
            out += _toleration(t, f"{rp}.tolerations[{j}]")
        out += _binding_conditions(r, rp)
        out += _consumed_capacity(r.get("consumedCapacity"), f"{rp}.consumedCapacity")
    cfgs, cc = _sized(devices.get("config"), f"{dp}.config", 2 * CONFIG_MAX)
    out += cc
    for i, c in enumerate(cfgs):
        cp = f"{dp}.config[{i}]"
        src = _dict(c).get("source")
        if not src:
            out.append(required(f"{cp}.source"))
        elif src not in CONFIG_SOURCES:
            out.append(not_supported(f"{cp}.source", src, CONFIG_SOURCES))
        out += _request_refs(_dict(c).get("requests"), f"{cp}.requests", names)
        out += _opaque(c, cp)
    if alloc.get("nodeSelector") is not None:
        out += _node_selector(alloc["nodeSelector"], f"{path}.nodeSelector")
    return out


def claim_status_causes(new: Obj, old: Obj) -> list[Cause]:
    """kube-apiserver's checks of a ResourceClaim status update (what PreBind and the
    resourceclaim controller write)."""
    st = new.get("status")
    if st is None:
        st = {}
    if not isinstance(st, dict):
        return [invalid_value("status", st, "must be an object")]
    ost = _dict(old.get("status"))
    out: list[Cause] = []
    names = _request_names(_dict(_dict(new.get("spec")).get("devices")))
    reserved, rc = _sized(st.get("reservedFor"), "status.reservedFor", RESERVED_FOR_MAX)
    out += rc
    for i, ref in enumerate(reserved):
        rp = f"status.reservedFor[{i}]"
        ref = _dict(ref)
        for f in ("resource", "name", "uid"):
            if not ref.get(f):
                out.append(required(f"{rp}.{f}"))
    out += _unique([(i, _dict(r).get("uid")) for i, r in enumerate(reserved) if _dict(r).get("uid")],
                   "status.reservedFor")
    alloc = st.get("allocation")
    old_alloc = ost.get("allocation")
    if reserved:
        if alloc is None:
            out.append(forbidden("status.reservedFor", "may not be specified when `allocated` is not set"))
        elif new["metadata"].get("deletionTimestamp"):
            old_uids = {_show(r) for r in _list(ost.get("reservedFor"))}
            if any(_show(r) not in old_uids for r in reserved):
                out.append(forbidden("status.reservedFor", "new entries may not be added while "
                                     "`deallocationRequested` or `deletionTimestamp` are set"))
    if alloc is not None and old_alloc is not None:
        if alloc != old_alloc:
            out.append(immutable("status.allocation", alloc))
    elif alloc is not None:
        out += _allocation_causes(alloc, "status.allocation", names)
    out += _device_status_causes(st.get("devices"), alloc)
    return out


def _device_status_causes(raw: Any, alloc: Any) -> list[Cause]:
    """``status.devices`` (DRAResourceClaimDeviceStatus, GA): what drivers report of the
    allocated devices; each entry names one of the allocation's results, once."""
    entries, out = _sized(raw, "status.devices", -1)
    results = _list(_dict(_dict(alloc).get("devices")).get("results"))
    allocated = {(r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID"))
                 for r in (_dict(r) for r in results)}
    seen: set[tuple[Any, ...]] = set()
    for i, e in enumerate(entries):
        ep = f"status.devices[{i}]"
        if not isinstance(e, dict):
            out.append(invalid_value(ep, e, "must be an object"))
            continue
        out += driver_name(e.get("driver"), f"{ep}.driver")
        out += pool_name(e.get("pool"), f"{ep}.pool")
        out += dns_label(e.get("device"), f"{ep}.device")
        key = (e.get("driver"), e.get("pool"), e.get("device"), e.get("shareID"))
        if key in seen:
            out.append(duplicate(ep, {k: v for k, v in zip(
                ("driver", "pool", "device", "shareID"), key) if v is not None}))
        elif key not in allocated:
            out.append(invalid_value(ep, {k: v for k, v in zip(
                ("driver", "pool", "device", "shareID"), key) if v is not None},
                "must be an allocated device in the claim"))
        seen.add(key)
        net = e.get("networkData")
        if net is not None:
            net = _dict(net)
            name = net.get("interfaceName")
            if isinstance(name, str) and len(name) > DEVICE_STATUS_INTERFACE_NAME_MAX:
                out.append(too_long(f"{ep}.networkData.interfaceName",
                                    DEVICE_STATUS_INTERFACE_NAME_MAX))
            hw = net.get("hardwareAddress")
            if isinstance(hw, str) and len(hw) > DEVICE_STATUS_HARDWARE_ADDRESS_MAX:
                out.append(too_long(f"{ep}.networkData.hardwareAddress",
                                    DEVICE_STATUS_HARDWARE_ADDRESS_MAX))
            _, ic = _sized(net.get("ips"), f"{ep}.networkData.ips", DEVICE_STATUS_IPS_MAX)
            out += ic
        _, cc = _sized(e.get("conditions"), f"{ep}.conditions", DEVICE_STATUS_CONDITIONS_MAX)
        out += cc
    return out


# ------------------------------------------------------------------ pods


def pod_claim_causes(pod: Obj) -> list[Cause]:
    """``spec.resourceClaims`` of a pod and its containers' ``resources.claims`` (core/v1
    validation of what DRA adds to a pod)."""
    spec = _dict(pod.get("spec"))
    claims, out = _sized(spec.get("resourceClaims"), "spec.resourceClaims", -1)
    names: list[str] = []
    pod_name = str(_dict(pod.get("metadata")).get("name") or "")
    for i, c in enumerate(claims):
        p = f"spec.resourceClaims[{i}]"
        if not isinstance(c, dict):
            out.append(invalid_value(p, c, "must be an object"))
            continue
        name = c.get("name")
        if not name:
            out.append(required(f"{p}.name"))
        elif name in names:
            out.append(duplicate(f"{p}.name", name))
        else:
            errs = dns_label(name, f"{p}.name")
            out += errs
            if not errs and c.get("resourceClaimTemplateName") is not None and pod_name:
                final = f"{pod_name}-{name}"
                if len(final) > 253 or not _DNS_SUBDOMAIN.match(final):
                    out.append(invalid_value(f"{p}.name", final, "final ResourceClaim name: " + DNS_SUBDOMAIN_MSG))
            names.append(str(name))
        sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if c.get(k) is not None]
        if len(sources) != 1:
            out.append(invalid_value(p, c, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        for k in sources:
            out += [(f"{p}.{k}", r, m) for _, r, m in dns_subdomain(c[k], f"{p}.{k}")]
    for kind in ("initContainers", "containers"):
        for i, ctr in enumerate(_list(spec.get(kind))):
            used: set[str] = set()
            for j, cl in enumerate(_list(_dict(_dict(ctr).get("resources")).get("claims"))):
                cp = f"spec.{kind}[{i}].resources.claims[{j}]"
                cname = _dict(cl).get("name")
                if not cname:
                    out.append(required(cp))
                    continue
                key = f"{cname}/{_dict(cl)['request']}" if _dict(cl).get("request") else str(cname)
                if key in used:
                    out.append(duplicate(cp, key))
                used.add(key)
                if cname not in names:
                    detail = ("must be one of the names in pod.spec.resourceClaims which is empty" if not names
                              else "must be one of the names in pod.spec.resourceClaims: " + ", ".join(names))
                    out.append((cp, "FieldValueNotFound", f"Not found: {_show(cname)}: {detail}"))
    return out


# ------------------------------------------------------------------ device taint rules

_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def taint_rule_spec_causes(spec: Any) -> list[Cause]:
    """A DeviceTaintRule's spec (DRADeviceTaintRules): an optional selector of devices by
    driver, pool and device name, and the one taint (key, value, effect) it adds to them."""
    if not isinstance(spec, dict):
        return [required("spec")]
    out: list[Cause] = []
    sel = spec.get("deviceSelector")
    if sel is not None:
        if not isinstance(sel, dict):
            out.append(invalid_value("spec.deviceSelector", sel, "must be an object"))
        else:
            for fld, check in (("driver", driver_name), ("pool", pool_name), ("device", dns_label)):
                if sel.get(fld) is not None:
                    out += check(sel[fld], f"spec.deviceSelector.{fld}")
    taint = spec.get("taint")
    out += _taint(taint, "spec.taint") if taint is not None else [required("spec.taint")]
    return out


def _condition_causes(c: Any, path: str) -> list[Cause]:
    """metav1.Condition as ValidateConditions checks it."""
    if not isinstance(c, dict):
        return [invalid_value(path, c, "must be an object")]
    out = qualified_label_key(c.get("type"), f"{path}.type") if c.get("type") else [required(f"{path}.type")]
    st = c.get("status")
    if not st:
        out.append(required(f"{path}.status"))
    elif st not in ("True", "False", "Unknown"):
        out.append(not_supported(f"{path}.status", st, ("False", "True", "Unknown")))
    if not c.get("lastTransitionTime"):
        out.append(required(f"{path}.lastTransitionTime", "must be set"))
    reason = c.get("reason")
    if not reason:
        out.append(required(f"{path}.reason"))
    elif not isinstance(reason, str) or not _CONDITION_REASON.match(reason):
        out.append(invalid_value(f"{path}.reason", reason, "a condition reason must start with alphabetic "
                                 "character, optionally followed by a string of alphanumeric characters "
                                 "or '_,:', and must end with an alphanumeric character or '_'"))
    elif len(reason) > 1024:
        out.append(too_long(f"{path}.reason", 1024))
    msg = c.get("message")
    if isinstance(msg, str) and len(msg) > 32768:
        out.append(too_long(f"{path}.message", 32768))
    og = c.get("observedGeneration")
    if og is not None and (not isinstance(og, int) or og < 0):
        out.append(invalid_value(f"{path}.observedGeneration", og, "must be greater than or equal to zero"))
    return out


def taint_rule_status_causes(status: Any) -> list[Cause]:
    if status is None:
        return []
    if not isinstance(status, dict):
        return [invalid_value("status", status, "must be an object")]
    conds, out = _sized(status.get("conditions"), "status.conditions", TAINT_RULE_CONDITIONS_MAX)
    for i, c in enumerate(conds):
        out += _condition_causes(c, f"status.conditions[{i}]")
    out += _unique([(i, _dict(c).get("type")) for i, c in enumerate(conds)], "status.conditions")
    return out


# ------------------------------------------------------------------ entry points


def causes(obj: Obj, plural: str) -> list[Cause]:
    """Validation of a whole object (create, and the main resource on update)."""
    if plural == "deviceclasses":
        return class_spec_causes(obj.get("spec"))
    if plural == "resourceclaims":
        return claim_spec_causes(obj.get("spec"), "spec")
    if plural == "resourceclaimtemplates":
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [required("spec")]
        return _template_meta(spec.get("metadata"), "spec.metadata") + claim_spec_causes(spec.get("spec"), "spec.spec")
    if plural == "resourceslices":
        return slice_spec_causes(obj.get("spec"))
    if plural == "devicetaintrules":
        return taint_rule_spec_causes(obj.get("spec"))
    return []


def update_causes(new: Obj, old: Obj, plural: str, *, sub: str) -> list[Cause]:
    """What an update may not change (the registry strategies' ValidateUpdate)."""
    if plural == "resourceclaims":
        if sub == "status":
            return claim_status_causes(new, old)
        if new.get("spec") != old.get("spec"):
            return [immutable("spec", new.get("spec"))]
    elif plural == "devicetaintrules":
        if sub == "status":
            return taint_rule_status_causes(new.get("status"))
    elif plural == "resourceclaimtemplates":
        if new.get("spec") != old.get("spec"):
            return [immutable("spec", new.get("spec"))]
    elif plural == "resourceslices":
        n, o = _dict(new.get("spec")), _dict(old.get("spec"))
        out: list[Cause] = []
        if _dict(n.get("pool")).get("name") != _dict(o.get("pool")).get("name"):
            out.append(immutable("spec.pool.name", _dict(n.get("pool")).get("name")))
        if n.get("driver") != o.get("driver"):
            out.append(immutable("spec.driver", n.get("driver")))
        if n.get("nodeName") != o.get("nodeName"):
            out.append(immutable("spec.nodeName", n.get("nodeName")))
        return out
    return []
