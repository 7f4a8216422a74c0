"""NodePorts: host port conflicts (0.0.0.0 semantics), Skip, and the pod-deleted hint."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.nodeports import ERR_REASON, NAME, NodePorts, fits
from scheduler.plugins.registry import in_tree_registry
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos

_counter = iter(range(10**6))


def _port(spec: str) -> dict[str, Any]:
    """A container port from ``PROTO/IP/PORT`` (IP may be empty)."""
    proto, ip, port = spec.split("/")
    p: dict[str, Any] = {"containerPort": int(port), "hostPort": int(port), "protocol": proto}
    if ip:
        p["hostIP"] = ip
    return p


def _pod(*ports: str, node: str = "", init_ports: tuple[str, ...] = (),
         sidecar_ports: tuple[str, ...] = (), nominated: str = "") -> dict[str, Any]:
    """A pod whose container wants ``ports`` (``PROTO/IP/PORT``)."""
    b = PodBuilder(f"p{next(_counter)}").container(ports=[_port(s) for s in ports])
    if init_ports:
        b.init_container(ports=[_port(s) for s in init_ports])
    if sidecar_ports:
        b.sidecar(ports=[_port(s) for s in sidecar_ports])
    if node:
        b.node(node)
    if nominated:
        b.nominated_node(nominated)
    return b.obj()


def _plugin() -> NodePorts:
    return NodePorts({}, FakeHandle())


def test_name_and_registry() -> None:
    assert NAME == names.NODE_PORTS == NodePorts.NAME == _plugin().name
    assert in_tree_registry().get(names.NODE_PORTS) is NodePorts


def test_unknown_args_rejected() -> None:
    with pytest.raises(ConfigError, match=r"NodePorts\.args\.x"):
        NodePorts({"x": 1}, FakeHandle())


UNSCHED = Status(Code.UNSCHEDULABLE, ERR_REASON)

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Status | None]] = [
    ("other port", _pod("UDP/127.0.0.1/8080"), [_pod("UDP/127.0.0.1/9090", node="m1")], None),
    ("same udp port", _pod("UDP/127.0.0.1/8080"), [_pod("UDP/127.0.0.1/8080", node="m1")],
     UNSCHED),
    ("same tcp port", _pod("TCP/127.0.0.1/8080"), [_pod("TCP/127.0.0.1/8080", node="m1")],
     UNSCHED),
    ("different host ip", _pod("TCP/127.0.0.1/8080"), [_pod("TCP/127.0.0.2/8080", node="m1")],
     None),
    ("different protocol", _pod("UDP/127.0.0.1/8080"), [_pod("TCP/127.0.0.1/8080", node="m1")],
     None),
    ("second port conflicts", _pod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
     [_pod("UDP/127.0.0.1/8080", node="m1")], UNSCHED),
    ("first port conflicts", _pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
     [_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081", node="m1")], UNSCHED),
    ("wanted 0.0.0.0 conflicts with a specific ip", _pod("TCP/0.0.0.0/8001"),
     [_pod("TCP/127.0.0.1/8001", node="m1")], UNSCHED),
    ("wanted empty ip means 0.0.0.0", _pod("TCP//8001"),
     [_pod("TCP/127.0.0.1/8001", node="m1")], UNSCHED),
    ("specific and 0.0.0.0 wanted, specific used", _pod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
     [_pod("TCP/127.0.0.1/8001", node="m1")], UNSCHED),
    ("used 0.0.0.0 conflicts with a specific ip", _pod("TCP/127.0.0.1/8001"),
     [_pod("TCP/0.0.0.0/8001", node="m1")], UNSCHED),
    ("used 0.0.0.0 of another protocol", _pod("UDP/127.0.0.1/8001"),
     [_pod("TCP/0.0.0.0/8001", node="m1")], None),
    ("used 0.0.0.0 on both protocols", _pod("UDP/127.0.0.1/8001"),
     [_pod("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001", node="m1")], UNSCHED),
    ("port held by a pod on another node", _pod("TCP//80"), [_pod("TCP//80", node="m2")], None),
    ("sidecar port conflicts", _pod(sidecar_ports=("TCP//9000",)),
     [_pod("TCP//9000", node="m1")], UNSCHED),
    ("node's sidecar holds the port", _pod("TCP//9000"),
     [_pod(sidecar_ports=("TCP//9000",), node="m1")], UNSCHED),
    ("plain init container ports are not held", _pod("TCP//9000"),
     [_pod("TCP//81", init_ports=("TCP//9000",), node="m1")], None),
    ("empty node", _pod("TCP//80"), [], None),
]


@pytest.mark.parametrize(
    ("pod", "existing", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_filter(pod: dict[str, Any], existing: list[dict[str, Any]], want: Status | None) -> None:
    [info, _] = node_infos([NodeBuilder("m1").obj(), NodeBuilder("m2").obj()], existing)
    plugin = _plugin()
    pod_info = PodInfo.from_pod(pod)
    state = CycleState()
    assert plugin.pre_filter(state, pod_info, [info]) == (None, None)
    assert plugin.filter(state, pod_info, info) == want
    assert fits(pod_info, info) is (want is None)
    # The state is shared by clones (preemption) and still works there.
    assert plugin.filter(state.clone(), pod_info, info) == want


@pytest.mark.parametrize(
    "pod",
    [
        PodBuilder("none").container().obj(),
        PodBuilder("container-port-only").container(ports=[{"containerPort": 80}]).obj(),
        PodBuilder("zero").container(ports=[{"containerPort": 80, "hostPort": 0}]).obj(),
        _pod(init_ports=("TCP//9000",)),  # init containers do not keep ports
    ],
    ids=["no ports", "container port only", "host port 0", "init container only"],
)
def test_pre_filter_skips_pods_without_host_ports(pod: dict[str, Any]) -> None:
    state = CycleState()
    assert _plugin().pre_filter(state, PodInfo.from_pod(pod), []) == (None, Status(Code.SKIP))


def test_filter_without_pre_filter_is_an_error() -> None:
    [info] = node_infos([NodeBuilder("m1").obj()])
    got = _plugin().filter(CycleState(), PodInfo.from_pod(_pod("TCP//80")), info)
    assert got is not None and got.code == Code.ERROR


# --- events and hints -----------------------------------------------------------------------


def test_events_to_register() -> None:
    registered = _plugin().events_to_register()
    by_resource = {e.event.resource: e for e in registered}
    assert set(by_resource) == {EventResource.POD, EventResource.NODE}
    assert by_resource[EventResource.POD].event.action_type == ActionType.DELETE
    assert by_resource[EventResource.POD].hint is not None
    assert by_resource[EventResource.NODE].event.action_type == ActionType.ADD
    assert by_resource[EventResource.NODE].hint is None


WANT_8080 = _pod("TCP//8080")

HINT_CASES: list[tuple[str, dict[str, Any], dict[str, Any], QueueingHint]] = [
    ("deleted pod was never scheduled", WANT_8080, _pod("TCP//8080"), QueueingHint.SKIP),
    ("deleted pod had no host ports", WANT_8080, _pod(node="n"), QueueingHint.SKIP),
    ("deleted pod held an unrelated port", WANT_8080, _pod("TCP//8081", node="n"),
     QueueingHint.SKIP),
    ("deleted pod held the same port", WANT_8080, _pod("TCP//8080", node="n"), QueueingHint.QUEUE),
    ("deleted nominated pod held the port", WANT_8080, _pod("TCP//8080", nominated="n"),
     QueueingHint.QUEUE),
    ("same port other protocol", WANT_8080, _pod("UDP//8080", node="n"), QueueingHint.SKIP),
    ("deleted pod held it on a specific ip", WANT_8080, _pod("TCP/10.0.0.1/8080", node="n"),
     QueueingHint.QUEUE),
    ("different specific ips", _pod("TCP/10.0.0.2/8080"), _pod("TCP/10.0.0.1/8080", node="n"),
     QueueingHint.SKIP),
    ("deleted pod's sidecar held the port", WANT_8080,
     _pod(sidecar_ports=("TCP//8080",), node="n"), QueueingHint.QUEUE),
]


@pytest.mark.parametrize(
    ("pod", "deleted", "want"), [c[1:] for c in HINT_CASES], ids=[c[0] for c in HINT_CASES]
)
def test_pod_deleted_hint(pod: dict[str, Any], deleted: dict[str, Any], want: QueueingHint) -> None:
    assert _plugin().is_schedulable_after_pod_deleted(pod, deleted, None) == want


def test_pod_deleted_hint_wrong_object_raises() -> None:
    with pytest.raises(TypeError):
        _plugin().is_schedulable_after_pod_deleted(WANT_8080, "not-a-pod", None)
