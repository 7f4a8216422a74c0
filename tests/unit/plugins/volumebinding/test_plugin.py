"""VolumeBinding end to end over fakes: PreFilter, Filter, Reserve/Unreserve, PreBind, Score."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from scheduler.config import features
from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.registry import in_tree_registry
from scheduler.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
)
from scheduler.plugins.volumebinding.matching import ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE
from scheduler.plugins.helper import FunctionShapePoint
from scheduler.plugins.volumebinding.plugin import (
    ERR_REASON_UNBOUND_IMMEDIATE,
    VolumeBinding,
    _build_scorer,
)
from tests.builders import NodeBuilder, PodBuilder, csi_driver
from tests.fakes import FakeApiClient, FakeHandle, FakeResponse, node_infos
from tests.unit.plugins.volumebinding.storage import ZONE, pv, pvc, storage_class

NODES = [NodeBuilder("node-a").labels({ZONE: "a"}).obj(),
         NodeBuilder("node-b").labels({ZONE: "b"}).obj()]
LOCAL = storage_class("local")
IMMEDIATE = storage_class("immediate", mode="Immediate")
CSI = storage_class("csi", provisioner="csi.example.com")
CSI_ZONE_B = storage_class("csi-b", provisioner="csi.example.com", allowed_zones=["b"])
CLASSES = [LOCAL, IMMEDIATE, CSI, CSI_ZONE_B]


class EchoClient(FakeApiClient):
    """Answers an unqueued PUT like the API server: the body stored at a new resourceVersion."""

    async def request(self, method: str, path: str, *, body: Any = None,
                      params: Mapping[str, str] | None = None,
                      content_type: str = "application/json",
                      discard_ok_body: bool = False) -> FakeResponse:
        queued = self.responses.get((method, path))
        if queued or method != "PUT":
            return await super().request(method, path, body=body, params=params,
                                         content_type=content_type)
        self.requests.append((method, path, body))
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 100)
        return FakeResponse(200, stored)


class Env:
    def __init__(self, *, pvs: Sequence[dict[str, Any]] = (), pvcs: Sequence[dict[str, Any]] = (),
                 args: dict[str, Any] | None = None, timeout: int = 30,
                 capacities: Sequence[dict[str, Any]] = (),
                 drivers: Sequence[dict[str, Any]] = (),
                 gates: features.FeatureGates | None = None) -> None:
        self.handle = FakeHandle(node_infos(NODES), objects={
            "persistentvolumes": [copy.deepcopy(p) for p in pvs],
            "persistentvolumeclaims": [copy.deepcopy(c) for c in pvcs],
            "storageclasses": CLASSES,
            "csidrivers": list(drivers),
            "csistoragecapacities": list(capacities),
        }, client=EchoClient())
        self.polls = 0
        self.on_poll: Callable[[int], None] | None = None
        merged = {"bindTimeoutSeconds": timeout, **(args or {})}
        self.plugin = VolumeBinding(merged, self.handle, poll_interval=0.1, sleep=self._sleep,
                                    gates=gates)

    async def _sleep(self, seconds: float) -> None:
        self.handle.now += seconds
        self.polls += 1
        if self.on_poll is not None:
            self.on_poll(self.polls)

    @property
    def objects(self) -> dict[str, list[dict[str, Any]]]:
        return self.handle.listers.objects

    def replace(self, resource: str, obj: dict[str, Any]) -> None:
        items = self.objects[resource]
        for i, old in enumerate(items):
            if (old["metadata"]["name"] == obj["metadata"]["name"]
                    and old["metadata"].get("namespace") == obj["metadata"].get("namespace")):
                items[i] = obj
                return
        items.append(obj)

    def cycle(self, pod: dict[str, Any]) -> tuple[CycleState, Status | None, dict[str, Status | None]]:
        state = CycleState()
        info = PodInfo.from_pod(pod)
        infos = self.handle.snapshot().list()
        _, pre = self.plugin.pre_filter(state, info, infos)
        if pre is not None and not pre.is_success():
            return state, pre, {}
        return state, pre, {ni.name: self.plugin.filter(state, info, ni) for ni in infos}


def _pod(*claims: str, name: str = "pod") -> dict[str, Any]:
    b = PodBuilder(name)
    for c in claims:
        b.pvc(c)
    return b.obj()


def _unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)


# --- PreFilter --------------------------------------------------------------------------------

def _ephemeral_pod(owner_uid: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pod = PodBuilder("eph").volume({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}).obj()
    claims = [] if owner_uid is None else [pvc("eph-scratch", owner_uid=owner_uid)]
    return pod, claims


PRE_FILTER_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Status | None]] = [
    ("no claims: skip", PodBuilder("p").obj(), [], Status(Code.SKIP)),
    ("missing claim", _pod("c"), [], _unresolvable('persistentvolumeclaim "c" not found')),
    ("lost claim", _pod("c"), [pvc("c", volume="gone", phase="Lost")],
     _unresolvable('persistentvolumeclaim "c" bound to non-existent persistentvolume "gone"')),
    ("claim being deleted", _pod("c"),
     [{**pvc("c"), "metadata": {**pvc("c")["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}}],
     _unresolvable('persistentvolumeclaim "c" is being deleted')),
    ("unbound immediate claim", _pod("c"), [pvc("c", cls="immediate")],
     _unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)),
    ("unbound claim without class is immediate", _pod("c"), [pvc("c", cls=None)],
     _unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)),
    ("claim of unknown class is immediate", _pod("c"), [pvc("c", cls="nope")],
     _unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)),
    ("pre-bound delayed claim waits for the PV controller", _pod("c"), [pvc("c", volume="p1")],
     _unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)),
    ("unbound WaitForFirstConsumer claim", _pod("c"), [pvc("c")], None),
    ("bound claim", _pod("c"), [pvc("c", volume="p1", bound=True)], None),
    ("ephemeral claim not created yet", _ephemeral_pod(None)[0], [],
     _unresolvable('waiting for ephemeral volume controller to create the persistentvolumeclaim '
                   '"eph-scratch"')),
    ("ephemeral claim owned by another pod", *_ephemeral_pod("someone-else"),
     _unresolvable("PVC default/eph-scratch was not created for pod default/eph (pod is not owner)")),
    ("ephemeral claim owned by the pod", *_ephemeral_pod("uid-default-eph"), None),
    ("malformed claim (issue 12)", _pod("c"), [{**pvc("c"), "spec": {"resources": "5Gi"}}],
     _unresolvable("PersistentVolumeClaim default/c: spec.resources: must be an object")),
]


@pytest.mark.parametrize(("pod", "claims", "want"), [c[1:] for c in PRE_FILTER_CASES],
                         ids=[c[0] for c in PRE_FILTER_CASES])
def test_pre_filter(pod: dict[str, Any], claims: list[dict[str, Any]], want: Status | None) -> None:
    env = Env(pvcs=claims)
    _, got, _ = env.cycle(pod)
    assert got == want


# --- Filter -----------------------------------------------------------------------------------

FILTER_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], list[str],
                         dict[str, Status | None]]] = [
    ("static binding to a zone-local PV", [pv("pa", zone="a")], [pvc("c")], ["c"],
     {"node-a": None, "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
    ("PV too small", [pv("pa", size="1Gi")], [pvc("c", size="5Gi")], ["c"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT),
      "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
    ("access modes not offered", [pv("pa")], [pvc("c", modes=("ReadWriteMany",))], ["c"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT),
      "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
    ("class mismatch", [pv("pa", cls="other")], [pvc("c")], ["c"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT),
      "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
    ("PV already claimed", [pv("pa", claim=("default", "x"), phase="Bound")], [pvc("c")], ["c"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT),
      "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
    ("bound PV's node affinity", [pv("pb", zone="b", phase="Bound")],
     [pvc("c", volume="pb", bound=True)], ["c"],
     {"node-a": _unresolvable(ERR_REASON_NODE_CONFLICT), "node-b": None}),
    ("bound to a PV that does not exist", [], [pvc("c", volume="ghost", bound=True)], ["c"],
     {"node-a": _unresolvable(ERR_REASON_PV_NOT_EXIST),
      "node-b": _unresolvable(ERR_REASON_PV_NOT_EXIST)}),
    ("bound conflict and no volume to bind: both reasons",
     [pv("pb", zone="b", phase="Bound")], [pvc("c1", volume="pb", bound=True), pvc("c2")],
     ["c1", "c2"],
     {"node-a": _unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT),
      "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
    ("dynamic provisioning anywhere", [], [pvc("c", cls="csi")], ["c"],
     {"node-a": None, "node-b": None}),
    ("provisioning restricted by allowedTopologies", [], [pvc("c", cls="csi-b")], ["c"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT), "node-b": None}),
    ("provisioning already started on node-b",
     [], [pvc("c", cls="csi", annotations={ANN_SELECTED_NODE: "node-b"})], ["c"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT), "node-b": None}),
    ("static PV preferred, provisioning as fallback", [pv("pa", cls="csi", zone="a")],
     [pvc("c", cls="csi")], ["c"], {"node-a": None, "node-b": None}),
    ("one PV for two claims", [pv("pa", zone="a")], [pvc("c1"), pvc("c2")], ["c1", "c2"],
     {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT),
      "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}),
]


@pytest.mark.parametrize(("pvs", "claims", "pod_claims", "want"),
                         [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter(pvs: list[dict[str, Any]], claims: list[dict[str, Any]], pod_claims: list[str],
                want: dict[str, Status | None]) -> None:
    env = Env(pvs=pvs, pvcs=claims)
    _, pre, got = env.cycle(_pod(*pod_claims))
    assert pre is None
    assert got == want


def test_filter_errors_on_missing_storage_class_when_provisioning() -> None:
    env = Env(pvcs=[pvc("c", cls="csi")])
    env.objects["storageclasses"] = [LOCAL]
    # PreFilter sees no class -> Immediate; restore it only for PreFilter by faking the order.
    state = CycleState()
    info = PodInfo.from_pod(_pod("c"))
    env.objects["storageclasses"] = CLASSES
    env.plugin.pre_filter(state, info, env.handle.snapshot().list())
    env.objects["storageclasses"] = [LOCAL]
    status = env.plugin.filter(state, info, env.handle.snapshot().list()[0])
    assert status is not None and status.code == Code.ERROR
    assert status.message() == 'failed to find storage class "csi"'


def test_two_claims_get_distinct_smallest_volumes() -> None:
    env = Env(pvs=[pv("p10", size="10Gi"), pv("p5", size="5Gi"), pv("p20", size="20Gi")],
              pvcs=[pvc("big", size="8Gi"), pvc("small", size="5Gi")])
    state, _, got = env.cycle(_pod("big", "small"))
    assert got["node-a"] is None
    assert env.plugin.reserve(state, PodInfo.from_pod(_pod("big", "small")), "node-a") is None
    chosen = {p["spec"]["claimRef"]["name"]: p["metadata"]["name"]
              for p in env.plugin.binder.pv_cache.list() if p["spec"].get("claimRef")}
    assert chosen == {"small": "p5", "big": "p10"}


# --- Reserve / Unreserve ----------------------------------------------------------------------

def test_second_pod_cannot_get_the_pv_reserved_for_the_first() -> None:
    env = Env(pvs=[pv("only", zone="a")], pvcs=[pvc("c1"), pvc("c2")])
    pod1, pod2 = _pod("c1", name="p1"), _pod("c2", name="p2")
    state1, _, got1 = env.cycle(pod1)
    assert got1["node-a"] is None
    assert env.plugin.reserve(state1, PodInfo.from_pod(pod1), "node-a") is None
    _, _, got2 = env.cycle(pod2)
    assert got2 == {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT),
                    "node-b": _unresolvable(ERR_REASON_BIND_CONFLICT)}
    # Unreserve gives the volume back.
    env.plugin.unreserve(state1, PodInfo.from_pod(pod1), "node-a")
    _, _, got3 = env.cycle(pod2)
    assert got3["node-a"] is None


def test_reserve_provisioning_assumes_selected_node() -> None:
    env = Env(pvcs=[pvc("c", cls="csi")])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    assert env.plugin.reserve(state, PodInfo.from_pod(pod), "node-b") is None
    assumed = env.plugin.binder.pvc_cache.get("default/c")
    assert assumed is not None and assumed["metadata"]["annotations"][ANN_SELECTED_NODE] == "node-b"
    # A later cycle of another pod sharing the claim sees the selection: only node-b fits.
    _, _, got = env.cycle(_pod("c", name="other"))
    assert got == {"node-a": _unresolvable(ERR_REASON_BIND_CONFLICT), "node-b": None}
    env.plugin.unreserve(state, PodInfo.from_pod(pod), "node-b")
    assert ANN_SELECTED_NODE not in env.plugin.binder.pvc_cache.get("default/c")["metadata"]["annotations"]  # type: ignore[index]


def test_reserve_fails_when_pv_changed_since_filter() -> None:
    env = Env(pvs=[pv("pa", rv="1")], pvcs=[pvc("c")])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    env.replace("persistentvolumes", pv("pa", rv="2"))
    status = env.plugin.reserve(state, PodInfo.from_pod(pod), "node-a")
    assert status is not None and status.code == Code.ERROR
    assert "out of sync" in status.message()


def test_unreserve_without_prefilter_state_is_a_noop() -> None:
    env = Env()
    env.plugin.unreserve(CycleState(), PodInfo.from_pod(_pod("c")), "node-a")


# --- PreBind ----------------------------------------------------------------------------------

async def test_pre_bind_static_binding_writes_pv_and_waits_for_bound() -> None:
    env = Env(pvs=[pv("pa", zone="a")], pvcs=[pvc("c")])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    assert env.plugin.reserve(state, info, "node-a") is None

    def controller(poll: int) -> None:
        # The PV controller finishes on the third poll.
        if poll == 3:
            env.replace("persistentvolumes", {**pv("pa", zone="a", phase="Bound", rv="205",
                                                   claim=("default", "c"),
                                                   claim_uid="uid-pvc-default-c")})
            env.replace("persistentvolumeclaims", pvc("c", volume="pa", bound=True, rv="206"))

    env.on_poll = controller
    assert await env.plugin.pre_bind(state, info, "node-a") is None
    assert env.polls == 3
    [(method, path, body)] = env.handle.client.requests
    assert (method, path) == ("PUT", "/api/v1/persistentvolumes/pa")
    assert body["spec"]["claimRef"]["name"] == "c"
    assert body["spec"]["claimRef"]["uid"] == "uid-pvc-default-c"
    assert body["metadata"]["annotations"][ANN_BOUND_BY_CONTROLLER] == "yes"
    assert body["metadata"]["resourceVersion"] == "1"


async def test_pre_bind_provisioning_writes_selected_node() -> None:
    env = Env(pvcs=[pvc("c", cls="csi")])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    env.plugin.reserve(state, info, "node-b")

    def provisioner(poll: int) -> None:
        if poll == 2:
            env.objects["persistentvolumes"].append(pv("pvc-new", cls="csi", zone="b",
                                                       phase="Bound", rv="208"))
            env.replace("persistentvolumeclaims", pvc(
                "c", cls="csi", volume="pvc-new", bound=True, rv="209",
                annotations={ANN_SELECTED_NODE: "node-b"}))

    env.on_poll = provisioner
    assert await env.plugin.pre_bind(state, info, "node-b") is None
    [(method, path, body)] = env.handle.client.requests
    assert (method, path) == ("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/c")
    assert body["metadata"]["annotations"][ANN_SELECTED_NODE] == "node-b"


async def test_pre_bind_times_out() -> None:
    env = Env(pvs=[pv("pa")], pvcs=[pvc("c")], timeout=2)
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    env.plugin.reserve(state, info, "node-a")
    start = env.handle.now
    status = await env.plugin.pre_bind(state, info, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert status.message() == "binding volumes: context deadline exceeded"
    assert env.handle.now - start >= 2
    assert env.polls == pytest.approx(20, abs=1)


async def test_pre_bind_fails_when_provisioner_gives_up() -> None:
    env = Env(pvcs=[pvc("c", cls="csi")])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    env.plugin.reserve(state, info, "node-a")
    # The informer sees our write, then the provisioner removes the annotation.
    env.replace("persistentvolumeclaims", pvc("c", cls="csi", rv="300"))
    status = await env.plugin.pre_bind(state, info, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert status.message() == 'binding volumes: selectedNode annotation reset for PVC "c"'


async def test_pre_bind_api_error_reverts_assumption() -> None:
    env = Env(pvs=[pv("pa")], pvcs=[pvc("c")])
    env.handle.client.responses[("PUT", "/api/v1/persistentvolumes/pa")] = [
        FakeResponse(409, {"kind": "Status", "message": "the object has been modified"})]
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    env.plugin.reserve(state, info, "node-a")
    assert len(env.plugin.binder.pv_cache) == 1
    status = await env.plugin.pre_bind(state, info, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert "HTTP 409: the object has been modified" in status.message()
    assert len(env.plugin.binder.pv_cache) == 0


@pytest.mark.parametrize(
    ("pvs", "pvcs", "claims", "has_work"),
    [
        pytest.param([], [], (), False, id="no-pvc"),
        pytest.param([pv("pa", phase="Bound")], [pvc("c", volume="pa", bound=True)], ("c",),
                     False, id="all-bound"),
        pytest.param([pv("pa", zone="a")], [pvc("c")], ("c",), True, id="static-binding"),
        pytest.param([], [pvc("c", cls="csi")], ("c",), True, id="provisioning"),
    ],
)
def test_pre_bind_pre_flight_skips_unless_volumes_are_left_to_bind(
        pvs: list[dict[str, Any]], pvcs: list[dict[str, Any]], claims: tuple[str, ...],
        has_work: bool) -> None:
    """NominatedNodeNameForExpectation: only a pod with volumes to bind is nominated first."""
    env = Env(pvs=pvs, pvcs=pvcs)
    pod = _pod(*claims)
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    assert env.plugin.reserve(state, info, "node-a") is None
    status = env.plugin.pre_bind_pre_flight(state, info, "node-a")
    assert (status is None) is has_work
    if not has_work:
        assert status is not None and status.code == Code.SKIP
    missing = env.plugin.pre_bind_pre_flight(CycleState(), info, "node-a")
    assert missing is not None and missing.code == Code.ERROR


async def test_pre_bind_all_bound_does_nothing() -> None:
    env = Env(pvs=[pv("pa", phase="Bound")], pvcs=[pvc("c", volume="pa", bound=True)])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    assert env.plugin.reserve(state, info, "node-a") is None
    assert await env.plugin.pre_bind(state, info, "node-a") is None
    assert env.handle.client.requests == []


async def test_pre_bind_rejects_claim_ref_reset() -> None:
    env = Env(pvs=[pv("pa")], pvcs=[pvc("c")])
    pod = _pod("c")
    state, _, _ = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    env.plugin.reserve(state, info, "node-a")
    env.handle.client.responses[("PUT", "/api/v1/persistentvolumes/pa")] = [
        FakeResponse(200, pv("pa", rv="2"))]
    env.replace("persistentvolumes", pv("pa", rv="2"))  # claimRef dropped by someone
    status = await env.plugin.pre_bind(state, info, "node-a")
    assert status is not None and status.message() == 'binding volumes: ClaimRef got reset for pv "pa"'


# --- Score (StorageCapacityScoring) -----------------------------------------------------------

def _gates(capacity_scoring: bool) -> features.FeatureGates:
    gates = features.FeatureGates()
    gates.set_from_map({"StorageCapacityScoring": capacity_scoring})
    return gates


def _csi_driver(name: str = "csi.example.com", *, capacity: bool = True) -> dict[str, Any]:
    return csi_driver(name, storage_capacity=capacity)


def _capacity(name: str, *, zone: str, capacity: str | None, cls: str = "csi",
              maximum: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"}, "storageClassName": cls,
        "nodeTopology": {"matchLabels": {ZONE: zone}}}
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    return obj


_LEAST_FREE = [FunctionShapePoint(0, 0), FunctionShapePoint(100, 100)]  # upstream's old default
_MOST_FREE = [FunctionShapePoint(0, 100), FunctionShapePoint(100, 0)]  # the default since 1.33
_CUSTOM = [FunctionShapePoint(50, 0), FunctionShapePoint(80, 30), FunctionShapePoint(100, 50)]

# Upstream scorer_test.go's table (hdd, ssd as [requested, capacity]), and the same inputs
# through the default shape of StorageCapacityScoring.
SCORER_CASES: list[tuple[str, list[FunctionShapePoint], dict[str, list[int]], int]] = [
    ("least free, empty", _LEAST_FREE, {"hdd": [0, 100]}, 0),
    ("least free, 30%", _LEAST_FREE, {"hdd": [30, 100]}, 30),
    ("least free, 50%", _LEAST_FREE, {"hdd": [50, 100]}, 50),
    ("least free, full", _LEAST_FREE, {"hdd": [100, 100]}, 100),
    ("least free, two classes 0/0", _LEAST_FREE, {"hdd": [0, 100], "ssd": [0, 100]}, 0),
    ("least free, two classes 0/30", _LEAST_FREE, {"hdd": [0, 100], "ssd": [30, 100]}, 15),
    ("least free, two classes 30/30", _LEAST_FREE, {"hdd": [30, 100], "ssd": [30, 100]}, 30),
    ("least free, two classes 30/60", _LEAST_FREE, {"hdd": [30, 100], "ssd": [60, 100]}, 45),
    ("least free, two classes 50/50", _LEAST_FREE, {"hdd": [50, 100], "ssd": [50, 100]}, 50),
    ("least free, two classes 50/100", _LEAST_FREE, {"hdd": [50, 100], "ssd": [100, 100]}, 75),
    ("least free, two classes full", _LEAST_FREE, {"hdd": [100, 100], "ssd": [100, 100]}, 100),
    ("custom, 0/0", _CUSTOM, {"hdd": [0, 100], "ssd": [0, 100]}, 0),
    ("custom, 0/30", _CUSTOM, {"hdd": [0, 100], "ssd": [30, 100]}, 0),
    ("custom, 30/30", _CUSTOM, {"hdd": [30, 100], "ssd": [30, 100]}, 0),
    ("custom, 30/60", _CUSTOM, {"hdd": [30, 100], "ssd": [60, 100]}, 5),
    ("custom, 50/100", _CUSTOM, {"hdd": [50, 100], "ssd": [100, 100]}, 25),
    ("custom, 90/90", _CUSTOM, {"hdd": [90, 100], "ssd": [90, 100]}, 40),
    ("custom, full", _CUSTOM, {"hdd": [100, 100], "ssd": [100, 100]}, 50),
    ("most free, empty", _MOST_FREE, {"hdd": [0, 100]}, 100),
    ("most free, 30%", _MOST_FREE, {"hdd": [30, 100]}, 70),
    ("most free, full", _MOST_FREE, {"hdd": [100, 100]}, 0),
    ("most free, two classes 0/30", _MOST_FREE, {"hdd": [0, 100], "ssd": [30, 100]}, 85),
    ("most free, two classes 50/100", _MOST_FREE, {"hdd": [50, 100], "ssd": [100, 100]}, 25),
    ("request over capacity counts as full", _MOST_FREE, {"hdd": [200, 100]}, 0),
    ("zero capacity counts as full", _MOST_FREE, {"hdd": [0, 0]}, 0),
    ("no class scores 0", _MOST_FREE, {}, 0),
]


@pytest.mark.parametrize(("shape", "resources", "want"), [c[1:] for c in SCORER_CASES],
                         ids=[c[0] for c in SCORER_CASES])
def test_scorer(shape: list[FunctionShapePoint], resources: dict[str, list[int]],
                want: int) -> None:
    assert _build_scorer(shape)(resources) == want


def _scores(env: Env, pod: dict[str, Any]) -> tuple[Status | None, dict[str, int]]:
    state, _, filtered = env.cycle(pod)
    info = PodInfo.from_pod(pod)
    feasible = [ni for ni in env.handle.snapshot().list() if filtered.get(ni.name) is None]
    pre = env.plugin.pre_score(state, info, feasible)
    out = {}
    for ni in feasible:
        score, status = env.plugin.score(state, info, ni)
        assert status is None
        out[ni.name] = score
    return pre, out


GIB = 1024 ** 3
CSI_CAPACITIES = [_capacity("cap-a", zone="a", capacity="100Gi"),
                  _capacity("cap-b", zone="b", capacity="50Gi")]

SCORE_CASES: list[tuple[str, dict[str, Any], Status | None, dict[str, int]]] = [
    ("static bindings: the PV's utilization through the default shape",
     {"pvs": [pv("pa", zone="a", size="10Gi"), pv("pb", zone="b", size="20Gi")],
      "pvcs": [pvc("c", size="5Gi")]},
     None, {"node-a": 50, "node-b": 75}),
    ("static bindings through a configured (packing) shape",
     {"pvs": [pv("pa", zone="a", size="10Gi"), pv("pb", zone="b", size="20Gi")],
      "pvcs": [pvc("c", size="5Gi")],
      "args": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}},
     None, {"node-a": 50, "node-b": 25}),
    ("dynamic provisioning: the node with the most free capacity scores best",
     {"pvcs": [pvc("c", cls="csi", size="10Gi")], "capacities": CSI_CAPACITIES,
      "drivers": [_csi_driver()]},
     None, {"node-a": 90, "node-b": 80}),
    ("two claims of one class share the pool's capacity (taken once, not summed)",
     {"pvcs": [pvc("c", cls="csi", size="10Gi"), pvc("d", cls="csi", size="10Gi")],
      "capacities": CSI_CAPACITIES, "drivers": [_csi_driver()]},
     None, {"node-a": 80, "node-b": 60}),
    ("scored by capacity, not maximumVolumeSize (which only filters)",
     {"pvcs": [pvc("c", cls="csi", size="10Gi")],
      "capacities": [_capacity("cap-a", zone="a", capacity="100Gi", maximum="20Gi"),
                     _capacity("cap-b", zone="b", capacity="20Gi", maximum="20Gi")],
      "drivers": [_csi_driver()]},
     None, {"node-a": 90, "node-b": 50}),
    ("a driver without capacity tracking: nothing to score",
     {"pvcs": [pvc("c", cls="csi", size="10Gi")], "capacities": CSI_CAPACITIES,
      "drivers": [_csi_driver(capacity=False)]},
     Status(Code.SKIP), {"node-a": 0, "node-b": 0}),
    ("static binding and provisioning: the static bindings are scored",
     {"pvs": [pv("pa", zone="a", size="10Gi"), pv("pb", zone="b", size="20Gi")],
      "pvcs": [pvc("c", size="5Gi"), pvc("d", cls="csi", size="10Gi")],
      "capacities": CSI_CAPACITIES, "drivers": [_csi_driver()]},
     None, {"node-a": 50, "node-b": 75}),
    ("no claim: nothing to score",
     {}, Status(Code.SKIP), {"node-a": 0, "node-b": 0}),
]


@pytest.mark.parametrize(("env_args", "want_pre", "want"), [c[1:] for c in SCORE_CASES],
                         ids=[c[0] for c in SCORE_CASES])
def test_score_with_storage_capacity_scoring(env_args: dict[str, Any], want_pre: Status | None,
                                             want: dict[str, int]) -> None:
    env = Env(**env_args)
    claims = [c["metadata"]["name"] for c in env_args.get("pvcs", [])]
    pre, scores = _scores(env, _pod(*claims))
    assert pre == want_pre
    assert scores == want


def test_score_with_the_gate_off_has_no_scorer() -> None:
    env = Env(pvs=[pv("pa", zone="a"), pv("pb", zone="b", size="20Gi")], pvcs=[pvc("c")],
              gates=_gates(False))
    pre, scores = _scores(env, _pod("c"))
    assert pre == Status(Code.SKIP)
    assert scores == {"node-a": 0, "node-b": 0}


def test_filter_keeps_the_capacity_object_found_for_each_provisioned_claim() -> None:
    env = Env(pvcs=[pvc("c", cls="csi", size="10Gi")], capacities=CSI_CAPACITIES,
              drivers=[_csi_driver()])
    state, _, filtered = env.cycle(_pod("c"))
    assert filtered == {"node-a": None, "node-b": None}
    data = state.get(names.VOLUME_BINDING)
    found = {node: [c["metadata"]["name"] if c else None for c in v.provision_capacities]
             for node, v in data.volumes_by_node.items()}
    assert found == {"node-a": ["cap-a"], "node-b": ["cap-b"]}


# --- args, registry, events -------------------------------------------------------------------

# Upstream's ValidateVolumeBindingArgs table: (gate, args, error or None).
ARGS_CASES: list[tuple[str, bool, dict[str, Any], str | None]] = [
    ("negative bindTimeoutSeconds", True, {"bindTimeoutSeconds": -1},
     r"VolumeBinding\.args\.bindTimeoutSeconds.*should not be a negative value"),
    ("bindTimeoutSeconds not an integer", True, {"bindTimeoutSeconds": "10"},
     r"bindTimeoutSeconds"),
    ("unknown field", True, {"bogus": 1}, r"VolumeBinding\.args\.bogus"),
    ("[gate off] shape is refused", False,
     {"shape": [{"utilization": 0, "score": 10}]},
     r"VolumeBinding\.args\.shape.*turn on the feature gate StorageCapacityScoring"),
    ("[gate off] no shape is fine", False, {"bindTimeoutSeconds": 10}, None),
    ("[gate on] an empty shape gets the default", True, {"shape": []}, None),
    ("[gate on] utilization must increase", True,
     {"shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]},
     r"shape\[1\]\.utilization.*sorted in increasing order"),
    ("[gate on] equal utilizations", True,
     {"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]},
     r"shape\[1\]\.utilization"),
    ("[gate on] score out of range", True, {"shape": [{"utilization": 0, "score": 11}]},
     r"shape\[0\]\.score.*\[0, 10\]"),
    ("[gate on] utilization out of range", True, {"shape": [{"utilization": 101, "score": 1}]},
     r"shape\[0\]\.utilization.*\[0, 100\]"),
    ("[gate on] negative score", True, {"shape": [{"utilization": 0, "score": -1}]},
     r"shape\[0\]\.score"),
    ("[gate on] a valid shape", True,
     {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}, None),
]


@pytest.mark.parametrize(("gate", "args", "match"), [c[1:] for c in ARGS_CASES],
                         ids=[c[0] for c in ARGS_CASES])
def test_args_validation(gate: bool, args: dict[str, Any], match: str | None) -> None:
    if match is None:
        plugin = VolumeBinding(args, FakeHandle(), gates=_gates(gate))
        assert plugin.capacity_scoring is gate
        return
    with pytest.raises(ConfigError, match=match):
        VolumeBinding(args, FakeHandle(), gates=_gates(gate))


def test_registry_builds_plugin_with_default_args() -> None:
    plugin = in_tree_registry().get(names.VOLUME_BINDING)({"bindTimeoutSeconds": 600}, FakeHandle())
    assert isinstance(plugin, VolumeBinding) and plugin.name == "VolumeBinding"
    assert plugin.binder.bind_timeout == 600


def test_events_and_hints() -> None:
    env = Env()
    events = {(e.event.resource, e.event.action_type): e.hint
              for e in env.plugin.events_to_register()}
    assert (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL) in events
    assert (EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE) in events
    pod = _pod("c")
    pvc_hint = events[(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE)]
    assert pvc_hint is not None
    assert pvc_hint(pod, None, pvc("c")) == QueueingHint.QUEUE
    assert pvc_hint(pod, None, pvc("other")) == QueueingHint.SKIP
    assert pvc_hint(pod, None, pvc("c", ns="elsewhere")) == QueueingHint.SKIP
    sc_hint = events[(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE)]
    assert sc_hint is not None
    assert sc_hint(pod, None, CSI) == QueueingHint.QUEUE
    assert sc_hint(pod, CSI, {**CSI, "parameters": {"x": "y"}}) == QueueingHint.SKIP
    assert sc_hint(pod, CSI, {**CSI, "allowedTopologies": []}) == QueueingHint.QUEUE
    csinode_hint = events[(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE)]
    assert csinode_hint is not None
    old = {"metadata": {"name": "n"}}
    assert csinode_hint(pod, old, old) == QueueingHint.SKIP
    assert csinode_hint(pod, old, {"metadata": {"name": "n", "annotations": {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"}}}) == QueueingHint.QUEUE


def test_a_malformed_pv_is_no_candidate_and_fails_no_pod() -> None:
    """Issue 12: a PV whose capacity cannot be parsed is skipped (the event handlers log it
    once), the claim binds to a well-formed PV of its class."""
    bad = pv("bad", size="1Gi")
    bad["spec"]["capacity"]["storage"] = "big"
    env = Env(pvs=[bad, pv("good")], pvcs=[pvc("c")])
    _, pre, filtered = env.cycle(_pod("c"))
    assert pre is None
    assert filtered == {"node-a": None, "node-b": None}
