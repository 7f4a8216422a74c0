"""A batch Filter without its PreFilter data answers an Error per node, as upstream does."""

from __future__ import annotations

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from tests.builders import make_node, make_pod
from tests.fakes import FakeHandle


@pytest.mark.parametrize("plugin_cls", [InterPodAffinity, PodTopologySpread])
def test_filter_nodes_without_pre_filter_state_errs_per_node(plugin_cls: type) -> None:
    plugin = plugin_cls({}, FakeHandle())
    with_node = NodeInfo()
    with_node.set_node(make_node("n1"))
    without_node = NodeInfo()
    statuses = plugin.filter_nodes(CycleState(), PodInfo.from_pod(make_pod("p")),
                                   [with_node, without_node])
    assert [s.code for s in statuses] == [Code.ERROR, Code.ERROR]
    assert "from cycleState: not found" in statuses[0].message()
    assert statuses[1].message() == "node not found"
    assert statuses[0] is not statuses[1]
