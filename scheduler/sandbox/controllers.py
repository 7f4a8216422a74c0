"""Minimal workload controllers and the garbage collector, as kube-controller-manager runs them.

Why: the examples in ``manifests/examples/`` are Deployments and Jobs; on a cluster their pods
come from controllers, and deleting the workload deletes its pods. The sandbox reproduces the
visible behaviour, each write going through the registry (new resourceVersion, watch events),
a few milliseconds after the triggering write:

* Deployment -> ReplicaSet ``<deployment>-<pod-template-hash>`` (hash of the pod template,
  label ``pod-template-hash`` on the ReplicaSet, its selector and template); a template change
  creates a new ReplicaSet and scales the old ones to 0 (no surge/unavailability pacing);
  ``deployment.kubernetes.io/revision``; status replicas / updated / ready / available and the
  Available and Progressing conditions.
* ReplicaSet -> pods ``<replicaset>-<random>`` (generateName) from the template, scaled up or
  down to ``spec.replicas`` (unscheduled and not-ready pods are removed first); status counts.
* Job -> pods ``<job>-<random>`` with the labels the API server gives a Job's template
  (``controller-uid``, ``job-name`` and their ``batch.kubernetes.io/`` forms; set on create in
  ``admission.py``), ``parallelism`` active at a time until ``completions`` succeeded
  (Indexed jobs get ``batch.kubernetes.io/job-completion-index``), ``backoffLimit`` failures
  fail the Job; status active / ready / succeeded / failed, start and completion times, the
  SuccessCriteriaMet + Complete or FailureTarget + Failed conditions.
* Garbage collection: a dependent all of whose owners (``ownerReferences``) are gone is
  deleted (background propagation); ``propagationPolicy: Foreground`` keeps the owner with the
  ``foregroundDeletion`` finalizer until its dependents are gone; ``Orphan`` (and the
  ``orphan`` finalizer) removes the owner's reference from its dependents instead.

Like kube-controller-manager's, these controllers watch the API instead of being called by
it: one in-process ``Informer`` on the store (every type but the event views; workloads in
full, other types only their events that can matter: objects with owner references, objects
being deleted, removals) feeds the work queue and the garbage collector's owner -> dependents
graph, built from the initial list and kept from the events.

All controlled objects carry an ``ownerReferences`` entry with ``controller: true`` and
``blockOwnerDeletion: true``, as the real controllers write it.

Not emulated: rollout pacing (maxSurge/maxUnavailable, minReadySeconds), revision history
limits, paused deployments, pod failure policies, success policies, suspend, TTL after
finished, CronJobs, StatefulSets, DaemonSets.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import TYPE_CHECKING, Any

import orjson

from .errors import ApiError
from .registry import FOREGROUND as FOREGROUND  # the finalizers the API server sets for the GC
from .registry import ORPHAN as ORPHAN
from .resources import ResourceType
from .selectors import selector_dict_matches
from .store import DELETED, Event, Informer
from .util import now_iso, set_condition
from .wakeloop import wake_loop

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")

REVISION = "deployment.kubernetes.io/revision"
HASH_LABEL = "pod-template-hash"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # upstream's rand.SafeEncodeString alphabet
_WORKLOADS = {("apps", "deployments"), ("apps", "replicasets"), ("batch", "jobs")}
WORKLOAD_PLURALS = frozenset(p for _, p in _WORKLOADS)


def template_hash(template: Obj) -> str:
    """A stable, name-safe hash of a pod template (upstream: fnv32a, safe-encoded)."""
    digest = hashlib.blake2s(orjson.dumps(template, option=orjson.OPT_SORT_KEYS), digest_size=4).digest()
    n = int.from_bytes(digest, "big")
    out = []
    for _ in range(10):
        n, r = divmod(n, len(_SAFE))
        out.append(_SAFE[r])
        if not n:
            break
    return "".join(out)


def owner_ref(obj: Obj, *, controller: bool = True) -> Obj:
    md = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": md["name"], "uid": md["uid"],
            "controller": controller, "blockOwnerDeletion": True}


def controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid", ""))
    return None


def _active(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict))


def _keep(rt: ResourceType, ev: Event) -> bool:
    """The events the controllers and the GC look at, chosen before queueing: every event
    of a workload, removals (an owner gone), and writes of owned objects or of objects being
    deleted (held by a GC finalizer)."""
    if ev.type == DELETED or (rt.group, rt.plural) in _WORKLOADS:
        return True
    md = ev.obj["metadata"]
    return bool(md.get("ownerReferences") or md.get("deletionTimestamp"))


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


class ControllerSim:
    """Deployment, ReplicaSet and Job controllers plus the garbage collector."""

    def __init__(self, registry: Registry, *, delay: float = 0.003) -> None:
        self.registry = registry
        self.delay = delay
        self._wake = asyncio.Event()
        self._dirty: set[tuple[str, str, str]] = set()  # (plural, namespace, name)
        self._removed_uids: set[str] = set()
        self._held: dict[tuple[str, str, str], ResourceType] = {}  # owners held by GC finalizers
        # the same owners by uid (where they are), to find an orphaning owner of a reference
        self._holding: dict[str, tuple[ResourceType, str, str]] = {}
        # The garbage collector's graph, as upstream's keeps one: owner uid -> its dependents
        # (type key, namespace, name), so an owner's removal, or a foreground deletion's wait,
        # visits its dependents only instead of every stored object.  Built from the
        # informer's initial list, then kept from its events (observe()/observe_removed());
        # an edge may outlive a reference an update dropped (that update's event may be
        # filtered out): each use checks the dependent's current references, and prunes.
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}
        self._owner_types: dict[tuple[str, str], ResourceType] = {}  # (apiVersion, kind)
        cat = registry.catalog
        self.pods = cat.builtin("", "pods")
        self.rs = cat.builtin("apps", "replicasets")
        self.deploy = cat.builtin("apps", "deployments")
        self.jobs = cat.builtin("batch", "jobs")
        self._by_plural = {"replicasets": self.rs, "deployments": self.deploy, "jobs": self.jobs}
        self.informer = Informer(registry.store, wake=self._wake, every_type=True, keep=_keep)

    # ------------------------------------------------------------ the watch

    def sync_watch(self) -> None:
        """Apply the initial list (when the watches (re)open) and the events since the last call."""
        for rt, entries in self.informer.open():
            for e in entries:
                self._observe_listed(rt, e.obj)
        for rt, ev in self.informer.drain():
            try:
                if ev.type == DELETED:
                    self.observe_removed(rt, ev.obj)
                else:
                    self.observe(rt, ev.obj)
            except (AttributeError, KeyError, TypeError, ValueError) as err:
                # a malformed object (written around validation): named, skipped, the rest goes on
                md = ev.obj.get("metadata")
                md = md if isinstance(md, dict) else {}
                log.warning("controllers: ignoring malformed %s %s/%s: %r", rt.plural,
                            md.get("namespace", ""), md.get("name", ""), err)

    def _observe_listed(self, rt: ResourceType, obj: Obj) -> None:
        md = obj["metadata"]
        if (rt.group, rt.plural) in _WORKLOADS or md.get("ownerReferences") or md.get("deletionTimestamp"):
            try:
                self.observe(rt, obj)
            except (AttributeError, KeyError, TypeError, ValueError):
                log.warning("controllers: ignoring malformed %s %s/%s", rt.plural, md.get("namespace", ""),
                            md.get("name", ""))

    # ------------------------------------------------------------ handlers of the watch events

    def observe(self, rt: ResourceType, obj: Obj) -> None:
        """An object was written: reconcile it (workloads) or its controller (owned objects)."""
        md = obj["metadata"]
        if (rt.group, rt.plural) in _WORKLOADS:
            self._mark(rt.plural, md.get("namespace", ""), md["name"])
        if md.get("deletionTimestamp") and {FOREGROUND, ORPHAN} & set(md.get("finalizers") or []):
            self._held[(rt.key, md.get("namespace", ""), md["name"])] = rt
            self._holding[md["uid"]] = (rt, md.get("namespace", ""), md["name"])
            self._removed_uids.add(md["uid"])  # its dependents are collected (or released) now
            self._wake.set()
        refs = md.get("ownerReferences")
        if refs:
            self._add_dependent(rt, md, refs)
            for ref in refs:
                if isinstance(ref, dict) and ref.get("controller"):
                    plural = {"ReplicaSet": "replicasets", "Deployment": "deployments", "Job": "jobs"}.get(
                        str(ref.get("kind")))
                    if plural:
                        self._mark(plural, md.get("namespace", ""), str(ref.get("name", "")))

    def observe_removed(self, rt: ResourceType, obj: Obj) -> None:
        """An object is gone: its dependents may have to go (GC), its controller may act."""
        md = obj["metadata"]
        if md["uid"] in self._dependents:
            self._removed_uids.add(md["uid"])
        if md.get("ownerReferences"):
            self._drop_dependent(rt, md)
        self.observe(rt, obj)

    def _mark(self, plural: str, ns: str, name: str) -> None:
        self._dirty.add((plural, ns, name))
        self._wake.set()

    # ------------------------------------------------------------ loop

    async def run(self, *, iterations: int | None = None) -> None:
        try:
            await wake_loop(self._wake, self.sync, delay=self.delay, what="controller simulation",
                            before=self._open, iterations=iterations)
        finally:
            self.informer.close()

    def _open(self) -> None:
        self.sync_watch()
        if self._dirty or self._removed_uids or self._held:
            self._wake.set()

    def sync(self, max_passes: int = 10) -> None:
        for _ in range(max_passes):
            self.sync_watch()
            if not self._dirty and not self._removed_uids:
                self._finish_held()
                return
            removed, self._removed_uids = self._removed_uids, set()
            if removed:
                self._collect_garbage(removed)
            self._finish_held()
            dirty, self._dirty = self._dirty, set()
            # owners first: a Deployment's change creates ReplicaSets that need pods
            for plural in ("deployments", "replicasets", "jobs"):
                for p, ns, name in sorted(dirty):
                    if p == plural:
                        self._reconcile(plural, ns, name)

    def _reconcile(self, plural: str, ns: str, name: str) -> None:
        rt = self._by_plural[plural]
        e = self.registry.ts(rt).get(ns, name)
        if e is None or e.obj["metadata"].get("deletionTimestamp"):
            return
        try:
            if plural == "deployments":
                self._sync_deployment(e.obj)
            elif plural == "replicasets":
                self._sync_replicaset(e.obj)
            else:
                self._sync_job(e.obj)
        except ApiError as err:
            log.warning("%s %s/%s: %s", plural, ns, name, err.message)

    # ------------------------------------------------------------ helpers

    def _owned(self, rt: ResourceType, ns: str, uid: str) -> list[Obj]:
        by_ns = self.registry.ts(rt).by_ns.get(ns) or {}
        return [e.obj for e in by_ns.values() if controller_uid(e.obj) == uid]

    def _create(self, rt: ResourceType, ns: str, obj: Obj) -> Obj:
        return self.registry.create(rt, ns, obj).obj

    def _write_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        if obj.get("status") == status:
            return
        md = obj["metadata"]
        self.registry.update(rt, md["namespace"], md["name"], {**obj, "status": status}, sub="status")

    def _delete(self, rt: ResourceType, obj: Obj) -> None:
        md = obj["metadata"]
        try:
            self.registry.delete(rt, md.get("namespace", ""), md["name"], {})
        except ApiError as err:
            if err.code != 404:
                raise

    # ------------------------------------------------------------ Deployment

    def _sync_deployment(self, d: Obj) -> None:
        md, spec = d["metadata"], d.get("spec") or {}
        ns, uid = md["namespace"], md["uid"]
        template = spec.get("template") or {}
        replicas = _int(spec.get("replicas"), 1)
        h = template_hash(template)
        owned = self._owned(self.rs, ns, uid)
        new = next((rs for rs in owned if (rs["metadata"].get("labels") or {}).get(HASH_LABEL) == h), None)
        revisions = [int((rs["metadata"].get("annotations") or {}).get(REVISION, "0") or 0) for rs in owned]
        if new is None:
            tmd = dict(template.get("metadata") or {})
            tmd["labels"] = {**(tmd.get("labels") or {}), HASH_LABEL: h}
            selector = dict(spec.get("selector") or {})
            selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: h}
            new = self._create(self.rs, ns, {
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"{md['name']}-{h}", "namespace": ns, "labels": tmd["labels"],
                             "annotations": {REVISION: str(max(revisions, default=0) + 1),
                                             "deployment.kubernetes.io/desired-replicas": str(replicas),
                                             "deployment.kubernetes.io/max-replicas": str(replicas)},
                             "ownerReferences": [owner_ref(d)]},
                "spec": {"replicas": replicas, "selector": selector, "template": {**template, "metadata": tmd},
                         "minReadySeconds": _int(spec.get("minReadySeconds"), 0)},
            })
            owned.append(new)
        elif _int((new.get("spec") or {}).get("replicas"), 1) != replicas:
            new = self._scale(new, replicas)
        for rs in owned:
            if rs is not new and rs["metadata"]["uid"] != new["metadata"]["uid"] and \
                    _int((rs.get("spec") or {}).get("replicas"), 1) != 0:
                self._scale(rs, 0)
        owned = self._owned(self.rs, ns, uid)
        st = [rs.get("status") or {} for rs in owned]
        new_st = next((rs.get("status") or {} for rs in owned if rs["metadata"]["uid"] == new["metadata"]["uid"]), {})
        total = sum(_int(s.get("replicas"), 0) for s in st)
        available = sum(_int(s.get("availableReplicas"), 0) for s in st)
        updated = _int(new_st.get("replicas"), 0)
        now = now_iso()
        conds = list((d.get("status") or {}).get("conditions") or [])
        conds = _condition(conds, "Available", available >= replicas,
                           "MinimumReplicasAvailable" if available >= replicas else "MinimumReplicasUnavailable",
                           "Deployment has minimum availability." if available >= replicas
                           else "Deployment does not have minimum availability.", now)
        done = updated == replicas and total == replicas and available >= replicas
        conds = _condition(conds, "Progressing", True,
                           "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                           f'ReplicaSet "{new["metadata"]["name"]}" '
                           + ("has successfully progressed." if done else "is progressing."), now)
        status: Obj = {"observedGeneration": md.get("generation", 1), "replicas": total,
                       "updatedReplicas": updated, "readyReplicas": sum(_int(s.get("readyReplicas"), 0) for s in st),
                       "availableReplicas": available, "conditions": conds}
        if total - available > 0:
            status["unavailableReplicas"] = total - available
        status = {k: v for k, v in status.items() if v != 0 or k == "observedGeneration"}
        self._write_status(self.deploy, d, status)

    def _scale(self, rs: Obj, replicas: int) -> Obj:
        md = rs["metadata"]
        ann = {**(md.get("annotations") or {}), "deployment.kubernetes.io/desired-replicas": str(replicas)}
        body = {**rs, "metadata": {**md, "annotations": ann}, "spec": {**(rs.get("spec") or {}), "replicas": replicas}}
        return self.registry.update(self.rs, md["namespace"], md["name"], body).obj

    # ------------------------------------------------------------ ReplicaSet

    def _sync_replicaset(self, rs: Obj) -> None:
        md, spec = rs["metadata"], rs.get("spec") or {}
        ns, uid = md["namespace"], md["uid"]
        replicas = _int(spec.get("replicas"), 1)
        pods = [p for p in self._owned(self.pods, ns, uid) if _active(p)]
        diff = replicas - len(pods)
        if diff > 0:
            for _ in range(diff):
                pods.append(self._create(self.pods, ns, self._pod_from_template(rs, spec.get("template") or {})))
        elif diff < 0:
            # upstream's ranking: unassigned before assigned, pending before running, not
            # ready before ready, newest first
            pods.sort(key=lambda p: (bool((p.get("spec") or {}).get("nodeName")),
                                     (p.get("status") or {}).get("phase") == "Running", _ready(p),
                                     _neg_ts(p["metadata"].get("creationTimestamp", ""))))
            for p in pods[:-diff]:
                self._delete(self.pods, p)
            pods = pods[-diff:]
        sel = spec.get("selector")
        ready = sum(1 for p in pods if _ready(p))
        status: Obj = {"replicas": len(pods),
                       "fullyLabeledReplicas": sum(1 for p in pods
                                                   if selector_dict_matches(sel, p["metadata"].get("labels") or {})),
                       "readyReplicas": ready, "availableReplicas": ready,
                       "observedGeneration": md.get("generation", 1)}
        status = {k: v for k, v in status.items() if v != 0 or k in ("replicas", "observedGeneration")}
        self._write_status(self.rs, rs, status)

    def _pod_from_template(self, owner: Obj, template: Obj, *, extra_labels: dict[str, str] | None = None,
                           annotations: dict[str, str] | None = None) -> Obj:
        tmd = template.get("metadata") or {}
        md: Obj = {"generateName": f"{owner['metadata']['name']}-", "namespace": owner["metadata"]["namespace"],
                   "labels": {**(tmd.get("labels") or {}), **(extra_labels or {})},
                   "ownerReferences": [owner_ref(owner)]}
        ann = {**(tmd.get("annotations") or {}), **(annotations or {})}
        if ann:
            md["annotations"] = ann
        if tmd.get("finalizers"):
            md["finalizers"] = list(tmd["finalizers"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": dict(template.get("spec") or {})}

    # ------------------------------------------------------------ Job

    def _sync_job(self, job: Obj) -> None:
        md, spec = job["metadata"], job.get("spec") or {}
        ns, uid = md["namespace"], md["uid"]
        status = dict(job.get("status") or {})
        conds = list(status.get("conditions") or [])
        finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conds)
        pods = self._owned(self.pods, ns, uid)
        active = [p for p in pods if _active(p)]
        succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        parallelism = _int(spec.get("parallelism"), 1)
        completions = spec.get("completions")
        indexed = spec.get("completionMode") == "Indexed" and isinstance(completions, int)
        now = now_iso()
        status.setdefault("startTime", now)
        n_succeeded = len(succeeded)
        if indexed:
            done_idx = {_index(p) for p in succeeded} - {None}
            n_succeeded = len(done_idx)
        if not finished:
            if len(failed) > _int(spec.get("backoffLimit"), 6):
                for p in active:
                    self._delete(self.pods, p)
                active = []
                conds = _condition(conds, "FailureTarget", True, "BackoffLimitExceeded",
                                   "Job has reached the specified backoff limit", now)
                conds = _condition(conds, "Failed", True, "BackoffLimitExceeded",
                                   "Job has reached the specified backoff limit", now)
                finished = True
            elif (isinstance(completions, int) and n_succeeded >= completions) or \
                    (completions is None and succeeded and not active):
                conds = _condition(conds, "SuccessCriteriaMet", True, "CompletionsReached",
                                   "Reached expected number of succeeded pods", now)
                conds = _condition(conds, "Complete", True, "CompletionsReached",
                                   "Reached expected number of succeeded pods", now)
                status["completionTime"] = now
                finished = True
            else:
                remaining = (completions - n_succeeded) if isinstance(completions, int) else \
                    (parallelism if not succeeded else 0)
                want = max(0, min(parallelism, remaining))
                tmpl = spec.get("template") or {}
                if indexed:
                    assert isinstance(completions, int)
                    taken = {_index(p) for p in active} | {_index(p) for p in succeeded}
                    free = [i for i in range(completions) if i not in taken]
                    for i in free[:max(0, want - len(active))]:
                        labels = {INDEX_ANNOTATION: str(i)}
                        active.append(self._create(self.pods, ns, self._pod_from_template(
                            job, tmpl, extra_labels=labels, annotations={INDEX_ANNOTATION: str(i)})))
                else:
                    for _ in range(want - len(active)):
                        active.append(self._create(self.pods, ns, self._pod_from_template(job, tmpl)))
        status.update({"active": len(active), "succeeded": n_succeeded, "failed": len(failed),
                       "ready": sum(1 for p in active if _ready(p)), "conditions": conds})
        if indexed and n_succeeded:
            status["completedIndexes"] = _ranges(sorted(i for i in {_index(p) for p in succeeded} if i is not None))
        status = {k: v for k, v in status.items() if v not in (0, []) or k == "ready"}
        self._write_status(self.jobs, job, status)

    # ------------------------------------------------------------ garbage collection

    def _collect_garbage(self, removed: set[str]) -> None:
        """Dependents whose owners are all gone are deleted; orphaning owners (``orphan``
        finalizer) release their dependents instead."""
        reg = self.registry
        keys: set[tuple[str, str, str]] = set()
        for uid in removed:
            # a held owner keeps its edges: its wait for its dependents reads them
            deps = self._dependents.get(uid) if uid in self._holding else self._dependents.pop(uid, None)
            keys.update(deps or ())
        types = reg.store.types
        for type_key, ns, name in sorted(keys):
            ts = types.get(type_key)
            entry = ts.get(ns, name) if ts is not None else None
            if ts is None or entry is None:
                continue
            refs = entry.obj["metadata"].get("ownerReferences")
            # the index may be older than the object: its refs are what counts
            if not refs or not any(isinstance(r, dict) and r.get("uid") in removed for r in refs):
                continue
            self._collect_one(ts.rt, entry.obj)

    def _add_dependent(self, rt: ResourceType, md: Obj, refs: Any) -> None:
        if rt.is_view or not isinstance(refs, list):
            return
        key = (rt.key, md.get("namespace", ""), md["name"])
        for ref in refs:
            if isinstance(ref, dict) and isinstance(uid := ref.get("uid"), str):
                self._dependents.setdefault(uid, set()).add(key)

    def _drop_dependent(self, rt: ResourceType, md: Obj) -> None:
        """A removed object leaves its owners' sets (keeps the graph bounded by what lives)."""
        refs = md.get("ownerReferences")
        if not isinstance(refs, list):
            return
        key = (rt.key, md.get("namespace", ""), md["name"])
        for ref in refs:
            uid = ref.get("uid") if isinstance(ref, dict) else None
            if isinstance(uid, str) and (deps := self._dependents.get(uid)):
                deps.discard(key)
                if not deps:
                    del self._dependents[uid]

    def _owner_alive(self, ref: Obj, namespace: str) -> bool:
        """Upstream's check of an owner reference: the object of that kind and name, in the
        dependent's namespace (or cluster-scoped), with that uid, not being deleted in the
        foreground (which no longer holds its dependents).  A kind this server does not
        serve resolves by uid over every stored object, as a last resort."""
        api_version, kind = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
        rt = self._owner_types.get((api_version, kind))
        if rt is None:
            group, _, version = api_version.rpartition("/")
            for cand in self.registry.catalog.by_gvr.values():
                if cand.kind == kind and cand.group == group and cand.version == version \
                        and not cand.is_view:
                    rt = self._owner_types[(api_version, kind)] = cand
                    break
            else:
                return ref.get("uid") in self._live_owner_uids()
        ts = self.registry.store.types.get(rt.key)
        entry = ts.get(namespace if rt.namespaced else "", str(ref.get("name", ""))) \
            if ts is not None else None
        if entry is None:
            return False
        md = entry.obj["metadata"]
        return md.get("uid") == ref.get("uid") and not (
            md.get("deletionTimestamp") and FOREGROUND in (md.get("finalizers") or []))

    def _live_owner_uids(self) -> set[str]:
        out: set[str] = set()
        for ts in self.registry.store.types.values():
            if ts.rt.is_view:
                continue
            for e in ts.entries():
                md = e.obj["metadata"]
                # an owner being deleted in the foreground no longer holds its dependents
                if not (md.get("deletionTimestamp") and FOREGROUND in (md.get("finalizers") or [])):
                    out.add(md["uid"])
        return out

    def _collect_one(self, rt: ResourceType, obj: Obj) -> None:
        md = obj["metadata"]
        refs = [r for r in md.get("ownerReferences") or [] if isinstance(r, dict)]
        orphaning = self._orphaning_uids(refs)
        if orphaning:
            kept = [r for r in refs if r.get("uid") not in orphaning]
            body = {**obj, "metadata": {**md, "ownerReferences": kept}}
            if not kept:
                body["metadata"].pop("ownerReferences")
            try:
                self.registry.update(rt, md.get("namespace", ""), md["name"], body)
            except ApiError as err:
                log.warning("gc: cannot orphan %s %s: %s", rt.plural, md["name"], err.message)
            return
        namespace = md.get("namespace", "")
        if any(self._owner_alive(r, namespace) for r in refs):
            return
        try:
            self.registry.delete(rt, md.get("namespace", ""), md["name"], {"propagationPolicy": "Background"})
        except ApiError as err:
            if err.code != 404:
                log.warning("gc: cannot delete %s %s: %s", rt.plural, md["name"], err.message)

    def _orphaning_uids(self, refs: list[Obj]) -> set[str]:
        """The referenced owners being deleted with the ``orphan`` finalizer (held, so known
        by uid: no search)."""
        out = set()
        for r in refs:
            uid = r.get("uid")
            where = self._holding.get(uid) if isinstance(uid, str) else None
            if where is None:
                continue
            rt, ns, name = where
            ts = self.registry.store.types.get(rt.key)
            e = ts.get(ns, name) if ts is not None else None
            if e is not None and e.obj["metadata"]["uid"] == uid and ORPHAN in (e.obj["metadata"].get("finalizers") or []):
                out.add(uid)
        return out

    def _finish_held(self) -> None:
        """Owners deleted in the foreground (or orphaning) go once their dependents are
        gone (or released): the GC removes its finalizer."""
        reg = self.registry
        held, self._held = self._held, {}
        for (key, ns, name), rt in held.items():
            e = reg.ts(rt).get(ns, name)
            if e is None:
                self._release(key, ns, name)
                continue
            uid = e.obj["metadata"]["uid"]
            fins = e.obj["metadata"].get("finalizers") or []
            if FOREGROUND in fins and self._has_dependents(uid, ns if rt.namespaced else None):
                self._held[(key, ns, name)] = rt
                continue
            kept = [f for f in fins if f not in (FOREGROUND, ORPHAN)]
            body = {**e.obj, "metadata": {**e.obj["metadata"], "finalizers": kept}}
            self._release(key, ns, name)
            try:
                reg.update(rt, ns, name, body)
            except ApiError as err:
                log.warning("gc: cannot finalize %s %s: %s", rt.plural, name, err.message)

    def _release(self, key: str, ns: str, name: str) -> None:
        """A held owner is no longer held (finalized, or gone)."""
        for uid, (rt, hns, hname) in list(self._holding.items()):
            if (rt.key, hns, hname) == (key, ns, name):
                del self._holding[uid]

    def _has_dependents(self, uid: str, ns: str | None) -> bool:
        """Whether an object still refers to ``uid`` (in ``ns`` for a namespaced owner): its
        edges in the graph, each checked against the dependent as stored (stale ones pruned)."""
        deps = self._dependents.get(uid)
        if not deps:
            return False
        types = self.registry.store.types
        for key in list(deps):
            type_key, dns, name = key
            ts = types.get(type_key)
            e = ts.get(dns, name) if ts is not None else None
            if ts is None or e is None or not self._depends_on(e.obj, uid):
                deps.discard(key)
                continue
            if ns is None or not ts.rt.namespaced or dns == ns:
                return True
        if not deps:
            del self._dependents[uid]
        return False

    @staticmethod
    def _depends_on(obj: Obj, uid: str) -> bool:
        refs = obj["metadata"].get("ownerReferences") or []
        return any(isinstance(r, dict) and r.get("uid") == uid for r in refs)


def _condition(conds: list[Obj], typ: str, ok: bool, reason: str, message: str, now: str) -> list[Obj]:
    for c in conds:
        if c.get("type") == typ and c.get("status") == ("True" if ok else "False") and c.get("reason") == reason:
            return conds
    return set_condition(conds, {"type": typ, "status": "True" if ok else "False", "reason": reason,
                                 "message": message, "lastUpdateTime": now, "lastTransitionTime": now})


def _index(pod: Obj) -> int | None:
    v = (pod["metadata"].get("annotations") or {}).get(INDEX_ANNOTATION)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _ranges(idx: list[int]) -> str:
    out: list[str] = []
    start: int | None = None
    prev: int | None = None
    for i in idx:
        if start is None:
            start = prev = i
        elif prev is not None and i == prev + 1:
            prev = i
        else:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = i
    if start is not None:
        out.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(out)


def _neg_ts(ts: str) -> tuple[int, ...]:
    # newest first when sorted ascending: invert the characters of the ISO timestamp
    return tuple(-ord(c) for c in ts)
