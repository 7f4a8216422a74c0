"""The sandbox's nodes with and without topology labels: upstream scheduler_perf's
node-default template has no zone, and the bench's shapes follow it (``--no-node-topology``)."""

from __future__ import annotations

import pytest

from scheduler.sandbox.cli import build_parser, sandbox_from_args

TOPOLOGY = {"topology.kubernetes.io/zone", "topology.kubernetes.io/region"}


@pytest.mark.parametrize(("argv", "zones"), [
    pytest.param([], ["zone-a", "zone-b", "zone-c", "zone-a"], id="default"),
    pytest.param(["--node-topology"], ["zone-a", "zone-b", "zone-c", "zone-a"], id="on"),
    pytest.param(["--no-node-topology"], None, id="off"),
])
def test_the_nodes_carry_zones_unless_told_not_to(argv: list[str],
                                                  zones: list[str] | None) -> None:
    sandbox = sandbox_from_args(build_parser().parse_args(
        ["--nodes", "4", "--no-simulate-kubelet", "--node-labels", "pool=a", *argv]))
    node_rt = sandbox.registry.catalog.builtin("", "nodes")
    labels = [sandbox.registry.get(node_rt, "", f"node-{i:04d}").obj["metadata"]["labels"]
              for i in range(4)]
    if zones is None:
        assert not TOPOLOGY & {key for node in labels for key in node}
    else:
        assert [node["topology.kubernetes.io/zone"] for node in labels] == zones
        assert {node["topology.kubernetes.io/region"] for node in labels} == {"region-1"}
    # the rest is labelled either way
    assert [(node["kubernetes.io/hostname"], node["pool"]) for node in labels] == [
        (f"node-{i:04d}", "a") for i in range(4)]
