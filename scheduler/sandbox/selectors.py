"""Label and field selectors with kube-apiserver's syntax and matching rules.

Label selectors support the full string syntax (``=``, ``==``, ``!=``, ``in``, ``notin``,
``key``, ``!key``, ``>``, ``<``); field selectors ``=``, ``==`` and ``!=`` with backslash
escapes, limited to the fields each resource declares (unknown fields are a 400 upstream too).
Selectors are compiled once per request into plain closures over dicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import ApiError, bad_request

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]

_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid qualified label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix or len(prefix) > 253 or not _DNS_SUB.match(prefix):
            return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _KEY_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return None


def label_value_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _VALUE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return None


# ---------------------------------------------------------------- label selectors (string)

Requirement = tuple[str, str, tuple[str, ...]]  # key, op, values

_TOKEN = re.compile(r"\s*(\(|\)|,|!=|==|=|!|>|<|[^\s(),!=<>]+)")


def _tokens(s: str) -> list[str]:
    out: list[str] = []
    pos = 0
    s = s.rstrip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m:
            raise bad_request(f"unable to parse requirement: found unexpected character at {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def parse_label_selector(s: str) -> list[Requirement]:
    """Parse like ``labels.Parse``; raises 400 BadRequest on malformed input."""
    toks = _tokens(s)
    reqs: list[Requirement] = []
    i = 0
    n = len(toks)
    special = {"(", ")", ",", "!=", "==", "=", "!", ">", "<"}

    def err(msg: str) -> ApiError:
        return bad_request(f"unable to parse requirement: {msg}")

    while i < n:
        if toks[i] == "!":
            if i + 1 >= n or toks[i + 1] in special:
                raise err("found '!' without a key")
            key = toks[i + 1]
            reqs.append((key, "!", ()))
            i += 2
        else:
            key = toks[i]
            if key in special:
                raise err(f"found '{key}', expected: identifier")
            i += 1
            if i >= n or toks[i] == ",":
                reqs.append((key, "exists", ()))
            else:
                op = toks[i]
                i += 1
                if op in ("=", "==", "!=", ">", "<"):
                    if i < n and toks[i] not in special:
                        val = toks[i]
                        i += 1
                    else:
                        val = ""
                    if op in (">", "<"):
                        try:
                            int(val)
                        except ValueError:
                            raise err(f"for 'Gt', 'Lt' operators, the value must be an integer") from None
                    reqs.append((key, "=" if op == "==" else op, (val,)))
                elif op in ("in", "notin"):
                    if i >= n or toks[i] != "(":
                        raise err(f"found '{toks[i] if i < n else ''}', expected: '('")
                    i += 1
                    vals: list[str] = []
                    expect_value = True
                    while i < n and toks[i] != ")":
                        t = toks[i]
                        if t == ",":
                            if expect_value:
                                vals.append("")
                            expect_value = True
                        elif t in special:
                            raise err(f"found '{t}', expected: ',', ')' or identifier")
                        else:
                            vals.append(t)
                            expect_value = False
                        i += 1
                    if i >= n:
                        raise err("found '', expected: ')'")
                    i += 1
                    if not vals:
                        raise err("for 'in', 'notin' operators, values set can't be empty")
                    reqs.append((key, op, tuple(vals)))
                else:
                    raise err(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        kerr = label_key_error(key)
        if kerr:
            raise bad_request(f"unable to parse requirement: invalid label key \"{key}\": {kerr}")
        for v in reqs[-1][2]:
            verr = label_value_error(v)
            if verr and reqs[-1][1] not in (">", "<"):
                raise bad_request(f"unable to parse requirement: invalid label value: \"{v}\": {verr}")
        if i < n:
            if toks[i] != ",":
                raise err(f"found '{toks[i]}', expected: ','")
            i += 1
            if i >= n:
                raise err("found '', expected: identifier")
    return reqs


def _req_matches(labels: dict[str, str], req: Requirement) -> bool:
    key, op, vals = req
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    if op == "=":
        return labels.get(key) == vals[0]
    if op == "!=":
        return labels.get(key) != vals[0]
    if op == "in":
        return key in labels and labels[key] in vals
    if op == "notin":
        return labels.get(key) not in vals
    if op in (">", "<"):
        if key not in labels:
            return False
        try:
            have = int(labels[key])
        except ValueError:
            return False
        return have > int(vals[0]) if op == ">" else have < int(vals[0])
    return False


def label_matcher(selector: str | None) -> Matcher | None:
    """A predicate on objects, or None when the selector selects everything."""
    if not selector or not selector.strip():
        return None
    reqs = parse_label_selector(selector)
    if not reqs:
        return None

    def match(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for r in reqs:
            if not _req_matches(labels, r):
                return False
        return True

    return match


def selector_dict_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Match a structured ``metav1.LabelSelector``; an empty selector matches everything."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        op = expr.get("operator", "")
        vals = expr.get("values") or []
        if op == "In" and not (key in labels and labels[key] in vals):
            return False
        if op == "NotIn" and labels.get(key) in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# ---------------------------------------------------------------- field selectors


def _split_unescaped(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


FieldReq = tuple[str, bool, str]  # field, equal?, value


def parse_field_selector(s: str) -> list[FieldReq]:
    reqs: list[FieldReq] = []
    for part in _split_unescaped(s, ","):
        if not part.strip():
            continue
        m = re.match(r"^((?:[^\\=!]|\\.)*)(!=|==|=)(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{s}'; can't understand '{part}'")
        field, op, val = m.group(1).strip(), m.group(2), m.group(3)
        reqs.append((_unescape(field), op != "!=", _unescape(val)))
    return reqs


def field_value(obj: Obj, path: str) -> str:
    """The string value kube-apiserver's field set would hold for ``path``."""
    if path == "source":
        # upstream's event field set: source.component, else the reporting controller
        return str((obj.get("source") or {}).get("component") or obj.get("reportingComponent") or "")
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            cur = None
            break
        cur = cur.get(part)
    if cur is None:
        if path in ("spec.unschedulable", "spec.hostNetwork"):
            return "false"
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_matcher(
    selector: str | None, supports: Callable[[str], bool], aliases: dict[str, str] | None = None
) -> Matcher | None:
    """``aliases`` maps a view's field labels to the stored fields they read (events.k8s.io)."""
    if not selector or not selector.strip():
        return None
    reqs = parse_field_selector(selector)
    for f, _, _ in reqs:
        if not supports(f):
            raise bad_request(f'field label not supported: {f}')
    if not reqs:
        return None
    if aliases:
        reqs = [(aliases.get(f, f), eq, v) for f, eq, v in reqs]

    def match(obj: Obj) -> bool:
        for f, eq, v in reqs:
            if (field_value(obj, f) == v) != eq:
                return False
        return True

    return match


def both(a: Matcher | None, b: Matcher | None) -> Matcher | None:
    if a is None:
        return b
    if b is None:
        return a
    return lambda o: a(o) and b(o)
