"""NodeTree keeps each zone's nodes in the order they were added, through removals and
re-additions (upstream's nodeTree removes a node from its zone's array in place)."""

from __future__ import annotations

from typing import Any

import pytest

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
