"""``kube-py-scheduler plugins`` reports what the framework runs, profile by profile."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.cli.plugins import _enabled_cell, plugin_rows
from scheduler.config.load import parse_config_text
from scheduler.plugins.registry import in_tree_registry

HEADER = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
"""


def rows_for(profiles: str) -> dict[str, dict[str, object]]:
    config = parse_config_text(HEADER + textwrap.dedent(profiles), source="<test>")
    return {r["name"]: r for r in plugin_rows(config, in_tree_registry())}


@pytest.mark.parametrize("profiles, plugin, enabled_at, cell", [
    pytest.param("- schedulerName: a\n", "PrioritySort", {"a": ["queueSort"]}, "a",
                 id="default-queue-sort"),
    # The newcomer's report: Coscheduling is the one queue sort, PrioritySort is not run.
    pytest.param("""\
        - schedulerName: a
          plugins:
            queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
        """, "PrioritySort", {}, "-", id="coscheduling-replaces-priority-sort"),
    pytest.param("""\
        - schedulerName: a
          plugins:
            queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
        """, "Coscheduling", {"a": ["queueSort"]}, "a:queueSort",
                 id="coscheduling-runs-only-where-enabled"),
    pytest.param("""\
        - schedulerName: a
          plugins:
            preFilter: {disabled: [{name: NodePorts}]}
            filter: {disabled: [{name: NodePorts}]}
        - schedulerName: b
        """, "NodePorts", {"b": ["preFilter", "filter"]}, "b",
                 id="disabled-at-every-point-it-implements"),
    pytest.param("""\
        - schedulerName: a
          plugins:
            score: {disabled: [{name: NodeAffinity}]}
        """, "NodeAffinity", {"a": ["preFilter", "filter", "preScore"]},
                 "a:preFilter+filter+preScore", id="disabled-at-one-point"),
])
def test_enabled_is_where_the_framework_runs_the_plugin(
    profiles: str, plugin: str, enabled_at: dict[str, list[str]], cell: str
) -> None:
    row = rows_for(profiles)[plugin]
    assert row["enabledAt"] == enabled_at
    assert row["enabledIn"] == list(enabled_at)
    assert _enabled_cell(row) == cell
