"""Label and field selectors with kube-apiserver's syntax and matching rules.

Label selectors support the full string syntax (``=``, ``==``, ``!=``, ``in``, ``notin``,
``key``, ``!key``, ``>``, ``<``) through ``scheduler.objects.labels``; field selectors ``=``, ``==`` and ``!=`` with backslash
escapes, limited to the fields each resource declares (unknown fields are a 400 upstream too).
Selectors are compiled once per request into plain closures over dicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from scheduler.objects.labels import LabelSelector, LabelSelectorError, parse_selector_string

from .errors import bad_request

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]

def label_matcher(selector: str | None) -> Matcher | None:
    """A predicate on objects, or None when the selector selects everything. The string
    syntax is parsed by ``scheduler.objects.labels`` (one parser for the project); a
    malformed selector is a 400 as upstream."""
    if not selector or not selector.strip():
        return None
    try:
        sel = parse_selector_string(selector)
    except ValueError as e:
        raise bad_request(f"unable to parse requirement: {e}") from None
    if sel.is_empty():
        return None
    matches = sel.matches

    def match(obj: Obj) -> bool:
        return matches((obj.get("metadata") or {}).get("labels") or {})

    return match


def selector_dict_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Match a structured ``metav1.LabelSelector``: an empty selector matches everything, a
    missing or malformed one nothing."""
    try:
        return LabelSelector.from_dict(selector).matches(labels)
    except LabelSelectorError:
        return False


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
    # each field read once per object however many requirements name it (the scheduler's
    # status.phase!=Succeeded,status.phase!=Failed), through a reader made once per selector
    fields: dict[str, list[tuple[bool, str]]] = {}
    for f, eq, v in reqs:
        fields.setdefault(f, []).append((eq, v))
    checks = [(field_reader(f), tuple(conds)) for f, conds in fields.items()]

    def match(obj: Obj) -> bool:
        for read, conds in checks:
            value = read(obj)
            for eq, v in conds:
                if (value == v) != eq:
                    return False
        return True

    return match


def field_reader(path: str) -> Callable[[Obj], str]:
    """``lambda obj: field_value(obj, path)``, with the path split once."""
    if path == "source":
        return lambda obj: field_value(obj, path)
    parts = tuple(path.split("."))
    missing = "false" if path in ("spec.unschedulable", "spec.hostNetwork") else ""

    def read(obj: Obj) -> str:
        cur: Any = obj
        for part in parts:
            if not isinstance(cur, dict):
                return missing
            cur = cur.get(part)
        if cur is None:
            return missing
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return read


def both(a: Matcher | None, b: Matcher | None) -> Matcher | None:
    if a is None:
        return b
    if b is None:
        return a
    return lambda o: a(o) and b(o)
