"""Kubernetes resource quantities (``k8s.io/apimachinery`` ``resource.Quantity``).

Quantities arrive as strings such as ``"500m"``, ``"1.5Gi"`` or ``"1e3"`` (or as bare YAML
numbers). The grammar, the rounding of sub-nano values up to 1n and the int64 cap follow
upstream so ``requests.cpu: 0.1n`` or absurd exponents behave the same as in kube-scheduler.

Internally a parsed quantity is an integer count of nano-units: every accepted quantity is a
multiple of 1e-9 after upstream rounding, so sums stay exact without Fractions on hot paths.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "QuantityError",
    "parse_quantity",
    "parse_quantity_nano",
    "milli_value",
    "int_value",
    "nano_to_milli",
    "nano_to_int",
]

_NANO = 10**9
_INT64_MAX = 2**63 - 1
_MAX_NANO = _INT64_MAX * _NANO

# Number: optional sign, digits, optional fraction (upstream tolerates "1." and ".5").
# Suffix: a run of suffix letters, optionally followed by a signed exponent.
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*(?:[+-]?[0-9]+)?)")

# suffix -> (base, exponent)
_SUFFIXES: dict[str, tuple[int, int]] = {
    "": (10, 0),
    "n": (10, -9),
    "u": (10, -6),
    "m": (10, -3),
    "k": (10, 3),
    "M": (10, 6),
    "G": (10, 9),
    "T": (10, 12),
    "P": (10, 15),
    "E": (10, 18),
    "Ki": (2, 10),
    "Mi": (2, 20),
    "Gi": (2, 30),
    "Ti": (2, 40),
    "Pi": (2, 50),
    "Ei": (2, 60),
}
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)")


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def _suffix(s: str, suffix: str) -> tuple[int, int]:
    found = _SUFFIXES.get(suffix)
    if found is not None:
        return found
    m = _EXPONENT_RE.fullmatch(suffix)
    if m is None:
        raise QuantityError(
            f'invalid quantity "{s}": unknown suffix "{suffix}" '
            "(expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3)"
        )
    exp = int(m.group(1))
    # upstream parses the exponent as a 32-bit integer
    if not -(2**31) <= exp < 2**31:
        raise QuantityError(f'invalid quantity "{s}": exponent out of range')
    return 10, exp


def _round_cap(mag_num: int, mag_den: int) -> int:
    """Magnitude num/den in units -> nano units, rounded up and capped like upstream."""
    nano, rem = divmod(mag_num * _NANO, mag_den)
    if rem:
        nano += 1
    return min(nano, _MAX_NANO)


@lru_cache(maxsize=8192)
def _parse_str_nano(s: str) -> int:
    if not s:
        raise QuantityError('invalid quantity "": empty string')
    m = _QUANTITY_RE.fullmatch(s)
    if m is None:
        raise QuantityError(f'invalid quantity "{s}": quantities must match the regular '
                            r"expression '^([+-]?[0-9.]+)([eEinumkMGTP]*[-+]?[0-9]*)$'")
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    base, exp = _suffix(s, suffix)
    digits = (whole + frac).lstrip("0")
    if not digits:
        return 0
    num = int(digits)
    den = 10 ** len(frac)
    if base == 2:
        num <<= exp
    elif exp >= 0:
        if exp > 60:  # far beyond int64: the cap applies
            return -_MAX_NANO if sign == "-" else _MAX_NANO
        num *= 10**exp
    else:
        if -exp > 60:  # far below 1n: rounds up to 1n
            return -1 if sign == "-" else 1
        den *= 10**-exp
    nano = _round_cap(num, den)
    return -nano if sign == "-" else nano


def parse_quantity_nano(value: object) -> int:
    """Parse a quantity into an integer number of nano-units (1 == 1e-9).  ``value`` is
    any JSON value from the wire: what is not a string or a number is a QuantityError."""
    if isinstance(value, str):
        return _parse_str_nano(value)
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}: booleans are not quantities")
    if isinstance(value, int):
        mag = min(abs(value) * _NANO, _MAX_NANO)
        return -mag if value < 0 else mag
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"invalid quantity {value!r}: not a finite number")
        # repr gives the shortest decimal that round-trips, i.e. what the user typed
        f = Fraction(repr(value))
        nano = _round_cap(abs(f.numerator), f.denominator)
        return -nano if f < 0 else nano
    raise QuantityError(f"invalid quantity {value!r}: expected a string or a number, "
                        f"got {type(value).__name__}")


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity into an exact Fraction of base units.

    Raises :class:`QuantityError` on anything upstream's ``resource.ParseQuantity`` rejects.
    """
    return Fraction(parse_quantity_nano(value), _NANO)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def nano_to_milli(nano: int) -> int:
    """Nano-units to milli-units, rounding up (ceil) like ``Quantity.MilliValue``."""
    return _ceil_div(nano, 10**6)


def nano_to_int(nano: int) -> int:
    """Nano-units to whole units, rounding up (ceil) like ``Quantity.Value``."""
    return _ceil_div(nano, _NANO)


def milli_value(q: Fraction | str | int | float) -> int:
    """The quantity in milli-units rounded up (upstream ``MilliValue``)."""
    if isinstance(q, Fraction):
        return _ceil_div(q.numerator * 1000, q.denominator)
    return nano_to_milli(parse_quantity_nano(q))


def int_value(q: Fraction | str | int | float) -> int:
    """The quantity in whole units rounded up (upstream ``Value``)."""
    if isinstance(q, Fraction):
        return _ceil_div(q.numerator, q.denominator)
    return nano_to_int(parse_quantity_nano(q))
