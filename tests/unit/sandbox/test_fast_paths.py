"""The sandbox's cheaper per-request paths give what the slower forms they replaced gave:
event times read without strptime (same canonical text, same errors), UIDs without uuid
objects (canonical version-4 text), parsed quantities remembered (same values, malformed
ones still refused), and quantities put into messages only where a message is written (the
messages unchanged)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from scheduler.objects.quantity import QuantityError
from scheduler.objects.quantity import parse_quantity as reference_parse
from scheduler.sandbox import events, validation
from scheduler.sandbox.util import new_uid
from tests.builders import make_pod


def _strptime_micro(v: str) -> str:
    """The form every event time took before: strptime, then the fields written as Go's
    ``Format`` writes them (the reference; strftime left years below 1000 unpadded)."""
    m = events._MICRO.match(v)
    assert m is not None
    dt = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    offset = m.group(3)
    if offset != "Z":
        sign = 1 if offset[0] == "+" else -1
        dt -= sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
    return f"{dt.year:04d}-" + dt.strftime("%m-%dT%H:%M:%S") + f".{m.group(2)}Z"


def _outcome(f: Any, v: str) -> str:
    try:
        return str(f(v))
    except ValueError as e:
        return f"ValueError: {e}"


@pytest.mark.parametrize("value", [
    "2026-11-27T05:00:00.000000Z",
    "2026-11-27T05:00:00.123456+01:30",
    "2026-01-01T00:10:00.000001-05:00",
    "2024-02-29T23:59:59.999999Z",       # a leap day
    "0999-01-01T00:00:00.000000Z",       # a 3-digit year: Go writes it with its 0
    "0001-01-01T02:30:00.000000+01:00",  # a 1-digit year after the offset
    "2026-13-01T00:00:00.000000Z",       # month 13: strptime's own error
    "2026-00-10T00:00:00.000000Z",
    "2026-02-30T00:00:00.000000Z",       # no such day
    "2026-01-01T24:00:00.000000Z",
    "2026-01-01T23:59:60.000000Z",       # a leap second
    # (year 0, which strptime refused and Go takes, is test_event_times')
])
def test_micro_times_read_as_strptime_read_them(value: str) -> None:
    assert _outcome(lambda v: events._micro(v, "events.k8s.io/v1"), value) == _outcome(_strptime_micro, value)


@pytest.mark.parametrize("value, want", [
    ("2026-11-27T05:00:07+02:00", "2026-11-27T03:00:07Z"),
    ("2026-11-27T05:00:07.5Z", "2026-11-27T05:00:07Z"),
    ("2026-11-27T05:00:07Z", "2026-11-27T05:00:07Z"),
])
def test_second_times_keep_their_canonical_form(value: str, want: str) -> None:
    assert events._seconds(value, "v1") == want


def test_uids_are_canonical_random_version_4_uuids() -> None:
    seen = set()
    for _ in range(500):
        u = new_uid()
        parsed = uuid.UUID(u)
        assert str(parsed) == u and re.fullmatch(r"[0-9a-f-]{36}", u)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.add(u)
    assert len(seen) == 500


@pytest.mark.parametrize("text", ["100m", "500Mi", "1", "0.5", "1e3", "-1", "12Ki", "1.5Gi", "abc", "1.2.3", ""])
def test_remembered_quantities_equal_the_parser(text: str) -> None:
    try:
        want: Fraction | None = reference_parse(text)
    except QuantityError:
        want = None
    for _ in range(2):  # the second read comes from the cache
        assert validation.parse_quantity(text) == want


def test_the_quantity_cache_is_bounded() -> None:
    for i in range(validation._PARSED_MAX + 10):
        validation.parse_quantity(f"{i}m")
    assert len(validation._PARSED) <= validation._PARSED_MAX
    assert validation.parse_quantity("1500m") == Fraction(3, 2)


@pytest.mark.parametrize("requests, limits, want", [
    ({"cpu": "2"}, {"cpu": "1500m"},
     'Invalid value: "2": must be less than or equal to cpu limit of 1500m'),
    ({"cpu": "-0.5"}, {},
     'Invalid value: "-500m": must be greater than or equal to 0'),
    ({"example.com/gpu": "1"}, {"example.com/gpu": "2"},
     'Invalid value: "1": must be equal to example.com/gpu limit of 2'),
    ({"example.com/gpu": "0.5"}, {"example.com/gpu": "0.5"},
     'Invalid value: "500m": must be an integer'),
    ({"memory": "2048Ki"}, {"memory": "1Mi"},
     'Invalid value: "2Mi": must be less than or equal to memory limit of 1Mi'),
    ({"cpu": "100m", "memory": "500Mi"}, {"cpu": "100m", "memory": "500Mi"}, None),
])
def test_resource_messages_show_canonical_quantities(requests: dict[str, str], limits: dict[str, str],
                                                     want: str | None) -> None:
    pod = make_pod("p", cpu="1")
    pod["spec"]["containers"][0]["resources"] = {"requests": requests, "limits": limits}
    messages = [m for _, _, m in validation.validate_pod(pod)]
    if want is None:
        assert messages == []
    else:
        assert want in messages, messages


def test_a_forked_child_draws_uids_of_its_own() -> None:
    import os

    new_uid()  # the pool is filled
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        os.write(w, new_uid().encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    parent = new_uid()
    assert child != parent and uuid.UUID(child).version == 4


@pytest.mark.parametrize("resources", [
    {"requests": {"cpu": "100m", "memory": "64Mi"}},
    {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "50m"}},  # over the limit
    {"limits": {"memory": "64Mi", "cpu": "1"}, "requests": {"cpu": "2", "memory": "1Gi"}},  # order kept
    {"requests": {"example.com/gpu": 1}},        # a limit required
    {"requests": {"example.com/gpu": True}},     # hashes like 1, reads otherwise
    {"requests": {"example.com/gpu": 1.5}, "limits": {"example.com/gpu": 1.5}},
    {"requests": {"cpu": "-1"}},
    {"requests": {"hugepages-2Mi": "3Mi"}, "limits": {"hugepages-2Mi": "3Mi"}},
    {"requests": {"bogus": "1"}},
    {"requests": "not a map"},
    {"requests": {"cpu": ["1"]}},                # not remembered: not a scalar
    {"requests": None, "limits": {}},
    None,
])
def test_remembered_resource_checks_equal_the_check(resources: Any) -> None:
    path = "spec.containers[0].resources"
    want = validation._resources_causes_of(resources, path)
    # asked twice (the second answer remembered), and after a look-alike with other types
    assert validation._resources_causes(resources, path) == want
    assert validation._resources_causes(resources, path) == want
    assert validation._resources_causes(resources, "spec.initContainers[0].resources") == \
        validation._resources_causes_of(resources, "spec.initContainers[0].resources")


def test_remembered_resource_checks_tell_equal_hashing_values_apart() -> None:
    path = "spec.containers[0].resources"
    for value in (1, True, 1.0, "1"):
        res = {"requests": {"example.com/gpu": value}, "limits": {"example.com/gpu": 1}}
        assert validation._resources_causes(res, path) == validation._resources_causes_of(res, path)


# ------------------------------------------------------------ field selectors: paths split once

_FIELD_OBJECTS: list[dict[str, Any]] = [
    make_pod("a", namespace="default", cpu="100m", memory="64Mi", node="node-0001"),
    {"metadata": {"name": "b", "namespace": "ns"}, "spec": {"unschedulable": True, "hostNetwork": False},
     "status": {"phase": "Running"}},
    {"metadata": {"name": "c"}, "spec": "not a dict", "status": None},
    {"metadata": {"name": "d"}, "spec": {"nodeName": 7}, "source": {"component": "kubelet"}},
    {"metadata": {"name": "e"}, "reportingComponent": "kube-py-scheduler"},
]
_FIELD_PATHS = ["metadata.name", "metadata.namespace", "spec.nodeName", "spec.unschedulable",
                "spec.hostNetwork", "status.phase", "source", "spec.nodeName.deeper", "involvedObject.kind"]


@pytest.mark.parametrize("path", _FIELD_PATHS)
def test_a_field_reader_reads_what_field_value_reads(path: str) -> None:
    from scheduler.sandbox.selectors import field_reader, field_value

    read = field_reader(path)
    assert [read(o) for o in _FIELD_OBJECTS] == [field_value(o, path) for o in _FIELD_OBJECTS]


@pytest.mark.parametrize("selector", [
    "status.phase!=Succeeded,status.phase!=Failed", "status.phase=Running,status.phase!=Failed",
    "spec.nodeName=,metadata.name!=a", "metadata.name=a,spec.nodeName=node-0001,status.phase!=Failed",
    "spec.unschedulable=true", "spec.hostNetwork=false", "status.phase==Running,status.phase=Pending",
])
def test_a_field_selector_matches_as_its_requirements_one_by_one(selector: str) -> None:
    from scheduler.sandbox.selectors import field_matcher, field_value, parse_field_selector

    match = field_matcher(selector, lambda _: True)
    assert match is not None
    reqs = parse_field_selector(selector)
    want = [all((field_value(o, f) == v) == eq for f, eq, v in reqs) for o in _FIELD_OBJECTS]
    assert [match(o) for o in _FIELD_OBJECTS] == want
    assert any(want) or selector.startswith("status.phase==Running,")


# ------------------------------------------------------------ the create routes remembered

@pytest.mark.parametrize("target", ["/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/events",
                                    "/apis/events.k8s.io/v1/namespaces/default/events"])
def test_a_remembered_create_route_is_the_route_and_follows_the_catalog(target: str) -> None:
    import copy

    from scheduler.sandbox import Sandbox

    sb = Sandbox(nodes=0)
    app, cat = sb.app, sb.registry.catalog
    headers = {"Accept": "application/json"}
    first = app.fast_route("POST", target, headers)
    parts = target.split("/")
    group, version, rest = ("", "v1", parts[3:]) if parts[1] == "api" else (parts[2], parts[3], parts[4:])
    assert first is not None and first == app._route(group, version, rest)
    assert app.fast_route("POST", target, headers) is first  # remembered
    key = (first.rt.group, first.rt.version, first.rt.plural)
    replaced = cat.by_gvr[key] = copy.copy(first.rt)  # the type served there changed (a CRD's, say)
    again = app.fast_route("POST", target, headers)
    assert again is not None and again.rt is replaced and again == app._route(group, version, rest)
    del cat.by_gvr[key]
    assert app.fast_route("POST", target, headers) is None  # no longer served: aiohttp answers 404
