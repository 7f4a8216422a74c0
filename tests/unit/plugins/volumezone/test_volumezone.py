"""VolumeZone: bound PVs' zone/region labels against node labels."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.volumezone import ERR_REASON_CONFLICT, VolumeZone
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos
from tests.unit.plugins.volumebinding.storage import pv, pvc, storage_class

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)


def _bound(name: str, **labels: str) -> tuple[dict[str, Any], dict[str, Any]]:
    fixed = {k.replace("__", "/").replace("_", "."): v for k, v in labels.items()}
    return pv(f"pv-{name}", labels=fixed, phase="Bound"), pvc(name, volume=f"pv-{name}", bound=True)


PVS_PVCS = [
    _bound("zone-a", **{"topology_kubernetes_io__zone": "a"}),
    _bound("beta-zone-a", **{"failure-domain_beta_kubernetes_io__zone": "a"}),
    _bound("multi", **{"topology_kubernetes_io__zone": "a__b"}),
    _bound("region-r1", **{"topology_kubernetes_io__region": "r1"}),
    _bound("bad-label", **{"topology_kubernetes_io__zone": "a__"}),
    _bound("plain"),
]
OBJECTS = {
    "persistentvolumes": [p for p, _ in PVS_PVCS],
    "persistentvolumeclaims": [c for _, c in PVS_PVCS] + [
        pvc("wffc", cls="local"), pvc("immediate", cls="imm"), pvc("no-class", cls=None),
        pvc("dangling", volume="missing", bound=True), pvc("unknown-class", cls="nope")],
    "storageclasses": [storage_class("local"), storage_class("imm", mode="Immediate")],
}

FILTER_CASES: list[tuple[str, str, dict[str, str], Status | None]] = [
    ("same zone", "zone-a", {ZONE: "a"}, None),
    ("other zone", "zone-a", {ZONE: "b"}, CONFLICT),
    ("node without topology labels fits anything", "zone-a", {}, None),
    ("node with only region lacks the zone", "zone-a", {REGION: "r1"}, CONFLICT),
    ("beta PV label matches GA node label", "beta-zone-a", {ZONE: "a"}, None),
    ("beta PV label matches beta node label", "beta-zone-a", {BETA_ZONE: "a"}, None),
    ("GA PV label does not read beta node label", "zone-a", {BETA_ZONE: "a"}, CONFLICT),
    ("multi-zone label, second zone", "multi", {ZONE: "b"}, None),
    ("multi-zone label, other zone", "multi", {ZONE: "c"}, CONFLICT),
    ("region match", "region-r1", {ZONE: "x", REGION: "r1"}, None),
    ("region mismatch", "region-r1", {REGION: "r2"}, CONFLICT),
]


@pytest.mark.parametrize(("claim", "labels", "want"), [c[1:] for c in FILTER_CASES],
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(claim: str, labels: dict[str, str], want: Status | None) -> None:
    node = NodeBuilder("n").obj()
    node["metadata"]["labels"] = labels
    infos = node_infos([node])
    plugin = VolumeZone({}, FakeHandle(infos, objects=OBJECTS))
    state, info = CycleState(), PodInfo.from_pod(PodBuilder("p").pvc(claim).obj())
    _, pre = plugin.pre_filter(state, info, infos)
    assert pre is None
    assert plugin.filter(state, info, infos[0]) == want
    # Without PreFilter state the Filter computes the same answer.
    assert plugin.filter(CycleState(), info, infos[0]) == want


def _unres(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)


PRE_CASES: list[tuple[str, str, Status | None]] = [
    ("unbound WaitForFirstConsumer is skipped", "wffc", Status(Code.SKIP)),
    ("PV without topology labels", "plain", Status(Code.SKIP)),
    ("unparsable zone label constrains nothing", "bad-label", Status(Code.SKIP)),
    ("unbound immediate claim", "immediate", _unres("PersistentVolume had no name")),
    ("unbound claim without class", "no-class",
     _unres("PersistentVolumeClaim had no pv name and storageClass name")),
    ("unknown class", "unknown-class", _unres('storageclass.storage.k8s.io "nope" not found')),
    ("missing claim", "ghost", _unres('persistentvolumeclaim "ghost" not found')),
    ("missing PV", "dangling", _unres('persistentvolume "missing" not found')),
]


@pytest.mark.parametrize(("claim", "want"), [c[1:] for c in PRE_CASES], ids=[c[0] for c in PRE_CASES])
def test_pre_filter(claim: str, want: Status | None) -> None:
    plugin = VolumeZone({}, FakeHandle(objects=OBJECTS))
    _, got = plugin.pre_filter(CycleState(), PodInfo.from_pod(PodBuilder("p").pvc(claim).obj()), [])
    assert got == want


def test_args_and_events() -> None:
    with pytest.raises(ConfigError):
        VolumeZone({"zone": "a"}, FakeHandle())
    plugin = VolumeZone({}, FakeHandle())
    events = {(e.event.resource, e.event.action_type): e.hint for e in plugin.events_to_register()}
    pod = PodBuilder("p").pvc("c").obj()
    sc_hint = events[(EventResource.STORAGE_CLASS, ActionType.ADD)]
    pv_hint = events[(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE)]
    pvc_hint = events[(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE)]
    assert sc_hint and pv_hint and pvc_hint
    assert sc_hint(pod, None, storage_class("x")) == QueueingHint.QUEUE
    assert sc_hint(pod, None, storage_class("x", mode="Immediate")) == QueueingHint.SKIP
    old = pv("p", labels={ZONE: "a"})
    assert pv_hint(pod, old, pv("p", labels={ZONE: "a"}, rv="2")) == QueueingHint.SKIP
    assert pv_hint(pod, old, pv("p", labels={ZONE: "b"})) == QueueingHint.QUEUE
    assert pv_hint(pod, None, old) == QueueingHint.QUEUE
    assert pvc_hint(pod, None, pvc("c")) == QueueingHint.QUEUE
    assert pvc_hint(pod, None, pvc("c", ns="x")) == QueueingHint.SKIP
