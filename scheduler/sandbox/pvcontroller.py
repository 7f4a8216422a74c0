"""A PersistentVolume controller simulation, so the VolumeBinding plugin works end to end.

Why: kube-controller-manager's PV controller (and, for dynamic provisioning, an external CSI
provisioner) completes what the scheduler starts: the scheduler pre-binds a PV by setting its
``spec.claimRef`` or asks for provisioning by annotating the PVC with
``volume.kubernetes.io/selected-node``; without a controller no PVC would ever become Bound.
This module reproduces the visible effects, each write going through the registry (new
resourceVersion, normal watch events), within a few milliseconds of the triggering write. Like
the real controller it watches PersistentVolumes, PersistentVolumeClaims and StorageClasses
(an in-process ``Informer`` on the store), keeps its own view of them from the events, and
syncs every volume and claim of that view when something changed:

* binding (``pkg/controller/volume/persistentvolume``): a PV whose claimRef names an existing
  claim is bound to it -- PV claimRef uid and phase Bound, PVC ``spec.volumeName`` with the
  ``pv.kubernetes.io/bind-completed`` / ``bound-by-controller`` annotations and status
  (phase, capacity, accessModes); an unbound claim of an Immediate class (or without class)
  is matched to the smallest Available PV that fits (class, size, access modes, volume mode,
  selector); a claim pre-bound by ``spec.volumeName`` gets that volume if it is free.
* provisioning: a claim with the selected-node annotation and a WaitForFirstConsumer class, or
  any unbound claim of an Immediate class, whose provisioner is not
  ``kubernetes.io/no-provisioner`` gets a CSI PV ``pvc-<claim uid>`` (node affinity on the
  selected node's zone, else hostname), then is bound as above.
* release: a PV whose bound claim is gone turns Released; reclaim policy Delete removes it.
  A bound claim whose PV is gone turns Lost.

Not emulated: protection finalizers, recycling, retroactive default class assignment,
volume expansion, attach/detach.
"""

from __future__ import annotations

import asyncio
import logging
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .selectors import selector_dict_matches
from .store import DELETED, Informer
from .util import new_uid
from .validation import parse_quantity
from .wakeloop import wake_loop

if TYPE_CHECKING:
    from .registry import Registry
    from .resources import ResourceType

log = logging.getLogger("scheduler.sandbox")
Obj = dict[str, Any]

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"  # a claim's or volume's class, the old way
WFFC = "WaitForFirstConsumer"


def _spec(o: Obj) -> Obj:
    s = o.get("spec")
    return s if isinstance(s, dict) else {}


def _status(o: Obj) -> Obj:
    s = o.get("status")
    return s if isinstance(s, dict) else {}


def _ann(o: Obj) -> dict[str, str]:
    a = o["metadata"].get("annotations")
    return a if isinstance(a, dict) else {}


def _class_of(o: Obj) -> str:
    """A claim's or a volume's class: the beta annotation first, then the field (upstream's
    GetPersistentVolumeClaimClass / GetPersistentVolumeClass); "" for none."""
    ann = _ann(o)
    if BETA_CLASS in ann:
        return str(ann[BETA_CLASS] or "")
    return str(_spec(o).get("storageClassName") or "")


def _qty(v: Any) -> Fraction:
    q = parse_quantity(v)
    return q if q is not None else Fraction(-1)


class PVControllerSim:
    def __init__(self, registry: Registry, *, delay: float = 0.005) -> None:
        self.registry = registry
        self.delay = delay
        self._wake = asyncio.Event()
        self._resync = False
        self.pv_rt = registry.catalog.builtin("", "persistentvolumes")
        self.pvc_rt = registry.catalog.builtin("", "persistentvolumeclaims")
        self.sc_rt = registry.catalog.builtin("storage.k8s.io", "storageclasses")
        self.informer = Informer(registry.store, wake=self._wake, types=(self.pv_rt, self.pvc_rt, self.sc_rt))
        # the controller's view, kept from the watch events (its informers' caches)
        self._pvs: dict[str, Obj] = {}
        self._claims: dict[tuple[str, str], Obj] = {}
        self._classes: dict[str, Obj] = {}

    def poke(self) -> None:
        """Sync soon even if nothing changed (a resync)."""
        self._resync = True
        self._wake.set()

    async def run(self, *, iterations: int | None = None) -> None:
        try:
            await wake_loop(self._wake, self.sync, delay=self.delay, before=self._open,
                            what="pv controller simulation", iterations=iterations)
        finally:
            self.informer.close()

    def _open(self) -> None:
        if self._apply_list():
            self._wake.set()

    # ------------------------------------------------------------ the view

    def _apply_list(self) -> bool:
        listed = self.informer.open()
        for rt, entries in listed:
            view = self._view(rt.plural)
            view.clear()
            for e in entries:
                view[self._key(rt.plural, e.obj)] = e.obj
        return bool(listed)

    def _view(self, plural: str) -> dict[Any, Obj]:
        if plural == "persistentvolumes":
            return self._pvs
        if plural == "persistentvolumeclaims":
            return self._claims
        return self._classes

    @staticmethod
    def _key(plural: str, obj: Obj) -> Any:
        md = obj["metadata"]
        return (md.get("namespace", ""), md["name"]) if plural == "persistentvolumeclaims" else md["name"]

    def _refresh(self) -> bool:
        """Bring the view up to date (initial list, then the watch events); True if it changed."""
        changed = self._apply_list()
        for rt, ev in self.informer.drain():
            view = self._view(rt.plural)
            key = self._key(rt.plural, ev.obj)
            if ev.type == DELETED:
                view.pop(key, None)
            else:
                view[key] = ev.obj
            changed = True
        return changed

    # ------------------------------------------------------------ one pass

    def sync(self, max_passes: int = 5) -> None:
        """Sync every volume and claim once something they depend on changed; again after
        the pass's own writes (seen through the watch), until nothing is left to write."""
        resync, self._resync = self._resync, False
        if not self._refresh() and not resync:
            return
        for _ in range(max_passes):
            if not self._pass():
                break
            self._refresh()

    def _pass(self) -> bool:
        pvs = dict(self._pvs)
        claims = dict(self._claims)
        classes = self._classes
        wrote = False
        claimed: set[tuple[str, str]] = set()
        for name in sorted(pvs):
            wrote |= self._sync_volume(pvs[name], claims, claimed)
        for key in sorted(claims):
            if key in claimed:
                continue
            wrote |= self._sync_claim(claims[key], pvs, classes)
        return wrote

    def _sync_volume(self, pv: Obj, claims: dict[tuple[str, str], Obj], claimed: set[tuple[str, str]]) -> bool:
        md = pv["metadata"]
        if md.get("deletionTimestamp"):
            return False
        ref = _spec(pv).get("claimRef")
        phase = _status(pv).get("phase")
        if not isinstance(ref, dict) or not ref.get("name"):
            return self._set_pv_phase(pv, "Available") if phase not in ("Available", "Failed", "Pending") else False
        key = (str(ref.get("namespace") or ""), str(ref["name"]))
        claim = claims.get(key)
        ref_uid = ref.get("uid")
        if claim is None or (ref_uid and claim["metadata"]["uid"] != ref_uid):
            if not ref_uid:
                # pre-bound to a claim that does not exist yet: stays available for it
                return self._set_pv_phase(pv, "Available") if phase != "Available" else False
            wrote = False
            if phase != "Released":
                wrote = self._set_pv_phase(pv, "Released")
            if _spec(pv).get("persistentVolumeReclaimPolicy", "Retain") == "Delete":
                self._delete_pv(md["name"])
                wrote = True
            return wrote
        if claim["metadata"].get("deletionTimestamp"):
            return False
        vol = _spec(claim).get("volumeName")
        if vol and vol != md["name"]:
            return False  # the claim is bound to another volume; this one waits
        claimed.add(key)
        return self._bind(pv, claim)

    def _sync_claim(self, claim: Obj, pvs: dict[str, Obj], classes: dict[str, Obj]) -> bool:
        md = claim["metadata"]
        if md.get("deletionTimestamp"):
            return False
        spec = _spec(claim)
        vol = spec.get("volumeName")
        if vol:
            pv = pvs.get(str(vol))
            if pv is None:
                if _ann(claim).get(ANN_BIND_COMPLETED) and _status(claim).get("phase") == "Bound":
                    return self._update_claim_status(claim, {**_status(claim), "phase": "Lost"})
                return False
            ref = _spec(pv).get("claimRef")
            if not ref and self._satisfies(pv, claim):
                return self._bind(pv, claim)  # pre-bound claim: take the free volume
            return False
        cls_name = _class_of(claim)
        sc = classes.get(cls_name)
        if sc is not None and sc.get("volumeBindingMode") == WFFC:
            node = _ann(claim).get(ANN_SELECTED_NODE)
            if node and sc.get("provisioner") not in (None, "", NO_PROVISIONER):
                return self._provision(claim, sc, str(node), pvs)
            return False
        best: Obj | None = None
        for pv in pvs.values():
            if _spec(pv).get("claimRef") or pv["metadata"].get("deletionTimestamp"):
                continue
            if _status(pv).get("phase") != "Available" or not self._satisfies(pv, claim):
                continue
            if best is None or _qty((_spec(pv).get("capacity") or {}).get("storage")) < \
                    _qty((_spec(best).get("capacity") or {}).get("storage")):
                best = pv
        if best is not None:
            return self._bind(best, claim)
        if sc is not None and sc.get("provisioner") not in (None, "", NO_PROVISIONER):
            return self._provision(claim, sc, None, pvs)
        return False

    # ------------------------------------------------------------ matching

    def _satisfies(self, pv: Obj, claim: Obj) -> bool:
        ps, cs = _spec(pv), _spec(claim)
        if _class_of(pv) != _class_of(claim):
            return False
        if (ps.get("volumeMode") or "Filesystem") != (cs.get("volumeMode") or "Filesystem"):
            return False
        if not set(cs.get("accessModes") or []) <= set(ps.get("accessModes") or []):
            return False
        req = ((cs.get("resources") or {}).get("requests") or {}).get("storage")
        if _qty((ps.get("capacity") or {}).get("storage")) < _qty(req):
            return False
        sel = cs.get("selector")
        return not sel or selector_dict_matches(sel, pv["metadata"].get("labels") or {})

    # ------------------------------------------------------------ writes

    def _bind(self, pv: Obj, claim: Obj) -> bool:
        """The controller's bind(): volume claimRef, volume phase, claim volumeName, claim status."""
        wrote = False
        cmd = claim["metadata"]
        ref = _spec(pv).get("claimRef")
        want_ref = {"kind": "PersistentVolumeClaim", "namespace": cmd.get("namespace", ""), "name": cmd["name"],
                    "uid": cmd["uid"], "apiVersion": "v1", "resourceVersion": cmd["resourceVersion"]}
        if not isinstance(ref, dict) or ref.get("uid") != cmd["uid"]:
            new_pv = {**pv, "metadata": dict(pv["metadata"]), "spec": {**_spec(pv), "claimRef": {**(ref or {}), **want_ref}}}
            if not ref:
                new_pv["metadata"]["annotations"] = {**_ann(pv), ANN_BOUND_BY_CONTROLLER: "yes"}
            got = self._update(self.pv_rt, new_pv)
            if got is None:
                return False
            pv, wrote = got, True
        if _status(pv).get("phase") != "Bound":
            got = self._update(self.pv_rt, {**pv, "status": {**_status(pv), "phase": "Bound"}}, sub="status")
            if got is None:
                return wrote
            pv, wrote = got, True
        ann = _ann(claim)
        vol = _spec(claim).get("volumeName")
        if vol != pv["metadata"]["name"] or ann.get(ANN_BIND_COMPLETED) != "yes":
            new_ann = {**ann, ANN_BIND_COMPLETED: "yes"}
            if not vol:
                new_ann[ANN_BOUND_BY_CONTROLLER] = "yes"
            new_claim = {**claim, "metadata": {**cmd, "annotations": new_ann},
                         "spec": {**_spec(claim), "volumeName": pv["metadata"]["name"]}}
            got = self._update(self.pvc_rt, new_claim)
            if got is None:
                return wrote
            claim, wrote = got, True
        ps = _spec(pv)
        st = {**_status(claim), "phase": "Bound", "accessModes": list(ps.get("accessModes") or []),
              "capacity": dict(ps.get("capacity") or {})}
        if st != _status(claim):
            wrote |= self._update_claim_status(claim, st)
        return wrote

    def _provision(self, claim: Obj, sc: Obj, node_name: str | None, pvs: dict[str, Obj]) -> bool:
        cmd = claim["metadata"]
        name = f"pvc-{cmd['uid']}"
        if name in pvs:
            return False  # provisioned already; binding follows from its claimRef
        prov = str(sc["provisioner"])
        affinity: Obj | None = None
        if node_name is not None:
            node_e = self.registry.ts_of("", "nodes").get("", node_name)
            if node_e is None:
                log.warning("pv controller: claim %s/%s selected unknown node %s", cmd.get("namespace"), cmd["name"],
                            node_name)
                return False
            labels = node_e.obj["metadata"].get("labels") or {}
            zone = labels.get("topology.kubernetes.io/zone")
            key, val = ("topology.kubernetes.io/zone", zone) if zone else \
                ("kubernetes.io/hostname", labels.get("kubernetes.io/hostname", node_name))
            affinity = {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": [val]}]}]}}
        wrote = False
        ann = _ann(claim)
        if ann.get(ANN_STORAGE_PROVISIONER) != prov:
            got = self._update(self.pvc_rt, {**claim, "metadata": {**cmd, "annotations": {
                **ann, ANN_STORAGE_PROVISIONER: prov, ANN_BETA_STORAGE_PROVISIONER: prov}}})
            if got is None:
                return False
            claim, cmd, wrote = got, got["metadata"], True
        cs = _spec(claim)
        spec: Obj = {
            "accessModes": list(cs.get("accessModes") or []),
            "capacity": {"storage": ((cs.get("resources") or {}).get("requests") or {}).get("storage", "0")},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": cmd.get("namespace", ""), "name": cmd["name"],
                         "uid": cmd["uid"], "apiVersion": "v1", "resourceVersion": cmd["resourceVersion"]},
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
            "storageClassName": sc["metadata"]["name"],
            "volumeMode": cs.get("volumeMode") or "Filesystem",
            "csi": {"driver": prov, "volumeHandle": new_uid()},
        }
        if sc.get("mountOptions"):
            spec["mountOptions"] = list(sc["mountOptions"])
        if affinity is not None:
            spec["nodeAffinity"] = affinity
        pv = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: prov}}, "spec": spec}
        try:
            created = self.registry.create(self.pv_rt, "", pv).obj
        except ApiError as e:
            log.warning("pv controller: cannot provision %s: %s", name, e.message)
            return wrote
        self._bind(created, claim)
        return True

    def _set_pv_phase(self, pv: Obj, phase: str) -> bool:
        return self._update(self.pv_rt, {**pv, "status": {**_status(pv), "phase": phase}}, sub="status") is not None

    def _update_claim_status(self, claim: Obj, status: Obj) -> bool:
        return self._update(self.pvc_rt, {**claim, "status": status}, sub="status") is not None

    def _delete_pv(self, name: str) -> None:
        try:
            self.registry.delete(self.pv_rt, "", name, {})
        except ApiError as e:
            log.warning("pv controller: cannot delete volume %s: %s", name, e.message)

    def _update(self, rt: ResourceType, obj: Obj, *, sub: str = "") -> Obj | None:
        md = obj["metadata"]
        try:
            return self.registry.update(rt, md.get("namespace", ""), md["name"], obj, sub=sub).obj
        except ApiError as e:
            log.warning("pv controller: cannot update %s %s: %s", rt.plural, md["name"], e.message)
            return None
