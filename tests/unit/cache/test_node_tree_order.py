"""NodeTree keeps each zone's nodes in the order they were added, through removals and
re-additions (upstream's nodeTree removes a node from its zone's array in place)."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from scheduler.cache import NodeTree
from tests.builders import make_node

ZONE = "topology.kubernetes.io/zone"


def zoned(name: str, zone: str) -> dict[str, Any]:
    return make_node(name, labels={ZONE: zone})


@pytest.mark.parametrize(
    ("ops", "expected", "count"),
    [
        pytest.param([("add", "a1", "a"), ("add", "a2", "a"), ("add", "a3", "a"),
                      ("remove", "a2", "a")], ["a1", "a3"], 2, id="remove-middle-keeps-order"),
        pytest.param([("add", "a1", "a"), ("add", "a2", "a"), ("remove", "a1", "a"),
                      ("add", "a1", "a")], ["a2", "a1"], 2, id="re-added-goes-last"),
        pytest.param([("add", "a1", "a"), ("add", "a1", "a")], ["a1"], 1, id="duplicate-ignored"),
        pytest.param([("add", "a1", "a"), ("add", "b1", "b"), ("add", "a2", "a"),
                      ("remove", "a1", "a")], ["a2", "b1"], 2, id="zones-interleaved-after-remove"),
        pytest.param([("add", "a1", "a"), ("remove", "a1", "b")], ["a1"], 1,
                     id="remove-under-wrong-zone-ignored"),
    ],
)
def test_node_tree_order_through_changes(ops: list[tuple[str, str, str]], expected: list[str],
                                         count: int) -> None:
    tree = NodeTree()
    for op, name, zone in ops:
        if op == "add":
            tree.add_node(zoned(name, zone))
        else:
            tree.remove_node(zoned(name, zone))
    assert tree.list() == expected
    assert tree.num_nodes == count


def test_node_tree_add_answers_whether_it_changed() -> None:
    tree = NodeTree()
    assert tree.add_node(zoned("a1", "a"))
    assert not tree.add_node(zoned("a1", "a"))
    assert tree.remove_node(zoned("a1", "a"))
    assert not tree.remove_node(zoned("a1", "a"))
    assert tree.list() == [] and tree.zones() == []


def _round_robin(tree: NodeTree) -> list[str]:
    """The listing as a plain round-robin loop over the zones' names (what ``list`` did
    before it was written as C loops)."""
    lists = [[n for n in tree._tree[z]] for z in tree.zones()]
    out: list[str] = []
    index = 0
    while len(out) < tree.num_nodes:
        for names in lists:
            if index < len(names):
                out.append(names[index])
        index += 1
    return out


@pytest.mark.parametrize(
    ("zones", "expected"),
    [
        pytest.param([], [], id="empty"),
        pytest.param(["a", "a", "a"], ["n0", "n1", "n2"], id="one-zone"),
        pytest.param(["a", "b", "a", "a", "c"], ["n0", "n1", "n4", "n2", "n3"],
                     id="uneven-zones"),
        pytest.param(["", "a", "", ""], ["n0", "n1", "n2", "n3"], id="no-zone-first"),
    ],
)
def test_listing_interleaves_uneven_zones(zones: list[str], expected: list[str]) -> None:
    tree = NodeTree()
    for i, zone in enumerate(zones):
        tree.add_node(zoned(f"n{i}", zone) if zone else make_node(f"n{i}"))
    assert tree.list() == expected == _round_robin(tree)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 11), st.sampled_from(["", "a", "b", "c"])),
                max_size=40))
def test_listing_equals_the_round_robin_through_any_changes(
        ops: list[tuple[bool, int, str]]) -> None:
    tree = NodeTree()
    for add, number, zone in ops:
        node = zoned(f"n{number}", zone) if zone else make_node(f"n{number}")
        if add:
            tree.add_node(node)
        else:
            tree.remove_node(node)
        assert tree.list() == _round_robin(tree)
