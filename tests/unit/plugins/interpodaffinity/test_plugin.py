"""InterPodAffinity args, term memoization and queueing hints."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.interpodaffinity.terms import TermsCache, parse_pod_affinity_terms
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle
from tests.unit.plugins.interpodaffinity.helpers import ZONE

Q, S = QueueingHint.QUEUE, QueueingHint.SKIP


def plugin(args: dict[str, Any] | None = None) -> InterPodAffinity:
    return InterPodAffinity(args or {}, FakeHandle())


# --- args --------------------------------------------------------------------------------------


def test_default_args() -> None:
    p = plugin()
    assert p.hard_pod_affinity_weight == 1
    assert p.ignore_preferred_terms_of_existing_pods is False


@pytest.mark.parametrize(
    "args, field",
    [
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_invalid_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        plugin(args)
    assert f"InterPodAffinity.args.{field}" in str(exc.value)


@pytest.mark.parametrize("weight", [0, 1, 100])
def test_valid_weights(weight: int) -> None:
    assert plugin({"hardPodAffinityWeight": weight}).hard_pod_affinity_weight == weight


# --- terms ---------------------------------------------------------------------------------------


def test_terms_namespaces_default_to_own_namespace() -> None:
    pod = PodBuilder("p", "ns1").pod_affinity_required({"a": "b"}, ZONE).obj()
    (term,) = parse_pod_affinity_terms(pod).required_affinity
    assert term.namespaces == frozenset({"ns1"})
    assert term.namespace_selector.is_nothing()


def test_terms_with_namespace_selector_do_not_add_own_namespace() -> None:
    pod = PodBuilder("p", "ns1").pod_affinity_required(
        {"a": "b"}, ZONE, namespace_selector={"matchLabels": {"x": "y"}}).obj()
    (term,) = parse_pod_affinity_terms(pod).required_affinity
    assert term.namespaces == frozenset()
    assert term.matches("ns2", {"a": "b"}, {"x": "y"})
    assert not term.matches("ns1", {"a": "b"}, {})


def test_terms_cache_memoizes_by_content() -> None:
    cache = TermsCache(max_size=2)
    pod = PodBuilder("p").resource_version(1).pod_affinity_required({"a": "b"}, ZONE).obj()
    first = cache.get(pod)
    assert cache.get(dict(pod)) is first  # same content: parsed once
    replica = PodBuilder("q").resource_version(7).pod_affinity_required({"a": "b"}, ZONE).obj()
    assert cache.get(replica) is first  # another pod, the same affinity: shared
    assert cache.misses == 1 and cache.hits == 2
    changed = PodBuilder("p").resource_version(2).pod_affinity_required({"c": "d"}, ZONE).obj()
    assert cache.get(changed) is not first
    for i in range(3):
        cache.get(PodBuilder(f"o{i}").resource_version(1)
                  .pod_affinity_required({"a": f"b{i}"}, ZONE).obj())
    assert len(cache) <= 2  # bounded


# What a parse reads besides the affinity: (first pod, second pod, whether they share terms).
@pytest.mark.parametrize("first, second, shared", [
    (PodBuilder("p", "ns1").pod_affinity_required({"a": "b"}, ZONE),
     PodBuilder("q", "ns1").labels(x="1").pod_affinity_required({"a": "b"}, ZONE), True),
    # a term without namespaces applies to its pod's namespace
    (PodBuilder("p", "ns1").pod_affinity_required({"a": "b"}, ZONE),
     PodBuilder("p", "ns2").pod_affinity_required({"a": "b"}, ZONE), False),
    # matchLabelKeys read the pod's labels
    (PodBuilder("p", "ns1").labels(app="x").pod_affinity_required(
        {"a": "b"}, ZONE, match_label_keys=["app"]),
     PodBuilder("q", "ns1").labels(app="y").pod_affinity_required(
        {"a": "b"}, ZONE, match_label_keys=["app"]), False),
    (PodBuilder("p", "ns1").labels(app="x").pod_affinity_required(
        {"a": "b"}, ZONE, match_label_keys=["app"]),
     PodBuilder("q", "ns1").labels(app="x").pod_affinity_required(
        {"a": "b"}, ZONE, match_label_keys=["app"]), True),
])
def test_terms_cache_keys_on_what_the_parse_reads(first: PodBuilder, second: PodBuilder,
                                                  shared: bool) -> None:
    cache = TermsCache()
    a, b = first.obj(), second.obj()
    terms_a, terms_b = cache.get(a), cache.get(b)
    assert (terms_a is terms_b) is shared
    # Whatever the memo answers is what a parse of that pod gives.
    for pod, terms in ((a, terms_a), (b, terms_b)):
        expected = parse_pod_affinity_terms(pod)
        assert [t.key for t in terms.required_affinity] == [
            t.key for t in expected.required_affinity]


def test_terms_cache_never_keeps_a_parse_with_errors() -> None:
    cache = TermsCache()
    broken = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
         "topologyKey": ZONE}]}}
    p = PodBuilder("p").obj()
    p["spec"]["affinity"] = broken
    q = PodBuilder("q").obj()
    q["spec"]["affinity"] = broken
    first, second = cache.get(p), cache.get(q)
    assert first.errors and second.errors and len(cache) == 0
    assert "Pod default/p:" in first.errors[0] and "Pod default/q:" in second.errors[0]
    assert cache.misses == 2


def test_terms_cache_without_resource_version_reparses_copies() -> None:
    cache = TermsCache()
    pod = PodBuilder("p").pod_affinity_required({"a": "b"}, ZONE).obj()
    first = cache.get(pod)
    assert cache.get(pod) is first
    edited = PodBuilder("p").pod_affinity_required({"x": "y"}, ZONE).obj()
    (term,) = cache.get(edited).required_affinity
    assert term.selector.matches({"x": "y"})


def test_pods_without_affinity_are_not_parsed() -> None:
    cache = TermsCache()
    cache.get(PodBuilder("p").obj())
    assert cache.misses == 0 and len(cache) == 0


# --- events ----------------------------------------------------------------------------------------


def test_events_to_register() -> None:
    events = plugin().events_to_register()
    by_resource = {e.event.resource: e for e in events}
    pod_event = by_resource[EventResource.POD].event
    assert pod_event.action_type == ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
    node_event = by_resource[EventResource.NODE].event
    assert node_event.action_type & ActionType.ADD
    assert node_event.action_type & ActionType.UPDATE_NODE_LABEL
    assert all(e.hint is not None for e in events)


def waiting_with_affinity() -> dict[str, Any]:
    return PodBuilder("w").labels(app="web").pod_affinity_required({"app": "db"}, ZONE).obj()


def waiting_with_anti() -> dict[str, Any]:
    return PodBuilder("w").labels(app="web").pod_anti_affinity_required({"app": "db"}, ZONE).obj()


def assigned(name: str, **labels: str) -> PodBuilder:
    return PodBuilder(name).labels(labels).node("n1")


@pytest.mark.parametrize(
    "waiting, old, new, want",
    [
        ("aff", None, assigned("e", app="db").obj(), Q),
        ("aff", None, assigned("e", app="web").obj(), S),
        ("aff", None, PodBuilder("e").labels(app="db").obj(), S),  # not assigned
        ("aff", assigned("e", app="x").obj(), assigned("e", app="db").obj(), Q),
        ("aff", assigned("e", app="db").obj(), assigned("e", app="db", v="2").obj(), S),
        ("anti", assigned("e", app="db").obj(), assigned("e", app="x").obj(), Q),
        ("anti", assigned("e", app="x").obj(), assigned("e", app="db").obj(), S),
        ("anti", assigned("e", app="db").obj(), None, Q),
        ("anti", assigned("e", app="x").obj(), None, S),
        ("aff", assigned("e", app="db").obj(), None, S),
        # Deleting a pod whose anti-affinity selected the waiting pod.
        ("none", assigned("e", app="x").pod_anti_affinity_required({"app": "web"}, ZONE).obj(),
         None, Q),
        # Relabelling a pod whose own anti-affinity blocks: its terms still select the pod.
        ("none", assigned("e", app="x").pod_anti_affinity_required({"app": "web"}, ZONE).obj(),
         assigned("e", app="y").pod_anti_affinity_required({"app": "web"}, ZONE).obj(), S),
    ],
)
def test_pod_change_hint(waiting: str, old: Any, new: Any, want: QueueingHint) -> None:
    pod = {
        "aff": waiting_with_affinity,
        "anti": waiting_with_anti,
        "none": lambda: PodBuilder("w").labels(app="web").obj(),
    }[waiting]()
    assert plugin().is_schedulable_after_pod_change(pod, old, new) == want


def node(name: str = "n", **labels: str) -> dict[str, Any]:
    return NodeBuilder(name).labels(labels).obj()


@pytest.mark.parametrize(
    "waiting, old, new, want",
    [
        ("aff", None, node(zone="z1"), Q),
        ("aff", None, node(region="r1"), S),
        ("aff", node(region="r1"), node(region="r1", zone="z1"), Q),
        ("aff", node(zone="z1"), node(zone="z2"), Q),
        ("aff", node(zone="z1"), node(zone="z1", other="x"), S),
        ("anti", None, node(region="r1"), Q),
        ("anti", node(zone="z1"), node(), Q),
        ("anti", node(), node(zone="z1"), S),
        ("anti", node(zone="z1"), node(zone="z1", other="y"), S),
        # Taint-only change: judged like an add.
        ("aff", node(zone="z1"), node(zone="z1"), Q),
        ("none", None, node(), Q),
    ],
)
def test_node_change_hint(waiting: str, old: Any, new: Any, want: QueueingHint) -> None:
    pod = {
        "aff": waiting_with_affinity,
        "anti": waiting_with_anti,
        "none": lambda: PodBuilder("w").labels(app="web").obj(),
    }[waiting]()
    assert plugin().is_schedulable_after_node_change(pod, old, new) == want


def test_hint_rejects_wrong_object_type() -> None:
    with pytest.raises(TypeError):
        plugin().is_schedulable_after_node_change(waiting_with_affinity(), None, "node")

