"""DynamicResources' claim hint is keyed (``KeyedHint``): the queue asks only the pods that
name the claim of an event, unless the event freed devices.  The keys must never hide a pod
the hint would queue."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.events import EventResource, KeyedHint, QueueingHint
from scheduler.plugins.dynamicresources.plugin import (
    DynamicResources,
    claim_event_keys,
    pod_claim_keys,
)
from tests.builders import dra_allocation, dra_claim
from tests.fakes import FakeHandle
from tests.unit.plugins.dynamicresources.test_plugin import pod_with


def claim_hint() -> KeyedHint:
    [hint] = [item.hint for item in DynamicResources(None, FakeHandle()).events_to_register()
              if item.event.resource is EventResource.RESOURCE_CLAIM]
    assert isinstance(hint, KeyedHint)
    return hint


def claim(name: str, ns: str = "default", *, allocated: bool = False) -> dict[str, Any]:
    obj = dra_claim(name, ns)
    if allocated:
        obj["status"] = {"allocation": dra_allocation("n1", [("gpu", "d", "p", "g0")])}
    return obj


@pytest.mark.parametrize(
    ("pod", "keys"),
    [
        pytest.param(pod_with("p", "a", "b"), [("default", "a"), ("default", "b")],
                     id="named-claims"),
        pytest.param(pod_with("p", template="t", generated="p-gpu"), [("default", "p-gpu")],
                     id="template-claim-generated"),
        pytest.param(pod_with("p", "a", template="t"), [], id="template-claim-not-created-yet"),
        pytest.param(pod_with("p"), [], id="no-claims"),
    ],
)
def test_pod_keys(pod: dict[str, Any], keys: list[tuple[str, str]]) -> None:
    assert pod_claim_keys(pod) == keys


@pytest.mark.parametrize(
    ("old", "new", "keys"),
    [
        pytest.param(None, claim("a"), [("default", "a")], id="added"),
        pytest.param(claim("a"), claim("a", allocated=True), [("default", "a")],
                     id="allocated"),
        pytest.param(claim("a", allocated=True), claim("a"), None, id="deallocated"),
        pytest.param(claim("a", allocated=True), None, None, id="allocated-deleted"),
        pytest.param(claim("a"), None, [("default", "a")], id="unallocated-deleted"),
        pytest.param(None, None, None, id="no-object"),
    ],
)
def test_event_keys(old: Any, new: Any, keys: list[tuple[str, str]] | None) -> None:
    assert claim_event_keys(old, new) == keys


NAMES = st.sampled_from(("a", "b", "p-gpu", "q-gpu"))
NAMESPACES = st.sampled_from(("default", "other"))
pods = st.builds(
    lambda names, template, generated, ns: _in(pod_with("p", *names, template=template,
                                                        generated=generated), ns),
    st.lists(NAMES, max_size=2, unique=True), st.sampled_from((None, "t")),
    st.sampled_from((None, "p-gpu")), NAMESPACES)
claims = st.one_of(st.none(), st.builds(
    lambda name, ns, allocated: claim(name, ns, allocated=allocated), NAMES, NAMESPACES,
    st.booleans()))


def _in(pod: dict[str, Any], ns: str) -> dict[str, Any]:
    pod["metadata"]["namespace"] = ns
    return pod


@settings(max_examples=300, deadline=None)
@given(pods, claims, claims)
def test_keys_never_hide_a_pod_the_hint_queues(pod: dict[str, Any], old: Any, new: Any
                                               ) -> None:
    hint = claim_hint()
    keys = hint.event_keys(old, new)
    if keys is not None and not set(keys) & set(hint.pod_keys(pod)):
        assert hint(pod, old, new) is QueueingHint.SKIP
