"""kube-scheduler's feature gates, by upstream's names, and the release we match.

``--feature-gates`` takes kube-scheduler's syntax (``Name=true,Other=false``).  ``GATES`` lists
every scheduler-relevant gate since 1.30 with its stage and default in the release named by
``KUBE_SCHEDULER_RELEASE``, and whether kube-py-scheduler implements it; ``docs/parity.md``
is checked against this list by ``tests/unit/config/test_parity_table.py``.  GA gates are
locked to true, as upstream locks them; a gate we do not implement is refused when set to a
value other than its default (silently accepting it would claim a behaviour we lack).

One process-wide set (``DEFAULT``), as upstream's ``utilfeature.DefaultFeatureGate``: the
command line sets it once before the daemon is built; plugins read it at construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler import KUBE_SCHEDULER_RELEASE

__all__ = [
    "KUBE_SCHEDULER_RELEASE",
    "ALPHA",
    "BETA",
    "GA",
    "DEPRECATED",
    "FeatureGate",
    "FeatureGates",
    "FeatureGateError",
    "GATES",
    "DEFAULT",
]

ALPHA = "Alpha"
BETA = "Beta"
GA = "GA"
DEPRECATED = "Deprecated"


@dataclass(frozen=True, slots=True)
class FeatureGate:
    name: str
    stage: str  # in KUBE_SCHEDULER_RELEASE
    default: bool
    implemented: bool  # does kube-py-scheduler behave as upstream with the gate on?
    # upstream locks a GA gate to its default, except the few GA gates still settable for a
    # release (``LockToDefault: false``)
    lock: bool | None = None

    @property
    def locked(self) -> bool:
        return self.stage == GA if self.lock is None else self.lock


def _g(name: str, stage: str, default: bool, implemented: bool, *,
       lock: bool | None = None) -> FeatureGate:
    return FeatureGate(name, stage, default, implemented, lock)


# Scheduler-relevant gates since 1.30 (pkg/features/kube_features.go), as of 1.37.
GATES: tuple[FeatureGate, ...] = (
    _g("DynamicResourceAllocation", GA, True, True),
    # DRA's sub-gates (docs/dra.md)
    _g("DRAAdminAccess", GA, True, True),
    _g("DRAConsumableCapacity", BETA, True, True),
    _g("DRADerivedAttributes", ALPHA, False, False),
    _g("DRADeviceBindingConditions", BETA, True, True),
    _g("DRADeviceCompatibilityGroups", ALPHA, False, False),
    _g("DRADeviceTaintRules", GA, True, True, lock=False),
    _g("DRADeviceTaints", GA, True, True, lock=False),
    _g("DRAExtendedResource", GA, True, True),
    _g("DRAFractionalCapacityRange", BETA, True, True),
    _g("DRAListTypeAttributes", ALPHA, False, False),
    _g("DRANodeAllocatableResources", ALPHA, False, False),
    _g("DRAOptionalNodeOperations", ALPHA, False, False),
    _g("DRAPartitionableDevices", BETA, True, True),
    _g("DRAPrioritizedList", GA, True, True),
    _g("DRAResourceClaimDeviceStatus", GA, True, True),
    _g("DRASchedulerFilterTimeout", BETA, True, True),
    _g("DRAWorkloadResourceClaims", BETA, False, False),
    _g("InPlacePodVerticalScaling", GA, True, True),
    _g("InPlacePodLevelResourcesVerticalScaling", ALPHA, False, True),
    _g("InPlacePodVerticalScalingSchedulerPreemption", ALPHA, False, False),
    _g("InterPodAffinityHostnameFastPath", ALPHA, False, False),
    _g("MatchLabelKeysInPodAffinity", GA, True, True),
    _g("MatchLabelKeysInPodTopologySpread", GA, True, True),
    _g("NodeDeclaredFeatures", GA, True, True),
    _g("NominatedNodeNameForExpectation", BETA, True, True),
    _g("OpportunisticBatching", BETA, True, True),
    _g("PodLevelResources", BETA, True, True),
    _g("PodSchedulingReadiness", GA, True, True),
    _g("SchedulerAsyncAPICalls", BETA, True, True),
    _g("SchedulerAsyncPreemption", GA, True, True),
    _g("SchedulerPopFromBackoffQ", GA, True, True),
    _g("SchedulerQueueingHints", GA, True, True),
    _g("StorageCapacityScoring", BETA, True, True),
    _g("TaintTolerationComparisonOperators", ALPHA, False, True),
    _g("VolumeLimitScaling", BETA, True, True),
)


class FeatureGateError(ValueError):
    """A bad ``--feature-gates`` value; the message names the gate."""


class FeatureGates:
    """Gate values: upstream's defaults, overridden by ``--feature-gates``."""

    def __init__(self, gates: Iterable[FeatureGate] = GATES) -> None:
        self._known = {g.name: g for g in gates}
        self._values = {name: g.default for name, g in self._known.items()}

    def enabled(self, name: str) -> bool:
        if name not in self._known:
            raise KeyError(f"unknown feature gate {name!r}")
        return self._values[name]

    def known(self) -> Mapping[str, FeatureGate]:
        return self._known

    def set_from_map(self, values: Mapping[str, bool]) -> None:
        """Apply ``{name: value}`` all or nothing (a bad entry changes no gate)."""
        for name, value in values.items():
            gate = self._known.get(name)
            if gate is None:
                raise FeatureGateError(
                    f"unrecognized feature gate: {name} (known: {', '.join(sorted(self._known))})")
            if gate.locked and value is not gate.default:
                raise FeatureGateError(
                    f"cannot set feature gate {name} to {str(value).lower()}, "
                    f"feature is locked to {str(gate.default).lower()}")
            if not gate.implemented and value is not gate.default:
                raise FeatureGateError(
                    f"feature gate {name} ({gate.stage}) is not implemented by "
                    f"kube-py-scheduler; it can only be {str(gate.default).lower()}")
        self._values.update(values)

    def set(self, flag: str) -> None:
        """Parse kube-scheduler's ``--feature-gates`` syntax: ``A=true,B=false``."""
        self.set_from_map(parse_feature_gates(flag))

    def reset(self) -> None:
        self._values = {name: g.default for name, g in self._known.items()}


def parse_feature_gates(flag: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for part in flag.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip().lower()
        if not sep or not name:
            raise FeatureGateError(f"missing bool value for {part}")
        if raw not in ("true", "false"):
            raise FeatureGateError(f"invalid value of {name}={raw}, err: not a boolean")
        out[name] = raw == "true"
    return out


DEFAULT = FeatureGates()
