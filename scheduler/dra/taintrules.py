"""DeviceTaintRules (resource.k8s.io/v1, DRADeviceTaintRules): taints an administrator adds
to devices without touching the driver's ResourceSlices.

Why: a rule has the same effect as if its taint were in the slice; kube-scheduler's
DynamicResources reads slices through a tracker that adds the taints of every rule whose
selector matches a device, so an untolerated ``NoSchedule``/``NoExecute`` rule taint keeps
the device from allocation like a driver's own taint.  Here :class:`TaintRules` is kept
from the informer's events and :meth:`TaintRules.apply` sets each device's effective
``taints`` (its slice's taints, then the matching rules' in rule-name order) whenever a
slice or a rule changed; the allocator reads ``Device.taints`` as before.

A rule selects devices by ``driver``, ``pool`` and ``device`` name, every field set must
match; an empty selector matches every device, a rule without a selector none.  A malformed
rule is skipped and named in :attr:`TaintRules.new_problems` (object and field).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.dra.inventory import Device, DeviceTaint, Inventory
from scheduler.objects.errors import ObjectError

KIND = "DeviceTaintRule"


@dataclass(frozen=True, slots=True)
class TaintRule:
    name: str
    taint: DeviceTaint
    selects: bool  # a deviceSelector is present (without one the rule matches nothing)
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def matches(self, d: Device) -> bool:
        return (self.selects
                and (self.driver is None or self.driver == d.driver)
                and (self.pool is None or self.pool == d.pool)
                and (self.device is None or self.device == d.name))


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def parse_rule(obj: Mapping[str, Any]) -> TaintRule:
    """The rule of a DeviceTaintRule object, or ObjectError naming the field."""
    name = _name(obj)

    def err(fld: str, msg: str) -> ObjectError:
        return ObjectError(msg, kind=KIND, name=name, field=fld)

    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise err("spec", "must be an object")
    taint = spec.get("taint")
    if not isinstance(taint, Mapping):
        raise err("spec.taint", "must be an object")
    key, effect, value = taint.get("key"), taint.get("effect"), taint.get("value")
    if not isinstance(key, str) or not key:
        raise err("spec.taint.key", "must be a non-empty string")
    if not isinstance(effect, str) or not effect:
        raise err("spec.taint.effect", "must be a non-empty string")
    if value is not None and not isinstance(value, str):
        raise err("spec.taint.value", "must be a string")
    sel = spec.get("deviceSelector")
    if sel is not None and not isinstance(sel, Mapping):
        raise err("spec.deviceSelector", "must be an object")
    fields: dict[str, str | None] = {}
    for f in ("driver", "pool", "device"):
        v = sel.get(f) if sel is not None else None
        if v is not None and not isinstance(v, str):
            raise err(f"spec.deviceSelector.{f}", "must be a string")
        fields[f] = v or None
    return TaintRule(name=name, taint=DeviceTaint(key, value or "", effect),
                     selects=sel is not None, **fields)


class TaintRules:
    """The cluster's DeviceTaintRules, kept from informer events (or a listing).

    ``version`` changes whenever the set of parsed rules changes, so a reader re-applies
    them only then (or when the inventory is a new one)."""

    def __init__(self) -> None:
        self._rules: dict[str, TaintRule] = {}
        self._problems: dict[str, str] = {}
        self._rv: dict[str, str] = {}
        self.version = 0
        self.new_problems: list[str] = []

    @property
    def rules(self) -> list[TaintRule]:
        return [self._rules[k] for k in sorted(self._rules)]

    def rule_added(self, obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        meta = obj.get("metadata")
        rv = str((meta if isinstance(meta, Mapping) else {}).get("resourceVersion") or "")
        if rv and self._rv.get(name) == rv:
            return  # a resync of what we have
        self._rv[name] = rv
        try:
            rule = parse_rule(obj)
        except ObjectError as e:
            self._problems[name] = str(e)
            self.new_problems.append(str(e))
            if self._rules.pop(name, None) is not None:
                self.version += 1
            return
        self._problems.pop(name, None)
        if self._rules.get(name) != rule:
            self._rules[name] = rule
            self.version += 1

    def rule_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if _name(old) != _name(new):
            self.rule_deleted(old)
        self.rule_added(new)

    def rule_deleted(self, obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        self._rv.pop(name, None)
        self._problems.pop(name, None)
        if self._rules.pop(name, None) is not None:
            self.version += 1

    def replace(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """Take a full listing (when no informer events are delivered)."""
        seen = set()
        for obj in objs:
            seen.add(_name(obj))
            self.rule_added(obj)
        for name in [n for n in self._rv if n not in seen]:
            self.rule_deleted({"metadata": {"name": name}})

    def apply(self, inventory: Inventory) -> None:
        """Set every device's effective ``taints`` (the allocator reads them)."""
        rules = self.rules
        for pool in inventory.pools.values():
            for d in pool.devices:
                extra = tuple(r.taint for r in rules if r.matches(d)) if rules else ()
                d.taints = d.slice_taints + extra if extra else d.slice_taints
