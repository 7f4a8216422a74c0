"""The plugins whose PreFilter result left nodes out (NodeAffinity pinning a node by name, as
a DaemonSet's pod does) count among the pod's unschedulable plugins when no node fits, beside
the Filter plugins that rejected the rest: the pod is requeued by their events too."""

from __future__ import annotations

import pytest

from scheduler.framework.types import FitError
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder
from tests.offline import cache_with, default_framework, scheduling_cycle


def test_a_prefilter_result_names_its_plugin_in_the_diagnosis() -> None:
    cache, snapshot = cache_with(NodeBuilder(f"n{i}").capacity(cpu="1", memory="4Gi", pods=10).obj()
                                 for i in range(3))
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot)
    pod = PodBuilder("ds-pod").uid("uid-ds").req(cpu="2").required_node_affinity([
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]).obj()
    cache.update_snapshot(snapshot)
    with pytest.raises(FitError) as raised:
        cycle.schedule_pod(fwk, fwk.new_cycle_state(), PodInfo.from_pod(pod))
    diagnosis = raised.value.diagnosis
    assert diagnosis.unschedulable_plugins == {"NodeAffinity", "NodeResourcesFit"}
    assert diagnosis.node_to_status["n1"].plugin == "NodeResourcesFit"
