"""Toleration operators Lt and Gt (KEP-5471, alpha behind TaintTolerationComparisonOperators):
rows from upstream's TestCompareNumericValues and TestTolerationToleratesTaint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.cli.run import apply_feature_gates
from scheduler.config.features import FeatureGates
from scheduler.objects.taints import (
    NO_SCHEDULE,
    OP_EQUAL,
    OP_EXISTS,
    OP_GT,
    OP_LT,
    Taint,
    Toleration,
    compare_numeric_values,
    comparison_operators_enabled,
    set_comparison_operators,
    tolerates,
)


@pytest.fixture
def gate_on() -> Iterator[None]:
    set_comparison_operators(True)
    yield
    set_comparison_operators(False)


@pytest.mark.parametrize(
    ("toleration", "taint", "op", "expected"),
    [
        ("100", "200", OP_GT, True), ("200", "100", OP_GT, False), ("100", "100", OP_GT, False),
        ("-100", "-50", OP_GT, True), ("-50", "-100", OP_GT, False), ("0", "1", OP_GT, True),
        ("9223372036854775806", "9223372036854775807", OP_GT, True),
        ("200", "100", OP_LT, True), ("100", "200", OP_LT, False), ("100", "100", OP_LT, False),
        ("-50", "-100", OP_LT, True), ("-100", "-50", OP_LT, False), ("0", "-1", OP_LT, True),
        # not canonical integers: never a match
        ("abc", "100", OP_GT, False), ("", "100", OP_GT, False), ("0100", "200", OP_GT, False),
        ("+100", "200", OP_GT, False), ("100.5", "200", OP_GT, False), ("-", "100", OP_GT, False),
        ("100", "xyz", OP_GT, False), ("100", "", OP_GT, False), ("100", "0200", OP_GT, False),
        ("100", "+200", OP_LT, False), ("100", " 200 ", OP_LT, False),
        # other operators are no numeric comparison
        ("100", "100", OP_EQUAL, False), ("100", "100", OP_EXISTS, False),
        ("0", "0", OP_GT, False), ("0", "0", OP_LT, False),
        ("0", "9223372036854775807", OP_GT, True), ("0", "-9223372036854775808", OP_LT, True),
        # beyond int64
        ("0", "9223372036854775808", OP_GT, False),
    ],
)
def test_compare_numeric_values(toleration: str, taint: str, op: str, expected: bool) -> None:
    assert compare_numeric_values(toleration, taint, op) is expected


SLA = "node.kubernetes.io/sla"


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration(SLA, OP_GT, "950", NO_SCHEDULE), Taint(SLA, "800", NO_SCHEDULE), False),
        (Toleration(SLA, OP_GT, "750", NO_SCHEDULE), Taint(SLA, "950", NO_SCHEDULE), True),
        (Toleration(SLA, OP_LT, "800", NO_SCHEDULE), Taint(SLA, "950", NO_SCHEDULE), False),
        (Toleration(SLA, OP_LT, "950", NO_SCHEDULE), Taint(SLA, "800", NO_SCHEDULE), True),
        (Toleration(SLA, OP_GT, "950", NO_SCHEDULE), Taint(SLA, "950", NO_SCHEDULE), False),
        (Toleration(SLA, OP_GT, "950", NO_SCHEDULE), Taint(SLA, "high", NO_SCHEDULE), False),
        (Toleration("k", OP_GT, "-100", NO_SCHEDULE), Taint("k", "-200", NO_SCHEDULE), False),
        # the key and effect still have to match
        (Toleration("other", OP_GT, "750", NO_SCHEDULE), Taint(SLA, "950", NO_SCHEDULE), False),
    ],
)
def test_tolerates_with_the_gate_on(gate_on: None, toleration: Toleration, taint: Taint,
                                    expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_gate_off_never_matches_lt_or_gt() -> None:
    assert not comparison_operators_enabled()
    assert not tolerates(Toleration(SLA, OP_GT, "750", NO_SCHEDULE),
                         Taint(SLA, "950", NO_SCHEDULE))


def test_feature_gates_flag_turns_the_operators_on() -> None:
    gates = FeatureGates()
    gates.set("TaintTolerationComparisonOperators=true")
    try:
        apply_feature_gates(gates)
        assert comparison_operators_enabled()
    finally:
        set_comparison_operators(False)


def test_feature_gates_flag_turns_the_pod_level_resize_report_on() -> None:
    from scheduler.objects.pod import pod_requests, set_pod_level_resources_resize
    from tests.builders import PodBuilder

    pod = (PodBuilder("p").container("c").pod_resources(requests={"cpu": "2"})
           .set("status.allocatedResources", {"cpu": "4"})
           .set("status.resources", {"requests": {"cpu": "4"}}).obj())
    gates = FeatureGates()
    gates.set("InPlacePodLevelResourcesVerticalScaling=true")
    try:
        apply_feature_gates(gates)
        assert pod_requests(pod).milli_cpu == 4000
    finally:
        set_pod_level_resources_resize(False)
