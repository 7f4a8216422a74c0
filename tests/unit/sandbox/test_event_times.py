"""Event times at the ends of Go's calendar: kube-apiserver decodes MicroTime and Time with
``time.Parse`` (whose years run on before year 1 and past 9999) and encodes them with
``Format`` in UTC, or as null for the zero instant (``IsZero``). The sandbox used to overflow
Python's datetime there and answer 500."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.sandbox import events


@pytest.mark.parametrize("value, want", [
    # the offset pushes the instant before year 1: year 0 (a leap year in Go's calendar)
    ("0001-01-01T00:30:00.000000+01:00", "0000-12-31T23:30:00.000000Z"),
    ("0001-01-01T00:00:00.000001+23:59", "0000-12-31T00:01:00.000001Z"),
    ("0001-01-01T23:59:59.999999+24:00", "0000-12-31T23:59:59.999999Z"),
    ("0001-01-02T12:00:00.000000+24:00", "0001-01-01T12:00:00.000000Z"),
    # ... or past year 9999
    ("9999-12-31T23:30:00.000000-01:00", "10000-01-01T00:30:00.000000Z"),
    ("9999-12-31T00:00:00.000000-24:00", "10000-01-01T00:00:00.000000Z"),
    # the zero instant is Go's zero time: null, however it is spelled
    ("0001-01-01T00:00:00.000000Z", None),
    ("0001-01-01T01:00:00.000000+01:00", None),
    ("0001-01-01T00:00:00.000001Z", "0001-01-01T00:00:00.000001Z"),
    # year 0 itself: time.Parse takes it (it is not the zero instant), Format writes it back;
    # an offset may push it before year 0, which Format writes with a minus sign
    ("0000-01-01T00:00:00.000000Z", "0000-01-01T00:00:00.000000Z"),
    ("0000-02-29T12:00:00.000000-01:00", "0000-02-29T13:00:00.000000Z"),  # year 0 is a leap year
    ("0000-12-31T23:30:00.000000-01:00", "0001-01-01T00:30:00.000000Z"),
    ("0000-01-01T00:30:00.000000+01:00", "-0001-12-31T23:30:00.000000Z"),
    # years below 1000 keep four digits
    ("0012-06-01T00:00:00.000000Z", "0012-06-01T00:00:00.000000Z"),
    ("0012-06-01T00:00:00.000000-02:00", "0012-06-01T02:00:00.000000Z"),
    ("2026-11-27T05:00:00.123456Z", "2026-11-27T05:00:00.123456Z"),
])
def test_micro_times_at_the_ends_of_the_calendar(value: str, want: str | None) -> None:
    assert events._micro(value, "events.k8s.io/v1") == want


@pytest.mark.parametrize("value, want", [
    ("0001-01-01T00:30:00+01:00", "0000-12-31T23:30:00Z"),
    ("9999-12-31T23:30:00.5-01:00", "10000-01-01T00:30:00Z"),
    ("0001-01-01T00:00:00Z", None),
    ("0001-01-01T00:00:00.000Z", None),
    ("0001-01-01T00:00:00.5Z", "0001-01-01T00:00:00Z"),  # not zero: the fraction counts
    ("0001-01-01T02:00:00+02:00", None),
    ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
    ("0000-03-01T01:00:00+02:00", "0000-02-29T23:00:00Z"),
])
def test_second_times_at_the_ends_of_the_calendar(value: str, want: str | None) -> None:
    assert events._seconds(value, "v1") == want


def _event(**times: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"}, **times}


@pytest.mark.parametrize("times, want", [
    ({"eventTime": "0001-01-01T00:30:00.000000+01:00",
      "series": {"count": 2, "lastObservedTime": "0001-01-01T00:45:00.000000+01:00"}},
     {"eventTime": "0000-12-31T23:30:00.000000Z",
      "series": {"count": 2, "lastObservedTime": "0000-12-31T23:45:00.000000Z"}}),
    ({"firstTimestamp": "0001-01-01T00:00:00+00:00", "lastTimestamp": "9999-12-31T23:59:59-00:01"},
     {"firstTimestamp": None, "lastTimestamp": "10000-01-01T00:00:59Z"}),
])
def test_canonical_times_of_an_event(times: dict[str, Any], want: dict[str, Any]) -> None:
    assert events.canonical_times(_event(**times), version="v1") == _event(**want)


@pytest.mark.parametrize("value", [
    "2026-13-01T00:30:00.000000+01:00",  # the fields' own errors still come first
    "0001-01-01T24:00:00.000000+01:00",
    "0000-13-01T00:00:00.000000Z",  # year 0's fields are checked like any other year's
    "0001-02-29T00:00:00.000000Z",  # year 0 is a leap year, year 1 is not
])
def test_bad_fields_are_still_refused_with_an_offset(value: str) -> None:
    with pytest.raises(ValueError):
        events._micro(value, "events.k8s.io/v1")
