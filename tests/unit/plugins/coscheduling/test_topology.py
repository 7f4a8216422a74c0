"""Gang topology (issue 22): required/preferred-topology annotations on the PodGroup, the
tightest fitting domain, the domain of placed members, and the message naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.coscheduling.core import parse_pod_group
from scheduler.plugins.coscheduling.topology import (
    PREFERRED_TOPOLOGY_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    TopologyConstraint,
)
from tests.builders import make_node

from .helpers import Cluster, member, pod_group

RACK = "example.com/rack"


def _group(min_member: int, annotation: str | None, key: Any = RACK) -> dict[str, Any]:
    pg = pod_group("g", min_member)
    if annotation is not None:
        pg["metadata"]["annotations"] = {annotation: key}
    return pg


def _racks(spec: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """rack -> (nodes, CPUs per node)."""
    return [make_node(f"{rack}-{i}", cpu=str(cpu), labels={RACK: rack})
            for rack, (count, cpu) in sorted(spec.items()) for i in range(count)]


def _pre_filter(c: Cluster, pod: dict[str, Any]) -> tuple[Any, Any]:
    info = PodInfo.from_pod(pod)
    return c.plugin.pre_filter(CycleState(), info, c.handle.snapshot().list())


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, None),
        ({REQUIRED_TOPOLOGY_ANNOTATION: RACK}, TopologyConstraint(RACK, True)),
        ({PREFERRED_TOPOLOGY_ANNOTATION: RACK}, TopologyConstraint(RACK, False)),
        ({REQUIRED_TOPOLOGY_ANNOTATION: "a", PREFERRED_TOPOLOGY_ANNOTATION: "b"},
         TopologyConstraint("a", True)),
    ],
)
def test_parse(annotations: dict[str, str], expected: TopologyConstraint | None) -> None:
    pg = pod_group("g", 2)
    pg["metadata"]["annotations"] = annotations
    assert parse_pod_group(pg).topology == expected


@pytest.mark.parametrize("bad", ["", "  ", "a b", 3])
def test_parse_bad_value_names_the_annotation(bad: Any) -> None:
    with pytest.raises(ObjectError, match="required-topology"):
        parse_pod_group(_group(2, REQUIRED_TOPOLOGY_ANNOTATION, bad))


@pytest.mark.parametrize(
    ("racks", "annotation", "expected_nodes"),
    [
        # 4 members of 4 CPU: rack a (2 x 8) fits exactly, rack b (4 x 8) with room to
        # spare: the tightest wins.
        ({"a": (2, 8), "b": (4, 8)}, REQUIRED_TOPOLOGY_ANNOTATION, {"a-0", "a-1"}),
        ({"a": (2, 8), "b": (4, 8)}, PREFERRED_TOPOLOGY_ANNOTATION, {"a-0", "a-1"}),
        # rack a too small: b.
        ({"a": (1, 8), "b": (4, 8)}, REQUIRED_TOPOLOGY_ANNOTATION,
         {"b-0", "b-1", "b-2", "b-3"}),
        # Preferred and no rack fits alone: anywhere (no restriction).
        ({"a": (1, 8), "b": (1, 8)}, PREFERRED_TOPOLOGY_ANNOTATION, None),
        # No annotation: no restriction.
        ({"a": (2, 8), "b": (4, 8)}, None, None),
    ],
)
def test_domain_choice(racks: dict[str, tuple[int, int]], annotation: str | None,
                       expected_nodes: set[str] | None) -> None:
    pods = [member(f"m{i}", cpu="4") for i in range(4)]
    c = Cluster(nodes=_racks(racks), groups=[_group(4, annotation)], pods=pods)
    result, status = _pre_filter(c, pods[0])
    assert status is None
    assert (None if result is None else result.node_names) == expected_nodes


def test_required_and_unsatisfiable_names_the_key_and_each_domain() -> None:
    pods = [member(f"m{i}", cpu="4") for i in range(4)]
    nodes = [*_racks({"a": (1, 8), "b": (1, 4)}), make_node("loose", cpu="64")]
    c = Cluster(nodes=nodes, groups=[_group(4, REQUIRED_TOPOLOGY_ANNOTATION)], pods=pods)
    result, status = _pre_filter(c, pods[0])
    assert result is None and status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == (
        f"PodGroup default/g requires its members in one {RACK} domain: no domain fits 4 "
        f"more member(s) ({RACK}=a: 2 of 4 fit; {RACK}=b: 1 of 4 fit; "
        f"1 node(s) without label {RACK})")


def test_placed_members_fix_the_domain() -> None:
    # Two members already on rack b (the loosest): the rest follow them there.
    pods = [member("m0", cpu="4", node="b-0"), member("m1", cpu="4", node="b-1"),
            member("m2", cpu="4"), member("m3", cpu="4")]
    c = Cluster(nodes=_racks({"a": (2, 8), "b": (4, 8)}),
                groups=[_group(4, REQUIRED_TOPOLOGY_ANNOTATION)], pods=pods)
    result, status = _pre_filter(c, pods[2])
    assert status is None and result is not None
    assert result.node_names == {"b-0", "b-1", "b-2", "b-3"}


def test_no_node_has_the_label() -> None:
    pods = [member(f"m{i}", cpu="1") for i in range(2)]
    c = Cluster(groups=[_group(2, REQUIRED_TOPOLOGY_ANNOTATION)], pods=pods)
    _, status = _pre_filter(c, pods[0])
    assert status is not None and f"no node has label {RACK}" in status.message()


# --- members of different sizes ----------------------------------------------------------


@pytest.mark.parametrize(
    ("racks", "sizes", "expected_nodes"),
    [
        # One 8-CPU member and six of 1 CPU (14 CPUs): rack a (2 x 8) holds them packed
        # largest first (8 on a-0, six on a-1); counting seven members of the first's size
        # (8 CPUs) would have turned a down for the loose rack b.
        ({"a": (2, 8), "b": (8, 8)}, ["8"] + ["1"] * 6, {"a-0", "a-1"}),
        # The same gang scheduled from a small member: the same packing, the same rack.
        ({"a": (2, 8), "b": (8, 8)}, ["1"] * 6 + ["8"], {"a-0", "a-1"}),
        # Two 6-CPU members cannot share an 8-CPU node: rack a (2 x 8) cannot also hold
        # the four of 3 CPUs (only 2 CPUs left on each node); rack b (4 x 8) can.
        ({"a": (2, 8), "b": (4, 8)}, ["6", "6", "3", "3", "3", "3"],
         {"b-0", "b-1", "b-2", "b-3"}),
    ],
)
def test_mixed_sizes_are_packed_into_the_domain(
    racks: dict[str, tuple[int, int]], sizes: list[str], expected_nodes: set[str]
) -> None:
    pods = [member(f"m{i}", cpu=cpu) for i, cpu in enumerate(sizes)]
    c = Cluster(nodes=_racks(racks), groups=[_group(len(pods), REQUIRED_TOPOLOGY_ANNOTATION)],
                pods=pods)
    result, status = _pre_filter(c, pods[0])
    assert status is None and result is not None
    assert result.node_names == expected_nodes


def test_members_packed_largest_first() -> None:
    from scheduler.cache.snapshot import Snapshot
    from scheduler.objects.resources import Resource
    from scheduler.plugins.coscheduling.topology import members_packed

    nodes = Snapshot.from_objects([make_node("a", cpu="4"), make_node("b", cpu="4")], []).list()
    sizes = [Resource(milli_cpu=m) for m in (1000, 1000, 1000, 1000, 4000)]
    # Largest first: 4 CPUs on a, the four small ones on b.
    assert members_packed(nodes, sizes) == 5
    assert members_packed(nodes, sizes + [Resource(milli_cpu=1)]) == 5


@pytest.mark.parametrize("seed", range(6))
def test_domain_index_chooses_as_the_full_walk(seed: int) -> None:
    """The kept per-domain totals choose what walking every node chooses, as pods come and
    go and nodes leave (random clusters)."""
    import random

    from scheduler.objects.resources import Resource
    from scheduler.plugins.coscheduling.topology import DomainIndex, choose_domain

    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", cpu=str(rng.choice([4, 8, 16])),
                       labels={RACK: f"r{rng.randrange(5)}"} if rng.random() < 0.9 else {})
             for i in range(40)]
    c = Cluster(nodes=nodes, groups=[pod_group("g", 4)])
    index = DomainIndex(RACK)
    for step in range(12):
        if step % 4 == 3 and len(c.nodes) > 10:
            c.nodes.pop(rng.randrange(len(c.nodes)))
        for j in range(rng.randrange(1, 8)):
            node = rng.choice(c.nodes)["metadata"]["name"]
            c.pods.append(member(f"p{step}-{j}", None, cpu=str(rng.choice([1, 2, 3])),
                                 node=node))
        c.refresh()
        snapshot = c.handle.snapshot()
        index.refresh(snapshot)
        for need, cpu in ((4, 2000), (12, 3000), (30, 4000)):
            request = Resource(milli_cpu=cpu, memory=1 << 20)
            missing = [] if need != 12 else [Resource(milli_cpu=rng.choice([1000, 5000]),
                                                      memory=1 << 20) for _ in range(need)]
            full, _, _ = choose_domain(snapshot.list(), RACK, request=request, need=need,
                                       missing=missing)
            fast = index.choose(request=request, need=need, missing=missing)
            assert (fast and (fast.value, fast.nodes)) == (full and (full.value, full.nodes))
