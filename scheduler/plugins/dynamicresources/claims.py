"""A pod's ResourceClaims, and the assume cache for the allocations in flight.

The claims of a pod are named in ``spec.resourceClaims``: directly (``resourceClaimName``) or
through a template, whose generated claim name the resourceclaim controller writes into
``pod.status.resourceClaimStatuses``.  ``ClaimTracker`` holds the allocations this scheduler
chose (Reserve) but the informer does not show yet: every cycle counts them as taken, so two
pods in flight never get the same device.  An entry goes when the informer's copy of the
claim shows an allocation (the API is the truth from then on, and after a restart it is all
there is) or when the pod is unreserved.

The devices held are kept incrementally: ``claim_added``/``claim_updated``/``claim_deleted``
(fed by the claim informer's events) and ``assume``/``forget`` adjust a count per device, so
``held()`` costs nothing per pod.  ``in_use(claims)`` is the full scan, for listers that
deliver no events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, KeysView, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from scheduler.dra import capacity as cap
from scheduler.dra.extended import SPECIAL_NAME
from scheduler.dra.inventory import DeviceID
from scheduler.dra.inventory import device_ids_of as _all_device_ids


def device_ids_of(allocation: Mapping[str, Any] | None) -> list[DeviceID]:
    """The devices an allocation holds whole (a share of a device allocated by capacity,
    DRAConsumableCapacity, is counted in ``ClaimTracker.consumed`` instead)."""
    return _all_device_ids(allocation, include_shared=False)

RESOURCE_CLAIMS = "resourceclaims"
# Upstream's ResourceClaimReservedForMaxSize.
RESERVED_FOR_MAX = 256
FINALIZER = "resource.kubernetes.io/delete-protection"


class ClaimProblem(Exception):
    """Why the pod cannot be scheduled yet (a claim missing, being deleted, not its own)."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    entry: str  # spec.resourceClaims[].name
    claim_name: str
    from_template: bool


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def key_of(obj: Mapping[str, Any]) -> str:
    m = _meta(obj)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def has_claims(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    # A dict by its type first: the ABC check costs a Python call, three times a pod.
    return (type(spec) is dict or isinstance(spec, Mapping)) and bool(spec.get("resourceClaims"))


def pod_claims(pod: Mapping[str, Any]) -> list[PodClaim]:
    """The claims the pod needs; ClaimProblem when a generated name is not known yet."""
    spec = pod.get("spec") or {}
    raw = spec.get("resourceClaims") or []
    if not isinstance(raw, list):
        raise ClaimProblem("spec.resourceClaims: must be a list")
    status = pod.get("status") or {}
    statuses = {s.get("name"): s for s in status.get("resourceClaimStatuses") or []
                if isinstance(s, Mapping)}
    out: list[PodClaim] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ClaimProblem(f"spec.resourceClaims[{i}].name: must be a string")
        name = entry["name"]
        if isinstance(entry.get("resourceClaimName"), str):
            out.append(PodClaim(name, entry["resourceClaimName"], False))
        elif isinstance(entry.get("resourceClaimTemplateName"), str):
            st = statuses.get(name)
            if st is None:
                m = _meta(pod)
                raise ClaimProblem(f"pod {m.get('namespace', '')}/{m.get('name', '')}: "
                                   f"ResourceClaim not created yet for {name!r}")
            generated = st.get("resourceClaimName")
            if generated is None:
                continue  # the controller decided no claim is needed
            out.append(PodClaim(name, str(generated), True))
        else:
            raise ClaimProblem(f"spec.resourceClaims[{i}]: one of resourceClaimName, "
                               "resourceClaimTemplateName is required")
    return out


def owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    uid = _meta(pod).get("uid")
    for ref in _meta(claim).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("uid") == uid and ref.get("controller") is True:
            return True
    return False


def allocation_of(claim: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = claim.get("status")
    alloc = status.get("allocation") if isinstance(status, Mapping) else None
    return alloc if isinstance(alloc, Mapping) else None


def reserved_for(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = claim.get("status")
    raw = status.get("reservedFor") if isinstance(status, Mapping) else None
    return [r for r in raw if isinstance(r, Mapping)] if isinstance(raw, list) else []


def is_reserved_for(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    uid = _meta(pod).get("uid")
    return any(r.get("uid") == uid for r in reserved_for(claim))


class ClaimTracker:
    """The allocations chosen in Reserve that the informer does not show yet, and the devices
    held by every allocated claim (informer events) and every one in flight."""

    def __init__(self) -> None:
        # claim key -> (pod uid, allocation)
        self._in_flight: dict[str, tuple[str, dict[str, Any]]] = {}
        # (uid, resourceVersion) of informer copies -> (claim key, devices)
        self._seen: dict[tuple[str, str], tuple[str, tuple[DeviceID, ...]]] = {}
        # Incremental state: the devices of each allocated informer claim, and how many
        # holders (informer claims and in-flight allocations) each device has.
        self._held: dict[str, tuple[DeviceID, ...]] = {}
        self._count: dict[DeviceID, int] = {}
        # Consumable capacity: what the shares of each device (informer claims and in-flight
        # allocations) consume, per capacity name.
        self._consumed: dict[DeviceID, dict[str, Fraction]] = {}
        self._scan_consumed: dict[DeviceID, dict[str, Fraction]] = {}
        self._scanned = False  # in_use() is the source (a lister without events)
        self._shared_alloc: dict[str, Mapping[str, Any]] = {}  # informer claims with shares
        # told when a device becomes held (True) or free (False): the free-device index
        self.on_held: Callable[[DeviceID, bool], None] | None = None
        # claims reserved for exactly one pod -> their devices (preemption of that pod frees
        # them); ``on_reserved`` is told of each such claim coming (+1) and going (-1)
        self._single: dict[str, tuple[DeviceID, ...]] = {}
        self.on_reserved: Callable[[tuple[DeviceID, ...], int], None] | None = None
        # DRAExtendedResource: a created claim's key -> the in-memory key its allocation is
        # held under until the informer shows the claim allocated (or gone)
        self._aliases: dict[str, str] = {}

    def _share(self, allocation: Mapping[str, Any] | None, sign: int,
               into: dict[DeviceID, dict[str, Fraction]] | None = None) -> None:
        target = self._consumed if into is None else into
        for dev, use in cap.consumed_of(allocation):
            cur = target.setdefault(dev, {})
            cap.add(cur, use, sign)
            if not cur:
                del target[dev]

    def consumed(self) -> Mapping[DeviceID, Mapping[str, Fraction]]:
        """Per shared device, the capacity its shares consume (as of the events seen, or of
        the last ``in_use`` scan for listers without events): a live view."""
        return self._scan_consumed if self._scanned else self._consumed

    # --- the per-device count --------------------------------------------------------------------

    def _add(self, devices: Iterable[DeviceID]) -> None:
        count, tell = self._count, self.on_held
        for d in devices:
            n = count[d] = count.get(d, 0) + 1
            if n == 1 and tell is not None:
                tell(d, True)

    def _sub(self, devices: Iterable[DeviceID]) -> None:
        count, tell = self._count, self.on_held
        for d in devices:
            n = count.get(d, 0) - 1
            if n > 0:
                count[d] = n
            elif count.pop(d, None) is not None and tell is not None:
                tell(d, False)

    def _drop_in_flight(self, claim_key: str) -> None:
        alias = self._aliases.pop(claim_key, None) if self._aliases else None
        if alias is not None:
            self._drop_in_flight(alias)
        cur = self._in_flight.pop(claim_key, None)
        if cur is not None:
            self._sub(device_ids_of(cur[1]))
            self._share(cur[1], -1)

    # --- in flight -------------------------------------------------------------------------------

    def assume(self, claim_key: str, pod_uid: str, allocation: dict[str, Any]) -> None:
        self._drop_in_flight(claim_key)
        self._in_flight[claim_key] = (pod_uid, allocation)
        self._add(device_ids_of(allocation))
        self._share(allocation, 1)

    def forget(self, claim_key: str, pod_uid: str) -> None:
        cur = self._in_flight.get(claim_key)
        if cur is not None and cur[0] == pod_uid:
            if self._aliases:  # a created claim no longer stands for it
                for k in [k for k, v in self._aliases.items() if v == claim_key]:
                    del self._aliases[k]
            self._drop_in_flight(claim_key)

    def unnamed_in_flight(self) -> list[dict[str, Any]]:
        """The allocations in flight for claims that exist in no informer yet (pods' special
        claims, DRAExtendedResource), as claims named by their in-memory keys: what the cache
        comparer counts beside the cluster's claims."""
        out: list[dict[str, Any]] = []
        for key, (_uid, alloc) in self._in_flight.items():
            if SPECIAL_NAME in key:
                ns, _, name = key.partition("/")
                out.append({"metadata": {"namespace": ns, "name": name},
                            "status": {"allocation": alloc}})
        return out

    def alias(self, claim_key: str, held_as: str) -> None:
        """The claim ``claim_key`` (just created) holds what is in flight as ``held_as``: that
        goes when the informer shows the claim allocated, or gone."""
        self._aliases[claim_key] = held_as

    def in_flight(self, claim_key: str) -> dict[str, Any] | None:
        cur = self._in_flight.get(claim_key)
        return cur[1] if cur is not None else None

    def overlay(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        """The claim as this scheduler knows it: with its in-flight allocation, if any."""
        if allocation_of(claim) is not None:
            return claim
        alloc = self.in_flight(key_of(claim))
        if alloc is None:
            return claim
        status = dict(claim.get("status") or {})
        status["allocation"] = alloc
        return {**claim, "status": status}

    # --- informer events -------------------------------------------------------------------------

    def claim_added(self, claim: Mapping[str, Any]) -> None:
        """The informer has this claim (added, or changed: the newest copy replaces the last)."""
        key = key_of(claim)
        alloc = allocation_of(claim)
        devices = tuple(device_ids_of(alloc))
        # Most updates of an allocated claim (a finalizer, reservedFor, a driver's device
        # status) keep its devices: then the counts and the index stay as they are (letting
        # go of the devices and taking them again ends in the same state, at the cost of
        # two index updates a device).
        old = self._held.get(key, ())
        if old != devices:
            if old:
                del self._held[key]
                self._sub(old)
            if devices:
                self._held[key] = devices
                self._add(devices)
        if self._shared_alloc:
            self._share(self._shared_alloc.pop(key, None), -1)
        if alloc is not None and cap.consumed_of(alloc):
            self._shared_alloc[key] = alloc
            self._share(alloc, 1)
        single = devices if devices and len(reserved_for(claim)) == 1 else None
        if self._single.get(key) != single:
            self._drop_single(key)
            if single is not None:
                self._single[key] = single
                if self.on_reserved is not None:
                    self.on_reserved(single, 1)
        if alloc is not None:
            self._drop_in_flight(key)  # the API shows it now

    def claim_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if key_of(old) != key_of(new):
            self.claim_deleted(old)
        self.claim_added(new)

    def claim_deleted(self, claim: Mapping[str, Any]) -> None:
        key = key_of(claim)
        old = self._held.pop(key, None)
        if old:
            self._sub(old)
        self._share(self._shared_alloc.pop(key, None), -1)
        self._drop_single(key)
        # In-flight claims were read from the informer: gone from it means deleted.
        self._drop_in_flight(key)

    def _drop_single(self, key: str) -> None:
        single = self._single.pop(key, None)
        if single is not None and self.on_reserved is not None:
            self.on_reserved(single, -1)

    def single_reserved(self) -> list[tuple[DeviceID, ...]]:
        """The devices of each claim reserved for one pod alone."""
        return list(self._single.values())

    def held(self) -> KeysView[DeviceID]:
        """Every device held, as of the events seen so far (a live view: do not keep it)."""
        return self._count.keys()

    # --- full scan -------------------------------------------------------------------------------

    def in_use(self, claims: Iterable[Mapping[str, Any]]) -> set[DeviceID]:
        """Every device held by these (the informer's) claims and by those in flight: a scan,
        for listers without events."""
        out: set[DeviceID] = set()
        shares: dict[DeviceID, dict[str, Fraction]] = {}
        seen = self._seen
        fresh: dict[tuple[str, str], tuple[str, tuple[DeviceID, ...]]] = {}
        # A claim's devices change only with its resourceVersion: unchanged claims are
        # taken from the last call.
        for c in claims:
            meta = c.get("metadata") or {}
            version = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
            hit = seen.get(version)
            if hit is None:
                alloc = allocation_of(c)
                key = key_of(c)
                hit = (key, tuple(device_ids_of(alloc)))
                if alloc is not None:
                    self._drop_in_flight(key)  # the API shows it now
            fresh[version] = hit
            if hit[1]:
                out.update(hit[1])
            status = c.get("status")
            if isinstance(status, Mapping) and status.get("allocation") is not None:
                self._share(allocation_of(c), 1, shares)
        self._seen = fresh
        if self._in_flight:
            present = {hit[0] for hit in fresh.values()}
            for key in [k for k in self._in_flight
                        if k not in present and SPECIAL_NAME not in k]:
                # (a pod's in-memory extended-resource claim is in no informer)
                # In-flight claims were read from the informer: gone from it means deleted.
                self._drop_in_flight(key)
            for _uid, alloc in self._in_flight.values():
                out.update(device_ids_of(alloc))
                self._share(alloc, 1, shares)
        self._scan_consumed = shares
        self._scanned = True
        return out
