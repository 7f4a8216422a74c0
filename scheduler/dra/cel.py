"""CEL device selectors: DRA's CEL environment over the ``cel`` library (Rust-backed).

Why this library: ``common-expression-language`` (module ``cel``) evaluates a selector in about
1 µs once a device's environment is built, ``cel-python`` (celpy) in about 600 µs; both compile
in 0.1-0.7 ms and both accept receiver-style custom functions, which DRA's ``quantity`` and
``semver`` libraries need.  ``docs/dra.md`` has the comparison.

The environment is upstream's (``k8s.io/dynamic-resource-allocation/cel``): one variable
``device`` with ``driver``, ``attributes[domain][id]`` and ``capacity[domain][id]``;
attribute names without a domain belong to the driver's domain; an attribute domain the device
does not have reads as an empty map (so ``has(device.attributes["x"].y)`` is false, while
``device.attributes["x"].y`` is a runtime error, as upstream).  The library has no opaque
custom types, so quantities and versions travel through CEL as tagged strings that only
this module's functions create and read: ``quantity("1Gi").compareTo(...)``,
``isGreaterThan``, ``semver("1.2.3").major()`` ... behave as upstream's.

Compiled programs are cached by expression text (bounded).  The library has no cost
estimator; the limits applied are upstream's maximum expression length and a bound on
nesting depth, which together keep an expression's runtime linear in the device's size
(at most a few dozen attributes).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import cel as _cel

from scheduler.objects.quantity import QuantityError, parse_quantity

# Upstream: resource.k8s.io's CELSelectorExpressionMaxLength.
MAX_EXPRESSION_LENGTH = 10 * 1024
# Brackets nested deeper than this are refused at compile time (a stand-in for upstream's
# cost limit, which the library cannot estimate).
MAX_NESTING = 32
CACHE_SIZE = 4096

_Q = "\x00q:"  # a quantity
_V = "\x00v:"  # a semantic version


class CelError(Exception):
    """A compile or runtime error of one expression (the caller names class/claim/field)."""


# ---- quantity and semver values -------------------------------------------------------------

def _q(value: str) -> str:
    return _Q + value


def _parse_q(v: object) -> Fraction:
    if isinstance(v, str) and v.startswith(_Q):
        return parse_quantity(v[len(_Q):])
    raise CelError(f"expected a quantity, got {_show(v)}")


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def _semver_key(text: str) -> tuple[int, int, int, tuple[tuple[int, int | str], ...] | None]:
    m = _SEMVER.match(text)
    if m is None:
        raise CelError(f"invalid semver {text!r}")
    pre: tuple[tuple[int, int | str], ...] | None = None
    if m.group(4):
        pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in m.group(4).split("."))
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _parse_v(v: object) -> tuple[int, int, int, tuple[tuple[int, int | str], ...] | None]:
    if isinstance(v, str) and v.startswith(_V):
        return _semver_key(v[len(_V):])
    raise CelError(f"expected a semver, got {_show(v)}")


def _cmp_versions(a: object, b: object) -> int:
    ka, kb = _parse_v(a), _parse_v(b)
    if ka[:3] != kb[:3]:
        return -1 if ka[:3] < kb[:3] else 1
    pa, pb = ka[3], kb[3]
    if pa == pb:
        return 0
    if pa is None:  # a release is greater than any of its pre-releases
        return 1
    if pb is None:
        return -1
    return -1 if pa < pb else 1


def _show(v: object) -> str:
    if isinstance(v, str) and v[:3] in (_Q, _V):
        return ("quantity " if v.startswith(_Q) else "semver ") + v[3:]
    return repr(v)


def _cmp(a: object, b: object) -> int:
    if isinstance(a, str) and a.startswith(_V):
        return _cmp_versions(a, b)
    qa, qb = _parse_q(a), _parse_q(b)
    return (qa > qb) - (qa < qb)


def _quantity(s: object) -> str:
    if not isinstance(s, str):
        raise CelError(f"quantity() takes a string, got {_show(s)}")
    try:
        parse_quantity(s)
    except (QuantityError, ValueError) as e:
        raise CelError(f"invalid quantity {s!r}: {e}") from None
    return _q(s)


def _is_quantity(s: object) -> bool:
    if not isinstance(s, str):
        return False
    try:
        parse_quantity(s)
    except (QuantityError, ValueError):
        return False
    return True


def _semver(s: object, *_normalize: object) -> str:
    if not isinstance(s, str):
        raise CelError(f"semver() takes a string, got {_show(s)}")
    _semver_key(s)
    return _V + s


def _is_semver(s: object, *_normalize: object) -> bool:
    return isinstance(s, str) and _SEMVER.match(s) is not None


def _fmt_fraction(f: Fraction) -> str:
    if f.denominator == 1:
        return str(f.numerator)
    return str(float(f))


def _as_integer(a: object) -> int:
    q = _parse_q(a)
    if q.denominator != 1:
        raise CelError(f"cannot convert {_show(a)} to an integer without losing precision")
    return int(q)


def _add(a: object, b: object) -> str:
    return _q(_fmt_fraction(_parse_q(a) + (_parse_q(b) if isinstance(b, str) else Fraction(_int(b)))))


def _sub(a: object, b: object) -> str:
    return _q(_fmt_fraction(_parse_q(a) - (_parse_q(b) if isinstance(b, str) else Fraction(_int(b)))))


def _int(v: object) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise CelError(f"expected an int or a quantity, got {_show(v)}")


def _part(index: int) -> Callable[[object], int]:
    def f(v: object) -> int:
        return _parse_v(v)[index]  # type: ignore[return-value]
    return f


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "sign": lambda a: (lambda q: (q > 0) - (q < 0))(_parse_q(a)),
    "isInteger": lambda a: _parse_q(a).denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: float(_parse_q(a)),
    "add": _add,
    "sub": _sub,
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
}


# ---- the device environment -----------------------------------------------------------------

def _attr_value(raw: object) -> object:
    """One DeviceAttribute (exactly one of int, bool, string, version) as a CEL value."""
    if isinstance(raw, Mapping):
        if "int" in raw:
            return raw["int"]
        if "bool" in raw:
            return raw["bool"]
        if "string" in raw:
            return raw["string"]
        if "version" in raw:
            return _V + str(raw["version"])
    return None


def split_name(name: str, driver: str) -> tuple[str, str]:
    """A qualified attribute/capacity name as (domain, id); no domain means the driver's."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def device_variable(
    *, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any],
    extra_domains: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The ``device`` variable for one device of a ResourceSlice."""
    attrs: dict[str, dict[str, object]] = {d: {} for d in extra_domains}
    for name, raw in attributes.items():
        domain, ident = split_name(name, driver)
        value = _attr_value(raw)
        if value is not None:
            attrs.setdefault(domain, {})[ident] = value
    caps: dict[str, dict[str, object]] = {d: {} for d in extra_domains}
    for name, raw in capacity.items():
        domain, ident = split_name(name, driver)
        value = raw.get("value") if isinstance(raw, Mapping) else None
        if value is not None:
            caps.setdefault(domain, {})[ident] = _q(str(value))
    return {"driver": driver, "attributes": attrs, "capacity": caps}


# Literal domains an expression indexes (``attributes["x"]`` / ``capacity["x"]``): every
# device's environment gets them, empty when absent, so they read as empty maps.
_DOMAIN_LITERAL = re.compile(r"""(?:attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")


class Selector:
    """One compiled expression."""

    __slots__ = ("expression", "program", "domains")

    def __init__(self, expression: str, program: Any, domains: frozenset[str]) -> None:
        self.expression = expression
        self.program = program
        self.domains = domains

    def matches(self, env: DeviceEnv) -> bool:
        """The expression's result for one device; CelError for a runtime error or non-bool."""
        ctx = env.context(self.domains)
        try:
            result = self.program.execute(ctx)
        except CelError:
            raise
        except KeyError as e:  # a missing map key or field
            raise CelError(f"CEL runtime error: no such key: {_clean(str(e.args[0]) if e.args else '')}") from None
        except Exception as e:  # the library maps every evaluation failure to an exception
            raise CelError(f"CEL runtime error: {_clean(str(e))}") from None
        if not isinstance(result, bool):
            raise CelError(f"CEL result must be a bool, got {_show(result)}")
        return result


def _clean(msg: str) -> str:
    for tag, name in ((_Q, "quantity "), (_V, "semver ")):
        msg = msg.replace(tag, name)
    return msg


class DeviceEnv:
    """A device's CEL context, built once and reused for every expression (the library
    converts a context's variables on first use; that is most of an evaluation's cost)."""

    __slots__ = ("_driver", "_attributes", "_capacity", "_contexts")

    def __init__(self, *, driver: str, attributes: Mapping[str, Any],
                 capacity: Mapping[str, Any]) -> None:
        self._driver = driver
        self._attributes = attributes
        self._capacity = capacity
        self._contexts: dict[frozenset[str], Any] = {}

    def context(self, domains: frozenset[str]) -> Any:
        ctx = self._contexts.get(domains)
        if ctx is None:
            var = device_variable(driver=self._driver, attributes=self._attributes,
                                  capacity=self._capacity, extra_domains=domains)
            ctx = _cel.Context(variables={"device": var}, functions=dict(FUNCTIONS))
            if len(self._contexts) < 16:
                self._contexts[domains] = ctx
        return ctx


_cache: OrderedDict[str, Selector | CelError] = OrderedDict()


def compile_selector(expression: object) -> Selector:
    """Compile (or fetch from the cache) one selector; CelError names what is wrong."""
    if not isinstance(expression, str):
        raise CelError(f"CEL expression must be a string, got {type(expression).__name__}")
    hit = _cache.get(expression)
    if hit is not None:
        _cache.move_to_end(expression)
        if isinstance(hit, CelError):
            raise hit
        return hit
    try:
        out: Selector | CelError = _compile(expression)
    except CelError as e:
        out = e
    _cache[expression] = out
    if len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    if isinstance(out, CelError):
        raise out
    return out


def _compile(expression: str) -> Selector:
    if not expression.strip():
        raise CelError("CEL compile error: empty expression")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelError(f"CEL compile error: expression is {len(expression)} characters long, "
                       f"more than the limit of {MAX_EXPRESSION_LENGTH}")
    depth = deepest = 0
    for ch in expression:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        raise CelError(f"CEL compile error: expression nests {deepest} levels deep, more than "
                       f"the limit of {MAX_NESTING} (estimated cost exceeds budget)")
    try:
        program = _cel.compile(expression)
    except Exception as e:
        raise CelError(f"CEL compile error: {_first_line(str(e))}") from None
    domains = frozenset(a or b for a, b in _DOMAIN_LITERAL.findall(expression))
    return Selector(expression, program, domains)


def _first_line(msg: str) -> str:
    return msg.split("\n", 1)[0]
