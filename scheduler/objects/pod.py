"""Pod helpers: identity, priority, resource requests (``resourcehelper.PodRequests``) and
:class:`PodInfo`, the parsed-once view plugins read on every scheduling cycle.

Requests are computed the way kube-scheduler does for a pod that went through apiserver
defaulting: a container's missing requests default to its limits (the sandbox may hand us
un-defaulted pods), sidecars (init containers with ``restartPolicy: Always``) add to the
running total, each ordinary init container is maxed against it, pod-level ``spec.resources``
requests override cpu/memory, and ``spec.overhead`` is added on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.objects.errors import ObjectError
from scheduler.objects.node_affinity import PreferredSchedulingTerms, RequiredNodeAffinity
from scheduler.objects.quantity import nano_to_int, nano_to_milli
from scheduler.objects.resources import (
    CPU,
    MEMORY,
    Resource,
    ResourceListError,
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
    "pod_host_ports",
    "PodInfo",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
# upstream schedutil.DefaultMilliCPURequest / DefaultMemoryRequest (scoring only)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_DEFAULT_CPU_NANO = DEFAULT_MILLI_CPU_REQUEST * 10**6
_DEFAULT_MEM_NANO = DEFAULT_MEMORY_REQUEST * 10**9
_POD_LEVEL_RESOURCES = (CPU, MEMORY)

_EMPTY: Mapping[str, Any] = {}


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    m = pod.get("metadata")
    return m if m else _EMPTY


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    s = pod.get("spec")
    return s if s else _EMPTY


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
    __slots__ = ("requests", "sidecar", "ports")

    def __init__(self, requests: dict[str, int], sidecar: bool,
                 ports: list[tuple[str, str, int]]) -> None:
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


def _resources(pod: Mapping[str, Any], holder: Mapping[str, Any], where: str) -> dict[str, int]:
    """Requests of a container (or pod-level resources), defaulted from limits."""
    res = holder.get("resources")
    if not res:
        return {}
    if not isinstance(res, Mapping):
        raise _err(pod, f"{where}.resources", "must be an object")
    reqs = _parse_rl(pod, res.get("requests"), f"{where}.resources.requests")
    limits = res.get("limits")
    if limits:
        for k, v in _parse_rl(pod, limits, f"{where}.resources.limits").items():
            reqs.setdefault(k, v)  # apiserver defaulting: requests default to limits
    return reqs


def _ports(pod: Mapping[str, Any], c: Mapping[str, Any], where: str) -> list[tuple[str, str, int]]:
    raw = c.get("ports")
    if not raw:
        return []
    if not isinstance(raw, list):
        raise _err(pod, f"{where}.ports", "must be a list")
    out: list[tuple[str, str, int]] = []
    for j, p in enumerate(raw):
        pp = f"{where}.ports[{j}]"
        if not isinstance(p, Mapping):
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
    if not raw:
        return []
    if not isinstance(raw, list):
        raise _err(pod, f"spec.{field}", "must be a list")
    init = field == "initContainers"
    out: list[_Container] = []
    for i, c in enumerate(raw):
        where = f"spec.{field}[{i}]"
        if not isinstance(c, Mapping):
            raise _err(pod, where, "must be an object")
        sidecar = init and c.get("restartPolicy") == "Always"
        ports = _ports(pod, c, where) if (not init or sidecar) else []
        out.append(_Container(_resources(pod, c, where), sidecar, ports))
    return out


def _aggregate(containers: list[_Container], inits: list[_Container],
               non_missing: Mapping[str, int] | None) -> dict[str, int]:
    def reqs_of(c: _Container) -> Mapping[str, int]:
        if not non_missing:
            return c.requests
        r = dict(c.requests)
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


def _parse_resources(pod: Mapping[str, Any]) -> _Parsed:
    spec = _spec(pod)
    if not isinstance(spec, Mapping):
        raise _err(pod, "spec", "must be an object")
    containers = _containers(pod, "containers")
    inits = _containers(pod, "initContainers")
    pod_level = {k: v for k, v in _resources(pod, spec, "spec").items()
                 if k in _POD_LEVEL_RESOURCES}
    overhead = _parse_rl(pod, spec.get("overhead"), "spec.overhead")

    def finish(reqs: dict[str, int]) -> dict[str, int]:
        reqs.update(pod_level)
        _add(reqs, overhead)
        return reqs

    reqs = finish(_aggregate(containers, inits, None))
    if pod_level:
        # only resources that neither pod level nor any container set get the default
        non_missing = {k: d for k, d in ((CPU, _DEFAULT_CPU_NANO), (MEMORY, _DEFAULT_MEM_NANO))
                       if k not in reqs}
    else:
        non_missing = {CPU: _DEFAULT_CPU_NANO, MEMORY: _DEFAULT_MEM_NANO}
    non_zero = finish(_aggregate(containers, inits, non_missing)) if non_missing else reqs
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


def pod_requests(pod: Mapping[str, Any]) -> Resource:
    """Effective resource requests of a pod (``allowed_pod_number`` stays 0)."""
    return _parse_resources(pod).requests


def pod_non_zero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(milli_cpu, memory) with 100m / 200Mi for containers requesting none (for scoring)."""
    p = _parse_resources(pod)
    return p.non_zero_cpu, p.non_zero_memory


def pod_host_ports(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of containers and sidecars with hostPort > 0."""
    out: list[tuple[str, str, int]] = []
    for field in ("initContainers", "containers"):
        for c in _containers(pod, field):
            out.extend(c.ports)
    return out


# --- PodInfo -------------------------------------------------------------------------------


def _has_terms(aff: Mapping[str, Any], kind: str, which: str) -> bool:
    a = aff.get(kind)
    return bool(a) and isinstance(a, Mapping) and bool(a.get(which))


class PodInfo:
    """Everything the scheduler reads from a pod, parsed once (raises ObjectError if malformed)."""

    __slots__ = (
        "pod",
        "key",
        "uid",
        "namespace",
        "name",
        "labels",
        "priority",
        "requests",
        "non_zero_cpu",
        "non_zero_memory",
        "host_ports",
        "tolerations",
        "required_node_affinity",
        "preferred_node_affinity",
        "has_affinity",
        "has_required_affinity",
        "has_required_anti_affinity",
        "has_preferred_affinity",
        "has_preferred_anti_affinity",
        "resource_version",
        "node_name",
        "scheduler_name",
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

    @classmethod
    def from_pod(cls, pod: dict[str, Any]) -> PodInfo:
        if not isinstance(pod, Mapping):
            raise ObjectError(f"expected a Pod object, got {type(pod).__name__}", kind="Pod")
        meta = pod.get("metadata")
        if not isinstance(meta, Mapping):
            raise _err(pod, "metadata", "must be an object")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise _err(pod, "metadata.name", "required")
        ns = meta.get("namespace") or ""
        if not isinstance(ns, str):
            raise _err(pod, "metadata.namespace", "must be a string")
        labels = meta.get("labels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise _err(pod, "metadata.labels", "must be a map of strings")
        spec = pod.get("spec")
        if spec is not None and not isinstance(spec, Mapping):
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
        self.priority = pod_priority(pod)
        parsed = _parse_resources(pod)
        self.requests = parsed.requests
        self.non_zero_cpu = parsed.non_zero_cpu
        self.non_zero_memory = parsed.non_zero_memory
        self.host_ports = parsed.host_ports
        self.tolerations = parse_tolerations(pod)
        self.required_node_affinity = RequiredNodeAffinity.from_pod(pod)
        self.preferred_node_affinity = PreferredSchedulingTerms.from_pod(pod)
        aff = spec.get("affinity") or _EMPTY
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
        self.node_name = str(spec.get("nodeName") or "")
        self.scheduler_name = str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME)
        return self

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"
