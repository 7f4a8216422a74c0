"""``--feature-gates``: kube-scheduler's syntax and gate names; GA gates locked; gates we do
not implement refused away from their default; all or nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scheduler.config.features import GA, GATES, FeatureGateError, FeatureGates
from scheduler.exit_codes import EXIT_USAGE


def test_defaults_are_upstream_defaults() -> None:
    gates = FeatureGates()
    for g in GATES:
        assert gates.enabled(g.name) is g.default
    assert all(g.default for g in GATES if g.stage == GA)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("NodeDeclaredFeatures=false", "cannot set feature gate NodeDeclaredFeatures to false, "
                                       "feature is locked to true"),
        ("InterPodAffinityHostnameFastPath=true", "is not implemented by kube-py-scheduler"),
        ("PodLevelResources", "missing bool value for PodLevelResources"),
        ("PodLevelResources=yes", "invalid value of PodLevelResources=yes"),
    ],
    ids=["unknown", "locked", "unimplemented", "no-value", "not-bool"],
)
def test_bad_flags_are_named(flag: str, message: str) -> None:
    gates = FeatureGates()
    with pytest.raises(FeatureGateError, match=message):
        gates.set(flag)


def test_setting_is_all_or_nothing_and_accepts_defaults() -> None:
    gates = FeatureGates()
    gates.set("PodLevelResources=true, SchedulerQueueingHints=true")
    assert gates.enabled("PodLevelResources")
    with pytest.raises(FeatureGateError):
        gates.set("PodLevelResources=true,NoSuchGate=false")
    assert gates.enabled("PodLevelResources")


def test_run_refuses_a_bad_gate_with_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "scheduler", "run", "--feature-gates",
                           "NodeDeclaredFeatures=false"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == EXIT_USAGE
    assert "--feature-gates: cannot set feature gate NodeDeclaredFeatures" in done.stderr


@pytest.mark.parametrize(("flag", "message"), [
    ("DRADeviceTaints=false", None),  # GA in 1.37 but not locked until 1.38
    ("DRAPartitionableDevices=false", None),  # beta, implemented: settable
    ("DRAPrioritizedList=false", "feature is locked to true"),
    ("DRAAdminAccess=false", "feature is locked to true"),
    ("DRAConsumableCapacity=false", None),  # beta, implemented: settable
    ("DRADeviceTaintRules=false", None),  # GA in 1.37, settable: rules are then ignored
])
def test_dra_sub_gates(flag: str, message: str | None) -> None:
    gates = FeatureGates()
    if message is None:
        gates.set(flag)
        assert not gates.enabled(flag.split("=")[0])
    else:
        with pytest.raises(FeatureGateError, match=message):
            gates.set(flag)
