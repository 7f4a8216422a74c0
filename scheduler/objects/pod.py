"""Pod helpers: identity, priority, resource requests (``resourcehelper.PodRequests``) and
:class:`PodInfo`, the parsed-once view plugins read on every scheduling cycle.

Requests are computed the way kube-scheduler does for a pod that went through apiserver
defaulting: a container's missing requests default to its limits (the sandbox may hand us
un-defaulted pods), sidecars (init containers with ``restartPolicy: Always``) add to the
running total, each ordinary init container is maxed against it, pod-level ``spec.resources``
requests (cpu, memory, hugepages) override the containers' sum, and ``spec.overhead`` is added
on top.  While an in-place resize is pending or in progress, each resource counts the larger of
the desired (spec) and the kubelet-reported (``status.containerStatuses[].allocatedResources`` /
``.resources``) sizes, as upstream's PodRequests with InPlacePodVerticalScaling.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

import orjson

from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import LabelSelector, LabelSelectorError
from scheduler.objects.node_affinity import PreferredSchedulingTerms, RequiredNodeAffinity
from scheduler.objects.quantity import nano_to_int, nano_to_milli
from scheduler.objects.resources import (
    CPU,
    MEMORY,
    Resource,
    ResourceListError,
    is_extended_resource_name,
    is_hugepage_resource_name,
    is_native_resource,
    parse_resource_list_nano,
)
from scheduler.objects.taints import Toleration, parse_tolerations

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_MEMORY_REQUEST",
    "pod_key",
    "pod_uid",
    "pod_name",
    "pod_namespace",
    "pod_labels",
    "pod_priority",
    "is_assigned",
    "is_terminal",
    "is_being_deleted",
    "scheduler_name",
    "pod_requests",
    "pod_non_zero_requests",
    "is_pod_resize_deferred",
    "resize_report",
    "set_pod_level_resources_resize",
    "is_pod_resize_infeasible",
    "POD_RESIZE_PENDING",
    "POD_RESIZE_IN_PROGRESS",
    "POD_REASON_DEFERRED",
    "POD_REASON_INFEASIBLE",
    "pod_host_ports",
    "parse_scheduling_gates",
    "PodInfo",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
# upstream schedutil.DefaultMilliCPURequest / DefaultMemoryRequest (scoring only)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_DEFAULT_CPU_NANO = DEFAULT_MILLI_CPU_REQUEST * 10**6
_DEFAULT_MEM_NANO = DEFAULT_MEMORY_REQUEST * 10**9
_POD_LEVEL_RESOURCES = (CPU, MEMORY)
_NANO = 10**9

_EMPTY: Mapping[str, Any] = {}


# ``type(x) is dict`` first: what the wire decodes to, answered without ``isinstance``
# against the Mapping ABC (a Python-level ``ABCMeta.__instancecheck__`` call each time).


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    m = pod.get("metadata")
    return m if type(m) is dict or isinstance(m, Mapping) else _EMPTY


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    s = pod.get("spec")
    return s if type(s) is dict or isinstance(s, Mapping) else _EMPTY


def pod_name(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("name") or "")


def pod_namespace(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("namespace") or "")


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` (cache and queue key)."""
    m = _meta(pod)
    return f"{m.get('namespace') or ''}/{m.get('name') or ''}"


def pod_uid(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("uid") or "")


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _meta(pod).get("labels")
    return labels if labels else _EMPTY


def pod_priority(pod: Mapping[str, Any]) -> int:
    """``spec.priority``; 0 when unset (upstream corev1helpers.PodPriority)."""
    p = _spec(pod).get("priority")
    if p is None:
        return 0
    if not isinstance(p, int) or isinstance(p, bool):
        raise ObjectError.for_object(pod, "spec.priority", f"must be an integer, got {p!r}",
                                     kind="Pod")
    return p


def is_assigned(pod: Mapping[str, Any]) -> bool:
    return bool(_spec(pod).get("nodeName"))


def is_terminal(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or _EMPTY
    return status.get("phase") in ("Succeeded", "Failed")


def is_being_deleted(pod: Mapping[str, Any]) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def scheduler_name(pod: Mapping[str, Any]) -> str:
    return str(_spec(pod).get("schedulerName") or DEFAULT_SCHEDULER_NAME)


# --- requests ------------------------------------------------------------------------------


def _add(dst: dict[str, int], src: Mapping[str, int]) -> None:
    for k, v in src.items():
        dst[k] = dst.get(k, 0) + v


def _max(dst: dict[str, int], src: Mapping[str, int]) -> None:
    for k, v in src.items():
        if k not in dst or v > dst[k]:
            dst[k] = v


class _Container:
    __slots__ = ("name", "requests", "sidecar", "ports")

    def __init__(self, name: str, requests: dict[str, int], sidecar: bool,
                 ports: list[tuple[str, str, int]]) -> None:
        self.name = name
        self.requests = requests
        self.sidecar = sidecar
        self.ports = ports


def _err(pod: Mapping[str, Any], field: str, msg: str) -> ObjectError:
    return ObjectError.for_object(pod, field, msg, kind="Pod")


def _parse_rl(pod: Mapping[str, Any], rl: Any, where: str) -> dict[str, int]:
    try:
        return parse_resource_list_nano(rl, where=where)
    except ResourceListError as exc:
        raise _err(pod, exc.field, exc.detail) from None


def _overcommit_allowed(name: str) -> bool:
    # upstream helper.IsOvercommitAllowed: native resources other than hugepages
    return is_native_resource(name) and not is_hugepage_resource_name(name)


def _check_amounts(pod: Mapping[str, Any], amounts: Mapping[str, int], where: str) -> None:
    """kube-apiserver's ValidateResourceQuantityValue: non-negative; whole for extended."""
    for name, nano in amounts.items():
        if nano < 0:
            raise _err(pod, f"{where}.{name}", "must be greater than or equal to 0")
        if nano % _NANO and is_extended_resource_name(name):
            raise _err(pod, f"{where}.{name}", "must be an integer")


def _resources(pod: Mapping[str, Any], holder: Mapping[str, Any], where: str) -> dict[str, int]:
    """Requests of a container (or pod-level resources), validated, defaulted from limits."""
    res = holder.get("resources")
    if res is None or res == {}:
        return {}
    if type(res) is not dict and not isinstance(res, Mapping):
        raise _err(pod, f"{where}.resources", "must be an object")
    reqs = _parse_rl(pod, res.get("requests"), f"{where}.resources.requests")
    limits = _parse_rl(pod, res.get("limits"), f"{where}.resources.limits")
    _check_amounts(pod, limits, f"{where}.resources.limits")
    _check_amounts(pod, reqs, f"{where}.resources.requests")
    for name, nano in reqs.items():
        limit = limits.get(name)
        if limit is None:
            continue
        if nano != limit and not _overcommit_allowed(name):
            raise _err(pod, f"{where}.resources.requests.{name}",
                       f"must be equal to {name} limit of {res['limits'][name]}")
        if nano > limit:
            raise _err(pod, f"{where}.resources.requests.{name}",
                       f"must be less than or equal to {name} limit of {res['limits'][name]}")
    for k, v in limits.items():
        reqs.setdefault(k, v)  # apiserver defaulting: requests default to limits
    return reqs


def _ports(pod: Mapping[str, Any], c: Mapping[str, Any], where: str) -> list[tuple[str, str, int]]:
    raw = c.get("ports")
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        raise _err(pod, f"{where}.ports", "must be a list")
    out: list[tuple[str, str, int]] = []
    for j, p in enumerate(raw):
        pp = f"{where}.ports[{j}]"
        if type(p) is not dict and not isinstance(p, Mapping):
            raise _err(pod, pp, "must be an object")
        hp = p.get("hostPort")
        if hp is None:
            continue
        if not isinstance(hp, int) or isinstance(hp, bool) or not 0 <= hp <= 65535:
            raise _err(pod, f"{pp}.hostPort", f"must be an integer in [0, 65535], got {hp!r}")
        if hp <= 0:
            continue
        proto = p.get("protocol") or "TCP"
        ip = p.get("hostIP") or "0.0.0.0"
        if not isinstance(proto, str) or not isinstance(ip, str):
            raise _err(pod, pp, "protocol and hostIP must be strings")
        out.append((ip, proto, hp))
    return out


def _containers(pod: Mapping[str, Any], field: str) -> list[_Container]:
    raw = _spec(pod).get(field)
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        raise _err(pod, f"spec.{field}", "must be a list")
    init = field == "initContainers"
    out: list[_Container] = []
    for i, c in enumerate(raw):
        where = f"spec.{field}[{i}]"
        if type(c) is not dict and not isinstance(c, Mapping):
            raise _err(pod, where, "must be an object")
        sidecar = init and c.get("restartPolicy") == "Always"
        ports = _ports(pod, c, where) if (not init or sidecar) else []
        name = c.get("name")
        out.append(_Container(name if isinstance(name, str) else "", _resources(pod, c, where),
                              sidecar, ports))
    return out


def _spec_requests(c: _Container) -> Mapping[str, int]:
    return c.requests


def _aggregate(containers: list[_Container], inits: list[_Container],
               non_missing: Mapping[str, int] | None,
               pick: Callable[[_Container], Mapping[str, int]] = _spec_requests,
               ) -> dict[str, int]:
    def reqs_of(c: _Container) -> Mapping[str, int]:
        if not non_missing:
            return pick(c)
        r = dict(pick(c))
        for k, v in non_missing.items():
            if k not in r:
                r[k] = v
        return r

    total: dict[str, int] = {}
    for c in containers:
        _add(total, reqs_of(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in inits:
        r = reqs_of(c)
        if c.sidecar:
            _add(total, r)
            _add(sidecars, r)
            _max(init_max, sidecars)
        else:
            cur = dict(r)
            _add(cur, sidecars)
            _max(init_max, cur)
    _max(total, init_max)
    return total


class _Parsed:
    __slots__ = ("requests", "non_zero_cpu", "non_zero_memory", "host_ports")

    def __init__(self, requests: Resource, non_zero_cpu: int, non_zero_memory: int,
                 host_ports: list[tuple[str, str, int]]) -> None:
        self.requests = requests
        self.non_zero_cpu = non_zero_cpu
        self.non_zero_memory = non_zero_memory
        self.host_ports = host_ports


# In-place pod resize (KEP-1287, GA in 1.35): the kubelet reports a resize through these pod
# conditions, and each container's admitted (``allocatedResources``) and running
# (``resources``) sizes through its status.
POD_RESIZE_PENDING = "PodResizePending"
POD_RESIZE_IN_PROGRESS = "PodResizeInProgress"
POD_REASON_DEFERRED = "Deferred"
POD_REASON_INFEASIBLE = "Infeasible"


def _resize_pending_reason(pod: Mapping[str, Any]) -> str | None:
    status = pod.get("status")
    if type(status) is not dict and not isinstance(status, Mapping):
        return None
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        # (type() first: an ABC isinstance per condition cost more than the rest)
        if (type(c) is dict or isinstance(c, Mapping)) and c.get("type") == POD_RESIZE_PENDING:
            reason = c.get("reason")
            return reason if isinstance(reason, str) else ""
    return None


def is_pod_resize_infeasible(pod: Mapping[str, Any]) -> bool:
    """``PodResizePending`` with reason ``Infeasible``: the node can never fit the new size."""
    return _resize_pending_reason(pod) == POD_REASON_INFEASIBLE


def is_pod_resize_deferred(pod: Mapping[str, Any]) -> bool:
    """``PodResizePending`` with reason ``Deferred``: the kubelet retries it when room frees."""
    return _resize_pending_reason(pod) == POD_REASON_DEFERRED


class _ContainerStatus:
    __slots__ = ("allocated", "actual")

    def __init__(self, allocated: dict[str, int] | None, actual: dict[str, int] | None) -> None:
        self.allocated = allocated
        self.actual = actual


def _container_statuses(pod: Mapping[str, Any]) -> dict[str, _ContainerStatus]:
    """Container name -> the sizes the kubelet reports (regular containers first, as upstream's
    lookup by name)."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return {}
    out: dict[str, _ContainerStatus] = {}
    for field in ("containerStatuses", "initContainerStatuses"):
        raw = status.get(field)
        if raw is None or raw == []:
            continue
        if not isinstance(raw, list):
            raise _err(pod, f"status.{field}", "must be a list")
        for i, cs in enumerate(raw):
            where = f"status.{field}[{i}]"
            if not isinstance(cs, Mapping):
                raise _err(pod, where, "must be an object")
            allocated = actual = None
            if cs.get("allocatedResources") is not None:
                allocated = _parse_rl(pod, cs["allocatedResources"], f"{where}.allocatedResources")
                _check_amounts(pod, allocated, f"{where}.allocatedResources")
            res = cs.get("resources")
            if res is not None:
                if not isinstance(res, Mapping):
                    raise _err(pod, f"{where}.resources", "must be an object")
                if res.get("requests") is not None:
                    actual = _parse_rl(pod, res["requests"], f"{where}.resources.requests")
                    _check_amounts(pod, actual, f"{where}.resources.requests")
            name = cs.get("name")
            if isinstance(name, str) and name not in out and (allocated is not None
                                                             or actual is not None):
                out[name] = _ContainerStatus(allocated, actual)
    return out


def resize_report(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """The parts of a pod's status its effective requests are computed from (the kubelet's
    resize report): equal reports and equal specs give equal requests.

    Only what the requests are parsed from is kept: of each container status its name and
    reported sizes, and only when it reports a size (its ids, state and timestamps change
    on every status write and never change the requests); malformed parts are kept whole, so
    that they compare unequal to anything that parses differently."""
    status = pod.get("status")
    if type(status) is not dict and (status is None or not isinstance(status, Mapping)):
        return (None, None, None, None, None)
    # (Every pod update reads it twice or more: the empty lists and the conditions'
    # scan are read inline, _reported_sizes and _resize_pending_reason only called for
    # what they would not answer at once.)
    sizes = status.get("containerStatuses")
    init_sizes = status.get("initContainerStatuses")
    conditions = status.get("conditions")
    pending: str | None = None
    if type(conditions) is list:
        for c in conditions:
            if type(c) is dict:
                if c.get("type") == POD_RESIZE_PENDING:
                    pending = _resize_pending_reason(pod)
                    break
            elif isinstance(c, Mapping):
                pending = _resize_pending_reason(pod)
                break
    elif conditions is not None:
        pending = _resize_pending_reason(pod)
    return (None if sizes is None or sizes == [] else _reported_sizes(sizes),
            None if init_sizes is None or init_sizes == [] else _reported_sizes(init_sizes),
            pending, status.get("allocatedResources"), status.get("resources"))


def _reported_sizes(raw: Any) -> Any:
    """What ``_container_statuses`` reads of one list of container statuses."""
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list):
        return raw
    out: list[Any] = []
    for cs in raw:
        if type(cs) is not dict and not isinstance(cs, Mapping):
            out.append(cs)
        elif cs.get("allocatedResources") is not None or cs.get("resources") is not None:
            out.append((cs.get("name"), cs.get("allocatedResources"), cs.get("resources")))
    return out or None


_NONE: Mapping[str, int] = {}


# InPlacePodLevelResourcesVerticalScaling (alpha, off): the kubelet also reports pod-level
# sizes (status.allocatedResources, status.resources.requests); process-wide, as upstream's
# feature gate (the command line sets it from --feature-gates).
_pod_level_resize = False


def set_pod_level_resources_resize(enabled: bool) -> None:
    """Turn on reading the pod-level resize report (InPlacePodLevelResourcesVerticalScaling)."""
    global _pod_level_resize
    _pod_level_resize = enabled


def _pod_status_sizes(pod: Mapping[str, Any]) -> tuple[dict[str, int] | None,
                                                       dict[str, int] | None, bool]:
    """(status.allocatedResources, status.resources.requests, whether status.resources is
    set) of the pod itself."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return None, None, False
    allocated = actual = None
    if status.get("allocatedResources") is not None:
        allocated = _parse_rl(pod, status["allocatedResources"], "status.allocatedResources")
        _check_amounts(pod, allocated, "status.allocatedResources")
    res = status.get("resources")
    if res is not None:
        if not isinstance(res, Mapping):
            raise _err(pod, "status.resources", "must be an object")
        if res.get("requests") is not None:
            actual = _parse_rl(pod, res["requests"], "status.resources.requests")
            _check_amounts(pod, actual, "status.resources.requests")
    return allocated, actual, res is not None


def _minus(amounts: Mapping[str, int] | None, overhead: Mapping[str, int]) -> dict[str, int]:
    out = dict(amounts or {})
    for k, v in overhead.items():
        if k in out:
            out[k] -= v
    return out


def _is_pod_level_resource(name: str) -> bool:
    # upstream IsSupportedPodLevelResource: cpu, memory and hugepages
    return name in _POD_LEVEL_RESOURCES or is_hugepage_resource_name(name)


def _parse_resources(pod: Mapping[str, Any]) -> _Parsed:
    spec = _spec(pod)
    if not isinstance(spec, Mapping):
        raise _err(pod, "spec", "must be an object")
    containers = _containers(pod, "containers")
    inits = _containers(pod, "initContainers")
    pod_level = {k: v for k, v in _resources(pod, spec, "spec").items()
                 if _is_pod_level_resource(k)}
    overhead = _parse_rl(pod, spec.get("overhead"), "spec.overhead")
    _check_amounts(pod, overhead, "spec.overhead")
    statuses = _container_statuses(pod)
    infeasible = is_pod_resize_infeasible(pod)
    pod_allocated = pod_actual = None
    pod_resources_set = False
    if _pod_level_resize:
        pod_allocated, pod_actual, pod_resources_set = _pod_status_sizes(pod)
    if pod_level and (pod_allocated is not None or pod_resources_set):
        # upstream effectivePodLevelResources: the reported pod-level sizes (overhead taken
        # out) against the desired one, which an infeasible resize drops
        effective: dict[str, int] = {} if infeasible else dict(pod_level)
        _max(effective, _minus(pod_actual, overhead))
        _max(effective, _minus(pod_allocated, overhead))
        pod_level = {k: v for k, v in effective.items() if _is_pod_level_resource(k)}

    # Upstream's AggregateContainerRequests with UseStatusResources (InPlacePodVerticalScaling,
    # GA): per resource the larger of the desired (spec), admitted (allocatedResources) and
    # running (resources.requests) sizes, so a pod shrinking from 3 CPU to 1 CPU still counts 3
    # until the kubelet reports the new size; an infeasible resize counts what runs, not spec.
    def allocated(c: _Container) -> Mapping[str, int]:
        cs = statuses.get(c.name)
        if cs is not None and cs.allocated is not None:
            return cs.allocated
        return _NONE if infeasible else c.requests

    def actual(c: _Container) -> Mapping[str, int]:
        cs = statuses.get(c.name)
        if cs is not None and cs.actual is not None:
            return cs.actual
        if cs is not None and cs.allocated is not None:
            return cs.allocated
        return _NONE if infeasible else c.requests

    def aggregate(non_missing: Mapping[str, int] | None) -> dict[str, int]:
        spec_total = _aggregate(containers, inits, non_missing)
        if pod_allocated is not None and pod_actual is not None:
            # the pod-level report already sums every container (upstream prefers it)
            total = {} if infeasible else spec_total
            _max(total, pod_actual)
            _max(total, pod_allocated)
            return total
        if not statuses and not infeasible:
            return spec_total  # nothing reported: all three sizes are the spec
        total = {} if infeasible else spec_total
        _max(total, _aggregate(containers, inits, non_missing, actual))
        _max(total, _aggregate(containers, inits, non_missing, allocated))
        return total

    def finish(reqs: dict[str, int]) -> dict[str, int]:
        reqs.update(pod_level)
        _add(reqs, overhead)
        return reqs

    reqs = finish(aggregate(None))
    if pod_level:
        # only resources that neither pod level nor any container set get the default
        non_missing = {k: d for k, d in ((CPU, _DEFAULT_CPU_NANO), (MEMORY, _DEFAULT_MEM_NANO))
                       if k not in reqs}
    else:
        non_missing = {CPU: _DEFAULT_CPU_NANO, MEMORY: _DEFAULT_MEM_NANO}
    non_zero = finish(aggregate(non_missing)) if non_missing else reqs
    ports: list[tuple[str, str, int]] = []
    for c in inits:
        ports.extend(c.ports)
    for c in containers:
        ports.extend(c.ports)
    return _Parsed(
        Resource.from_nano_map(reqs),
        nano_to_milli(non_zero.get(CPU, 0)),
        nano_to_int(non_zero.get(MEMORY, 0)),
        ports,
    )


# --- parses shared between pods -------------------------------------------------------------
#
# Pods of one Job, Deployment or benchmark are the same spec many times over, and each pod
# is parsed again for every watch event that carries it (created, bound, started): most of
# the scheduler's per-pod work outside the plugins was this parse.  What a parse reads is a
# pure function of the JSON values it reads, so the result is kept by the values' JSON
# encoding (``orjson.dumps``: equal encodings of JSON-decoded values parse alike; values
# orjson cannot encode are never kept) and handed to every pod with the same values.  Only
# successful parses are kept: a malformed pod is parsed (and its error, naming it, raised)
# every time.  The kept objects are shared: nothing may mutate them (no one does; a
# PodInfo's ``requests`` were already shared with its assumed copy).
_MEMO_SIZE = 2048


def _memo_key(*parts: Any) -> bytes | None:
    try:
        return orjson.dumps(parts)
    except TypeError:  # not JSON (a test's tuple of objects ...): parsed, never kept
        return None


def _remember(memo: dict[bytes, Any], key: bytes, value: Any) -> None:
    if len(memo) >= _MEMO_SIZE:
        memo.clear()  # pods of many distinct shapes: start over rather than grow
    memo[key] = value


_RESOURCES_MEMO: dict[bytes, _Parsed] = {}


def _shared_parse(pod: Mapping[str, Any]) -> _Parsed:
    """``_parse_resources(pod)``, shared with every pod whose spec and resize report read the
    same (never mutate it)."""
    spec = pod.get("spec")
    if type(spec) is not dict:
        return _parse_resources(pod)
    key = _memo_key(spec.get("containers"), spec.get("initContainers"), spec.get("resources"),
                    spec.get("overhead"), resize_report(pod), _pod_level_resize)
    if key is None:
        return _parse_resources(pod)
    parsed = _RESOURCES_MEMO.get(key)
    if parsed is None:
        parsed = _parse_resources(pod)
        _remember(_RESOURCES_MEMO, key, parsed)
    return parsed


def pod_requests(pod: Mapping[str, Any]) -> Resource:
    """Effective resource requests of a pod (``allowed_pod_number`` stays 0); the caller's
    own copy."""
    return _shared_parse(pod).requests.clone()


def pod_non_zero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(milli_cpu, memory) with 100m / 200Mi for containers requesting none (for scoring)."""
    p = _shared_parse(pod)
    return p.non_zero_cpu, p.non_zero_memory


def pod_host_ports(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of containers and sidecars with hostPort > 0."""
    out: list[tuple[str, str, int]] = []
    for field in ("initContainers", "containers"):
        for c in _containers(pod, field):
            out.extend(c.ports)
    return out


# --- everything else a pod contributes (validated before anything reaches the cache) --------

_AFFINITY_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_AFFINITY_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_NODE_POLICIES = ("Honor", "Ignore")


def _int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _selector(pod: Mapping[str, Any], raw: Any, where: str) -> None:
    try:
        LabelSelector.from_dict(raw, where=where)
    except LabelSelectorError as exc:
        field, sep, detail = str(exc).partition(": ")
        raise _err(pod, field if sep else where, detail if sep else str(exc)) from None


def _check_affinity_term(pod: Mapping[str, Any], raw: Any, where: str) -> None:
    if not isinstance(raw, Mapping):
        raise _err(pod, where, "must be an object")
    _selector(pod, raw.get("labelSelector"), f"{where}.labelSelector")
    _selector(pod, raw.get("namespaceSelector"), f"{where}.namespaceSelector")
    for name in ("namespaces", "matchLabelKeys", "mismatchLabelKeys"):
        if raw.get(name) is not None and not _str_list(raw[name]):
            raise _err(pod, f"{where}.{name}", "must be a list of strings")
    if not isinstance(raw.get("topologyKey") or "", str):
        raise _err(pod, f"{where}.topologyKey", "must be a string")


def _terms(pod: Mapping[str, Any], section: Mapping[str, Any], which: str,
           where: str) -> list[Any]:
    raw = section.get(which)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _err(pod, f"{where}.{which}", "must be a list")
    return raw


def _check_pod_affinity(pod: Mapping[str, Any], aff: Mapping[str, Any]) -> None:
    """podAffinity / podAntiAffinity terms, as InterPodAffinity will compile them."""
    for kind in ("podAffinity", "podAntiAffinity"):
        section = aff.get(kind)
        if section is None:
            continue
        base = f"spec.affinity.{kind}"
        if not isinstance(section, Mapping):
            raise _err(pod, base, "must be an object")
        for i, term in enumerate(_terms(pod, section, _AFFINITY_REQUIRED, base)):
            _check_affinity_term(pod, term, f"{base}.{_AFFINITY_REQUIRED}[{i}]")
        for i, wt in enumerate(_terms(pod, section, _AFFINITY_PREFERRED, base)):
            where = f"{base}.{_AFFINITY_PREFERRED}[{i}]"
            if not isinstance(wt, Mapping):
                raise _err(pod, where, "must be an object")
            weight = wt.get("weight")
            if not _int(weight) or not 1 <= weight <= 100:
                raise _err(pod, f"{where}.weight", f"must be in the range 1-100, got {weight!r}")
            _check_affinity_term(pod, wt.get("podAffinityTerm"), f"{where}.podAffinityTerm")


def _check_spread(pod: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    raw = spec.get("topologySpreadConstraints")
    if raw is None or raw == []:
        return
    if not isinstance(raw, list):
        raise _err(pod, "spec.topologySpreadConstraints", "must be a list")
    for i, c in enumerate(raw):
        where = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(c, Mapping):
            raise _err(pod, where, "must be an object")
        skew = c.get("maxSkew")
        if not _int(skew) or skew <= 0:
            raise _err(pod, f"{where}.maxSkew", f"must be greater than zero, got {skew!r}")
        min_domains = c.get("minDomains")
        if min_domains is not None and (not _int(min_domains) or min_domains <= 0):
            raise _err(pod, f"{where}.minDomains",
                       f"must be greater than zero, got {min_domains!r}")
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise _err(pod, f"{where}.topologyKey", "required (a non-empty string)")
        if c.get("whenUnsatisfiable") not in _WHEN_UNSATISFIABLE:
            raise _err(pod, f"{where}.whenUnsatisfiable",
                       f"unsupported value {c.get('whenUnsatisfiable')!r}: must be "
                       "DoNotSchedule or ScheduleAnyway")
        _selector(pod, c.get("labelSelector"), f"{where}.labelSelector")
        if c.get("matchLabelKeys") is not None and not _str_list(c["matchLabelKeys"]):
            raise _err(pod, f"{where}.matchLabelKeys", "must be a list of strings")
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if c.get(name) is not None and c[name] not in _NODE_POLICIES:
                raise _err(pod, f"{where}.{name}",
                           f"unsupported value {c[name]!r}: must be Honor or Ignore")


def _pvc_names(pod: Mapping[str, Any], spec: Mapping[str, Any], ns: str) -> tuple[str, ...]:
    """``namespace/claimName`` of the PVCs the pod mounts (the cache's PVC ref counts)."""
    raw = spec.get("volumes")
    if raw is None or raw == []:
        return ()
    if not isinstance(raw, list):
        raise _err(pod, "spec.volumes", "must be a list")
    out: list[str] = []
    for i, v in enumerate(raw):
        where = f"spec.volumes[{i}]"
        if not isinstance(v, Mapping):
            raise _err(pod, where, "must be an object")
        if not isinstance(v.get("name"), str) or not v["name"]:
            raise _err(pod, f"{where}.name", "required (a non-empty string)")
        for source, value in v.items():
            # every volume source (persistentVolumeClaim, ephemeral, csi, ...) is an object
            if source != "name" and value is not None and not isinstance(value, Mapping):
                raise _err(pod, f"{where}.{source}", "must be an object")
        claim = v.get("persistentVolumeClaim")
        if claim is None:
            continue
        if not isinstance(claim, Mapping):
            raise _err(pod, f"{where}.persistentVolumeClaim", "must be an object")
        name = claim.get("claimName")
        if not isinstance(name, str) or not name:
            raise _err(pod, f"{where}.persistentVolumeClaim.claimName",
                       "required (a non-empty string)")
        out.append(f"{ns or 'default'}/{name}")
    return tuple(out)


def parse_scheduling_gates(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """``spec.schedulingGates`` names; a malformed list is an ObjectError, never a gate."""
    spec = _spec(pod)
    raw = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    if raw is None or raw == []:
        return ()
    if not isinstance(raw, list):
        raise _err(pod, "spec.schedulingGates", "must be a list of {name: ...} objects")
    names: list[str] = []
    for i, gate in enumerate(raw):
        if not isinstance(gate, Mapping):
            raise _err(pod, f"spec.schedulingGates[{i}]", "must be an object")
        name = gate.get("name")
        if not isinstance(name, str) or not name:
            raise _err(pod, f"spec.schedulingGates[{i}].name", "required (a non-empty string)")
        if name in names:
            raise _err(pod, f"spec.schedulingGates[{i}].name", f"duplicate value {name!r}")
        names.append(name)
    return tuple(names)


# --- PodInfo -------------------------------------------------------------------------------


def _has_terms(aff: Mapping[str, Any], kind: str, which: str) -> bool:
    a = aff.get(kind)
    return bool(a) and isinstance(a, Mapping) and bool(a.get(which))


class _SpecParse:
    """What a PodInfo reads from a pod's spec (but its volumes and nodeName) and its resize
    report: shared between the pods whose spec and report read the same; never mutated."""

    __slots__ = (
        "priority", "requests", "non_zero_cpu", "non_zero_memory", "host_ports",
        "tolerations", "required_node_affinity", "preferred_node_affinity",
        "has_required_affinity", "has_preferred_affinity", "has_required_anti_affinity",
        "has_preferred_anti_affinity", "has_affinity", "scheduling_gates", "scheduler_name",
    )

    priority: int
    requests: Resource
    non_zero_cpu: int
    non_zero_memory: int
    host_ports: list[tuple[str, str, int]]
    tolerations: list[Toleration]
    required_node_affinity: RequiredNodeAffinity
    preferred_node_affinity: PreferredSchedulingTerms
    has_required_affinity: bool
    has_preferred_affinity: bool
    has_required_anti_affinity: bool
    has_preferred_anti_affinity: bool
    has_affinity: bool
    scheduling_gates: tuple[str, ...]
    scheduler_name: str

    @classmethod
    def parse(cls, pod: Mapping[str, Any], spec: Mapping[str, Any],
              ns: str) -> tuple[_SpecParse, tuple[str, ...]]:
        """The parse and the pod's PVC names, checked in PodInfo.from_pod's order (the first
        problem found is the one named)."""
        self = cls.__new__(cls)
        self.priority = pod_priority(pod)
        parsed = _shared_parse(pod)
        self.requests = parsed.requests
        self.non_zero_cpu = parsed.non_zero_cpu
        self.non_zero_memory = parsed.non_zero_memory
        self.host_ports = parsed.host_ports
        self.tolerations = parse_tolerations(pod)
        self.required_node_affinity = RequiredNodeAffinity.from_pod(pod)
        self.preferred_node_affinity = PreferredSchedulingTerms.from_pod(pod)
        aff = spec.get("affinity")
        aff = _EMPTY if aff is None else aff
        if not isinstance(aff, Mapping):
            raise _err(pod, "spec.affinity", "must be an object")
        req = "requiredDuringSchedulingIgnoredDuringExecution"
        pref = "preferredDuringSchedulingIgnoredDuringExecution"
        self.has_required_affinity = _has_terms(aff, "podAffinity", req)
        self.has_preferred_affinity = _has_terms(aff, "podAffinity", pref)
        self.has_required_anti_affinity = _has_terms(aff, "podAntiAffinity", req)
        self.has_preferred_anti_affinity = _has_terms(aff, "podAntiAffinity", pref)
        self.has_affinity = (self.has_required_affinity or self.has_preferred_affinity
                             or self.has_required_anti_affinity
                             or self.has_preferred_anti_affinity)
        _check_pod_affinity(pod, aff)
        _check_spread(pod, spec)
        pvc_names = _pvc_names(pod, spec, ns)
        self.scheduling_gates = parse_scheduling_gates(pod)
        node_name = spec.get("nodeName") or ""
        if not isinstance(node_name, str):
            raise _err(pod, "spec.nodeName", "must be a string")
        sched = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        if not isinstance(sched, str):
            raise _err(pod, "spec.schedulerName", "must be a string")
        self.scheduler_name = sched
        return self, pvc_names


_SPEC_MEMO: dict[bytes, _SpecParse] = {}


class PodInfo:
    """Everything the scheduler reads from a pod, parsed once (raises ObjectError if malformed)."""

    # Its own slots, then the shared parse's (from_pod copies each of those from the
    # _SpecParse: named once, there; a test checks every one is copied).
    __slots__ = (
        "pod",
        "key",
        "uid",
        "namespace",
        "name",
        "labels",
        "resource_version",
        "node_name",
        "pvc_names",
        "resize",
        *_SpecParse.__slots__,
    )

    pod: dict[str, Any]
    key: str
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    priority: int
    requests: Resource
    non_zero_cpu: int
    non_zero_memory: int
    host_ports: list[tuple[str, str, int]]
    tolerations: list[Toleration]
    required_node_affinity: RequiredNodeAffinity
    preferred_node_affinity: PreferredSchedulingTerms
    has_affinity: bool
    has_required_affinity: bool
    has_required_anti_affinity: bool
    has_preferred_affinity: bool
    has_preferred_anti_affinity: bool
    resource_version: str
    node_name: str
    scheduler_name: str
    # "namespace/claimName" of mounted PVCs (NodeInfo's PVC reference counts)
    pvc_names: tuple[str, ...]
    scheduling_gates: tuple[str, ...]
    # resize_report(pod) of the version parsed: a later version with the same spec and
    # report reuses the parse (eventhandlers' confirm), which reads it here, not again.
    resize: tuple[Any, ...]

    @classmethod
    def from_pod(cls, pod: dict[str, Any]) -> PodInfo:
        if type(pod) is not dict and not isinstance(pod, Mapping):
            raise ObjectError(f"expected a Pod object, got {type(pod).__name__}", kind="Pod")
        meta = pod.get("metadata")
        if type(meta) is not dict and not isinstance(meta, Mapping):
            raise _err(pod, "metadata", "must be an object")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise _err(pod, "metadata.name", "required")
        ns = meta.get("namespace") or ""
        if not isinstance(ns, str):
            raise _err(pod, "metadata.namespace", "must be a string")
        labels = meta.get("labels")
        labels = {} if labels is None else labels
        if (type(labels) is not dict and not isinstance(labels, Mapping)) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise _err(pod, "metadata.labels", "must be a map of strings")
        spec = pod.get("spec")
        if spec is not None and type(spec) is not dict and not isinstance(spec, Mapping):
            raise _err(pod, "spec", "must be an object")
        spec = spec or _EMPTY

        self = cls.__new__(cls)
        self.pod = pod
        self.name = name
        self.namespace = ns
        self.key = f"{ns}/{name}"
        self.uid = str(meta.get("uid") or "")
        self.resource_version = str(meta.get("resourceVersion") or "")
        self.labels = labels
        # Everything read from the spec (and the resize report) but the volumes and
        # nodeName, shared with the pods whose spec reads the same (see _shared_parse).
        key = None
        self.resize = report = resize_report(pod)
        if type(spec) is dict:
            rest = dict(spec)
            rest.pop("nodeName", None)
            rest.pop("volumes", None)
            key = _memo_key(rest, report, _pod_level_resize)
        parsed = _SPEC_MEMO.get(key) if key is not None else None
        if parsed is None:
            # Parsed and checked in the order that names a pod's first problem.
            parsed, self.pvc_names = _SpecParse.parse(pod, spec, ns)
            if key is not None:
                _remember(_SPEC_MEMO, key, parsed)
            node_name = spec.get("nodeName") or ""
        else:
            self.pvc_names = _pvc_names(pod, spec, ns)
            node_name = spec.get("nodeName") or ""
            if not isinstance(node_name, str):
                raise _err(pod, "spec.nodeName", "must be a string")
        self.priority = parsed.priority
        self.requests = parsed.requests
        self.non_zero_cpu = parsed.non_zero_cpu
        self.non_zero_memory = parsed.non_zero_memory
        self.host_ports = parsed.host_ports
        self.tolerations = parsed.tolerations
        self.required_node_affinity = parsed.required_node_affinity
        self.preferred_node_affinity = parsed.preferred_node_affinity
        self.has_required_affinity = parsed.has_required_affinity
        self.has_preferred_affinity = parsed.has_preferred_affinity
        self.has_required_anti_affinity = parsed.has_required_anti_affinity
        self.has_preferred_anti_affinity = parsed.has_preferred_anti_affinity
        self.has_affinity = parsed.has_affinity
        self.scheduling_gates = parsed.scheduling_gates
        self.node_name = node_name
        self.scheduler_name = parsed.scheduler_name
        return self

    def with_node_name(self, pod: dict[str, Any]) -> PodInfo:
        """This PodInfo for ``pod``, a copy of ``self.pod`` with ``spec.nodeName`` set (assume).

        Nothing else may differ, so nothing needs parsing again.
        """
        copy = PodInfo.__new__(PodInfo)
        _copy_slots(self, copy)
        copy.pod = pod
        copy.node_name = str(_spec(pod).get("nodeName") or "")
        return copy

    @classmethod
    def from_assigned_pod(cls, pod: dict[str, Any]) -> tuple[PodInfo, list[ObjectError]]:
        """A PodInfo for a pod already bound to a node, even if malformed; and the problems.

        A bound pod runs on its node whether or not we can read it, so leaving it out would
        hand its capacity to the next pod.  Each malformed field is dropped from a copy (a
        copy is what the returned PodInfo holds, so plugins reading existing pods never see
        the garbage): an unparseable or negative request counts 0, or its limit when it has
        one; a request above its limit counts the limit; a bad volume, affinity term or
        port is ignored.  Raises ObjectError when the identity (name, namespace) is unusable.
        """
        problems: list[ObjectError] = []
        current: Any = pod
        node_name = (_spec(pod).get("nodeName")
                     if type(pod) is dict or isinstance(pod, Mapping) else None)
        if not isinstance(node_name, str):
            node_name = None  # unreadable: the pod is not bound anywhere we can name
        dropped: set[str] = set()
        for _ in range(_MAX_REPAIRS):
            try:
                return cls.from_pod(current), problems
            except ObjectError as exc:
                problems.append(exc)
                if exc.field.startswith(_IDENTITY):
                    raise problems[0] from None
                # Drop the field; if that is not enough (a required key), its parent.
                field, repaired = _repair_target(exc.field), None
                while field and repaired is None:
                    if field not in dropped:
                        repaired = _drop_field(current, field)
                    if repaired is None:
                        field = _parent_field(field)
                if repaired is None:
                    raise problems[0] from None
                dropped.add(field)
                spec = repaired.get("spec")
                if node_name and not (isinstance(spec, Mapping) and spec.get("nodeName")):
                    # keep the binding even when the whole spec was unusable
                    repaired["spec"] = {**(spec if isinstance(spec, Mapping) else {}),
                                        "nodeName": node_name}
                current = repaired
        raise problems[0]

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


def _copy_slots(src: PodInfo, dst: PodInfo) -> None:
    """Every slot of ``src`` into ``dst``, spelled out: about four times faster than a
    getattr/setattr loop over ``__slots__`` (it runs twice per scheduled pod); a test checks
    that it names every slot."""
    dst.pod = src.pod
    dst.key = src.key
    dst.uid = src.uid
    dst.namespace = src.namespace
    dst.name = src.name
    dst.labels = src.labels
    dst.priority = src.priority
    dst.requests = src.requests
    dst.non_zero_cpu = src.non_zero_cpu
    dst.non_zero_memory = src.non_zero_memory
    dst.host_ports = src.host_ports
    dst.tolerations = src.tolerations
    dst.required_node_affinity = src.required_node_affinity
    dst.preferred_node_affinity = src.preferred_node_affinity
    dst.has_affinity = src.has_affinity
    dst.has_required_affinity = src.has_required_affinity
    dst.has_required_anti_affinity = src.has_required_anti_affinity
    dst.has_preferred_affinity = src.has_preferred_affinity
    dst.has_preferred_anti_affinity = src.has_preferred_anti_affinity
    dst.resource_version = src.resource_version
    dst.node_name = src.node_name
    dst.scheduler_name = src.scheduler_name
    dst.pvc_names = src.pvc_names
    dst.resize = src.resize
    dst.scheduling_gates = src.scheduling_gates


_MAX_REPAIRS = 64
# Without these the pod cannot be keyed: it is not accounted anywhere.
_IDENTITY = ("metadata.name", "metadata.namespace")
_INDEX = re.compile(r"\[(\d+)\]\.?")


# What to drop for a malformed field: a part of a term or constraint could widen what it
# matches (an empty selector matches everything), so the whole term goes; a quantity goes alone.
_REPAIR_UNITS = re.compile(
    r"spec\.affinity\.\w+"
    r"|spec\.(?:topologySpreadConstraints|volumes|tolerations)\[\d+\]"
    r"|spec\.schedulingGates"
    r"|spec\.(?:containers|initContainers)\[\d+\]\.ports\[\d+\]"
)


def _repair_target(field: str) -> str:
    m = _REPAIR_UNITS.match(field)
    return m.group(0) if m else field


def _parent_field(path: str) -> str:
    """``a.b[0].c`` -> ``a.b[0]`` -> ``a.b`` -> ``a`` -> ``""``."""
    return path[:max(path.rfind("."), path.rfind("["), 0)]


def _drop_field(node: Any, path: str) -> Any:
    """A copy of ``node`` without the field at ``path`` (``spec.volumes[0].name``); copies only
    along the path.  None when the path does not lead anywhere."""
    if isinstance(node, list):
        m = _INDEX.match(path)
        if m is None or int(m.group(1)) >= len(node):
            return None
        i, rest = int(m.group(1)), path[m.end():]
        out = list(node)
        if not rest:
            del out[i]
            return out
        child = _drop_field(node[i], rest)
        if child is None:
            return None
        out[i] = child
        return out
    if not isinstance(node, Mapping):
        return None
    # Keys may hold dots ("example.com/gpu"): take the longest key the path starts with.
    best = ""
    for key in node:
        if isinstance(key, str) and len(key) > len(best) and (
            path == key or path.startswith(key + ".") or path.startswith(key + "[")
        ):
            best = key
    if not best:
        return None
    rest = path[len(best):]
    copy = dict(node)
    if not rest:
        del copy[best]
        return copy
    child = _drop_field(node[best], rest[1:] if rest[0] == "." else rest)
    if child is None:
        return None
    copy[best] = child
    return copy
