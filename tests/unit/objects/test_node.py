from typing import Any

import pytest

from scheduler.objects.errors import ObjectError
from scheduler.objects.node import (
    node_allocatable,
    node_condition,
    node_images,
    node_is_unschedulable,
    node_labels,
    node_name,
)
from scheduler.objects.resources import Resource
from tests.builders import NodeBuilder, make_node


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (make_node("n", cpu="4", memory="16Gi", pods=110),
         Resource(4000, 16 * 2**30, allowed_pod_number=110)),
        (NodeBuilder("n").capacity(cpu="8", memory="1Gi", pods=10)
         .allocatable(cpu="7500m", memory="900Mi").obj(),
         Resource(7500, 900 * 2**20)),
        (NodeBuilder("n").capacity(cpu=2, **{"nvidia.com/gpu": 4}).obj(),
         Resource(2000, scalar_resources={"nvidia.com/gpu": 4})),
        (NodeBuilder("n").obj(), Resource()),
    ],
    ids=["make_node", "allocatable-overrides", "scalar", "empty"],
)
def test_node_allocatable(node: dict[str, Any], expected: Resource) -> None:
    assert node_allocatable(node) == expected


def test_node_allocatable_error() -> None:
    node = NodeBuilder("n1").set("status.allocatable", {"cpu": "lots"}).obj()
    with pytest.raises(ObjectError, match=r'^Node n1: status.allocatable.cpu: invalid quantity'):
        node_allocatable(node)


def test_node_helpers() -> None:
    node = (NodeBuilder("n1").labels(zone="a").unschedulable()
            .images(("nginx:1", 100), (["a", "b"], 5)).condition("Ready", "False").obj())
    assert node_name(node) == "n1"
    assert node_labels(node)["zone"] == "a"
    assert node_is_unschedulable(node)
    assert not node_is_unschedulable(make_node("x"))
    assert node_images(node) == [(["nginx:1"], 100), (["a", "b"], 5)]
    cond = node_condition(node, "Ready")
    assert cond is not None and cond["status"] == "False"
    assert node_condition(node, "DiskPressure") is None
