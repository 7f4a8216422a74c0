"""Extended resources backed by DeviceClasses (DRAExtendedResource), without the framework.

A DeviceClass backs an extended resource name: the one in ``spec.extendedResourceName`` (if
any) and always its implicit ``deviceclass.resource.kubernetes.io/<class name>``.  A pod that
asks for such a resource in its containers' ``resources`` gets, on a node that does not
advertise the resource in its allocatable, a claim made by the scheduler: one request per
container and resource (``ExactCount`` of the quantity, of the mapped class), allocated by
the structured allocator with the pod's other claims and written at PreBind.

- ``ClassCache``: resource name -> DeviceClass, fed by the DeviceClass informer's events (or
  rebuilt from a listing).  When several classes name the same ``extendedResourceName`` the
  newest (``creationTimestamp``) wins, the lower name breaking a tie, as upstream's
  ``extendedresourcecache`` does.
- ``backed_resources``: which of a pod's requested resources a class backs.
- ``requests_and_mappings``: the special claim's device requests for the resources a node has
  to provide through DRA, and ``pod.status.extendedResourceClaimStatus.requestMappings``
  (regular containers and sidecars each get their own request; a plain init container reuses
  the requests of the containers after it first, and the plain init containers share the
  largest of their own requests, as upstream).
- ``special_claim`` / ``find_claim``: the in-memory claim, and the claim a prior attempt
  created (the annotation and the pod as controlling owner).
- ``class_devices``: how many devices of a node a class selects and how many of those are
  allocated: NodeResourcesFit scores a backed resource a node does not advertise with these
  as its allocatable and requested, as upstream's resourceAllocationScorer does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.dra.cel import CelError, Selector, compile_selector
from scheduler.dra.inventory import Device, DeviceID, class_selectors
from scheduler.objects.quantity import QuantityError, parse_quantity
from scheduler.objects.resources import is_extended_resource_name

__all__ = [
    "ANNOTATION",
    "CLASS_PREFIX",
    "SPECIAL_NAME",
    "ClassCache",
    "backed_resources",
    "class_devices",
    "find_claim",
    "is_dra_extended_resource_name",
    "requests_and_mappings",
    "special_claim",
]

CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# the in-memory claim's name: not a valid object name, so it never clashes with a real claim
SPECIAL_NAME = "<extended-resources>"
GENERATE_SUFFIX = "-extended-resources-"


def is_dra_extended_resource_name(name: str) -> bool:
    """An extended resource name, or a class's implicit one."""
    return name.startswith(CLASS_PREFIX) or is_extended_resource_name(name)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _explicit(cls: Mapping[str, Any]) -> str | None:
    spec = cls.get("spec")
    name = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and name else None


def _created(cls: Mapping[str, Any]) -> float:
    raw = _meta(cls).get("creationTimestamp")
    if not isinstance(raw, str):
        return 0.0
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class ClassCache:
    """Extended resource name -> the DeviceClass that backs it (informer events, or a
    listing), with a ``version`` that changes with every mapping change."""

    def __init__(self) -> None:
        self._by_resource: dict[str, Mapping[str, Any]] = {}
        self._by_class: dict[str, str] = {}  # class name -> its extendedResourceName
        self.version = 0
        self._listed: tuple[tuple[str, str, int], ...] | None = None

    def get(self, resource: str) -> Mapping[str, Any] | None:
        return self._by_resource.get(resource)

    def class_name(self, resource: str) -> str | None:
        cls = self._by_resource.get(resource)
        return str(_meta(cls).get("name")) if cls is not None else None

    def resource_of(self, class_name: str) -> str:
        """The explicit extendedResourceName of a class, or ""."""
        return self._by_class.get(class_name, "")

    def __len__(self) -> int:
        return len(self._by_resource)

    # --- informer events -------------------------------------------------------------------

    def class_added(self, cls: Mapping[str, Any]) -> None:
        self._put(cls, None)

    def class_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._put(new, old)

    def class_deleted(self, cls: Mapping[str, Any]) -> None:
        name = str(_meta(cls).get("name") or "")
        self._by_resource.pop(CLASS_PREFIX + name, None)
        explicit = _explicit(cls)
        if explicit is not None:
            cur = self._by_resource.get(explicit)
            if cur is not None and _meta(cur).get("name") == name:
                del self._by_resource[explicit]
        self._by_class.pop(name, None)
        self.version += 1

    def _put(self, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        name = str(_meta(new).get("name") or "")
        if not name:
            return
        self.version += 1
        explicit = _explicit(new)
        if explicit is None:
            self._by_class.pop(name, None)
        else:
            self._by_class[name] = explicit
        if old is not None:
            was = _explicit(old)
            if was is not None and was != explicit:
                cur = self._by_resource.get(was)
                if cur is not None and _meta(cur).get("name") == name:
                    del self._by_resource[was]
        self._by_resource[CLASS_PREFIX + name] = new
        if explicit is None:
            return
        cur = self._by_resource.get(explicit)
        if cur is not None and _meta(cur).get("name") != name:
            # two classes name the same resource: the newer one wins, the lower name on a tie
            mine, theirs = _created(new), _created(cur)
            if mine < theirs or (mine == theirs and name >= str(_meta(cur).get("name"))):
                return
        self._by_resource[explicit] = new

    # --- a listing (listers without events) ------------------------------------------------

    def replace(self, classes: Iterable[Mapping[str, Any]]) -> None:
        """Rebuild from a listing when it differs from the last one."""
        items = [c for c in classes if isinstance(c, Mapping)]
        key = tuple((str(_meta(c).get("uid")), str(_meta(c).get("resourceVersion")), id(c))
                    for c in items)
        if key == self._listed:
            return
        self._listed = key
        self._by_resource.clear()
        self._by_class.clear()
        for c in items:
            self._put(c, None)


def backed_resources(requests: Mapping[str, int], cache: ClassCache) -> dict[str, int]:
    """The pod's requested resources (non-zero) that a DeviceClass backs."""
    return {name: q for name, q in requests.items()
            if q and is_dra_extended_resource_name(name) and cache.get(name) is not None}


# --- the special claim's requests --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Request:
    name: str
    class_name: str
    count: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "exactly": {"deviceClassName": self.class_name,
                                               "allocationMode": "ExactCount",
                                               "count": self.count}}


def _container_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    res = container.get("resources")
    if not isinstance(res, Mapping):
        return {}
    reqs = dict(res.get("requests") or {}) if isinstance(res.get("requests"), Mapping) else {}
    limits = res.get("limits")
    if isinstance(limits, Mapping):
        for k, v in limits.items():
            reqs.setdefault(k, v)  # requests default to limits (kube-apiserver's defaulting)
    return reqs


def _whole(raw: Any) -> int:
    try:
        q = parse_quantity(raw)
    except (QuantityError, TypeError):
        return 0
    return int(q) if q.denominator == 1 and q > 0 else 0


def _container_request(index: int, container: Mapping[str, Any], resource: str,
                       class_name: str, reusable: list[_Request | None]
                       ) -> tuple[_Request | None, list[dict[str, str]]]:
    reqs = _container_requests(container)
    if resource not in reqs:
        return None, []
    want = _whole(reqs[resource])
    if not want:
        return None, []
    cname = str(container.get("name") or "")
    mappings: list[dict[str, str]] = []
    have = 0
    for r in reusable:
        if r is None:
            continue
        have += r.count
        mappings.append({"containerName": cname, "resourceName": resource, "requestName": r.name})
        if have >= want:
            return None, mappings
    ridx = sorted(str(k) for k in reqs).index(resource)
    req = _Request(f"container-{index}-request-{ridx}", class_name, want - have)
    mappings.append({"containerName": cname, "resourceName": resource, "requestName": req.name})
    return req, mappings


def requests_and_mappings(pod: Mapping[str, Any], resources: Iterable[str], cache: ClassCache
                          ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The special claim's ``spec.devices.requests`` for these resources (those the node
    provides through DRA) and the pod's request mappings."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    inits = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    containers = inits + [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    long_lived = [i for i, c in enumerate(containers)
                  if i >= len(inits) or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(len(inits)) if i not in set(long_lived)]
    requests: list[_Request] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(set(resources)):
        class_name = cache.class_name(resource)
        if class_name is None:
            continue
        long_reqs: list[_Request | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            req, maps = _container_request(i, containers[i], resource, class_name, [])
            long_reqs[i] = req
            long_maps += maps
        biggest: _Request | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            req, maps = _container_request(i, containers[i], resource, class_name,
                                           long_reqs[i:])
            if req is not None:
                short_names.add(req.name)
                if biggest is None or biggest.count < req.count:
                    biggest = req
            short_maps += maps
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest.name)
            short_maps = [{**m, "requestName": biggest.name} if m["requestName"] in short_names
                          else m for m in short_maps]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for r in long_reqs if r is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: r.name)
    return [r.as_dict() for r in requests], mappings


def special_claim(pod: Mapping[str, Any], requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod's in-memory claim (its requests for one node)."""
    md = _meta(pod)
    name = str(md.get("name") or "")
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": SPECIAL_NAME,
            "namespace": str(md.get("namespace") or ""),
            "generateName": name + GENERATE_SUFFIX,
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                 "uid": str(md.get("uid") or ""), "controller": True}],
        },
        "spec": {"devices": {"requests": requests}},
    }


def is_special(claim: Mapping[str, Any]) -> bool:
    """Whether the claim is a pod's extended-resource claim (the annotation says so)."""
    ann = _meta(claim).get("annotations")
    return isinstance(ann, Mapping) and ann.get(ANNOTATION) == "true"


def find_claim(pod: Mapping[str, Any], claims: Iterable[Mapping[str, Any]]
               ) -> Mapping[str, Any] | None:
    """The extended-resource claim a prior attempt created for this pod, if any."""
    md = _meta(pod)
    ns, name, uid = md.get("namespace") or "", md.get("name"), md.get("uid")
    for c in claims:
        if (_meta(c).get("namespace") or "") != ns or not is_special(c):
            continue
        for ref in _meta(c).get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("name") == name and \
                    ref.get("uid") == uid and ref.get("controller") is True:
                return c
    return None


def class_devices(cls: Mapping[str, Any], devices: Sequence[Device],
                  allocated: AbstractSet[DeviceID]) -> tuple[int, int]:
    """(devices the class's selectors select, how many of them are allocated).  A selector
    that does not compile selects nothing; one that fails on a device does not select it."""
    selectors: list[Selector] = []
    for raw in class_selectors(cls):
        cel = raw.get("cel") if isinstance(raw, Mapping) else None
        try:
            selectors.append(compile_selector(cel.get("expression")
                                              if isinstance(cel, Mapping) else None))
        except CelError:
            return 0, 0
    total = used = 0
    for d in devices:
        for sel in selectors:
            hit = d.selected.get(sel.expression)
            if hit is None:
                try:
                    hit = d.selected[sel.expression] = sel.matches(d.env)
                except CelError:
                    hit = False
            if not hit:
                break
        else:
            total += 1
            used += d.id in allocated
    return total, used
