"""NodeVolumeLimits: unique CSI volumes per driver against CSINode allocatable counts."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import features
from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.nodevolumelimits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    NodeVolumeLimits,
)
from tests.builders import NodeBuilder, PodBuilder, csi_driver
from tests.fakes import FakeHandle, node_infos
from tests.unit.plugins.volumebinding.storage import csi_node, pv, pvc, storage_class

EXCEEDED = Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
DRIVER = "csi.example.com"
OTHER = "other.example.com"
EBS_PLUGIN = "kubernetes.io/aws-ebs"

_n = iter(range(10**6))

PVS = [pv(f"pv-{i}", csi=(DRIVER, f"h{i}"), phase="Bound") for i in range(4)] + [
    pv("pv-other", csi=(OTHER, "o1"), phase="Bound"),
    pv("pv-ebs", source={"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}},
       phase="Bound"),
]
PVCS = [pvc(f"c{i}", volume=f"pv-{i}", bound=True) for i in range(4)] + [
    pvc("c-other", volume="pv-other", bound=True),
    pvc("c-ebs", volume="pv-ebs", bound=True),
    pvc("unbound-1", cls="csi"), pvc("unbound-2", cls="csi"),
    pvc("unbound-noclass", cls=None),
    pvc("prebound-missing-pv", cls="csi", volume="not-yet"),
    pvc("unbound-ebs", cls="ebs"),
]
CLASSES = [storage_class("csi", provisioner=DRIVER),
           storage_class("ebs", provisioner=EBS_PLUGIN)]


def _pod(*claims: str, node: str = "", inline: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    b = PodBuilder(f"p{next(_n)}")
    for c in claims:
        b.pvc(c)
    for i, v in enumerate(inline or []):
        b.volume({"name": f"inline{i}", **v})
    if node:
        b.node(node)
    return b.obj()


def _run(pod: dict[str, Any], existing: list[dict[str, Any]], csinode: dict[str, Any] | None,
         *, drivers: list[dict[str, Any]] | None = None,
         gates: features.FeatureGates | None = None) -> Status | None:
    infos = node_infos([NodeBuilder("n").obj()], existing)
    objects: dict[str, list[dict[str, Any]]] = {
        "persistentvolumes": PVS, "persistentvolumeclaims": PVCS, "storageclasses": CLASSES,
        "csinodes": [csinode] if csinode else [], "csidrivers": drivers or []}
    plugin = NodeVolumeLimits({}, FakeHandle(infos, objects=objects), gates=gates)
    state, info = CycleState(), PodInfo.from_pod(pod)
    _, pre = plugin.pre_filter(state, info, infos)
    if pre is not None:
        return pre
    return plugin.filter(state, info, infos[0])


LIMIT_2 = csi_node("n", {DRIVER: 2, OTHER: 1})
EBS_MIGRATED = csi_node("n", {"ebs.csi.aws.com": 1}, migrated=[EBS_PLUGIN])

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any] | None, Status | None]] = [
    ("under the limit", _pod("c0"), [_pod("c1", node="n")], LIMIT_2, None),
    ("at the limit", _pod("c0", "c1"), [], LIMIT_2, None),
    ("over the limit", _pod("c0"), [_pod("c1", "c2", node="n")], LIMIT_2, EXCEEDED),
    ("same volume already attached is not counted twice", _pod("c1"),
     [_pod("c1", "c2", node="n")], LIMIT_2, None),
    ("other driver has its own limit", _pod("c-other"), [_pod("c0", "c1", node="n")], LIMIT_2, None),
    ("other driver: the shared volume is counted once", _pod("c-other"), [_pod("c-other", node="n")], LIMIT_2, None),
    ("no CSINode means no limit", _pod("c0", "c1", "c2"), [], None, None),
    ("driver without allocatable count is unlimited", _pod("c0", "c1", "c2"), [],
     csi_node("n", {DRIVER: None}), None),
    ("unbound claims counted by provisioner", _pod("unbound-1", "unbound-2", "c0"), [],
     LIMIT_2, EXCEEDED),
    ("unbound claim without class is not counted", _pod("unbound-noclass", "c0", "c1"), [],
     LIMIT_2, None),
    ("claim pre-bound to a missing PV counted by class", _pod("prebound-missing-pv", "c0", "c1"),
     [], LIMIT_2, EXCEEDED),
    ("existing pod's unknown claim is ignored", _pod("c0"), [_pod("ghost", "c1", node="n")],
     LIMIT_2, None),
    ("migrated in-tree PV counts under its CSI driver", _pod("c-ebs"),
     [_pod(node="n", inline=[{"awsElasticBlockStore": {"volumeID": "vol-2"}}])],
     EBS_MIGRATED, EXCEEDED),
    ("same in-tree volume inline and via PV is one volume", _pod("c-ebs"),
     [_pod(node="n", inline=[{"awsElasticBlockStore": {"volumeID": "vol-1"}}])],
     EBS_MIGRATED, None),
    ("not migrated on this node: not counted", _pod("c-ebs", "unbound-ebs"),
     [_pod(node="n", inline=[{"awsElasticBlockStore": {"volumeID": "vol-2"}}])],
     csi_node("n", {"ebs.csi.aws.com": 1}), None),
    ("unbound in-tree class counted when migrated", _pod("unbound-ebs"), [_pod("c-ebs", node="n")],
     EBS_MIGRATED, EXCEEDED),
    ("pod without volumes: skip", _pod(), [], LIMIT_2, Status(Code.SKIP)),
    ("pod with only non-CSI inline volumes: skip",
     _pod(inline=[{"emptyDir": {}}, {"hostPath": {"path": "/x"}}]), [], LIMIT_2, Status(Code.SKIP)),
    ("missing claim is unresolvable", _pod("ghost"), [], LIMIT_2,
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            'looking up PVC default/ghost: persistentvolumeclaim "ghost" not found')),
]


@pytest.mark.parametrize(("pod", "existing", "csinode", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_filter(pod: dict[str, Any], existing: list[dict[str, Any]],
                csinode: dict[str, Any] | None, want: Status | None) -> None:
    assert _run(pod, existing, csinode) == want


def test_args_and_events() -> None:
    with pytest.raises(ConfigError):
        NodeVolumeLimits({"max": 3}, FakeHandle())
    plugin = NodeVolumeLimits({}, FakeHandle())
    events = {(e.event.resource, e.event.action_type): e.hint for e in plugin.events_to_register()}
    assert events[(EventResource.CSI_NODE, ActionType.ADD)] is None
    upd = events[(EventResource.CSI_NODE, ActionType.UPDATE)]
    deleted = events[(EventResource.POD, ActionType.DELETE)]
    added = events[(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD)]
    assert upd and deleted and added
    waiting = _pod("c0")
    assert upd(waiting, csi_node("n", {DRIVER: 2}), csi_node("n", {DRIVER: 3})) == QueueingHint.QUEUE
    assert upd(waiting, csi_node("n", {DRIVER: 2}), csi_node("n", {DRIVER: 1})) == QueueingHint.SKIP
    assert deleted(waiting, _pod("c1", node="n"), None) == QueueingHint.QUEUE
    assert deleted(waiting, _pod("c1"), None) == QueueingHint.SKIP
    assert deleted(waiting, _pod(node="n"), None) == QueueingHint.SKIP
    assert added(waiting, None, pvc("c0")) == QueueingHint.QUEUE
    assert added(waiting, None, pvc("zz")) == QueueingHint.SKIP


# --- VolumeLimitScaling -----------------------------------------------------------------------

def _driver(name: str, prevent: bool | None) -> dict[str, Any]:
    return csi_driver(name, attach_required=True, prevent_pod_scheduling_if_missing=prevent)


def _gates(volume_limit_scaling: bool) -> features.FeatureGates:
    gates = features.FeatureGates()
    gates.set_from_map({"VolumeLimitScaling": volume_limit_scaling})
    return gates


def _missing(driver: str) -> Status:
    return Status(Code.UNSCHEDULABLE, f"{driver} CSI driver is not installed on the node")


WITHOUT_DRIVER = csi_node("n", {OTHER: 5})
OPTED_IN = [_driver(DRIVER, True)]

# (name, gate, pod, CSINode, CSIDrivers, want)
SCALING_CASES: list[tuple[str, bool, dict[str, Any], dict[str, Any] | None,
                          list[dict[str, Any]], Status | None]] = [
    ("opted-in driver missing from the CSINode", True, _pod("c0"), WITHOUT_DRIVER, OPTED_IN,
     _missing(DRIVER)),
    ("opted-in driver and no CSINode at all", True, _pod("c0"), None, OPTED_IN,
     _missing(DRIVER)),
    ("unbound claim: the class's provisioner must be there", True, _pod("unbound-1"),
     WITHOUT_DRIVER, OPTED_IN, _missing(DRIVER)),
    ("opted-in driver registered without a count: no limit", True, _pod("c0", "c1", "c2"),
     csi_node("n", {DRIVER: None}), OPTED_IN, None),
    ("opted-in driver registered: its count still applies", True, _pod("c0", "c1", "c2"),
     LIMIT_2, OPTED_IN, EXCEEDED),
    ("driver not opted in (false): unlimited as before", True, _pod("c0"), WITHOUT_DRIVER,
     [_driver(DRIVER, False)], None),
    ("driver not opted in (unset): unlimited as before", True, _pod("c0"), None,
     [_driver(DRIVER, None)], None),
    ("no CSIDriver object: unlimited as before", True, _pod("c0"), None, [], None),
    ("another driver's opt-in does not matter", True, _pod("c0"), None,
     [_driver(OTHER, True)], None),
    ("the second driver of the pod is the missing one", True, _pod("c-other", "c0"),
     csi_node("n", {OTHER: 5}), [_driver(DRIVER, True), _driver(OTHER, True)],
     _missing(DRIVER)),
    ("gate off: the opt-in is not read", False, _pod("c0"), WITHOUT_DRIVER, OPTED_IN, None),
    ("gate off, no CSINode: unlimited", False, _pod("c0"), None, OPTED_IN, None),
]


@pytest.mark.parametrize(("gate", "pod", "csinode", "drivers", "want"),
                         [c[1:] for c in SCALING_CASES], ids=[c[0] for c in SCALING_CASES])
def test_filter_with_volume_limit_scaling(gate: bool, pod: dict[str, Any],
                                          csinode: dict[str, Any] | None,
                                          drivers: list[dict[str, Any]],
                                          want: Status | None) -> None:
    assert _run(pod, [], csinode, drivers=drivers, gates=_gates(gate)) == want


def test_volume_limit_scaling_events() -> None:
    waiting = _pod("c0")
    on = NodeVolumeLimits({}, FakeHandle(), gates=_gates(True))
    events = {(e.event.resource, e.event.action_type): e.hint for e in on.events_to_register()}
    upd = events[(EventResource.CSI_NODE, ActionType.UPDATE)]
    driver_upd = events[(EventResource.CSI_DRIVER, ActionType.UPDATE)]
    assert upd and driver_upd
    # the driver registering on the node, even without a count
    assert upd(waiting, WITHOUT_DRIVER, csi_node("n", {OTHER: 5, DRIVER: None})) == QueueingHint.QUEUE
    assert upd(waiting, csi_node("n", {DRIVER: 2}), csi_node("n", {DRIVER: 3})) == QueueingHint.QUEUE
    assert upd(waiting, csi_node("n", {DRIVER: 2}), csi_node("n", {DRIVER: 2})) == QueueingHint.SKIP
    assert driver_upd(waiting, _driver(DRIVER, True), _driver(DRIVER, False)) == QueueingHint.QUEUE
    assert driver_upd(waiting, _driver(DRIVER, True), _driver(DRIVER, None)) == QueueingHint.QUEUE
    assert driver_upd(waiting, _driver(DRIVER, False), _driver(DRIVER, True)) == QueueingHint.SKIP
    off = NodeVolumeLimits({}, FakeHandle(), gates=_gates(False))
    off_events = {(e.event.resource, e.event.action_type): e.hint
                  for e in off.events_to_register()}
    assert (EventResource.CSI_DRIVER, ActionType.UPDATE) not in off_events
    off_upd = off_events[(EventResource.CSI_NODE, ActionType.UPDATE)]
    assert off_upd
    assert off_upd(waiting, WITHOUT_DRIVER, csi_node("n", {OTHER: 5, DRIVER: None})) == QueueingHint.SKIP
