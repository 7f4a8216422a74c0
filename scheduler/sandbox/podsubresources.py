"""pods/binding and pods/eviction (with PodDisruptionBudgets), as kube-apiserver serves them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from . import errors, validation
from .errors import ApiError
from .selectors import selector_dict_matches
from .util import now_iso, set_condition

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]


def bind(reg: Registry, ns: str, name: str, binding: Any) -> None:
    if not isinstance(binding, dict):
        raise errors.bad_request("the body of the request must be a Binding object")
    bmd = binding.get("metadata") or {}
    if bmd.get("name") and bmd["name"] != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    err = validation.binding_error(binding, name)
    if err:
        raise err
    node = str(binding["target"]["name"])
    ts = reg.ts_of("", "pods")
    e = ts.get(ns, name)
    if e is None:
        raise errors.not_found("pods", name)
    pod = e.obj
    md = pod["metadata"]
    if bmd.get("uid") and bmd["uid"] != md["uid"]:
        raise errors.conflict("pods", name,
                              f"Precondition failed: UID in precondition: {bmd['uid']}, UID in object meta: {md['uid']}")
    if bmd.get("resourceVersion") and bmd["resourceVersion"] != md["resourceVersion"]:
        raise errors.conflict("pods", name, errors.STALE_RV)
    spec = pod.get("spec") or {}
    if md.get("deletionTimestamp"):
        raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    if spec.get("nodeName"):
        raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
    if spec.get("schedulingGates"):
        raise errors.conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
    status = dict(pod.get("status") or {})
    # kube-apiserver clears the nomination when the pod is bound (KEP-5278,
    # ClearingNominatedNodeNameAfterBinding, on since 1.35): whoever nominated, it is stale now
    status.pop("nominatedNodeName", None)
    status["conditions"] = set_condition(
        list(status.get("conditions") or []),
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_iso()},
    )
    nmd = dict(md)
    if bmd.get("annotations"):
        nmd["annotations"] = {**(md.get("annotations") or {}), **bmd["annotations"]}
    new = {**pod, "metadata": nmd, "spec": {**spec, "nodeName": node}, "status": status}
    reg.store.write(ts, new, pod)
    reg.bump("bindings")

# ------------------------------------------------------------ pods/eviction


def evict(reg: Registry, ns: str, name: str, eviction: Any) -> None:
    if not isinstance(eviction, dict):
        raise errors.bad_request("the body of the request must be an Eviction object")
    emd = eviction.get("metadata") or {}
    if emd.get("name") and emd["name"] != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    pods = reg.ts_of("", "pods")
    e = pods.get(ns, name)
    if e is None:
        raise errors.not_found("pods", name)
    pod = e.obj
    options = eviction.get("deleteOptions") or {}
    phase = (pod.get("status") or {}).get("phase")
    if not (phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp")):
        labels = pod["metadata"].get("labels") or {}
        pdbs = [p.obj for p in (reg.ts_of("policy", "poddisruptionbudgets").by_ns.get(ns) or {}).values()
                if selector_dict_matches((p.obj.get("spec") or {}).get("selector"), labels)]
        if len(pdbs) > 1:
            raise ApiError(500, "InternalError",
                           "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        if pdbs:
            pdb = pdbs[0]
            healthy, desired, expected = pdb_numbers(reg, pdb, ns)
            pod_ready = _pod_ready(pod)
            allowed = healthy - desired
            if not pod_ready and healthy >= desired:
                allowed = 1  # unhealthy pods may go when the budget is met (IfHealthyBudget)
            if allowed <= 0:
                err = errors.too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.", retry_after=0
                )
                err.details = {"causes": [{
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb['metadata']['name']} needs {desired} "
                               f"healthy pods and has {healthy} currently",
                }]}
                raise err
    reg.bump("evictions")
    reg.delete(reg.catalog.builtin("", "pods"), ns, name, options)


def pdb_numbers(reg: Registry, pdb: Obj, ns: str) -> tuple[int, int, int]:
    spec = pdb.get("spec") or {}
    sel = spec.get("selector")
    matching = [p.obj for p in (reg.ts_of("", "pods").by_ns.get(ns) or {}).values()
                if selector_dict_matches(sel, p.obj["metadata"].get("labels") or {})
                and (p.obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    # terminating pods still count as expected (a controller would replace them) but
    # not as healthy, so consecutive evictions see the budget shrink
    expected = len(matching)
    healthy = sum(1 for p in matching if _pod_ready(p) and not p["metadata"].get("deletionTimestamp"))
    if "minAvailable" in spec:
        desired = _int_or_percent(spec["minAvailable"], expected, round_up=True)
    elif "maxUnavailable" in spec:
        desired = max(0, expected - _int_or_percent(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = expected
    return healthy, desired, expected


def _pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _int_or_percent(v: Any, total: int, *, round_up: bool) -> int:
    if isinstance(v, str) and v.endswith("%"):
        try:
            pct = int(v[:-1])
        except ValueError:
            return 0
        x = pct * total / 100
        return math.ceil(x) if round_up else math.floor(x)
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0
