"""One event store, two API views: core/v1 ``events`` and ``events.k8s.io/v1`` ``events``.

Why: in kube-apiserver both groups are served from the same storage (the internal
``core.Event``), so an event the scheduler writes through events.k8s.io/v1 is what
``kubectl describe pod`` lists through core/v1, and a series PATCH on one view bumps the count
seen in the other. The sandbox stores every event in its core/v1 form and converts on the
way in and out of the events.k8s.io/v1 view, field for field like upstream's
``pkg/apis/events/v1/conversion.go``:

regarding <-> involvedObject, note <-> message, deprecatedSource <-> source,
deprecatedCount/deprecatedFirstTimestamp/deprecatedLastTimestamp <-> count/firstTimestamp/
lastTimestamp, reportingController <-> reportingComponent; eventTime, series, action, reason,
type, related and reportingInstance keep their names.

Fields are rendered as Go's JSON encoder writes them (zero timestamps as ``null``, structs
without omitempty as ``{}``), so each view looks like what a real server sends. Validation is
upstream's ``ValidateEventCreate`` / ``ValidateEventUpdate``: legacy rules for every request,
strict ones for writes through events.k8s.io/v1.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]

# events.k8s.io/v1 field selector labels -> the stored (core/v1) field they read.
VIEW_FIELD_ALIASES = {
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
}

# (events.k8s.io/v1 name, core/v1 name) for fields whose name differs.
_RENAMED = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("reportingController", "reportingComponent"),
)
_SAME = ("eventTime", "series", "action", "reason", "type", "related", "reportingInstance")
_V1_TO_CORE = dict(_RENAMED)
_CORE_TO_V1 = {c: v for v, c in _RENAMED}

REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def to_core(ev: Obj, *, like: Obj | None = None) -> Obj:
    """An events.k8s.io/v1 Event (as sent by a client) in its stored core/v1 form.

    Fields the events.k8s.io/v1 schema does not have (``message``, ``involvedObject``...) are
    dropped, as decoding into the versioned type drops them upstream. ``like``: the stored
    object an update replaces; zero values it does not spell out are left out again, so a
    no-op write through this view stays a no-op.
    """
    out: Obj = {"apiVersion": "v1", "kind": "Event"}
    if "metadata" in ev:
        out["metadata"] = ev["metadata"]
    for k in _SAME:
        if k in ev:
            out[k] = ev[k]
    for v1, core in _RENAMED:
        if v1 in ev:
            out[core] = ev[v1]
    if like is None:
        return _go_core(out)
    for k in list(out):
        if k not in like and out[k] in (None, {}, "", 0):
            del out[k]
    return out


def _go_core(e: Obj) -> Obj:
    """Fill the fields core/v1 always serializes (no omitempty, or zero-valued structs)."""
    e.setdefault("involvedObject", {})
    e.setdefault("source", {})
    e.setdefault("firstTimestamp", None)
    e.setdefault("lastTimestamp", None)
    e.setdefault("eventTime", None)
    e.setdefault("reportingComponent", "")
    e.setdefault("reportingInstance", "")
    if e.get("count") in (0, None):
        e.pop("count", None)
    return e


def from_core(e: Obj) -> Obj:
    """The events.k8s.io/v1 view of a stored core/v1 Event."""
    out: Obj = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    if "metadata" in e:
        out["metadata"] = e["metadata"]
    for k in _SAME:
        if k in e:
            out[k] = e[k]
    for core, v1 in _CORE_TO_V1.items():
        if core in e:
            out[v1] = e[core]
    # Go's encoder: eventTime has no omitempty; zero structs stay {}; zero Times are null;
    # omitempty strings and ints disappear when empty.
    out.setdefault("eventTime", None)
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    out.setdefault("deprecatedFirstTimestamp", None)
    out.setdefault("deprecatedLastTimestamp", None)
    for k in ("reportingController", "reportingInstance", "note", "reason", "type", "action"):
        if out.get(k) in ("", None):
            out.pop(k, None)
    if out.get("deprecatedCount") in (0, None):
        out.pop("deprecatedCount", None)
    if out.get("series") is None:
        out.pop("series", None)
    if out.get("related") is None:
        out.pop("related", None)
    return out


# ---------------------------------------------------------------- time fields

_MICRO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{6})(Z|[+-]\d\d:\d\d)$")
_SECONDS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:\d\d)$")
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"


# Go's calendar runs on past year 1 and year 9999 (time.Parse reads "0001-01-01T00:30:00+01:00"
# as 23:30 on 31 December of year 0 and Format writes that year as "0000"); Python's datetime
# stops at both ends. The Gregorian calendar repeats every 400 years, so an instant pushed
# out of range by its offset (or written in year 0, which time.Parse takes) is computed 400
# years inside and its year moved back.
_CYCLE = 400


def _utc(base: str, offset: str) -> tuple[datetime, int]:
    """The UTC wall time of ``base`` at ``offset``, as (datetime, years to add to its year)."""
    # ``base`` matched \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d: the constructor reads it as strptime
    # would; where it refuses a field (month 13, second 60, ...), strptime's own error follows
    year = int(base[0:4])
    years = 0
    if year == 0:  # Go's year 0 (time.Parse takes it): the same calendar 400 years on
        year, years = _CYCLE, -_CYCLE
    try:
        dt = datetime(year, int(base[5:7]), int(base[8:10]),
                      int(base[11:13]), int(base[14:16]), int(base[17:19]))
    except ValueError:
        dt = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    if offset == "Z":
        return dt, years
    sign = 1 if offset[0] == "+" else -1
    delta = sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
    try:
        return dt - delta, years
    except OverflowError:
        shift = _CYCLE if dt.year <= _CYCLE else -_CYCLE
        return dt.replace(year=dt.year + shift) - delta, years - shift


def _format(dt: datetime, years: int) -> str:
    """Go's ``Format`` of the date and time (four-digit year, more digits past 9999, a minus
    sign and four digits before year 0)."""
    year = dt.year + years
    return (f"{'-' if year < 0 else ''}{abs(year):04d}-{dt.month:02d}-{dt.day:02d}T"
            f"{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}")


def _is_zero(dt: datetime, years: int, fraction: str) -> bool:
    """Go's ``IsZero``: the instant 0001-01-01T00:00:00Z, which metav1 encodes as null."""
    return years == 0 and dt == _GO_ZERO and fraction.strip("0") == ""


_GO_ZERO = datetime(1, 1, 1)


def _micro(v: Any, kind: str) -> Any:
    if v is None:
        return None
    m = _MICRO.match(v) if isinstance(v, str) else None
    if m is None:
        raise ValueError(f'Event in version "{kind}" cannot be handled as a Event: parsing time "{v}" as '
                         f'"{RFC3339_MICRO}": cannot parse as RFC3339Micro')
    base, offset = m.group(1), m.group(3)
    if offset == "Z" and base[0] != "0":
        _utc(base, offset)  # the fields' errors
        return f"{base}.{m.group(2)}Z"  # already canonical: what Format would print
    dt, years = _utc(base, offset)
    if _is_zero(dt, years, m.group(2)):
        return None
    return f"{_format(dt, years)}.{m.group(2)}Z"


def _seconds(v: Any, kind: str) -> Any:
    if v is None:
        return None
    m = _SECONDS.match(v) if isinstance(v, str) else None
    if m is None:
        raise ValueError(f'Event in version "{kind}" cannot be handled as a Event: parsing time "{v}" as '
                         '"2006-01-02T15:04:05Z07:00": cannot parse as RFC3339')
    dt, years = _utc(m.group(1), m.group(3))
    if _is_zero(dt, years, m.group(2) or ""):
        return None
    return f"{_format(dt, years)}Z"


def canonical_times(e: Obj, *, version: str) -> Obj:
    """Decode and re-encode the time fields of a stored-form event the way the server's Go types
    do: MicroTime (eventTime, series.lastObservedTime) must be RFC3339 with exactly six fraction
    digits, Time (first/lastTimestamp) is kept at second precision; both are rendered in UTC.
    Raises ValueError (a 400 upstream) for what Go cannot parse."""
    out = dict(e)
    if "eventTime" in out:
        out["eventTime"] = _micro(out["eventTime"], version)
    for k in ("firstTimestamp", "lastTimestamp"):
        if k in out:
            out[k] = _seconds(out[k], version)
    s = out.get("series")
    if isinstance(s, dict) and "lastObservedTime" in s:
        out["series"] = {**s, "lastObservedTime": _micro(s["lastObservedTime"], version)}
    return out


# ---------------------------------------------------------------- validation


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else str(v))


def _legacy(e: Obj) -> list[Cause]:
    causes: list[Cause] = []
    md = e.get("metadata") or {}
    ns = _s(md.get("namespace"))
    io = e.get("involvedObject") if isinstance(e.get("involvedObject"), dict) else {}
    assert isinstance(io, dict)
    io_ns = _s(io.get("namespace"))
    mismatch = ("involvedObject.namespace", "FieldValueInvalid",
                f'Invalid value: "{io_ns}": does not match event.namespace')
    if not e.get("eventTime"):
        if not io_ns:
            if ns not in ("", "default"):
                causes.append(mismatch)
        elif ns != io_ns:
            causes.append(mismatch)
    else:
        if not io_ns and ns not in ("default", "kube-system"):
            causes.append(mismatch)
        rc = _s(e.get("reportingComponent"))
        if not rc:
            causes.append(("reportingController", "FieldValueRequired", "Required value"))
        else:
            causes += _qualified_name_causes("reportingController", rc)
        for field, limit, required in _LIMITED_FIELDS:
            v = _s(e.get(field))
            if required and not v:
                causes.append((field, "FieldValueRequired", "Required value"))
            if len(v) > limit:
                causes.append((field, "FieldValueInvalid", f'Invalid value: "": can have at most {limit} characters'))
    if ns and not _DNS_SUBDOMAIN.match(ns):
        causes.append(("namespace", "FieldValueInvalid",
                       f'Invalid value: "{ns}": a lowercase RFC 1123 subdomain must consist of lower case '
                       "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"))
    return causes


# the string fields events.k8s.io/v1 validation bounds, in its order: (field, at most, required)
_LIMITED_FIELDS = (("reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT, True),
                   ("action", ACTION_LENGTH_LIMIT, True), ("reason", REASON_LENGTH_LIMIT, True),
                   ("message", NOTE_LENGTH_LIMIT, False))


def _qualified_name_causes(path: str, v: str) -> list[Cause]:
    _, slash, name = v.rpartition("/")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return [(path, "FieldValueInvalid",
                 f'Invalid value: "{v}": name part must consist of alphanumeric characters, \'-\', \'_\' or '
                 "'.', and must start and end with an alphanumeric character")]
    return []


def _series(e: Obj) -> list[Cause]:
    s = e.get("series")
    if s is None:
        return []
    if not isinstance(s, dict):
        return [("series", "FieldValueInvalid", "Invalid value: must be an object")]
    causes: list[Cause] = []
    cnt = s.get("count")
    if not isinstance(cnt, int) or isinstance(cnt, bool) or cnt < 2:
        causes.append(("series.count", "FieldValueInvalid", 'Invalid value: "": should be at least 2'))
    if not s.get("lastObservedTime"):
        causes.append(("series.lastObservedTime", "FieldValueRequired", "Required value"))
    return causes


def validate_create(e: Obj, *, strict: bool) -> list[Cause]:
    """``ValidateEventCreate`` on the stored form; ``strict`` for events.k8s.io/v1 requests."""
    causes = _legacy(e)
    if not strict:
        return causes
    causes += _series(e)
    if not e.get("eventTime"):
        causes.append(("eventTime", "FieldValueRequired", "Required value"))
    t = e.get("type")
    if t not in ("Normal", "Warning"):
        causes.append(("type", "FieldValueInvalid", f'Invalid value: "": has invalid value: {_s(t)}'))
    for k in ("firstTimestamp", "lastTimestamp"):
        if e.get(k):
            causes.append((k, "FieldValueInvalid", 'Invalid value: "": needs to be unset'))
    if e.get("count"):
        causes.append(("count", "FieldValueInvalid", 'Invalid value: "": needs to be unset'))
    src = e.get("source") or {}
    if isinstance(src, dict) and (src.get("component") or src.get("host")):
        causes.append(("source", "FieldValueInvalid", 'Invalid value: "": needs to be unset'))
    return causes


_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
              "type", "eventTime", "action", "related", "reportingComponent", "reportingInstance")
_PATH = {"reportingComponent": "reportingController"}


def validate_update(new: Obj, old: Obj, *, strict: bool) -> list[Cause]:
    """``ValidateEventUpdate``: through events.k8s.io/v1 only the series may change."""
    causes = _legacy(new)
    if not strict:
        return causes
    if new.get("series") != old.get("series"):
        causes += _series(new)
    for k in _IMMUTABLE:
        if _norm(new.get(k)) != _norm(old.get(k)):
            causes.append((_PATH.get(k, k), "FieldValueInvalid", "Invalid value: field is immutable"))
    return causes


def _norm(v: Any) -> Any:
    return None if v in ("", {}, 0) else v
