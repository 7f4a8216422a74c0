"""The resourceclaim controller, as kube-controller-manager runs it (``pkg/controller/resourceclaim``).

Why: a pod that asks for devices through ``spec.resourceClaims[].resourceClaimTemplateName``
cannot be scheduled until its ResourceClaim exists, and a claim whose pod is gone keeps its
devices until something releases them. On a cluster this controller does both; the sandbox
reproduces what it writes, each write going through the registry (new resourceVersion,
watch events, kube-apiserver's validation), a few milliseconds after the triggering write.
It watches pods, ResourceClaims and ResourceClaimTemplates in the store (an in-process
``store.Informer``, so it also sees what the simulated kubelet writes), keeps its indexes
(claims per pod, pods per claim, reservations, owners) from the events, and:

* creates a pod's claim from its template: ``generateName`` ``<pod>-<pod claim>-`` (both parts
  shortened proportionally past 57 characters), the template's labels and annotations plus
  ``resource.kubernetes.io/pod-claim-name``, an owner reference to the pod with
  ``controller: true`` and ``blockOwnerDeletion: true``, the template's claim spec; an
  orphaned claim of an earlier attempt (owned by the pod, same annotation) is adopted instead;
  the name goes to ``pod.status.resourceClaimStatuses``. A missing template is a
  ``FailedResourceClaimCreation`` Warning event on the pod, retried when templates change.
* reserves an allocated claim for a pod that is already bound (``spec.nodeName`` set by
  someone else than the scheduler) while ``reservedFor`` has room (256).
* drops ``reservedFor`` entries of pods that are gone, replaced (other uid) or done
  (Succeeded/Failed, or deleted before being bound); when the last one goes it deallocates
  (clears ``status.allocation``) and removes the ``resource.kubernetes.io/delete-protection``
  finalizer; a deleted claim nobody uses gets the same, so its deletion completes.
* deletes a generated claim nobody uses once its pod is done or replaced (the garbage
  collector in ``controllers.py`` deletes it when the pod is removed).

The claim the scheduler makes for a pod's extended resources (DRAExtendedResource: owned by
the pod, named in its ``status.extendedResourceClaimStatus``) is treated as a generated one:
released when its pod goes, deleted once it is done (the garbage collector deletes it with
the pod).

Not emulated: the admin-access namespace check, metrics. A pod
that is done gets no claim re-created for it (the claim of a finished pod is deleted above and
would otherwise come back).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .store import DELETED, Event, Informer
from .util import now_iso
from .wakeloop import wake_loop

if TYPE_CHECKING:
    from .registry import Registry
    from .resources import ResourceType

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256
COMPONENT = "resource_claim"
_MAX_BASE = 57  # leaves room for "-" + 5 random characters in 63


def generate_name(pod_name: str, claim_name: str) -> str:
    """``<pod>-<claim>-``; past 57 characters both parts are cut in proportion to their length."""
    name = f"{pod_name}-{claim_name}-"
    if len(name) <= _MAX_BASE:
        return name
    return (pod_name[: len(pod_name) * _MAX_BASE // len(name)] + "-"
            + claim_name[: len(claim_name) * _MAX_BASE // len(name)])


def is_pod_done(pod: Obj) -> bool:
    """None of the pod's containers run or will run."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


def owning_pod(claim: Obj) -> tuple[str, str]:
    for ref in claim["metadata"].get("ownerReferences") or []:
        if (isinstance(ref, dict) and ref.get("controller") and ref.get("apiVersion") == "v1"
                and ref.get("kind") == "Pod"):
            return str(ref.get("name", "")), str(ref.get("uid", ""))
    return "", ""


class ClaimNotFound(Exception):
    """The pod's status does not (yet) name the claim generated for this pod claim."""


def claim_name(pod: Obj, pod_claim: Obj) -> tuple[str | None, bool]:
    """The ResourceClaim a pod claim stands for (None: none needed) and whether the claim
    must be owned by the pod (``resourceclaim.Name`` upstream)."""
    if pod_claim.get("resourceClaimName"):
        return str(pod_claim["resourceClaimName"]), False
    if pod_claim.get("resourceClaimTemplateName"):
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if isinstance(st, dict) and st.get("name") == pod_claim.get("name"):
                name = st.get("resourceClaimName")
                return (str(name) if name else None), True
        raise ClaimNotFound
    return None, False


def is_for_pod(pod: Obj, claim: Obj) -> bool:
    uid = pod["metadata"]["uid"]
    return any(isinstance(r, dict) and r.get("uid") == uid for r in claim["metadata"].get("ownerReferences") or [])


def reserved_for_pod(pod: Obj, claim: Obj) -> bool:
    uid = pod["metadata"]["uid"]
    return any(isinstance(r, dict) and r.get("uid") == uid
               for r in (claim.get("status") or {}).get("reservedFor") or [])


class ClaimControllerSim:
    def __init__(self, registry: Registry, *, delay: float = 0.003) -> None:
        self.registry = registry
        self.delay = delay
        cat = registry.catalog
        self.pods_rt = cat.builtin("", "pods")
        self.claims_rt = cat.builtin("resource.k8s.io", "resourceclaims")
        self.templates_rt = cat.builtin("resource.k8s.io", "resourceclaimtemplates")
        self.events_rt = cat.builtin("", "events")
        self._wake = asyncio.Event()
        self.informer = Informer(registry.store, wake=self._wake,
                                 types=(self.pods_rt, self.claims_rt, self.templates_rt), keep=self._keep)
        # pod uids in the reservedFor of the claim events queued since the last drain: a pod
        # event queued behind such a claim's is kept, as the drain will have reserved it
        self._incoming: set[str] = set()
        self._pods: set[tuple[str, str]] = set()
        self._claims: set[tuple[str, str]] = set()
        self._waiting_for_template: set[tuple[str, str]] = set()
        self._reported: set[tuple[str, str]] = set()  # (pod uid, message) already evented
        # indexes kept from the watch events (upstream's informer indexers)
        self._pod_claims: dict[tuple[str, str], set[str]] = {}  # pod -> claim names it uses
        self._claim_users: dict[tuple[str, str], set[str]] = {}  # claim -> pod names using it
        self._claim_reserved: dict[tuple[str, str], set[str]] = {}  # claim -> reservedFor uids
        self._reservations: dict[str, set[tuple[str, str]]] = {}  # pod uid -> claims reserving it
        self._owned: dict[str, set[tuple[str, str]]] = {}  # pod uid -> claims it owns (controller)
        self._claim_owner: dict[tuple[str, str], str] = {}  # claim -> owning pod uid

    # ------------------------------------------------------------ watching the store

    def _watch(self) -> bool:
        """(Re)open the watches; True when they had to be opened (a full resync is due)."""
        return bool(self.informer.open())

    def _keep(self, rt: ResourceType, ev: Event) -> bool:
        """Chosen before queueing: every claim and template event, and the pod events
        ``_pod_event`` acts on (a pod that names claims, uses some, or that a claim reserves,
        the claims queued ahead of it included); a plain pod's writes wake nothing here."""
        obj = ev.obj
        if rt is not self.pods_rt:
            if rt is self.claims_rt and ev.type != DELETED:
                status = obj.get("status")
                reserved = status.get("reservedFor") if isinstance(status, dict) else None
                if isinstance(reserved, list):
                    self._incoming.update(str(r.get("uid")) for r in reserved if isinstance(r, dict))
            return True
        spec, md = obj.get("spec"), obj.get("metadata")
        if not isinstance(spec, dict) or not isinstance(md, dict) or "name" not in md or spec.get("resourceClaims"):
            return True  # (a malformed pod is queued: the drain names it)
        uid = md.get("uid")
        return ((md.get("namespace", ""), md["name"]) in self._pod_claims or uid in self._reservations
                or uid in self._incoming)

    def _drain(self) -> None:
        # the claims queued so far are handled below (before anything here writes), so their
        # reservations are in _reservations for the pod events filtered from now on
        self._incoming.clear()
        for rt, ev in self.informer.drain():
            plural, typ = rt.plural, ev.type
            try:
                if plural == "pods":
                    self._pod_event(typ, ev.obj)
                elif plural == "resourceclaims":
                    self._claim_event(typ, ev.obj)
                elif typ != DELETED:  # a template appeared or changed: retry pods waiting for one
                    ns = ev.obj["metadata"].get("namespace", "")
                    self._pods |= {k for k in self._waiting_for_template if k[0] == ns}
            except (AttributeError, KeyError, TypeError, ValueError) as err:
                # a malformed object (written around validation): named, skipped, the rest goes on
                md = ev.obj.get("metadata")
                md = md if isinstance(md, dict) else {}
                log.warning("resourceclaim controller: ignoring malformed %s %s/%s: %r", plural,
                            md.get("namespace", ""), md.get("name", ""), err)

    def _pod_event(self, typ: str, pod: Obj) -> None:
        md = pod["metadata"]
        key = (md.get("namespace", ""), md["name"])
        if (not (pod.get("spec") or {}).get("resourceClaims") and key not in self._pod_claims
                and md.get("uid") not in self._reservations):
            return  # most pods: nothing to index, nothing to do
        names = self._claim_names(pod) if typ != DELETED else set()
        old = self._pod_claims.pop(key, set())
        for n in old - names:
            users = self._claim_users.get((key[0], n))
            if users is not None:
                users.discard(key[1])
                if not users:
                    del self._claim_users[(key[0], n)]
        if names:
            self._pod_claims[key] = names
            for n in names - old:
                self._claim_users.setdefault((key[0], n), set()).add(key[1])
        if typ != DELETED and (pod.get("spec") or {}).get("resourceClaims"):
            self._pods.add(key)
        if typ == DELETED or is_pod_done(pod):
            self._claims |= {(key[0], n) for n in old | names}
            self._claims |= self._reservations.get(md["uid"], set())

    def _claim_event(self, typ: str, claim: Obj) -> None:
        md = claim["metadata"]
        key = (md.get("namespace", ""), md["name"])
        uids = set() if typ == DELETED else {
            str(r.get("uid")) for r in (claim.get("status") or {}).get("reservedFor") or [] if isinstance(r, dict)}
        old = self._claim_reserved.pop(key, set())
        for u in old - uids:
            keys = self._reservations.get(u)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._reservations[u]
        if uids:
            self._claim_reserved[key] = uids
            for u in uids - old:
                self._reservations.setdefault(u, set()).add(key)
        owner = "" if typ == DELETED else owning_pod(claim)[1]
        old_owner = self._claim_owner.pop(key, "")
        if old_owner and old_owner != owner:
            keys = self._owned.get(old_owner)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._owned[old_owner]
        if owner:
            self._claim_owner[key] = owner
            self._owned.setdefault(owner, set()).add(key)
        if typ != DELETED:
            self._claims.add(key)
        # pods that use this claim may now need a reservation (or a new claim)
        self._pods |= {(key[0], p) for p in self._claim_users.get(key, ())}

    @staticmethod
    def _claim_names(pod: Obj) -> set[str]:
        out = set()
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
            if not isinstance(pc, dict):
                continue
            try:
                name, _ = claim_name(pod, pc)
            except ClaimNotFound:
                continue
            if name:
                out.add(name)
        return out

    # ------------------------------------------------------------ loop

    async def run(self, *, iterations: int | None = None) -> None:
        def rewatch() -> None:
            if self._watch():
                self.resync_all()

        try:
            await wake_loop(self._wake, self.sync, delay=self.delay, before=rewatch,
                            what="resourceclaim controller simulation", iterations=iterations)
        finally:
            self.informer.close()

    def resync_all(self) -> None:
        """Every pod and claim, as after an informer's initial list."""
        self._pod_claims.clear()
        self._claim_users.clear()
        self._claim_reserved.clear()
        self._reservations.clear()
        self._owned.clear()
        self._claim_owner.clear()
        for e in list(self.registry.ts(self.claims_rt).entries()):
            self._claim_event("ADDED", e.obj)
        for e in list(self.registry.ts(self.pods_rt).entries()):
            self._pod_event("ADDED", e.obj)
        self._wake.set()

    def sync(self, max_passes: int = 10) -> None:
        """Work through what the watches delivered (and what handling it caused)."""
        if self._watch():
            self.resync_all()
        for _ in range(max_passes):
            self._drain()
            if not self._pods and not self._claims:
                return
            pods, self._pods = self._pods, set()
            claims, self._claims = self._claims, set()
            for ns, name in sorted(pods):
                self._guard("pod", ns, name, self.sync_pod)
            for ns, name in sorted(claims):
                self._guard("claim", ns, name, self.sync_claim)

    def _guard(self, what: str, ns: str, name: str, fn: Any) -> None:
        try:
            fn(ns, name)
        except ApiError as err:
            log.warning("resourceclaim controller: %s %s/%s: %s", what, ns, name, err.message)
            if err.code == 409:  # retried at once; other errors on the next event
                (self._pods if what == "pod" else self._claims).add((ns, name))
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            # a malformed object (written around validation): named and skipped
            log.warning("resourceclaim controller: ignoring malformed %s %s/%s: %r", what, ns, name, err)

    # ------------------------------------------------------------ pods

    def _get(self, rt: Any, ns: str, name: str) -> Obj | None:
        e = self.registry.ts(rt).get(ns, name)
        return e.obj if e is not None else None

    def sync_pod(self, ns: str, name: str) -> None:
        pod = self._get(self.pods_rt, ns, name)
        # a pod being deleted or done never runs again: no claim is (re)created for it
        if pod is None or pod["metadata"].get("deletionTimestamp") or is_pod_done(pod):
            return
        pod_claims = [pc for pc in (pod.get("spec") or {}).get("resourceClaims") or [] if isinstance(pc, dict)]
        if not pod_claims:
            return
        new_statuses: dict[str, str] = {}
        self._waiting_for_template.discard((ns, name))
        for pc in pod_claims:
            err = self._handle_claim(pod, pc, new_statuses)
            if err:
                self._waiting_for_template.add((ns, name))
                self._event(pod, "FailedResourceClaimCreation", f"PodResourceClaim {pc.get('name')}: {err}")
                break
        if new_statuses:
            pod = self._record_statuses(pod, new_statuses)
        if not (pod.get("spec") or {}).get("nodeName"):
            return  # the scheduler reserves
        for pc in pod_claims:
            try:
                cname, check_owner = claim_name(pod, pc)
            except ClaimNotFound:
                return
            if cname is None:
                continue
            claim = self._get(self.claims_rt, ns, cname)
            if claim is None or (check_owner and not is_for_pod(pod, claim)):
                return
            st = claim.get("status") or {}
            if (st.get("allocation") and not reserved_for_pod(pod, claim)
                    and len(st.get("reservedFor") or []) < RESERVED_FOR_MAX):
                ref = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
                self._write_claim_status(claim, {**st, "reservedFor": [*(st.get("reservedFor") or []), ref]})

    def _handle_claim(self, pod: Obj, pc: Obj, new_statuses: dict[str, str]) -> str:
        """Make sure the claim of one pod claim exists; an error message if it cannot."""
        ns = pod["metadata"].get("namespace", "")
        try:
            cname, check_owner = claim_name(pod, pc)
        except ClaimNotFound:
            pass
        else:
            if cname is None:
                return ""
            existing = self._get(self.claims_rt, ns, cname)
            if existing is not None and (not check_owner or is_for_pod(pod, existing)):
                return ""
            if not check_owner:
                return ""  # a plain claim reference: the user creates it
        template_name = pc.get("resourceClaimTemplateName")
        if not template_name:
            return ""
        claim = self._orphaned_claim(pod, str(pc.get("name", "")))
        if claim is None:
            tmpl = self._get(self.templates_rt, ns, str(template_name))
            if tmpl is None:
                return (f'resource claim template "{template_name}": resourceclaimtemplates.resource.k8s.io '
                        f'"{template_name}" not found')
            tspec = tmpl.get("spec") or {}
            tmeta = tspec.get("metadata") or {}
            annotations = {**(tmeta.get("annotations") or {}), POD_CLAIM_ANNOTATION: pc.get("name", "")}
            pmd = pod["metadata"]
            md: Obj = {
                "generateName": generate_name(pmd["name"], str(pc.get("name", ""))),
                "namespace": ns,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pmd["name"], "uid": pmd["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
                "annotations": annotations,
            }
            if tmeta.get("labels"):
                md["labels"] = dict(tmeta["labels"])
            body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": md,
                    "spec": tspec.get("spec") or {}}
            try:
                claim = self.registry.create(self.claims_rt, ns, body).obj
            except ApiError as err:
                return f"create ResourceClaim : {err.message}"
        new_statuses[str(pc.get("name", ""))] = claim["metadata"]["name"]
        return ""

    def _orphaned_claim(self, pod: Obj, pod_claim: str) -> Obj | None:
        ns = pod["metadata"].get("namespace", "")
        for cns, cname in sorted(self._owned.get(pod["metadata"]["uid"], ())):
            c = self._get(self.claims_rt, cns, cname)
            if (c is not None and cns == ns and owning_pod(c)[1] == pod["metadata"]["uid"]
                    and (c["metadata"].get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == pod_claim):
                return c
        return None

    def _record_statuses(self, pod: Obj, new: dict[str, str]) -> Obj:
        """``pod.status.resourceClaimStatuses`` (server-side apply, forced: entries by name)."""
        st = dict(pod.get("status") or {})
        entries = [dict(x) for x in st.get("resourceClaimStatuses") or [] if isinstance(x, dict)]
        for pod_claim, cname in sorted(new.items()):
            for x in entries:
                if x.get("name") == pod_claim:
                    x["resourceClaimName"] = cname
                    break
            else:
                entries.append({"name": pod_claim, "resourceClaimName": cname})
        st["resourceClaimStatuses"] = entries
        md = pod["metadata"]
        body = {**pod, "metadata": {k: v for k, v in md.items() if k != "resourceVersion"}, "status": st}
        return self.registry.update(self.pods_rt, md.get("namespace", ""), md["name"], body, sub="status").obj

    def _event(self, pod: Obj, reason: str, message: str) -> None:
        md = pod["metadata"]
        if (md["uid"], message) in self._reported:
            return
        self._reported.add((md["uid"], message))
        now = now_iso()
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"generateName": f"{md['name']}.", "namespace": md.get("namespace", "")},
              "involvedObject": {"kind": "Pod", "namespace": md.get("namespace", ""), "name": md["name"],
                                 "uid": md["uid"], "apiVersion": "v1",
                                 "resourceVersion": md.get("resourceVersion", "")},
              "reason": reason, "message": message, "type": "Warning", "count": 1,
              "source": {"component": COMPONENT}, "firstTimestamp": now, "lastTimestamp": now,
              "reportingComponent": COMPONENT, "reportingInstance": ""}
        try:
            self.registry.create(self.events_rt, md.get("namespace", ""), ev)
        except ApiError as err:
            log.warning("resourceclaim controller: cannot record event: %s", err.message)

    # ------------------------------------------------------------ claims

    def _write_claim_status(self, claim: Obj, status: Obj) -> Obj:
        md = claim["metadata"]
        body = {**claim, "status": status}
        return self.registry.update(self.claims_rt, md.get("namespace", ""), md["name"], body, sub="status").obj

    def _pod_gone_or_done(self, ns: str, ref: Obj) -> bool:
        if ref.get("apiGroup") or ref.get("resource") != "pods":
            return False  # other consumers are not ours to judge
        pod = self._get(self.pods_rt, ns, str(ref.get("name", "")))
        return pod is None or pod["metadata"]["uid"] != ref.get("uid") or is_pod_done(pod)

    def sync_claim(self, ns: str, name: str) -> None:
        claim = self._get(self.claims_rt, ns, name)
        if claim is None:
            return
        st = claim.get("status") or {}
        reserved = [r for r in st.get("reservedFor") or [] if isinstance(r, dict)]
        valid = [r for r in reserved if not self._pod_gone_or_done(ns, r)]
        has_fin = FINALIZER in (claim["metadata"].get("finalizers") or [])
        if len(valid) < len(reserved):
            new_st = {**st, "reservedFor": valid}
            if not valid:
                new_st.pop("reservedFor")
                if has_fin:
                    new_st.pop("allocation", None)  # deallocate: the devices are free again
                    new_st.pop("devices", None)  # the drivers' reports go with the allocation
            claim = self._write_claim_status(claim, new_st)
            if has_fin and not (claim.get("status") or {}).get("allocation"):
                claim = self._drop_finalizer(claim)
        elif has_fin and claim["metadata"].get("deletionTimestamp") and not valid:
            if st.get("allocation"):
                claim = self._write_claim_status(claim, {k: v for k, v in st.items()
                                                         if k not in ("allocation", "devices")})
            claim = self._drop_finalizer(claim)
        if valid or claim is None:
            return
        pod_name, pod_uid = owning_pod(claim)
        if not pod_name:
            return
        pod = self._get(self.pods_rt, ns, pod_name)
        if pod is not None and (pod["metadata"]["uid"] != pod_uid or is_pod_done(pod)):
            if not claim["metadata"].get("deletionTimestamp"):
                try:
                    self.registry.delete(self.claims_rt, ns, name, {})
                except ApiError as err:
                    if err.code != 404:
                        raise

    def _drop_finalizer(self, claim: Obj) -> Obj | None:
        md = claim["metadata"]
        fins = [f for f in md.get("finalizers") or [] if f != FINALIZER]
        body = {**claim, "metadata": {**md, "finalizers": fins}}
        if not fins:
            body["metadata"].pop("finalizers")
        e = self.registry.update(self.claims_rt, md.get("namespace", ""), md["name"], body)
        return None if self._get(self.claims_rt, md.get("namespace", ""), md["name"]) is None else e.obj
