"""The requeue index (keyed queueing hints) against the plain scan of every waiting pod.

Two queues get the same stream of pods, failures and cluster events; one asks only the pods
its index names (``index_hints=True``, the default), the other runs every hint over every
waiting pod.  They must move the same pods, in the same order, to the same queues with the
same labels, and hold the same pods in the same order afterwards.  The hints are the real
ones of DynamicResources (claims), VolumeBinding (PVCs) and Coscheduling (PodGroups), next
to unkeyed ones (NodeResourcesFit, NodeAffinity) that must keep seeing every pod.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.framework import events as ev
from scheduler.framework.events import ClusterEvent, KeyedHint, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.framework.types import QueuedPodInfo
from scheduler.objects.pod import PodInfo, pod_key, scheduler_name
from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.dynamicresources.plugin import DynamicResources
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.volumebinding.plugin import VolumeBinding
from scheduler.queue import HintEntry, SchedulingQueue
from scheduler.queue.requeue_index import RequeueIndex
from tests.builders import PodBuilder, dra_allocation, dra_claim, make_node, with_pod_claims
from tests.fakes import FakeHandle
from tests.unit.queue.helpers import (
    AFFINITY,
    FIT,
    GATES,
    PROFILE,
    Clock,
    label_hint,
    new_metrics,
    priority_less,
)

DRA = "DynamicResources"
PORTS = "NodePorts"
VB = "VolumeBinding"
GANG = "Coscheduling"
OTHER_PROFILE = "other-scheduler"
NAMESPACES = ("ns0", "ns1")
CLAIMS = ("c0", "c1", "c2")
PVCS = ("v0", "v1")
GROUPS = ("g0", "g1")


def _entries(name: str, plugin: Any) -> list[HintEntry]:
    return [(item.event, name, item.hint) for item in plugin.events_to_register()]


def real_hints() -> list[HintEntry]:
    handle = FakeHandle()
    return [
        *_entries(DRA, DynamicResources(None, handle)),
        *_entries(VB, VolumeBinding({}, handle)),
        *_entries(GANG, Coscheduling({}, handle)),
        *_entries(PORTS, NodePorts({}, handle)),
        (ev.NODE_ADD, FIT, None),
        (ev.ASSIGNED_POD_DELETE, FIT, None),
        (ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_LABEL), AFFINITY,
         label_hint),
        (ClusterEvent(ev.EventResource.UNSCHEDULED_POD,
                      ev.ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED), GATES, None),
    ]


class Gate:
    """PreEnqueue: scheduling gates (SchedulingGates), and the pods labelled ``dra-gate``
    (DynamicResources, as when their claims do not exist yet)."""

    def __call__(self, info: PodInfo) -> Status | None:
        if (info.pod.get("spec") or {}).get("schedulingGates"):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin=GATES)
        if info.labels.get("dra-gate"):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no claim", plugin=DRA)
        return None


Move = tuple[str, str, str]  # pod, strategy, label


class Pair:
    """The indexed queue and the plain-scan one, driven together."""

    def __init__(self, hints: list[HintEntry]) -> None:
        self.clock = Clock()
        self.metrics = (new_metrics(), new_metrics())
        self.queues = tuple(
            SchedulingQueue(
                less=priority_less, pre_enqueue=Gate(),
                # A second profile without the keyed hints: its pods must still be asked.
                hints={PROFILE: hints, OTHER_PROFILE: hints[-4:]},
                profile_of=scheduler_name, clock=self.clock, metrics=m, index_hints=indexed)
            for m, indexed in zip(self.metrics, (True, False), strict=True))
        self.moves: tuple[list[Move], list[Move]] = ([], [])
        for queue, moves in zip(self.queues, self.moves, strict=True):
            queue._requeue = _recording(queue._requeue, moves)  # type: ignore[method-assign]

    def both(self, call: Callable[[SchedulingQueue], Any]) -> None:
        for queue in self.queues:
            call(queue)
        self.check()

    def check(self) -> None:
        indexed, plain = self.queues
        assert self.moves[0] == self.moves[1]
        assert _state(indexed) == _state(plain)
        assert _incoming(self.metrics[0]) == _incoming(self.metrics[1])

    def pop_and_fail(self, unschedulable: set[str], pending: set[str]) -> None:
        popped = [q.pop_nowait() for q in self.queues]
        assert [p and p.key for p in popped] == [popped[0] and popped[0].key] * 2
        for queue, qpi in zip(self.queues, popped, strict=True):
            if qpi is None:
                continue
            qpi.unschedulable_plugins = set(unschedulable)
            qpi.pending_plugins = set(pending)
            queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle())
        self.check()


def _recording(requeue: Callable[..., str], moves: list[Move]) -> Callable[..., str]:
    def wrapper(qpi: QueuedPodInfo, strategy: Any, label: str) -> str:
        moves.append((qpi.key, str(strategy), label))
        return requeue(qpi, strategy, label)
    return wrapper


def _state(queue: SchedulingQueue) -> dict[str, list[str]]:
    return {where: [pod_key(p) for p in pods] for where, pods in queue.pending_pods().items()}


def _incoming(metrics: Any) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for family in metrics.registry.collect():
        if family.name != "scheduler_queue_incoming_pods":
            continue
        for s in family.samples:
            if s.name.endswith("_total"):
                out[tuple(sorted(s.labels.items()))] = s.value  # type: ignore[arg-type]
    return out


# --- the stream ----------------------------------------------------------------------------

# (hostIP, protocol, hostPort): NodePorts' keys are (protocol, port); the IPs then decide.
HOST_PORTS = (("", "TCP", 80), ("10.0.0.1", "TCP", 80), ("10.0.0.2", "TCP", 80),
              ("", "UDP", 80), ("", "", 81))


def _with_ports(b: PodBuilder, ports: Any) -> PodBuilder:
    for ip, protocol, port in ports:
        b.host_port(port, protocol, ip)
    return b


def _deleted_pod(where: str, ports: Any) -> dict[str, Any]:
    b = PodBuilder("gone-ports").uid("uid-gone")
    if where == "node":
        b.node("n1")
    pod = _with_ports(b, ports).obj()
    if where == "nominated":
        pod["status"] = {"nominatedNodeName": "n1"}
    return pod


def make_waiting_pod(i: int, spec: dict[str, Any]) -> dict[str, Any]:
    b = PodBuilder(f"p{i}", spec["ns"]).uid(f"uid-{i}").priority(spec["priority"])
    if spec["profile"]:
        b.scheduler_name(spec["profile"])
    if spec["group"]:
        b.labels({POD_GROUP_LABEL: spec["group"]})
    if spec["dra_gate"]:
        b.labels({"dra-gate": "yes"})
    if spec["gates"]:
        b.scheduling_gates("example.com/gate")
    for pvc in spec["pvcs"]:
        b.pvc(pvc)
    pod = _with_ports(b, spec["ports"]).obj()
    if spec["claims"] or spec["template"]:
        entries = [(f"r-{c}", "claim", c) for c in spec["claims"]]
        if spec["template"]:
            entries.append(("gpu", "template", "tmpl"))
        with_pod_claims(pod, *entries)
        if spec["template"] == "generated":
            pod["status"] = {"resourceClaimStatuses": [
                {"name": "gpu", "resourceClaimName": f"p{i}-gpu"}]}
    return pod


pod_specs = st.fixed_dictionaries({
    "ns": st.sampled_from(NAMESPACES),
    "priority": st.integers(0, 2),
    # A profile without the keyed hints, and one without hints at all (any event helps).
    "profile": st.sampled_from(("", OTHER_PROFILE, "unknown-scheduler")),
    "group": st.sampled_from(("", *GROUPS)),
    "dra_gate": st.booleans(),
    "gates": st.booleans(),
    "pvcs": st.lists(st.sampled_from(PVCS), max_size=2, unique=True),
    "claims": st.lists(st.sampled_from(CLAIMS), max_size=2, unique=True),
    "template": st.sampled_from(("", "pending", "generated")),
    "ports": st.lists(st.sampled_from(HOST_PORTS), max_size=2, unique=True),
})
PLUGINS = st.sets(st.sampled_from((DRA, VB, GANG, FIT, AFFINITY, PORTS)), max_size=3)


def _named(name: str, ns: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.just({"metadata": {"name": name, "namespace": ns}})


def _claim(name: str, ns: str, allocated: bool) -> dict[str, Any]:
    obj = dra_claim(name, ns)
    if allocated:
        obj["status"] = {"allocation": dra_allocation("n1", [("gpu", "d", "p", "g0")])}
    return obj


claim_names = st.sampled_from((*CLAIMS, "p0-gpu", "p1-gpu", "p2-gpu", "p3-gpu"))
claim_events = st.tuples(
    st.sampled_from(("add", "update", "delete")), claim_names, st.sampled_from(NAMESPACES),
    st.booleans(), st.booleans(),
).map(lambda t: _claim_event(*t))


def _claim_event(kind: str, name: str, ns: str, was: bool, now: bool
                 ) -> tuple[ClusterEvent, Any, Any]:
    if kind == "add":
        return ev.RESOURCE_CLAIM_ADD, None, _claim(name, ns, now)
    if kind == "update":
        return ev.RESOURCE_CLAIM_UPDATE, _claim(name, ns, was), _claim(name, ns, now)
    return ev.RESOURCE_CLAIM_DELETE, _claim(name, ns, was), None


other_events = st.one_of(
    st.tuples(st.sampled_from((ev.PVC_ADD, ev.PVC_UPDATE)), st.sampled_from(PVCS),
              st.sampled_from(NAMESPACES)).map(
        lambda t: (t[0], None if t[0] is ev.PVC_ADD else {"metadata": {"name": t[1]}},
                   {"metadata": {"name": t[1], "namespace": t[2]}})),
    st.tuples(st.sampled_from((ev.POD_GROUP_ADD, ev.POD_GROUP_UPDATE)),
              st.sampled_from(GROUPS), st.sampled_from(NAMESPACES)).map(
        lambda t: (t[0], None, {"metadata": {"name": t[1], "namespace": t[2]}})),
    st.tuples(st.sampled_from((ev.ASSIGNED_POD_ADD, ev.UNSCHEDULED_POD_ADD)),
              st.sampled_from(("", *GROUPS)), st.sampled_from(NAMESPACES)).map(
        lambda t: (t[0], None, PodBuilder("peer", t[2]).labels(
            {POD_GROUP_LABEL: t[1]} if t[1] else {}).obj())),
    st.sampled_from(((ev.NODE_ADD, None, make_node("n9")),
                     (ev.ASSIGNED_POD_DELETE, PodBuilder("gone").obj(), None),
                     (ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_LABEL,
                                   "NodeUpdate"), make_node("n1"),
                      make_node("n1", labels={"ready": "true"})))),
)

port_events = st.tuples(
    st.sampled_from(("node", "nominated", "")),
    st.lists(st.sampled_from(HOST_PORTS), max_size=2, unique=True),
).map(lambda t: (ev.ASSIGNED_POD_DELETE, _deleted_pod(*t), None))

ops = st.one_of(
    st.tuples(st.just("add"), pod_specs),
    st.tuples(st.just("fail"), PLUGINS, PLUGINS),
    st.tuples(st.just("event"), st.one_of(claim_events, other_events, port_events)),
    st.tuples(st.just("generate"), st.integers(0, 30)),
    st.tuples(st.just("ungate"), st.integers(0, 30)),
    st.tuples(st.just("delete"), st.integers(0, 30)),
    st.tuples(st.just("tick"), st.sampled_from((0.5, 2.0, 400.0))),
)


def run_stream(stream: list[tuple[Any, ...]]) -> Pair:
    pair = Pair(real_hints())
    pods: dict[int, dict[str, Any]] = {}
    for op in stream:
        kind = op[0]
        if kind == "add":
            i = len(pods)
            pods[i] = make_waiting_pod(i, op[1])
            pair.both(lambda q, p=pods[i]: q.add(copy.deepcopy(p)))
        elif kind == "fail":
            pair.pop_and_fail(op[1], op[2] & op[1])
        elif kind == "event":
            event, old, new = op[1]
            pair.both(lambda q: q.move_all_to_active_or_backoff_queue(event, old, new))
        elif kind in ("generate", "ungate") and op[1] in pods:
            old = pods[op[1]]
            new = copy.deepcopy(old)
            if kind == "generate":  # the claim controller names the generated claim
                new["status"] = {"resourceClaimStatuses": [
                    {"name": "gpu", "resourceClaimName": f"p{op[1]}-gpu"}]}
            else:
                new["metadata"].get("labels", {}).pop("dra-gate", None)
                new["spec"].pop("schedulingGates", None)
            pods[op[1]] = new
            pair.both(lambda q: q.update(copy.deepcopy(old), copy.deepcopy(new)))
        elif kind == "delete" and op[1] in pods:
            gone = pods.pop(op[1])
            pair.both(lambda q: q.delete(gone))
        elif kind == "tick":
            pair.clock.advance(op[1])
            pair.both(lambda q: (q.flush_backoff_completed(), q.flush_unschedulable_left_over()))
    return pair


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=60))
def test_indexed_requeue_moves_what_the_scan_moves(stream: list[tuple[Any, ...]]) -> None:
    run_stream(stream)


def _claim_stream(n: int) -> list[tuple[Any, ...]]:
    """n pods with one template claim each, failed by DynamicResources, then the claim
    controller's work: each claim created, then the pod's status naming it."""
    spec = {"ns": "ns0", "priority": 0, "profile": "", "group": "", "dra_gate": False,
            "gates": False, "pvcs": [], "claims": [], "template": "pending", "ports": []}
    stream: list[tuple[Any, ...]] = [("add", spec)] * n + [("fail", {DRA}, set())] * n
    for i in range(n):
        stream.append(("event", _claim_event("add", f"p{i}-gpu", "ns0", False, False)))
        stream.append(("generate", i))
    return stream


@pytest.mark.parametrize(
    ("stream", "moved"),
    [
        pytest.param(_claim_stream(4), 4, id="each-claim-then-its-pod"),
        pytest.param(_claim_stream(3)[:6] + [
            ("event", _claim_event("update", "c0", "ns0", True, False))], 3,
            id="a-deallocation-concerns-every-pod"),
    ],
)
def test_claim_streams(stream: list[tuple[Any, ...]], moved: int) -> None:
    pair = run_stream(stream)
    assert len(pair.moves[0]) == moved


def _port_stream(where: str, freed: Any) -> list[tuple[Any, ...]]:
    """Two pods failed by NodePorts (one wanting TCP 80 on any IP, one UDP 80), then a pod
    deleted from ``where`` freeing ``freed``."""
    base = {"ns": "ns0", "priority": 0, "profile": "", "group": "", "dra_gate": False,
            "gates": False, "pvcs": [], "claims": [], "template": ""}
    return [("add", {**base, "ports": [("", "TCP", 80)]}),
            ("add", {**base, "ports": [("", "UDP", 80)]}),
            ("fail", {PORTS}, set()), ("fail", {PORTS}, set()),
            ("event", (ev.ASSIGNED_POD_DELETE, _deleted_pod(where, freed), None))]


@pytest.mark.parametrize(
    ("stream", "moved"),
    [
        pytest.param(_port_stream("node", [("", "TCP", 80)]), 1, id="its-port-freed"),
        pytest.param(_port_stream("nominated", [("10.0.0.1", "TCP", 80)]), 1,
                     id="a-nomination-freed-it"),
        pytest.param(_port_stream("node", [("", "UDP", 80), ("", "TCP", 80)]), 2,
                     id="both-ports-freed"),
        pytest.param(_port_stream("node", [("", "TCP", 81)]), 0, id="another-port"),
        pytest.param(_port_stream("", [("", "TCP", 80)]), 0, id="never-scheduled"),
    ],
)
def test_port_streams(stream: list[tuple[Any, ...]], moved: int) -> None:
    # Both queues (indexed and scan) move the same pods; these many of them.
    pair = run_stream(stream)
    assert len(pair.moves[0]) == moved


def _keyed(event_keys: Callable[[Any, Any], Any], pod_keys: Callable[[Any], Any]
           ) -> KeyedHint:
    return KeyedHint(lambda pod, old, new: QueueingHint.QUEUE, event_keys=event_keys,
                     pod_keys=pod_keys)


@pytest.mark.parametrize(
    ("hint", "found"),
    [
        pytest.param(_keyed(lambda o, n: ["k"], lambda p: ["k"]), ["a"], id="shared-key"),
        pytest.param(_keyed(lambda o, n: ["k"], lambda p: ["x"]), [], id="no-shared-key"),
        pytest.param(_keyed(lambda o, n: None, lambda p: ["x"]), ["a"], id="event-for-all"),
        pytest.param(_keyed(lambda o, n: 1 / 0, lambda p: ["x"]), ["a"],
                     id="event-keys-raise"),
        pytest.param(_keyed(lambda o, n: [["unhashable"]], lambda p: ["x"]), ["a"],
                     id="event-keys-unhashable"),
        pytest.param(_keyed(lambda o, n: ["k"], lambda p: 1 / 0), ["a"],
                     id="pod-keys-raise"),
    ],
)
def test_index_never_hides_a_pod_it_cannot_key(hint: KeyedHint, found: list[str]) -> None:
    index = RequeueIndex({PROFILE: [(ev.PVC_ADD, VB, hint)]}, profile_of=scheduler_name)
    qpi = QueuedPodInfo(PodInfo.from_pod(PodBuilder("a").obj()), timestamp=0.0)
    qpi.unschedulable_plugins = {VB}
    index.add("a", qpi)
    assert index.candidates(ev.PVC_ADD, None, {}) == found
    index.discard("a")
    assert index.candidates(ev.PVC_ADD, None, {}) == []
    assert len(index) == 0


KEYED = [(plugin, hint) for _event, plugin, hint in real_hints() if isinstance(hint, KeyedHint)]


def test_the_plugins_key_their_object_hints() -> None:
    assert sorted({plugin for plugin, _ in KEYED}) == [GANG, DRA, PORTS, VB]


event_objects = st.one_of(claim_events, other_events, port_events).map(
    lambda e: (e[1], e[2]))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KEYED), pod_specs, st.integers(0, 3), event_objects)
def test_keys_never_hide_a_pod_the_hint_queues(keyed: tuple[str, KeyedHint],
                                              spec: dict[str, Any], i: int,
                                              objects: tuple[Any, Any]) -> None:
    """The contract of every keyed hint of the plugins, on every kind of object: when the
    event's keys and the pod's share none, the hint answers Skip."""
    _plugin, hint = keyed
    pod = make_waiting_pod(i, spec)
    old, new = objects
    keys = hint.event_keys(old, new)
    if keys is not None and not set(keys) & set(hint.pod_keys(pod)):
        assert hint(pod, old, new) is QueueingHint.SKIP
