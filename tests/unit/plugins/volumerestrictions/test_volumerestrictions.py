"""VolumeRestrictions: inline disk conflicts and ReadWriteOncePod claims."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
)
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos
from tests.unit.plugins.volumebinding.storage import pvc

_n = iter(range(10**6))


def _pod(*volumes: dict[str, Any], node: str = "", ns: str = "default") -> dict[str, Any]:
    b = PodBuilder(f"p{next(_n)}", ns)
    for i, v in enumerate(volumes):
        b.volume({"name": f"v{i}", **v})
    if node:
        b.node(node)
    return b.obj()


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def ebs(vid: str, ro: bool = False) -> dict[str, Any]:
    return {"awsElasticBlockStore": {"volumeID": vid, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"iscsi": {"targetPortal": "1.2.3.4:3260", "iqn": iqn, "lun": 0, "readOnly": ro}}


def rbd(monitors: list[str], image: str, pool: str = "", ro: bool = False) -> dict[str, Any]:
    src: dict[str, Any] = {"monitors": monitors, "image": image, "readOnly": ro}
    if pool:
        src["pool"] = pool
    return {"rbd": src}


def claim(name: str) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": name}}


DISK = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT)
RWOP = Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Status | None]] = [
    ("same GCE PD read-write", _pod(gce("d")), [_pod(gce("d"))], DISK),
    ("same GCE PD both read-only", _pod(gce("d", True)), [_pod(gce("d", True))], None),
    ("same GCE PD one read-only", _pod(gce("d", True)), [_pod(gce("d"))], DISK),
    ("different GCE PD", _pod(gce("d")), [_pod(gce("e"))], None),
    ("same EBS even read-only", _pod(ebs("v", True)), [_pod(ebs("v", True))], DISK),
    ("different EBS", _pod(ebs("v")), [_pod(ebs("w"))], None),
    ("same ISCSI IQN", _pod(iscsi("iqn.a")), [_pod(iscsi("iqn.a"))], DISK),
    ("same ISCSI IQN read-only", _pod(iscsi("iqn.a", True)), [_pod(iscsi("iqn.a", True))], None),
    ("RBD sharing a monitor, same pool and image",
     _pod(rbd(["m1", "m2"], "img")), [_pod(rbd(["m2", "m3"], "img", pool="rbd"))], DISK),
    ("RBD different pool", _pod(rbd(["m1"], "img")), [_pod(rbd(["m1"], "img", pool="other"))], None),
    ("RBD no common monitor", _pod(rbd(["m1"], "img")), [_pod(rbd(["m2"], "img"))], None),
    ("RBD all read-only", _pod(rbd(["m1"], "img", ro=True)), [_pod(rbd(["m1"], "img", ro=True))], None),
    ("no conflict with other kinds", _pod(gce("d")), [_pod(ebs("d"))], None),
]


@pytest.mark.parametrize(("pod", "existing", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_disk_conflicts(pod: dict[str, Any], existing: list[dict[str, Any]], want: Status | None) -> None:
    node = NodeBuilder("n").obj()
    for e in existing:
        e["spec"]["nodeName"] = "n"
    infos = node_infos([node], existing)
    plugin = VolumeRestrictions({}, FakeHandle(infos))
    state = CycleState()
    info = PodInfo.from_pod(pod)
    _, pre = plugin.pre_filter(state, info, infos)
    assert pre is None
    assert plugin.filter(state, info, infos[0]) == want


def _rwop_env(existing: list[dict[str, Any]]) -> tuple[VolumeRestrictions, list[Any]]:
    nodes = [NodeBuilder("n1").obj(), NodeBuilder("n2").obj()]
    infos = node_infos(nodes, existing)
    handle = FakeHandle(infos, objects={"persistentvolumeclaims": [
        pvc("once", modes=("ReadWriteOncePod",)), pvc("shared", modes=("ReadWriteMany",))]})
    return VolumeRestrictions({}, handle), infos


def test_read_write_once_pod_in_use_anywhere_rejects_every_node() -> None:
    holder = _pod(claim("once"), node="n1")
    plugin, infos = _rwop_env([holder])
    state, info = CycleState(), PodInfo.from_pod(_pod(claim("once")))
    _, pre = plugin.pre_filter(state, info, infos)
    assert pre is None
    assert [plugin.filter(state, info, ni) for ni in infos] == [RWOP, RWOP]
    # Preemption removing the holder frees the claim.
    copy_state = state.clone()
    assert plugin.remove_pod(copy_state, info, PodInfo.from_pod(holder), infos[0]) is None
    assert plugin.filter(copy_state, info, infos[0]) is None
    assert plugin.filter(state, info, infos[0]) == RWOP
    # A nominated pod using it blocks again.
    assert plugin.add_pod(copy_state, info, PodInfo.from_pod(holder), infos[0]) is None
    assert plugin.filter(copy_state, info, infos[0]) == RWOP


def test_read_write_once_pod_unused_and_other_modes_skip() -> None:
    plugin, infos = _rwop_env([_pod(claim("shared"), node="n1")])
    for pod in (_pod(claim("once")), _pod(claim("shared"))):
        _, pre = plugin.pre_filter(CycleState(), PodInfo.from_pod(pod), infos)
        assert pre == Status(Code.SKIP)


def test_same_claim_name_in_other_namespace_does_not_conflict() -> None:
    plugin, infos = _rwop_env([_pod(claim("once"), node="n1", ns="other")])
    _, pre = plugin.pre_filter(CycleState(), PodInfo.from_pod(_pod(claim("once"))), infos)
    assert pre == Status(Code.SKIP)


def test_missing_claim_is_unresolvable() -> None:
    plugin, infos = _rwop_env([])
    _, pre = plugin.pre_filter(CycleState(), PodInfo.from_pod(_pod(claim("nope"))), infos)
    assert pre == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "nope" not found')


def test_args_rejected() -> None:
    with pytest.raises(ConfigError, match=r"VolumeRestrictions\.args\.x"):
        VolumeRestrictions({"x": 1}, FakeHandle())


def test_events_and_hints() -> None:
    plugin = VolumeRestrictions({}, FakeHandle())
    events = {(e.event.resource, e.event.action_type): e.hint for e in plugin.events_to_register()}
    assert (EventResource.NODE, ActionType.ADD) in events
    pod_hint = events[(EventResource.POD, ActionType.DELETE)]
    pvc_hint = events[(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD)]
    assert pod_hint is not None and pvc_hint is not None
    waiting = _pod(gce("d"), claim("c"))
    assert pod_hint(waiting, _pod(gce("d"), node="n"), None) == QueueingHint.QUEUE
    assert pod_hint(waiting, _pod(claim("c"), node="n"), None) == QueueingHint.QUEUE
    assert pod_hint(waiting, _pod(gce("other"), node="n"), None) == QueueingHint.SKIP
    assert pod_hint(waiting, _pod(gce("d"), node="n", ns="x"), None) == QueueingHint.SKIP
    assert pvc_hint(waiting, None, pvc("c")) == QueueingHint.QUEUE
    assert pvc_hint(waiting, None, pvc("d")) == QueueingHint.SKIP
