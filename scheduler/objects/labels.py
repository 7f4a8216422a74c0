"""Label selectors (``metav1.LabelSelector`` and the ``a=b,c in (x)`` string syntax).

One compiled :class:`LabelSelector` serves both forms. Conventions follow
apimachinery: an *empty* selector (no matchLabels, no matchExpressions) matches everything,
while a *missing* (None) selector matches nothing. ``from_dict(None)`` therefore returns
:meth:`LabelSelector.nothing`; callers with other needs can pick :meth:`everything`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "IN",
    "NOT_IN",
    "EXISTS",
    "DOES_NOT_EXIST",
    "EQUALS",
    "NOT_EQUALS",
    "GT",
    "LT",
    "Requirement",
    "LabelSelector",
    "LabelSelectorError",
    "parse_selector_string",
    "validate_label_key",
    "validate_label_value",
    "validate_qualified_name",
]

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
EQUALS = "="
NOT_EQUALS = "!="
GT = "Gt"
LT = "Lt"

_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class LabelSelectorError(ValueError):
    """An invalid label selector; the message names the field path when known."""


def validate_qualified_name(value: str) -> str | None:
    """Check ``[prefix/]name`` like apimachinery's IsQualifiedName; None when valid."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    prefix, sep, name = value.rpartition("/")
    if sep:
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253:
            return "prefix part must be no more than 253 characters"
        if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            return ("prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                    "alphanumeric characters, '-' or '.', and must start and end with an "
                    "alphanumeric character")
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_RE.fullmatch(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character")
    return None


def validate_label_key(key: str) -> str | None:
    """A label key must be a qualified name; returns an error string or None."""
    return validate_qualified_name(key)


def validate_label_value(value: str) -> str | None:
    """A label value is empty or a <=63 char name; returns an error string or None."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if value == "":
        return None
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _NAME_RE.fullmatch(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character")
    return None


def _parse_int64(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64) semantics: None when not a base-10 int64."""
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


class Requirement:
    """One ``key op values`` clause, already validated."""

    __slots__ = ("key", "operator", "values", "_int")

    def __init__(self, key: str, operator: str, values: Iterable[str] = (), *,
                 where: str = "") -> None:
        vals = tuple(values)
        prefix = f"{where}: " if where else ""
        err = validate_label_key(key)
        if err:
            raise LabelSelectorError(f"{prefix}key: invalid label key {key!r}: {err}")
        if operator in (IN, NOT_IN):
            if not vals:
                raise LabelSelectorError(
                    f"{prefix}values: for 'In', 'NotIn' operators, values set can't be empty")
        elif operator in (EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                raise LabelSelectorError(f"{prefix}values: exact-match compatibility "
                                         "requires one single value")
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                raise LabelSelectorError(f"{prefix}values: values set must be empty for "
                                         "exists and does not exist")
        elif operator in (GT, LT):
            if len(vals) != 1 or _parse_int64(vals[0]) is None:
                raise LabelSelectorError(f"{prefix}values: for 'Gt', 'Lt' operators, exactly "
                                         "one value is required and it must be an integer")
        else:
            raise LabelSelectorError(f"{prefix}operator: {operator!r} is not a valid operator")
        if operator not in (GT, LT):
            for v in vals:
                verr = validate_label_value(v)
                if verr:
                    raise LabelSelectorError(f"{prefix}values: invalid label value {v!r}: {verr}")
        self.key = key
        self.operator = operator
        self.values: frozenset[str] = frozenset(vals)
        self._int: int | None = _parse_int64(vals[0]) if operator in (GT, LT) else None

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN or op == EQUALS:
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == NOT_IN or op == NOT_EQUALS:
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        v = labels.get(self.key)
        if v is None:
            return False
        iv = _parse_int64(v)
        if iv is None or self._int is None:
            return False
        return iv > self._int if op == GT else iv < self._int

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.operator!r}, {sorted(self.values)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Requirement) and self.key == other.key
                and self.operator == other.operator and self.values == other.values)

    def __hash__(self) -> int:
        return hash((self.key, self.operator, self.values))


class LabelSelector:
    """A compiled selector: requirements ANDed; or the special "nothing" selector."""

    __slots__ = ("requirements", "_nothing", "_equal")

    def __init__(self, requirements: Sequence[Requirement] = (), *, nothing: bool = False) -> None:
        self.requirements: tuple[Requirement, ...] = tuple(requirements)
        self._nothing = nothing
        # fast path: pure matchLabels selectors compare items directly
        eq: list[tuple[str, str]] | None = []
        for r in self.requirements:
            if r.operator in (IN, EQUALS) and len(r.values) == 1 and eq is not None:
                eq.append((r.key, next(iter(r.values))))
            else:
                eq = None
        self._equal = tuple(eq) if eq is not None else None

    @classmethod
    def nothing(cls) -> LabelSelector:
        """Matches no label set (what a nil metav1.LabelSelector means)."""
        return cls(nothing=True)

    @classmethod
    def everything(cls) -> LabelSelector:
        """Matches every label set (what an empty metav1.LabelSelector means)."""
        return cls()

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any] | None, *, where: str = "") -> LabelSelector:
        """Compile a ``metav1.LabelSelector``; None gives :meth:`nothing`.

        Raises :class:`LabelSelectorError` naming ``where`` and the offending field.
        """
        if sel is None:
            return cls.nothing()
        p = f"{where}." if where else ""
        if not isinstance(sel, Mapping):
            raise LabelSelectorError(f"{where or 'selector'}: expected an object, "
                                     f"got {type(sel).__name__}")
        reqs: list[Requirement] = []
        ml = sel.get("matchLabels") or {}
        if not isinstance(ml, Mapping):
            raise LabelSelectorError(f"{p}matchLabels: expected a map")
        for k in sorted(ml):
            v = ml[k]
            if not isinstance(v, str):
                raise LabelSelectorError(f"{p}matchLabels.{k}: value must be a string, "
                                         f"got {type(v).__name__}")
            reqs.append(Requirement(k, EQUALS, (v,), where=f"{p}matchLabels.{k}"))
        exprs = sel.get("matchExpressions") or []
        if not isinstance(exprs, list):
            raise LabelSelectorError(f"{p}matchExpressions: expected a list")
        for i, expr in enumerate(exprs):
            ep = f"{p}matchExpressions[{i}]"
            if not isinstance(expr, Mapping):
                raise LabelSelectorError(f"{ep}: expected an object")
            op = expr.get("operator")
            if op not in (IN, NOT_IN, EXISTS, DOES_NOT_EXIST):
                raise LabelSelectorError(f"{ep}.operator: {op!r} is not a valid label "
                                         "selector operator")
            vals = expr.get("values") or []
            if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
                raise LabelSelectorError(f"{ep}.values: expected a list of strings")
            key = expr.get("key")
            if not isinstance(key, str):
                raise LabelSelectorError(f"{ep}.key: expected a string")
            reqs.append(Requirement(key, op, vals, where=ep))
        return cls(reqs)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self._nothing:
            return False
        eq = self._equal
        if eq is not None:
            for k, v in eq:
                if labels.get(k) != v:
                    return False
            return True
        for r in self.requirements:
            if not r.matches(labels):
                return False
        return True

    def is_empty(self) -> bool:
        """True for the match-everything selector (no requirements)."""
        return not self._nothing and not self.requirements

    def is_nothing(self) -> bool:
        return self._nothing

    def __repr__(self) -> str:
        if self._nothing:
            return "LabelSelector.nothing()"
        return f"LabelSelector({list(self.requirements)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelSelector) and self._nothing == other._nothing
                and set(self.requirements) == set(other.requirements))

    def __hash__(self) -> int:
        return hash((self._nothing, frozenset(self.requirements)))


# --- string syntax -------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"\s*(?:(!=|==|=|\(|\)|,|!|>|<)|([^\s!=(),<>]+))")


def _tokenize(s: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    s = s.rstrip()
    while pos < len(s):
        m = _TOKEN_RE.match(s, pos)
        if m is None or m.end() == pos:  # pragma: no cover - the regex always advances
            raise ValueError(f"invalid selector {s!r}: unexpected character at {pos}")
        tokens.append(m.group(1) or m.group(2))
        pos = m.end()
    return tokens


def parse_selector_string(s: str) -> LabelSelector:
    """Parse ``a=b,c!=d,e in (x,y),f notin (z),g,!h,i>1`` into a :class:`LabelSelector`.

    An empty string selects everything. Raises ValueError describing the problem.
    """
    toks = _tokenize(s)
    reqs: list[Requirement] = []
    i = 0
    n = len(toks)

    def err(msg: str) -> ValueError:
        return ValueError(f"invalid label selector {s!r}: {msg}")

    def ident(tok: str | None, what: str) -> str:
        if tok is None or tok in ("!=", "==", "=", "(", ")", ",", "!", ">", "<"):
            raise err(f"expected {what}, found {tok or 'end of string'!r}")
        return tok

    if n == 0:
        return LabelSelector()
    try:
        while True:
            tok = toks[i] if i < n else None
            if tok == "!":
                key = ident(toks[i + 1] if i + 1 < n else None, "a label key after '!'")
                reqs.append(Requirement(key, DOES_NOT_EXIST))
                i += 2
            else:
                key = ident(tok, "a label key")
                i += 1
                op = toks[i] if i < n else None
                if op is None or op == ",":
                    reqs.append(Requirement(key, EXISTS))
                elif op in ("=", "=="):
                    nxt = toks[i + 1] if i + 1 < n else None
                    if nxt is None or nxt == ",":
                        val, i = "", i + 1
                    else:
                        val, i = ident(nxt, "a value"), i + 2
                    reqs.append(Requirement(key, EQUALS, (val,)))
                elif op == "!=":
                    nxt = toks[i + 1] if i + 1 < n else None
                    if nxt is None or nxt == ",":
                        val, i = "", i + 1
                    else:
                        val, i = ident(nxt, "a value"), i + 2
                    reqs.append(Requirement(key, NOT_EQUALS, (val,)))
                elif op in (">", "<"):
                    val = ident(toks[i + 1] if i + 1 < n else None, "an integer")
                    reqs.append(Requirement(key, GT if op == ">" else LT, (val,)))
                    i += 2
                elif op in ("in", "notin"):
                    if i + 1 >= n or toks[i + 1] != "(":
                        raise err(f"expected '(' after {op!r}")
                    i += 2
                    vals: list[str] = []
                    expect_value = True
                    while True:
                        t = toks[i] if i < n else None
                        if t is None:
                            raise err("missing ')'")
                        if t == ")":
                            if expect_value and vals:
                                vals.append("")  # trailing comma means an empty value
                            i += 1
                            break
                        if t == ",":
                            if expect_value:
                                vals.append("")
                            expect_value = True
                            i += 1
                            continue
                        if not expect_value:
                            raise err(f"expected ',' or ')', found {t!r}")
                        vals.append(ident(t, "a value"))
                        expect_value = False
                        i += 1
                    reqs.append(Requirement(key, IN if op == "in" else NOT_IN, vals))
                else:
                    raise err(f"expected an operator after {key!r}, found {op!r}")
            if i >= n:
                break
            if toks[i] != ",":
                raise err(f"expected ',' found {toks[i]!r}")
            i += 1
            if i >= n:
                raise err("trailing ','")
    except LabelSelectorError as exc:
        raise err(str(exc)) from None
    return LabelSelector(reqs)
