"""Consumable capacity (DRAConsumableCapacity, DRAFractionalCapacityRange): how much of a
shared device's capacity one request consumes.

A device with ``allowMultipleAllocations: true`` may be allocated to several requests (of one
claim or of several) while, per capacity name, the amounts they consume add up to at most the
capacity's ``value``.  What a request consumes of one capacity:

- the request names it (``capacity.requests``): the amount, raised to the device's
  ``requestPolicy``: with ``validValues`` the smallest listed value not below it (above every
  value: the device cannot serve the request); with ``validRange`` at least ``min``, rounded
  up to ``min + n*step`` when a step is set, and never above ``max`` (else the device cannot
  serve it); without a policy the amount as asked;
- the request does not name it: the policy's ``default``, else the whole capacity.

Arithmetic is exact integers of the quantities (``resource.Quantity.Value()``, rounded up)
unless the DRAFractionalCapacityRange gate is on and the range has a fractional min, max or
step: then thousandths (milli-units), as upstream does.  A request naming a capacity the
device lacks cannot use the device.  For a device without the flag a capacity request is a
floor: the device's capacity must be at least the amount.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from scheduler.objects.quantity import QuantityError, parse_quantity

Amounts = dict[str, Fraction]

_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


class CapacityError(ValueError):
    """A quantity of a claim's capacity request that does not parse."""


def quantity(raw: Any) -> Fraction | None:
    """A quantity (string or number) as a Fraction, or None when malformed."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return None
    try:
        return parse_quantity(raw)
    except (QuantityError, ValueError, ZeroDivisionError):
        return None


def requested(raw: Any, where: str) -> Amounts:
    """``capacity.requests`` of a request: name -> amount; CapacityError names the field."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise CapacityError(f"{where}.capacity: must be an object")
    reqs = raw.get("requests")
    if reqs is None:
        return {}
    if not isinstance(reqs, Mapping):
        raise CapacityError(f"{where}.capacity.requests: must be an object")
    out: Amounts = {}
    for name, q in reqs.items():
        v = quantity(q)
        if v is None or v < 0:
            raise CapacityError(f"{where}.capacity.requests[{name}]: not a valid quantity: {q!r}")
        out[str(name)] = v
    return out


def _ceil(v: Fraction, unit: Fraction) -> Fraction:
    """``v`` rounded up to a multiple of ``unit``."""
    return -(-v // unit) * unit


def _entry(capacity: Mapping[str, Any], name: str, driver: str) -> Mapping[str, Any] | None:
    e = capacity.get(name)
    if e is None and "/" in name:
        domain, _, ident = name.rpartition("/")
        if domain == driver:
            e = capacity.get(ident)
    return e if isinstance(e, Mapping) else None


def capacity_values(capacity: Mapping[str, Any]) -> Amounts:
    """The device's capacities (name -> value); malformed ones left out."""
    out: Amounts = {}
    for name, e in capacity.items():
        v = quantity(e.get("value")) if isinstance(e, Mapping) else None
        if v is not None:
            out[str(name)] = v
    return out


def _consume_one(entry: Mapping[str, Any], total: Fraction, asked: Fraction | None,
                 fractional: bool) -> Fraction | None:
    """What one request consumes of one capacity, or None (the policy refuses it)."""
    policy = entry.get("requestPolicy")
    policy = policy if isinstance(policy, Mapping) else {}
    if asked is None:
        default = quantity(policy.get("default"))
        return default if default is not None else total
    rng = policy.get("validRange")
    values = policy.get("validValues")
    if isinstance(rng, Mapping) and quantity(rng.get("min")) is not None:
        lo = quantity(rng.get("min"))
        hi = quantity(rng.get("max"))
        step = quantity(rng.get("step"))
        assert lo is not None
        exact = [x for x in (lo, hi, step) if x is not None]
        unit = (Fraction(1, 1000) if fractional and any(x.denominator != 1 for x in exact)
                else Fraction(1))
        lo, asked = _ceil(lo, unit), _ceil(asked, unit)
        hi = _ceil(hi, unit) if hi is not None else None
        step = _ceil(step, unit) if step is not None else None
        v = max(asked, lo)
        if step:
            v = lo + _ceil(v - lo, step)
        if hi is not None and v > hi:
            return None
        return v
    if isinstance(values, list) and values:
        for raw in values:
            q = quantity(raw)
            if q is not None and q >= asked:
                return q
        return None
    return asked


def consumption(*, capacity: Mapping[str, Any], driver: str, asked: Mapping[str, Fraction],
                fractional: bool) -> Amounts | str:
    """What a request consumes of a shared device, every capacity of the device named (zero
    included), or why the device cannot serve it."""
    out: Amounts = {}
    for name in asked:
        if _entry(capacity, name, driver) is None:
            return f"has no capacity {name}"
    for name, entry in capacity.items():
        if not isinstance(entry, Mapping):
            continue
        total = quantity(entry.get("value"))
        if total is None:
            continue
        a = asked.get(name)
        if a is None:
            a = asked.get(f"{driver}/{name}")
        v = _consume_one(entry, total, a, fractional)
        if v is None or v < 0:  # a negative default or range: malformed, never a credit
            if a is None:
                return f"its request policy for {name} has an invalid default"
            return f"its request policy for {name} does not allow {format_quantity(a)}"
        out[str(name)] = v
    return out


def floor_met(*, capacity: Mapping[str, Any], driver: str, asked: Mapping[str, Fraction]
              ) -> bool:
    """A device without allowMultipleAllocations: has it at least the capacity asked?"""
    for name, a in asked.items():
        e = _entry(capacity, name, driver)
        v = quantity(e.get("value")) if e is not None else None
        if v is None or v < a:
            return False
    return True


def fits(use: Mapping[str, Fraction], total: Mapping[str, Fraction],
         *held: Mapping[str, Fraction] | None) -> bool:
    """Whether ``use`` fits in ``total`` after every ``held``."""
    for name, v in use.items():
        if not v:
            continue
        left = total.get(name)
        if left is None:
            return False
        left -= v
        for h in held:
            if h:
                x = h.get(name)
                if x:
                    left -= x
        if left < 0:
            return False
    return True


def add(into: dict[str, Fraction], use: Mapping[str, Fraction], sign: int = 1) -> None:
    for name, v in use.items():
        n = into.get(name, Fraction(0)) + sign * v
        if n:
            into[name] = n
        else:
            into.pop(name, None)


def format_quantity(value: Fraction, like: Any = "") -> str:
    """A canonical quantity string: binary suffixes when ``like`` (the device's capacity
    text) uses them, else the largest decimal suffix that keeps an integer (or milli)."""
    text = str(like)
    if value == 0:
        return "0"
    if value.denominator == 1 and text.endswith(_BINARY[1:]) and value >= 1024:
        n, p = value.numerator, 0
        while p < 6 and n % 1024 == 0:
            n, p = n // 1024, p + 1
        return f"{n}{_BINARY[p]}"
    if value.denominator != 1:
        milli = value * 1000
        if milli.denominator == 1:
            return f"{milli.numerator}m"
        nano = _ceil(value * 10**9, Fraction(1))
        return f"{nano.numerator}n"
    best = 0
    for exp in sorted(_DECIMAL):
        if value % (10 ** exp) == 0:
            best = exp
    return f"{value.numerator // 10 ** best}{_DECIMAL[best]}"


def consumed_of(allocation: Mapping[str, Any] | None) -> list[tuple[tuple[str, str, str], Amounts]]:
    """The shared devices of an allocation and what each result consumes of them."""
    if not isinstance(allocation, Mapping):
        return []
    devices = allocation.get("devices")
    results = devices.get("results") if isinstance(devices, Mapping) else None
    out: list[tuple[tuple[str, str, str], Amounts]] = []
    for r in results if isinstance(results, list) else ():
        if not isinstance(r, Mapping) or not isinstance(r.get("consumedCapacity"), Mapping):
            continue
        ident = (r.get("driver"), r.get("pool"), r.get("device"))
        if not all(isinstance(x, str) for x in ident):
            continue
        use: Amounts = {}
        for name, q in r["consumedCapacity"].items():
            v = quantity(q)
            if v is not None:
                use[str(name)] = v
        out.append((ident, use))  # type: ignore[arg-type]
    return out
