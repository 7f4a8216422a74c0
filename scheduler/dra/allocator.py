"""The structured allocator: which devices of one node satisfy all the claims of a pod.

Semantics are upstream's (``k8s.io/dynamic-resource-allocation/structured``): every request
of every claim gets devices, or none does; a request is ``exactly`` one device class with
extra CEL selectors, ``allocationMode`` ExactCount (``count``) or All, or ``firstAvailable``
subrequests tried in order; ``constraints`` (``matchAttribute``, ``distinctAttribute``) tie
the devices of the requests they name; a device is free unless another claim's allocation
holds it (an ``adminAccess`` request may use a held device and holds none); a device taint
with effect NoSchedule/NoExecute must be tolerated by the request; a device that consumes
shared counters of its pool (partitionable devices) is free only while those counters have
enough left after the devices already allocated.  The search is a
depth-first walk over requests and device combinations, bounded by a step budget and, when
the caller gives one, a deadline (upstream's ``filterTimeout``), so one pathological claim
cannot stall the scheduler.

The outcome is either the ``status.allocation`` of each claim, or why not: ``Unfit`` (the
node has not the devices: per request, a reason ``explain`` prints) or ``AllocationError``
(the claim or class is wrong: a CEL error, an unknown class), naming the object and field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
import time
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scheduler.dra import capacity as cap

from scheduler.dra.cel import CelError, Selector, compile_selector
from scheduler.dra.counters import Counters, PoolID, fits, take
from scheduler.dra.inventory import (
    TAINT_EFFECTS,
    Device,
    DeviceID,
    DeviceTaint,
    Inventory,
    class_selectors,
)

MODE_EXACT = "ExactCount"
MODE_ALL = "All"
DEFAULT_STEP_BUDGET = 200_000
DEADLINE_CHECK_EVERY = 64  # search steps between two looks at the clock
# Upstream's limits (resource.k8s.io/v1).
MAX_REQUESTS = 32

REASON_TIMEOUT = "timed out trying to allocate devices"


class AllocationError(Exception):
    """The claim or its class cannot be evaluated (not a lack of devices)."""


class Unfit:
    """No allocation on this node; ``details`` says, per request, why (for explain).  They
    may be worked out only when first read (``explain``): Filter rejects many nodes, and
    explain reads why for a few."""

    __slots__ = ("_details", "_explain", "timed_out")

    def __init__(self, details: list[str] | None = None, timed_out: bool = False, *,
                 explain: Callable[[], list[str]] | None = None) -> None:
        self._details = details if details is not None or explain is not None else []
        self._explain = explain
        self.timed_out = timed_out

    @property
    def details(self) -> list[str]:
        if self._details is None:
            assert self._explain is not None
            self._details, self._explain = self._explain(), None
        return self._details

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Unfit) and self.details == other.details
                and self.timed_out == other.timed_out)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        return f"Unfit(details={self.details!r}, timed_out={self.timed_out!r})"


class Allocated:
    """One ``status.allocation`` per claim, in the order the claims were given (built on
    first use: Filter finds many feasible nodes, Reserve reads one)."""

    __slots__ = ("_build", "_allocations", "subrequest_rank")

    def __init__(self, allocations: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]],
                 subrequest_rank: int = 0) -> None:
        self._build = allocations if callable(allocations) else None
        self._allocations = None if callable(allocations) else allocations
        # Sum over requests of the chosen firstAvailable index (0 best), for Score.
        self.subrequest_rank = subrequest_rank

    @property
    def allocations(self) -> list[dict[str, Any]]:
        if self._allocations is None:
            assert self._build is not None
            self._allocations = self._build()
            self._build = None
        return self._allocations

    def __repr__(self) -> str:
        return f"Allocated({self.allocations!r}, {self.subrequest_rank})"


Outcome = Allocated | Unfit


def claim_key(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# ---- requests ------------------------------------------------------------------------------

@dataclass(slots=True)
class _Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, t: DeviceTaint) -> bool:
        if self.effect and self.effect != t.effect:
            return False
        if self.key and self.key != t.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == t.value
        return self.operator == "Exists"


@dataclass(slots=True)
class _Alternative:
    result_name: str  # "req" or "req/sub"
    class_name: str
    class_selectors: list[tuple[str, Selector]]  # (where, selector)
    selectors: list[tuple[str, Selector]]
    mode: str
    count: int
    admin: bool
    tolerations: list[_Toleration]
    raw_tolerations: list[Any]
    class_config: list[Any]
    capacity: dict[str, Fraction] = field(default_factory=dict)  # capacity.requests
    # every selector (class first) and the key their joint result is cached under on a device
    all_selectors: tuple[tuple[str, Selector], ...] = field(init=False)
    selected_key: str = field(init=False)
    capacity_key: str = field(init=False)  # capacity requests, as a cache key

    def __post_init__(self) -> None:
        self.all_selectors = (*self.class_selectors, *self.selectors)
        # NUL never occurs in an expression: this key cannot be one expression's
        self.selected_key = "\x00" + "\x00".join(sel.expression
                                                 for _w, sel in self.all_selectors)
        self.capacity_key = repr(sorted(self.capacity.items()))


Alternative = _Alternative  # one (sub)request's choice, as Filter's shortcuts name it


@dataclass(slots=True)
class _Request:
    claim_index: int
    claim: str
    name: str
    alternatives: list[_Alternative]


@dataclass(slots=True)
class _Constraint:
    requests: frozenset[str]  # empty: every request of the claim
    attribute: str
    distinct: bool

    def applies(self, request: str, result_name: str) -> bool:
        return not self.requests or request in self.requests or result_name in self.requests


def _parse_tolerations(where: str, raw: Any) -> list[_Toleration]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AllocationError(f"{where}.tolerations: must be a list")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, Mapping):
            raise AllocationError(f"{where}.tolerations[{i}]: must be an object")
        out.append(_Toleration(str(t.get("key") or ""), str(t.get("operator") or ""),
                               str(t.get("value") or ""), str(t.get("effect") or "")))
    return out


def _compile_all(where: str, raw: Any) -> list[tuple[str, Selector]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AllocationError(f"{where}: must be a list")
    out = []
    for i, s in enumerate(raw):
        expr = s.get("cel", {}).get("expression") if isinstance(s, Mapping) else None
        if not isinstance(s, Mapping) or not isinstance(s.get("cel"), Mapping):
            raise AllocationError(f"{where}[{i}].cel: must be an object with an expression")
        try:
            out.append((f"{where}[{i}]", compile_selector(expr)))
        except CelError as e:
            raise AllocationError(f"{where}[{i}].cel.expression: {e}") from None
    return out


def _class_parts(name: str, classes: Mapping[str, Mapping[str, Any]], where: str
                 ) -> tuple[list[tuple[str, Selector]], list[Any]]:
    cls = classes.get(name)
    if cls is None:
        raise AllocationError(f"{where}: device class {name} does not exist")
    sels = _compile_all(f"DeviceClass {name}: spec.selectors", class_selectors(cls))
    spec = cls.get("spec")
    config = spec.get("config") if isinstance(spec, Mapping) else None
    return sels, config if isinstance(config, list) else []


def _alternative(where: str, result_name: str, raw: Mapping[str, Any],
                 classes: Mapping[str, Mapping[str, Any]]) -> _Alternative:
    class_name = raw.get("deviceClassName")
    if not isinstance(class_name, str) or not class_name:
        raise AllocationError(f"{where}.deviceClassName: must be a non-empty string")
    csels, cconfig = _class_parts(class_name, classes, where)
    mode = raw.get("allocationMode") or MODE_EXACT
    if mode not in (MODE_EXACT, MODE_ALL):
        raise AllocationError(f"{where}.allocationMode: unsupported value {mode!r}")
    count = raw.get("count", 1) if mode == MODE_EXACT else 0
    if not isinstance(count, int) or isinstance(count, bool) or (mode == MODE_EXACT and count < 1):
        raise AllocationError(f"{where}.count: must be a positive integer")
    tol_raw = raw.get("tolerations")
    try:
        asked = cap.requested(raw.get("capacity"), where)
    except cap.CapacityError as e:
        raise AllocationError(str(e)) from None
    return _Alternative(
        result_name=result_name, class_name=class_name, class_selectors=csels,
        selectors=_compile_all(f"{where}.selectors", raw.get("selectors")),
        mode=mode, count=count, admin=raw.get("adminAccess") is True,
        tolerations=_parse_tolerations(where, tol_raw),
        raw_tolerations=tol_raw if isinstance(tol_raw, list) else [],
        class_config=cconfig, capacity=asked,
    )


def _parse_claim(index: int, claim: Mapping[str, Any],
                 classes: Mapping[str, Mapping[str, Any]]
                 ) -> tuple[list[_Request], list[_Constraint]]:
    key = claim_key(claim)
    spec = claim.get("spec")
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    if devices is None:
        return [], []
    if not isinstance(devices, Mapping):
        raise AllocationError(f"ResourceClaim {key}: spec.devices: must be an object")
    raw_requests = devices.get("requests") or []
    if not isinstance(raw_requests, list) or len(raw_requests) > MAX_REQUESTS:
        raise AllocationError(f"ResourceClaim {key}: spec.devices.requests: must be a list "
                              f"of at most {MAX_REQUESTS}")
    requests = []
    for i, r in enumerate(raw_requests):
        where = f"ResourceClaim {key}: spec.devices.requests[{i}]"
        if not isinstance(r, Mapping) or not isinstance(r.get("name"), str):
            raise AllocationError(f"{where}.name: must be a string")
        name = r["name"]
        alts: list[_Alternative] = []
        if isinstance(r.get("exactly"), Mapping):
            alts.append(_alternative(f"{where}.exactly", name, r["exactly"], classes))
        elif isinstance(r.get("firstAvailable"), list) and r["firstAvailable"]:
            for j, sub in enumerate(r["firstAvailable"]):
                swhere = f"{where}.firstAvailable[{j}]"
                if not isinstance(sub, Mapping) or not isinstance(sub.get("name"), str):
                    raise AllocationError(f"{swhere}.name: must be a string")
                alts.append(_alternative(swhere, f"{name}/{sub['name']}", sub, classes))
        else:
            raise AllocationError(f"{where}: exactly one of exactly, firstAvailable is required")
        requests.append(_Request(index, key, name, alts))
    constraints = []
    raw_constraints = devices.get("constraints") or []
    if not isinstance(raw_constraints, list):
        raise AllocationError(f"ResourceClaim {key}: spec.devices.constraints: must be a list")
    for i, c in enumerate(raw_constraints):
        where = f"ResourceClaim {key}: spec.devices.constraints[{i}]"
        if not isinstance(c, Mapping):
            raise AllocationError(f"{where}: must be an object")
        reqs = c.get("requests") or []
        if not isinstance(reqs, list) or not all(isinstance(x, str) for x in reqs):
            raise AllocationError(f"{where}.requests: must be a list of strings")
        if isinstance(c.get("matchAttribute"), str):
            constraints.append(_Constraint(frozenset(reqs), c["matchAttribute"], False))
        elif isinstance(c.get("distinctAttribute"), str):
            constraints.append(_Constraint(frozenset(reqs), c["distinctAttribute"], True))
        else:
            raise AllocationError(f"{where}: one of matchAttribute, distinctAttribute is required")
    return requests, constraints


# ---- the search ----------------------------------------------------------------------------

class _Budget(Exception):
    pass


class _Shares:
    """Devices shared by capacity (DRAConsumableCapacity on): what other claims consume of
    them (``consumed``) and what this search has taken so far."""

    def __init__(self, consumed: Mapping[DeviceID, Mapping[str, Fraction]] | None,
                 fractional: bool) -> None:
        self.consumed = consumed or {}
        self.fractional = fractional
        self.taken: dict[DeviceID, dict[str, Fraction]] = {}

    def use(self, alt: _Alternative, d: Device) -> cap.Amounts | str:
        # kept on the device: its capacity never changes (a changed slice is a new Device)
        key = (alt.capacity_key, self.fractional)
        hit: cap.Amounts | str | None = d.capacity_cache.get(key)
        if hit is None:
            hit = d.capacity_cache[key] = cap.consumption(
                capacity=d.capacity, driver=d.driver, asked=alt.capacity,
                fractional=self.fractional)
        return hit

    def total(self, d: Device) -> cap.Amounts:
        hit: cap.Amounts | None = d.capacity_cache.get(None)
        if hit is None:
            hit = d.capacity_cache[None] = cap.capacity_values(d.capacity)
        return hit

    def capable(self, alt: _Alternative, d: Device) -> bool:
        """The device can serve the request at all (its policy, its capacities)."""
        if d.multi:
            return not isinstance(self.use(alt, d), str)
        return not alt.capacity or cap.floor_met(capacity=d.capacity, driver=d.driver,
                                                  asked=alt.capacity)

    def fits(self, alt: _Alternative, d: Device) -> bool:
        use = self.use(alt, d)
        return not isinstance(use, str) and cap.fits(
            use, self.total(d), self.consumed.get(d.id), self.taken.get(d.id))

    def take(self, alt: _Alternative, d: Device, sign: int = 1) -> None:
        use = self.use(alt, d)
        assert not isinstance(use, str)
        cap.add(self.taken.setdefault(d.id, {}), use, sign)


class _Search:
    def __init__(self, requests: list[_Request], constraints: list[list[_Constraint]],
                 candidates: list[list[list[Device] | None]], budget: int,
                 counters: Counters | None = None,
                 left: dict[tuple[PoolID, str], dict[str, int]] | None = None,
                 deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 shares: _Shares | None = None) -> None:
        self.shares = shares
        self.requests = requests
        self.deadline = deadline
        self.clock = clock
        self.counters = counters
        self.left = left or {}
        self.constraints = constraints
        self.candidates = candidates
        self.budget = budget
        self.picked: set[DeviceID] = set()
        self.chosen: list[tuple[int, list[Device]]] = []
        # per claim, per constraint: values seen (attribute value -> count)
        self.values: list[list[dict[object, int]]] = [[{} for _ in cs] for cs in constraints]

    def _step(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _Budget()
        if self.deadline is not None and self.budget % DEADLINE_CHECK_EVERY == 0 and \
                self.clock() > self.deadline:
            raise _Budget()

    def _add(self, req: _Request, alt: _Alternative, d: Device) -> list[int] | None:
        """Take ``d`` for ``req`` if the claim's constraints allow; the constraints applied."""
        cs = self.constraints[req.claim_index]
        vals = self.values[req.claim_index]
        applied: list[int] = []
        for ci, c in enumerate(cs):
            if not c.applies(req.name, alt.result_name):
                continue
            v = d.attribute(c.attribute)
            seen = vals[ci]
            ok = v is not None and ((v not in seen) if c.distinct else (not seen or v in seen))
            if not ok:
                self._undo(req, alt, d, applied, held=False)
                return None
            seen[v] = seen.get(v, 0) + 1
            applied.append(ci)
        if not alt.admin:  # adminAccess holds nothing
            if self.shares is not None and d.multi:
                if not self.shares.fits(alt, d):
                    self._undo(req, alt, d, applied, held=False)
                    return None
                self.shares.take(alt, d)
                return applied
            if self.left and self.counters is not None:
                use = self.counters.consumption(d)
                if use:
                    if not fits(use, (d.driver, d.pool), self.left):
                        self._undo(req, alt, d, applied, held=False)
                        return None
                    take(use, (d.driver, d.pool), self.left)
            self.picked.add(d.id)
        return applied

    def _undo(self, req: _Request, alt: _Alternative, d: Device, applied: Sequence[int], *,
              held: bool) -> None:
        cs = self.constraints[req.claim_index]
        vals = self.values[req.claim_index]
        for ci in applied:
            v = d.attribute(cs[ci].attribute)
            n = vals[ci].get(v, 0) - 1
            if n <= 0:
                vals[ci].pop(v, None)
            else:
                vals[ci][v] = n
        if held and not alt.admin and self.shares is not None and d.multi:
            self.shares.take(alt, d, -1)
        elif held and not alt.admin:
            self.picked.discard(d.id)
            if self.left and self.counters is not None:
                use = self.counters.consumption(d)
                if use:
                    take(use, (d.driver, d.pool), self.left, -1)

    def run(self, i: int = 0) -> bool:
        if i == len(self.requests):
            return True
        req = self.requests[i]
        for ai, alt in enumerate(req.alternatives):
            cands = self.candidates[i][ai]
            if cands is None:
                continue
            need = len(cands) if alt.mode == MODE_ALL else alt.count
            if self._pick(i, ai, alt, cands, 0, need, []):
                return True
        return False

    def _pick(self, i: int, ai: int, alt: _Alternative, cands: list[Device], start: int,
              need: int, taken: list[Device]) -> bool:
        self._step()
        req = self.requests[i]
        if need == 0:
            self.chosen.append((ai, list(taken)))
            if self.run(i + 1):
                return True
            self.chosen.pop()
            return False
        all_mode = alt.mode == MODE_ALL
        for j in range(start, len(cands) - need + 1):
            d = cands[j]
            applied = None if (d.id in self.picked and not alt.admin) else self._add(req, alt, d)
            if applied is None:
                if all_mode:  # every device or nothing
                    return False
                continue
            taken.append(d)
            if self._pick(i, ai, alt, cands, j + 1, need - 1, taken):
                return True
            taken.pop()
            self._undo(req, alt, d, applied, held=True)
            if all_mode:
                return False
        return False


def _tolerated(alt: _Alternative, d: Device) -> bool:
    for t in d.taints:
        if t.effect in TAINT_EFFECTS and not any(tol.tolerates(t) for tol in alt.tolerations):
            return False
    return True


def _selected(alt: _Alternative, d: Device, claim: str, req_name: str) -> bool:
    cache = d.selected
    joint = cache.get(alt.selected_key)
    if joint is not None:
        return joint
    for where, sel in alt.all_selectors:
        hit = cache.get(sel.expression)
        if hit is None:
            try:
                hit = cache[sel.expression] = sel.matches(d.env)
            except CelError as e:
                raise AllocationError(
                    f"{where}: device {d.driver}/{d.pool}/{d.name}: {e}") from None
        if not hit:
            cache[alt.selected_key] = False
            return False
    cache[alt.selected_key] = True
    return True


def _node_selector(devices: Sequence[Device], node_name: str) -> dict[str, Any] | None:
    if any(d.node_name is not None for d in devices):
        return {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    raws = [d.node_selector_raw for d in devices if d.node_selector_raw is not None]
    if not raws:
        return None
    if all(r == raws[0] for r in raws):
        return dict(raws[0])
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


def _simple_alternative(prepared: Prepared) -> tuple[_Request, _Alternative] | None:
    """One claim, one ExactCount request without alternatives or constraints (the common
    shape), or None."""
    if len(prepared.requests) != 1 or prepared.constraints[0]:
        return None
    req = prepared.requests[0]
    if len(req.alternatives) != 1:
        return None
    alt = req.alternatives[0]
    if alt.mode != MODE_EXACT:
        return None
    return req, alt


def first_fit_shape(prepared: Prepared) -> _Alternative | None:
    """The alternative when the claims are the common shape (``_simple_alternative``) with
    no adminAccess, no tolerations and no capacity requests: ``_fast_path`` then takes the
    first ``count`` devices its selectors select that no claim holds."""
    simple = _simple_alternative(prepared)
    if simple is None:
        return None
    alt = simple[1]
    if alt.admin or alt.raw_tolerations or alt.capacity:
        return None
    return alt


def first_fit_accepts(prepared: Prepared, d: Device, *, device_taints: bool) -> bool:
    """For claims of :func:`first_fit_shape`: whether ``_fast_path`` would take ``d`` were
    it free (its selectors select it, its taints are allowed).  Raises AllocationError when
    a selector fails on it, as the allocator does."""
    simple = _simple_alternative(prepared)
    assert simple is not None
    req, alt = simple
    return _selected(alt, d, req.claim, req.name) and (
        not d.taints or not device_taints or _tolerated(alt, d))


def allocated_at(prepared: Prepared, picks: Sequence[Device], node_name: str, *,
                 device_taints: bool, shape: _Alternative | None = None) -> Allocated:
    """What ``_fast_path`` returns when it takes ``picks`` for claims of
    :func:`first_fit_shape` (``shape``, worked out when not given): the allocation, built
    on first use."""
    alt = shape if shape is not None else first_fit_shape(prepared)
    assert alt is not None
    config = prepared.configs[0]
    return Allocated(lambda: [_build_allocation(
        [(alt, picks)], config, node_name, device_taints, None)], 0)


def selectors_checked(prepared: Prepared, inventory: Inventory,
                      node: Mapping[str, Any]) -> bool:
    """Every selector of every request evaluates without a CEL error on every device of the
    node (as a full search would evaluate them); remembered in ``inventory.checked``.
    False when one errs: the caller then runs the allocator, which reports it."""
    node_name = str((node.get("metadata") or {}).get("name") or "")
    devices: Sequence[Device] | None = None
    for req in prepared.requests:
        for alt in req.alternatives:
            key = (node_name, alt.selected_key)
            if key in inventory.checked:
                continue
            if devices is None:
                devices = inventory.devices_for_node(node)
            try:
                for d in devices:
                    _selected(alt, d, req.claim, req.name)
            except AllocationError:
                return False
            inventory.checked.add(key)
    return True


def _fast_path(prepared: Prepared, devices: Sequence[Device], in_use: AbstractSet[DeviceID],
               node_name: str, device_taints: bool, counters: Counters | None = None,
               left: dict[tuple[PoolID, str], dict[str, int]] | None = None,
               partitionable: bool = True, shares: _Shares | None = None
               ) -> Allocated | None:
    """The common shape (``_simple_alternative``): the first free devices in order are what
    the search would pick.  None: no such devices, or another shape."""
    simple = _simple_alternative(prepared)
    if simple is None:
        return None
    req, alt = simple
    taken: list[Device] = []
    # Partitionable devices: take the first ones whose counters still fit, counting what the
    # ones taken before consume (the search's first answer, when there is one).
    tally = {k: dict(v) for k, v in left.items()} if left else None
    for d in devices:
        if (alt.admin or d.id not in in_use) and _selected(alt, d, req.claim, req.name) and (
                not d.taints or not device_taints or _tolerated(alt, d)):
            if shares is not None and (alt.capacity or d.multi) and not (
                    shares.fits(alt, d) if d.multi and not alt.admin
                    else shares.capable(alt, d)):
                continue
            if counters is not None:
                use = counters.consumption(d)
                if use:
                    pid = (d.driver, d.pool)
                    if not partitionable or pid in counters.invalid:
                        continue
                    if not alt.admin:
                        if tally is None or not fits(use, pid, tally):
                            continue
                        take(use, pid, tally)
            taken.append(d)
            if len(taken) == alt.count:
                config = prepared.configs[0]
                return Allocated(lambda: [_build_allocation(
                    [(alt, taken)], config, node_name, device_taints, shares)], 0)
    return None


def _build_allocation(picks: Sequence[tuple[_Alternative, Sequence[Device]]],
                      claim_config: list[Any], node_name: str,
                      device_taints: bool = True, shares: _Shares | None = None
                      ) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    config: list[dict[str, Any]] = []
    all_devs: list[Device] = []
    for alt, devs in picks:
        for c in alt.class_config:
            if isinstance(c, Mapping):
                config.append({"source": "FromClass", "requests": [alt.result_name],
                               **{k: v for k, v in c.items() if k != "requests"}})
        for d in devs:
            r: dict[str, Any] = {"request": alt.result_name, "driver": d.driver,
                                 "pool": d.pool, "device": d.name}
            if alt.admin:
                r["adminAccess"] = True
            if alt.raw_tolerations and d.taints and device_taints:
                r["tolerations"] = list(alt.raw_tolerations)
            if shares is not None and d.multi and not alt.admin:
                use = shares.use(alt, d)
                assert not isinstance(use, str)
                r["consumedCapacity"] = {
                    name: cap.format_quantity(v, _capacity_text(d, name))
                    for name, v in use.items()}
                r["shareID"] = str(uuid.uuid4())
            results.append(r)
            all_devs.append(d)
    for c in claim_config:
        if isinstance(c, Mapping):
            config.append({"source": "FromClaim", **dict(c)})
    devices_part: dict[str, Any] = {"results": results}
    if config:
        devices_part["config"] = config
    alloc: dict[str, Any] = {"devices": devices_part}
    sel = _node_selector(all_devs, node_name)
    if sel is not None:
        alloc["nodeSelector"] = sel
    return alloc


def _capacity_text(d: Device, name: str) -> Any:
    entry = d.capacity.get(name)
    return entry.get("value") if isinstance(entry, Mapping) else ""


@dataclass(slots=True)
class Prepared:
    """Claims parsed and their classes' selectors compiled: once per pod, not per node."""

    claims: Sequence[Mapping[str, Any]]
    requests: list[_Request]
    constraints: list[list[_Constraint]]
    configs: list[list[Any]]


def prepare(claims: Sequence[Mapping[str, Any]],
            classes: Mapping[str, Mapping[str, Any]]) -> Prepared:
    """Parse ``claims``; AllocationError names the claim or class and the field."""
    requests: list[_Request] = []
    constraints: list[list[_Constraint]] = []
    configs: list[list[Any]] = []
    for ci, claim in enumerate(claims):
        reqs, cons = _parse_claim(ci, claim, classes)
        requests.extend(reqs)
        constraints.append(cons)
        spec = claim.get("spec") or {}
        cfg = (spec.get("devices") or {}).get("config") if isinstance(spec, Mapping) else None
        configs.append(cfg if isinstance(cfg, list) else [])
    return Prepared(claims, requests, constraints, configs)


def allocate(
    claims: Sequence[Mapping[str, Any]] | Prepared,
    *,
    node: Mapping[str, Any],
    inventory: Inventory,
    classes: Mapping[str, Mapping[str, Any]] | None = None,
    in_use: AbstractSet[DeviceID],
    step_budget: int = DEFAULT_STEP_BUDGET,
    counters: Counters | None = None,
    device_taints: bool = True,
    partitionable: bool = True,
    held: Mapping[str, int] | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    consumable: bool = True,
    fractional: bool = True,
    consumed: Mapping[DeviceID, Mapping[str, Fraction]] | None = None,
) -> Outcome:
    """Allocate devices of ``node`` to every claim in ``claims`` (none yet allocated), or say
    why not.  Raises AllocationError when a claim or class is malformed (or a selector
    fails on one of the node's devices).  ``device_taints`` and ``partitionable`` are the
    DRADeviceTaints and DRAPartitionableDevices feature gates: with the first off, device
    taints are ignored; with the second off, devices that consume shared counters are never
    allocated (as upstream's allocator does with the feature disabled).  ``deadline`` (on
    ``clock``) bounds the search in time besides the step budget (DRASchedulerFilterTimeout):
    past it the node is Unfit with upstream's ``timed out trying to allocate devices``.
    ``consumable`` and ``fractional`` are the DRAConsumableCapacity and
    DRAFractionalCapacityRange gates: with the first on, a device with
    ``allowMultipleAllocations`` is shared by capacity (``consumed``: what the claims already
    allocated consume of each such device; ``in_use`` then holds only whole allocations) and
    its results carry ``consumedCapacity`` and a ``shareID``; with it off such a device is
    allocated whole and ``capacity.requests`` are not read."""
    prepared = claims if isinstance(claims, Prepared) else prepare(claims, classes or {})
    node_name = str((node.get("metadata") or {}).get("name") or "")
    devices = inventory.devices_for_node(node)
    shares = _Shares(consumed, fractional) if consumable else None
    left = counters.left(devices, in_use) if counters and partitionable else {}
    blocked: dict[DeviceID, str] = {}  # counter-consuming devices that cannot be taken now
    if left or (counters and (counters.invalid or not partitionable)):
        assert counters is not None
        for d in devices:
            use = counters.consumption(d)
            if not use:
                continue
            pid = (d.driver, d.pool)
            if not partitionable:
                blocked[d.id] = (f"resource pool {d.pool}: device {d.name} consumes shared "
                                 f"counters and the DRAPartitionableDevices feature is disabled")
            elif pid in counters.invalid:
                blocked[d.id] = f"resource pool {d.pool} is invalid: {counters.invalid[pid]}"
            elif d.id not in in_use and not fits(use, pid, left):
                blocked[d.id] = "shared counters"
        # greedy with counters is not exact: a failure here takes the general search
        fast = _fast_path(prepared, devices, in_use, node_name, device_taints, counters, left,
                          partitionable, shares)
        if fast is not None:
            return fast
    else:
        simple = _simple_alternative(prepared)
        if (held is not None and simple is not None and not simple[1].admin
                and (node_name, simple[1].selected_key) in inventory.checked
                and inventory.all_held(node_name, held)):
            # Every device of the node is held and none fails the selectors: nothing to look
            # at (``held`` is ``Inventory.held_by_node(in_use)``, counted once per pod).
            def why_held() -> list[str]:
                out = _search_all(prepared, node_name, devices, in_use, step_budget,
                                  counters=counters, left=left, blocked=blocked,
                                  device_taints=device_taints, shares=shares)
                return out.details if isinstance(out, Unfit) else []
            return Unfit(explain=why_held)
        fast = _fast_path(prepared, devices, in_use, node_name, device_taints, shares=shares)
        if fast is not None:
            return fast
        if simple is not None:
            # The fast path is exact for this shape: the search below would fail too.  Only
            # the selectors are checked on every device (a CEL error is raised as the search
            # would raise it); why it fails is worked out if someone reads it (explain).
            req, alt = simple
            for d in devices:
                _selected(alt, d, req.claim, req.name)
            inventory.checked.add((node_name, alt.selected_key))

            def explain() -> list[str]:
                out = _search_all(prepared, node_name, devices, in_use, step_budget,
                                  counters=counters, left=left, blocked=blocked,
                                  device_taints=device_taints, shares=shares)
                return out.details if isinstance(out, Unfit) else []
            return Unfit(explain=explain)
    return _search_all(prepared, node_name, devices, in_use, step_budget, counters=counters,
                       left=left, blocked=blocked, device_taints=device_taints,
                       deadline=deadline, clock=clock, shares=shares)


def _search_all(prepared: Prepared, node_name: str, devices: Sequence[Device],
                in_use: AbstractSet[DeviceID], step_budget: int, *, counters: Counters | None,
                left: dict[tuple[PoolID, str], dict[str, int]], blocked: dict[DeviceID, str],
                device_taints: bool, deadline: float | None = None,
                clock: Callable[[], float] = time.monotonic,
                shares: _Shares | None = None) -> Outcome:
    """The general path: candidates per request and alternative, then the search."""
    claims = prepared.claims
    requests, constraints, configs = (prepared.requests, prepared.constraints,
                                      prepared.configs)
    candidates: list[list[list[Device] | None]] = []
    details: list[str] = []
    for req in requests:
        per_alt: list[list[Device] | None] = []
        why: list[str] = []
        for alt in req.alternatives:
            matching = [d for d in devices if _selected(alt, d, req.claim, req.name)]
            if shares is not None and (alt.capacity or any(d.multi for d in matching)):
                matching = [d for d in matching if shares.capable(alt, d)]
            usable = [d for d in matching
                      if not d.taints or not device_taints or _tolerated(alt, d)]
            free = usable if alt.admin or not in_use else [
                d for d in usable if d.id not in in_use]
            spent = 0  # shared devices without enough capacity left
            if shares is not None and not alt.admin:
                before = len(free)
                free = [d for d in free if not d.multi or shares.fits(alt, d)]
                spent = before - len(free)
            if blocked:
                invalid = [why_ for d in matching if (why_ := blocked.get(d.id, "")) not in (
                    "", "shared counters")]
                usable = [d for d in usable if not blocked.get(d.id, "").startswith(
                    "resource pool")]
                free = [d for d in free if d.id not in blocked or (
                    alt.admin and not blocked[d.id].startswith("resource pool"))]
            else:
                invalid = []
            label = f"claim {req.claim}, request {alt.result_name}"
            if alt.mode == MODE_ALL:
                incomplete = [d for d in matching if d.pool_ref is not None
                              and d.pool_ref.incomplete]
                if incomplete:
                    why.append(f"{label}: asks for all devices, but resource pool "
                               f"{incomplete[0].pool} is currently being updated")
                    per_alt.append(None)
                elif not matching:
                    why.append(f"{label}: asks for all devices, but none match on this node")
                    per_alt.append(None)
                elif len(free) != len(matching):
                    why.append(f"{label}: asks for all {len(matching)} devices, "
                               f"{len(matching) - len(free)} of them "
                               f"{'tainted' if len(usable) < len(matching) else 'allocated'}")
                    per_alt.append(None)
                else:
                    per_alt.append(free)
                continue
            if len(free) < alt.count:
                if not matching:
                    why.append(f"{label}: no device of class {alt.class_name} matches the "
                               f"selectors on this node")
                elif len(matching) < alt.count:
                    why.append(f"{label}: needs {alt.count}, only {len(matching)} match on "
                               f"this node")
                elif invalid and len(usable) < alt.count:
                    why.append(f"{label}: needs {alt.count}, {len(matching)} match but "
                               f"{invalid[0]}")
                elif len(usable) < alt.count:
                    why.append(f"{label}: needs {alt.count}, {len(matching)} match but "
                               f"{len(matching) - len(usable)} have untolerated taints")
                else:
                    shared = " or their shared counters used up" if blocked else ""
                    if spent:
                        shared += " or their capacity used up"
                    why.append(f"{label}: needs {alt.count}, {len(matching)} match, "
                               f"{len(free)} free (the others are allocated{shared})")
                per_alt.append(None)
            else:
                per_alt.append(free)
        candidates.append(per_alt)
        details.extend(why if all(c is None for c in per_alt) else [])
    if details:
        return Unfit(details)
    search = _Search(requests, constraints, candidates, step_budget, counters, left,
                     deadline, clock, shares)
    try:
        ok = search.run()
    except _Budget:
        return Unfit([REASON_TIMEOUT], timed_out=True)
    if not ok:
        return Unfit(["the free devices do not satisfy the claims' constraints together "
                      "(matchAttribute/distinctAttribute), or two requests need the same device"
                      + (" or the same shared counters" if left else "")])
    allocations: list[dict[str, Any]] = []
    rank = 0
    per_claim: list[list[tuple[_Request, _Alternative, list[Device]]]] = [[] for _ in claims]
    for req, (ai, devs) in zip(requests, search.chosen):
        per_claim[req.claim_index].append((req, req.alternatives[ai], devs))
        rank += ai
    for ci, picks in enumerate(per_claim):
        allocations.append(_build_allocation([(alt, devs) for _req, alt, devs in picks],
                                             configs[ci], node_name, device_taints, shares))
    return Allocated(allocations, rank)
