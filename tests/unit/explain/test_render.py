"""The table fits a 100-column terminal for 5 and for 5000 nodes; wide lists every node;
JSON carries the simulator's keys."""

from __future__ import annotations

import json

import pytest

from scheduler.explain.engine import (
    Explanation,
    GangState,
    NodeVerdict,
    PreemptionCandidate,
    PreemptionPlan,
    Victim,
)
from scheduler.explain.render import WIDTH, render

REASONS = [
    ("NodeResourcesFit", ["Insufficient cpu"]),
    ("TaintToleration", ["node(s) had untolerated taint {dedicated: a-very-long-team-name-gpu}"]),
    ("NodeAffinity", ["node(s) didn't match Pod's node affinity/selector"]),
]


def explanation(nodes: int, *, feasible_every: int = 0) -> Explanation:
    verdicts = []
    for i in range(nodes):
        name = f"worker-node-with-a-long-name-{i:05d}"
        if feasible_every and i % feasible_every == 0:
            verdicts.append(NodeVerdict(name))
            continue
        plugin, reasons = REASONS[i % len(REASONS)]
        verdicts.append(NodeVerdict(name, plugin, "Unschedulable", list(reasons)))
    e = Explanation(
        pod="default/web", profile="py-scheduler", num_nodes=nodes, daemon_nodes_to_find=100,
        filter_plugins=["NodeUnschedulable", "TaintToleration", "NodeAffinity",
                        "NodeResourcesFit"],
        prefilter_status={"NodeResourcesFit": "success"}, prefilter_result={},
        verdicts=verdicts,
    )
    feasible = [v.node for v in verdicts if v.feasible]
    if feasible:
        e.scored_nodes = feasible
        e.totals = {n: 300 - i % 7 for i, n in enumerate(feasible)}
        e.score_columns = {"NodeResourcesFit": (
            [90] * len(feasible), [90] * len(feasible), [90] * len(feasible))}
        e.score_weights = {"NodeResourcesFit": 1}
        e.selected = feasible[0]
        e.ties = [feasible[0]]
    else:
        e.message = "0/%d nodes are available: %s." % (nodes, ", ".join(
            f"{nodes // 3} {r[0]}" for _, r in REASONS))
        e.preemption = PreemptionPlan(
            message="", chosen=verdicts[0].node,
            candidates=[PreemptionCandidate(v.node, [Victim(f"default/low-{j}", 0)
                                                     for j in range(20)], 0)
                        for v in verdicts[:50]])
    e.gang = GangState(pod_group="default/train", found=True, min_member=4, members=2,
                       pending=[f"default/train-{i}" for i in range(300)],
                       missing="2 more member pod(s) must exist")
    return e


@pytest.mark.parametrize("nodes", [5, 5000])
@pytest.mark.parametrize("feasible_every", [0, 2])
def test_the_table_fits_100_columns_at_any_size(nodes: int, feasible_every: int) -> None:
    text = render(explanation(nodes, feasible_every=feasible_every), "table")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert len(lines) < 45
    if nodes == 5000:
        assert "more" in text  # node names are elided, with how many more


def test_grouped_counts_add_up_to_every_node() -> None:
    text = render(explanation(5000), "table")
    counts = [int(line.split()[0]) for line in text.splitlines()
              if line.strip() and line.split()[0].isdigit()]
    assert sum(counts) == 5000


def test_wide_lists_every_node() -> None:
    e = explanation(50, feasible_every=5)
    text = render(e, "wide")
    assert all(v.node in text for v in e.verdicts)


def test_json_uses_the_simulator_keys_with_string_values() -> None:
    e = explanation(6, feasible_every=2)
    result = json.loads(render(e, "json"))
    for key in ("prefilter-result-status", "prefilter-result", "filter-result",
                "postfilter-result", "prescore-result", "score-result", "finalscore-result",
                "selected-node"):
        assert key in result
    node = e.verdicts[1]
    assert result["filter-result"][node.node] == {
        "NodeUnschedulable": "passed", "TaintToleration": node.reason}
    first = e.scored_nodes[0]
    assert result["finalscore-result"][first] == {"NodeResourcesFit": "90"}
    assert result["selected-node"] == first
