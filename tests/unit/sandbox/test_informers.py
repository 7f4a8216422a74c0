"""The sandbox's simulated controllers watch the store (``store.Informer``), as
kube-controller-manager's controllers watch the API: an object written around the registry
(straight into the store) still makes them act, a controller started after objects exist
catches up from its initial list, and the informer itself lists, then streams the events of
its types in resourceVersion order, filtered before queueing."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.sandbox import Sandbox
from scheduler.sandbox.controllers import ControllerSim
from scheduler.sandbox.dradriver import DraDriverSim, parse_device_kinds
from scheduler.sandbox.kubelet import KubeletSim
from scheduler.sandbox.nscontroller import NamespaceControllerSim
from scheduler.sandbox.pvcontroller import PVControllerSim
from scheduler.sandbox.registry import Registry
from scheduler.sandbox.store import ADDED, DELETED, MODIFIED, Event, Informer, Store, TypeStore
from scheduler.sandbox.util import new_uid, now_iso
from tests.builders import make_pod

Obj = dict[str, Any]


# ---------------------------------------------------------------- the informer


def _registry() -> Registry:
    reg = Registry(Store(watch_history=100))
    reg.create(reg.catalog.builtin("", "namespaces"), "", {"metadata": {"name": "default"}})
    return reg


def test_informer_lists_then_streams_its_types_in_order() -> None:
    reg = _registry()
    pods, cms = reg.catalog.builtin("", "pods"), reg.catalog.builtin("", "configmaps")
    reg.create(pods, "default", make_pod("before"))
    inf = Informer(reg.store, wake=asyncio.Event(), types=(pods, cms))
    listed = inf.open()
    assert [(rt.plural, [e.obj["metadata"]["name"] for e in entries]) for rt, entries in listed] == [
        ("pods", ["before"]), ("configmaps", [])]
    assert inf.rv == reg.store.rv
    assert inf.open() == []  # already open: no second list
    reg.create(cms, "default", {"metadata": {"name": "cm"}})
    reg.create(pods, "default", make_pod("after"))
    reg.delete(pods, "default", "before", {})
    got = [(rt.plural, ev.type, ev.obj["metadata"]["name"], ev.rv) for rt, ev in inf.drain()]
    assert [g[:3] for g in got] == [("configmaps", ADDED, "cm"), ("pods", ADDED, "after"),
                                    ("pods", DELETED, "before")]
    assert [g[3] for g in got] == sorted(g[3] for g in got)
    assert inf.drain() == []


@pytest.mark.parametrize(("keep", "want"), [
    (None, [ADDED, MODIFIED, DELETED]),
    (lambda rt, ev: ev.type == DELETED, [DELETED]),
    (lambda rt, ev: bool(ev.obj["metadata"].get("labels")), [MODIFIED, DELETED]),  # the labelled states
    (lambda rt, ev: False, []),
])
def test_informer_filters_before_queueing(keep: Callable[[Any, Event], bool] | None, want: list[str]) -> None:
    reg = _registry()
    cms = reg.catalog.builtin("", "configmaps")
    wake = asyncio.Event()
    inf = Informer(reg.store, wake=wake, types=(cms,), keep=keep)
    inf.open()
    reg.create(cms, "default", {"metadata": {"name": "cm"}})
    reg.update(cms, "default", "cm", {"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}})
    reg.delete(cms, "default", "cm", {})
    assert [ev.type for _, ev in inf.drain()] == want
    assert wake.is_set() == bool(want)  # what is filtered out wakes nobody


def test_informer_of_every_type_sees_types_registered_later_and_survives_dropped_watches() -> None:
    reg = _registry()
    inf = Informer(reg.store, wake=asyncio.Event(), every_type=True)
    plurals = {rt.plural for rt, _ in inf.open()}
    assert "namespaces" in plurals
    leases = reg.catalog.builtin("coordination.k8s.io", "leases")
    assert leases.key not in reg.store.types  # no lease type store yet
    reg.create(leases, "default", {"metadata": {"name": "l"}, "spec": {}})
    assert reg.store.drop_watches() == 0  # the fault ends client watches only
    assert [(rt.plural, ev.type) for rt, ev in inf.drain()] == [("leases", ADDED)]
    inf.close()
    reg.create(leases, "default", {"metadata": {"name": "m"}, "spec": {}})
    assert inf.drain() == []


# ---------------------------------------------------------------- the controllers

SIMULATED_NODE = "node-0000"


def _raw_write(sb: Sandbox, plural: str, obj: Obj, *, group: str = "") -> None:
    """Straight into the store: no registry call, only the watch event."""
    rt = sb.registry.catalog.builtin(group, plural)
    md = obj["metadata"]
    md.setdefault("uid", new_uid())
    md.setdefault("creationTimestamp", now_iso())
    obj = {"apiVersion": rt.storage_api_version, "kind": rt.kind, **obj}
    ts = sb.registry.ts(rt)
    cur = ts.get(md.get("namespace", ""), md["name"])
    sb.store.write(ts, obj, cur.obj if cur is not None else None)


def _get(sb: Sandbox, plural: str, ns: str, name: str, *, group: str = "") -> Obj | None:
    e = sb.registry.ts(sb.registry.catalog.builtin(group, plural)).get(ns, name)
    return e.obj if e is not None else None


def _owned(sb: Sandbox, plural: str, owner_uid: str, *, group: str = "") -> list[Obj]:
    ts = sb.registry.ts(sb.registry.catalog.builtin(group, plural))
    return [e.obj for e in ts.entries()
            if any(r.get("uid") == owner_uid for r in e.obj["metadata"].get("ownerReferences") or [])]


def _bound_pod(name: str) -> Obj:
    pod = make_pod(name, cpu="100m")
    pod["spec"]["nodeName"] = SIMULATED_NODE
    pod["status"] = {"phase": "Pending"}
    return pod


def _replicaset(name: str, replicas: int) -> Obj:
    labels = {"app": name}
    return {"metadata": {"name": name, "namespace": "default", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def _pv() -> Obj:
    return {"metadata": {"name": "vol"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                  "storageClassName": "", "hostPath": {"path": "/tmp/vol"}},
            "status": {"phase": "Available"}}


def _pvc() -> Obj:
    return {"metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "resources": {"requests": {"storage": "1Gi"}}}}


def _kubelet_case(sb: Sandbox, write: Callable[[str, Obj], None], *, first: bool) -> Callable[[], bool]:
    k = KubeletSim(sb.registry)
    if first:
        k.step()  # watching before the write
    write("pods", _bound_pod("p"))

    def done() -> bool:
        k.step()
        pod = _get(sb, "pods", "default", "p")
        return pod is not None and pod["status"]["phase"] == "Running"
    return done


def _replicaset_case(sb: Sandbox, write: Callable[[str, Obj], None], *, first: bool) -> Callable[[], bool]:
    c = ControllerSim(sb.registry)
    if first:
        c.sync()
    write("replicasets", _replicaset("web", 2))

    def done() -> bool:
        c.sync()
        rs = _get(sb, "replicasets", "default", "web", group="apps")
        return rs is not None and len(_owned(sb, "pods", rs["metadata"]["uid"])) == 2
    return done


def _gc_case(sb: Sandbox, write: Callable[[str, Obj], None], *, first: bool) -> Callable[[], bool]:
    """An owner removed straight from the store: the GC deletes its dependent."""
    c = ControllerSim(sb.registry)
    if first:
        c.sync()
    write("configmaps", {"metadata": {"name": "owner", "namespace": "default"}})
    owner = _get(sb, "configmaps", "default", "owner")
    assert owner is not None
    pod = make_pod("dependent")
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                           "uid": owner["metadata"]["uid"]}]
    write("pods", pod)
    c.sync()
    ts = sb.registry.ts(sb.registry.catalog.builtin("", "configmaps"))
    e = ts.get("default", "owner")
    assert e is not None
    sb.store.remove(ts, e)

    def done() -> bool:
        c.sync()
        return _get(sb, "pods", "default", "dependent") is None
    return done


def _pv_case(sb: Sandbox, write: Callable[[str, Obj], None], *, first: bool) -> Callable[[], bool]:
    p = PVControllerSim(sb.registry)
    if first:
        p.sync()
    write("persistentvolumes", _pv())
    write("persistentvolumeclaims", _pvc())

    def done() -> bool:
        p.sync()
        claim = _get(sb, "persistentvolumeclaims", "default", "data")
        return claim is not None and (claim.get("status") or {}).get("phase") == "Bound"
    return done


def _namespace_case(sb: Sandbox, write: Callable[[str, Obj], None], *, first: bool) -> Callable[[], bool]:
    """A namespace marked Terminating straight in the store: emptied, then removed."""
    now = [0.0]
    c = NamespaceControllerSim(sb.registry, delay=2.0, clock=lambda: now[0])
    if first:
        c.sync()
    write("namespaces", {"metadata": {"name": "gone"}, "spec": {"finalizers": ["kubernetes"]}})
    write("configmaps", {"metadata": {"name": "cm", "namespace": "gone"}})
    write("namespaces", {"metadata": {"name": "gone", "deletionTimestamp": now_iso()},
                         "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Terminating"}})

    def done() -> bool:
        c.sync()
        if _get(sb, "configmaps", "gone", "cm") is None:
            return False  # not before its delay
        now[0] += 2.0
        c.sync()
        return _get(sb, "namespaces", "", "gone") is None and _get(sb, "configmaps", "gone", "cm") is None
    return done


def _dra_driver_case(sb: Sandbox, write: Callable[[str, Obj], None], *, first: bool) -> Callable[[], bool]:
    """A node written straight into the store gets the driver's ResourceSlice and its removal
    takes the slice away."""
    d = DraDriverSim(sb.registry, parse_device_kinds("gpu=2"))
    if first:
        d.sync()
    write("nodes", {"metadata": {"name": "node-x"}})

    def done() -> bool:
        d.sync()
        if [s["spec"]["driver"] for s in _slices(sb, "node-x")] != ["gpu.example.com"]:
            return False
        ts = sb.registry.ts(sb.registry.catalog.builtin("", "nodes"))
        e = ts.get("", "node-x")
        assert e is not None
        sb.store.remove(ts, e)
        d.sync()
        return _slices(sb, "node-x") == []
    return done


def _slices(sb: Sandbox, node: str) -> list[Obj]:
    ts = sb.registry.ts(sb.registry.catalog.builtin("resource.k8s.io", "resourceslices"))
    return [e.obj for e in ts.entries() if e.obj["spec"].get("nodeName") == node]


_CASE_OF = {"kubelet": _kubelet_case, "replicaset": _replicaset_case, "gc": _gc_case, "pv": _pv_case,
            "namespace": _namespace_case, "dra-driver": _dra_driver_case}
# each controller started after the writes (it catches up from its initial list) or before them
CASES: dict[str, Callable[[Sandbox, Callable[[str, Obj], None]], Callable[[], bool]]] = {
    f"{what}-{when}": functools.partial(case, first=when == "watching")
    for what, case in _CASE_OF.items() for when in ("catches-up", "watching")
}


def _sandbox() -> Sandbox:
    # no simulations of its own: each case runs the one it tests, by hand
    sb = Sandbox(nodes=1, simulate_kubelet=False, simulate_controllers=False, simulate_pv_controller=False)
    sb.registry.graceful_pod_deletion = True
    sb.registry.garbage_collection = True
    return sb


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_controller_acts_on_what_only_the_store_saw(case: str) -> None:
    """Written straight into the store (no registry call): the controller acts on the
    watch event, or on its initial list when it starts after the write."""
    sb = _sandbox()
    groups = {"replicasets": "apps"}

    def write(plural: str, obj: Obj) -> None:
        _raw_write(sb, plural, obj, group=groups.get(plural, ""))

    done = CASES[case](sb, write)
    assert done()


@pytest.mark.parametrize("case", sorted(CASES))
def test_without_the_controller_nothing_happens(case: str) -> None:
    """The counter-test of the one above: the same writes, the controller's turn not taken
    (its sync not called after the write) leave the objects as written."""
    sb = _sandbox()
    groups = {"replicasets": "apps"}
    wrote: list[tuple[str, str]] = []

    def write(plural: str, obj: Obj) -> None:
        wrote.append((plural, obj["metadata"]["name"]))
        _raw_write(sb, plural, obj, group=groups.get(plural, ""))

    CASES[case](sb, write)
    pod = _get(sb, "pods", "default", "p")
    if pod is not None:
        assert pod["status"]["phase"] == "Pending"
    rs = _get(sb, "replicasets", "default", "web", group="apps")
    if rs is not None:
        assert _owned(sb, "pods", rs["metadata"]["uid"]) == []
    claim = _get(sb, "persistentvolumeclaims", "default", "data")
    if claim is not None:
        assert (claim.get("status") or {}).get("phase") != "Bound"
    if ("namespaces", "gone") in wrote:
        assert _get(sb, "namespaces", "", "gone") is not None
        assert _get(sb, "configmaps", "gone", "cm") is not None
    if ("nodes", "node-x") in wrote:
        assert _slices(sb, "node-x") == []
    if ("pods", "dependent") in wrote:
        assert _get(sb, "pods", "default", "dependent") is not None
    assert wrote


def test_graceful_deletion_is_confirmed_by_the_kubelet_after_the_grace_period() -> None:
    """The registry sets deletionTimestamp and the grace period (the API server's part); the
    kubelet sees it through its watch and removes the pod once the period is over; a pod
    finalizers still hold stays with a zero grace period until its last finalizer goes."""
    sb = _sandbox()
    now = [1000.0]
    k = KubeletSim(sb.registry, clock=lambda: now[0], max_grace=5.0)
    pods = sb.registry.catalog.builtin("", "pods")
    for name, fins in (("plain", []), ("held", ["example.com/hold"])):
        pod = _bound_pod(name)
        pod["metadata"]["finalizers"] = fins
        sb.registry.create(pods, "default", pod)
    k.step()
    for name in ("plain", "held"):
        got, removed = sb.registry.delete(pods, "default", name, {"gracePeriodSeconds": 3})
        assert not removed and got.obj["metadata"]["deletionGracePeriodSeconds"] == 3
    k.step()
    assert _get(sb, "pods", "default", "plain") is not None  # in its grace period
    now[0] += 3.0
    k.step()
    assert _get(sb, "pods", "default", "plain") is None
    held = _get(sb, "pods", "default", "held")
    assert held is not None and held["metadata"]["deletionGracePeriodSeconds"] == 0
    sb.registry.update(pods, "default", "held", {**held, "metadata": {**held["metadata"], "finalizers": []}})
    assert _get(sb, "pods", "default", "held") is None


def test_a_finalizer_removed_during_the_grace_period_does_not_remove_the_pod() -> None:
    sb = _sandbox()
    pods = sb.registry.catalog.builtin("", "pods")
    pod = _bound_pod("p")
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    sb.registry.create(pods, "default", pod)
    sb.registry.delete(pods, "default", "p", {"gracePeriodSeconds": 30})
    cur = _get(sb, "pods", "default", "p")
    assert cur is not None
    sb.registry.update(pods, "default", "p", {**cur, "metadata": {**cur["metadata"], "finalizers": []}})
    assert _get(sb, "pods", "default", "p") is not None  # the kubelet has not confirmed


@pytest.mark.parametrize("metadata_finalizers", [[], ["example.com/held"]])
def test_the_namespace_controller_finalizes_through_the_finalize_subresource(
    metadata_finalizers: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As upstream's controller calls PUT namespaces/{name}/finalize: the controller's only
    write of the namespace is the registry's finalize update, and the API server (the
    registry) removes the namespace once no finalizer, in spec or metadata, is left."""
    sb = _sandbox()
    reg = sb.registry
    ns_rt = reg.catalog.builtin("", "namespaces")
    reg.create(ns_rt, "", {"metadata": {"name": "gone", "finalizers": metadata_finalizers}})
    reg.delete(ns_rt, "", "gone", {})
    updates: list[tuple[str, str, str]] = []
    update = reg.update

    def spy(rt: Any, ns: str, name: str, body: Any, *, sub: str = "", dry_run: bool = False) -> Any:
        updates.append((rt.plural, name, sub))
        return update(rt, ns, name, body, sub=sub, dry_run=dry_run)
    monkeypatch.setattr(reg, "update", spy)
    c = NamespaceControllerSim(reg, delay=0.0, clock=lambda: 0.0)
    c.sync()
    assert updates == [("namespaces", "gone", "finalize")]
    left = _get(sb, "namespaces", "", "gone")
    if not metadata_finalizers:
        assert left is None
        return
    assert left is not None and left["spec"] == {}
    monkeypatch.setattr(reg, "update", update)
    reg.update(ns_rt, "", "gone", {**left, "metadata": {**left["metadata"], "finalizers": []}})
    assert _get(sb, "namespaces", "", "gone") is None


@pytest.mark.parametrize("policy, owner_plural, owner_group", [
    ("Foreground", "priorityclasses", "scheduling.k8s.io"),  # a cluster-scoped owner
    ("Foreground", "configmaps", ""),
    ("Orphan", "configmaps", ""),
    ("Orphan", "priorityclasses", "scheduling.k8s.io"),
])
def test_the_gc_follows_its_graph_not_a_scan(
    policy: str, owner_plural: str, owner_group: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A foreground deletion waits for the owner's dependents and an orphaning one releases
    them, as before, through the collector's owner -> dependents graph (as upstream's GC):
    no stored type is listed whole while it works."""
    sb = _sandbox()
    reg = sb.registry
    owner_rt = reg.catalog.builtin(owner_group, owner_plural)
    cms = reg.catalog.builtin("", "configmaps")
    body: Obj = {"metadata": {"name": "owner", "namespace": "default"}}
    if owner_plural == "priorityclasses":
        body = {"metadata": {"name": "owner"}, "value": 10}
    owner = reg.create(owner_rt, "default", body).obj
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": "owner",
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    for i in range(2):
        reg.create(cms, "default", {"metadata": {"name": f"dep-{i}", "ownerReferences": [ref]}})
    for i in range(20):
        reg.create(cms, "default", {"metadata": {"name": f"other-{i}"}})
    c = ControllerSim(reg)
    c.sync()  # the initial list
    listed: list[str] = []
    entries = TypeStore.entries

    def spy(self: TypeStore) -> Any:
        listed.append(self.rt.plural)
        return entries(self)
    monkeypatch.setattr(TypeStore, "entries", spy)
    reg.delete(owner_rt, "default", "owner", {"propagationPolicy": policy})
    for _ in range(3):
        c.sync()
    assert _get(sb, owner_plural, "default" if owner_rt.namespaced else "", "owner", group=owner_group) is None
    deps = [_get(sb, "configmaps", "default", f"dep-{i}") for i in range(2)]
    if policy == "Orphan":
        assert all(d is not None and "ownerReferences" not in d["metadata"] for d in deps)
    else:
        assert deps == [None, None]
    assert listed == []


def test_the_claim_controller_queues_only_the_pod_events_it_acts_on() -> None:
    """A plain pod's writes are not queued for the resourceclaim controller; a pod that names
    claims, or that a claim reserves (its claim's event queued ahead and not drained yet, or
    already drained), is; the reservation of a pod gone is released as before."""
    from scheduler.sandbox.claimcontroller import ClaimControllerSim
    from tests.builders import dra_claim, with_pod_claims

    reg = _registry()
    pods = reg.catalog.builtin("", "pods")
    claims = reg.catalog.builtin("resource.k8s.io", "resourceclaims")
    cc = ClaimControllerSim(reg)
    cc.sync()  # its initial list: the watches open
    reg.create(pods, "default", make_pod("plain"))
    reg.create(pods, "default", with_pod_claims(make_pod("claimer"), ("gpu", "claim", "c1")))
    reserved = reg.create(pods, "default", make_pod("reserved")).obj
    later = reg.create(pods, "default", make_pod("later")).obj

    def reserve(name: str, pod: Obj) -> None:
        claim = dra_claim(name)
        claim["metadata"].update(uid=new_uid(), creationTimestamp=now_iso())
        claim["status"] = {"reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"],
                                            "uid": pod["metadata"]["uid"]}]}
        reg.store.write(reg.ts(claims), claim, None)

    reserve("c0", reserved)  # queued, not drained
    reg.delete(pods, "default", "reserved", {})
    reg.delete(pods, "default", "plain", {})
    queued = [(rt.plural, ev.type, ev.obj["metadata"]["name"]) for rt, ev in cc.informer._queue]
    assert queued == [("pods", ADDED, "claimer"), ("resourceclaims", ADDED, "c0"), ("pods", DELETED, "reserved")]
    cc.sync()
    assert "reservedFor" not in (reg.ts(claims).get("default", "c0").obj.get("status") or {})  # type: ignore[union-attr]
    reserve("c2", later)
    cc.sync()  # drained: the reservation is known
    reg.delete(pods, "default", "later", {})
    assert [(rt.plural, ev.type, ev.obj["metadata"]["name"]) for rt, ev in cc.informer._queue][-1:] == [
        ("pods", DELETED, "later")]
    cc.sync()
    assert "reservedFor" not in (reg.ts(claims).get("default", "c2").obj.get("status") or {})  # type: ignore[union-attr]


def test_nodes_added_before_start_get_slices_on_the_drivers_first_pass() -> None:
    """What lets ``Sandbox.start()`` leave them to the driver's loop: its first pass lists the
    nodes (the informer's initial list) and publishes for every one that lacks slices."""
    sb = Sandbox(nodes=1, dra_devices="gpu=2")
    assert sb.dra_driver is not None
    slices = sb.registry.catalog.builtin("resource.k8s.io", "resourceslices")

    def published() -> list[str]:
        return sorted(e.obj["spec"]["nodeName"] for e in sb.registry.ts(slices).entries())

    assert published() == ["node-0000"]  # at construction
    sb.add_nodes(2)
    assert published() == ["node-0000"]
    sb.dra_driver.sync()
    assert published() == ["node-0000", "node-0001", "node-0002"]
