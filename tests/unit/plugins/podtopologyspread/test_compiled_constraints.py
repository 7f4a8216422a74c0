"""A pod's own spread constraints are compiled once per distinct constraints (and pod
labels, when matchLabelKeys reads them), and a malformed one raises every time."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.objects.labels import LabelSelectorError
from scheduler.plugins.podtopologyspread import common
from scheduler.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    compile_own_constraints,
    filter_constraints,
)


def constraint(**extra: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DO_NOT_SCHEDULE,
            "labelSelector": {"matchLabels": {"app": "x"}}, **extra}


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        pytest.param((constraint(), {"app": "x"}), (constraint(), {"app": "x", "v": "2"}),
                     True, id="labels-ignored-without-matchLabelKeys"),
        pytest.param((constraint(matchLabelKeys=["v"]), {"v": "1"}),
                     (constraint(matchLabelKeys=["v"]), {"v": "2"}),
                     False, id="matchLabelKeys-reads-labels"),
        pytest.param((constraint(), {}), (constraint(maxSkew=2), {}), False,
                     id="different-constraints"),
    ],
)
def test_compiled_like_filter_constraints_and_shared_when_equal(
    first: tuple[dict[str, Any], dict[str, str]], second: tuple[dict[str, Any], dict[str, str]],
    same: bool,
) -> None:
    common._COMPILED.clear()
    a = compile_own_constraints([first[0]], first[1], DO_NOT_SCHEDULE)
    b = compile_own_constraints([second[0]], second[1], DO_NOT_SCHEDULE)
    assert a == filter_constraints([first[0]], first[1], DO_NOT_SCHEDULE)
    assert b == filter_constraints([second[0]], second[1], DO_NOT_SCHEDULE)
    assert (a[0] is b[0]) is same
    a.clear()  # callers get their own list
    assert compile_own_constraints([first[0]], first[1], DO_NOT_SCHEDULE)


def test_a_malformed_constraint_raises_every_time_and_is_not_kept() -> None:
    common._COMPILED.clear()
    bad = [constraint(maxSkew="one")]
    for _ in range(2):
        with pytest.raises(LabelSelectorError, match="maxSkew"):
            compile_own_constraints(bad, {}, DO_NOT_SCHEDULE)
    assert not common._COMPILED


def test_the_plugin_reads_a_pods_constraints_once_for_both_actions() -> None:
    """PreFilter and PreScore ask about the same pod object: what the compile reads of it
    (its constraints as JSON) is taken once, and another pod is read afresh."""
    from scheduler.plugins.podtopologyspread.common import SCHEDULE_ANYWAY
    from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
    from tests.builders import PodBuilder
    from tests.fakes import FakeHandle

    def pod(name: str, skew: int) -> dict[str, Any]:
        p = PodBuilder(name).labels(app="x").obj()
        p["spec"]["topologySpreadConstraints"] = [
            constraint(maxSkew=skew),
            constraint(maxSkew=skew + 1, whenUnsatisfiable=SCHEDULE_ANYWAY)]
        return p

    plugin = PodTopologySpread({}, FakeHandle())
    first, second = pod("a", 1), pod("b", 2)
    for p in (first, first, second, first):
        for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, DO_NOT_SCHEDULE):
            got = plugin.constraints_for(p, action)
            raw = p["spec"]["topologySpreadConstraints"]
            assert got == filter_constraints(raw, p["metadata"]["labels"], action)
            got.clear()  # callers get their own list
    calls: list[int] = []
    real = common.own_constraints_key

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    common_name = "scheduler.plugins.podtopologyspread.common.own_constraints_key"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common_name, counting)
        third = pod("c", 3)
        for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            plugin.constraints_for(third, action)
    assert len(calls) == 1  # once for the pod, whatever the action
