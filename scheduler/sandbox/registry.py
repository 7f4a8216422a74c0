"""Resource semantics between HTTP and storage: what kube-apiserver's registries do.

Create/update/patch/delete with metadata rules (uid, resourceVersion, generation,
generateName, deletionTimestamp + finalizers), status subresource separation, optimistic
concurrency, dry run and raw writes. Split by concern around it: ``catalog.py`` (served
types), ``admission.py`` (defaulting and admission on create), ``namespaces.py`` (namespace
deletion, the API server's half), ``crds.py`` (CRD registration), ``podsubresources.py`` (pods/binding and
pods/eviction). Transport-agnostic: the HTTP layer lives in ``app.py``.

What is API-server logic stays here (graceful pod deletion setting ``deletionTimestamp`` and
``deletionGracePeriodSeconds``, the garbage collector's finalizers for a propagation policy,
finalizers holding an object); the simulated controllers (``kubelet.py``, ``pvcontroller.py``,
``claimcontroller.py``, ``controllers.py``, ``nscontroller.py``) are not
called from here: they watch the store (``store.Informer``) and write back through this
registry, as kube-controller-manager's controllers watch the API.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import yaml

from . import admission, crds, dra, errors, events, namespaces, validation
from .catalog import Catalog
from .errors import ApiError
from .patch import json_patch, merge_patch, strategic_merge_patch
from .resources import ResourceType
from .selectors import Matcher
from .store import Entry, Store, TypeStore
from .util import is_simulated_node, iso_at, name_suffix, new_uid, now_iso

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")

# The finalizers a deletion's propagation policy puts on the owner for the garbage collector.
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def _spec_part(obj: Obj, rt: ResourceType) -> Obj:
    skip = ("metadata", "status") if rt.has_status_subresource or rt.is_custom else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip and k not in ("apiVersion", "kind")}


class Registry:
    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.catalog = Catalog()
        self.clock = clock
        # pods bound to simulated nodes are deleted gracefully (a simulated kubelet runs them)
        self.graceful_pod_deletion = False
        # a garbage collector runs: deletions with a propagation policy get its finalizers
        self.garbage_collection = False
        self.on_crd_change: Callable[[], None] | None = None
        self.counters: dict[str, int] = {}

    # ------------------------------------------------------------ helpers

    def ts(self, rt: ResourceType) -> TypeStore:
        return self.store.type_store(rt)

    def ts_of(self, group: str, plural: str) -> TypeStore:
        return self.store.type_store(self.catalog.builtin(group, plural))

    def get(self, rt: ResourceType, ns: str, name: str) -> Entry:
        e = self.ts(rt).get(ns, name)
        if e is None:
            raise errors.not_found(rt.plural, name, group=rt.group)
        return e

    def bump(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def _check_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        if not rt.namespaced:
            return
        nse = self.ts_of("", "namespaces").get("", ns)
        if nse is None:
            raise errors.not_found("namespaces", ns)
        if nse.obj["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rt.plural, name,
                f"unable to create new content in namespace {ns} because it is being terminated",
                group=rt.group,
            )

    # ------------------------------------------------------------ create

    def create(self, rt: ResourceType, ns: str, body: Any, *, dry_run: bool = False) -> Entry:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        if rt.is_view:
            body = events.to_core(body)
        md = body.get("metadata")
        md = dict(md) if isinstance(md, dict) else {}
        if rt.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if not md.get("name") and md.get("generateName"):
            md["name"] = f"{md['generateName']}{name_suffix()}"
        name = str(md.get("name") or "")
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            md.pop(k, None)
        md["uid"] = new_uid()
        md["creationTimestamp"] = now_iso()
        if rt.tracks_generation:
            md["generation"] = 1
        else:
            md.pop("generation", None)
        obj: Obj = {"apiVersion": rt.storage_api_version, "kind": rt.kind,
                    **{k: v for k, v in body.items() if k not in ("apiVersion", "kind")}}
        obj["metadata"] = md
        if rt.has_status_subresource and not rt.keep_status_on_create:
            obj.pop("status", None)
        obj = admission.prepare_create(self, rt, obj)
        if dra.is_dra(rt.group, rt.plural):
            obj = dra.default(obj, rt.plural)
        if rt.plural == "events" and rt.group in ("", "events.k8s.io"):
            obj = _event_times(obj, rt)
        validation.check(obj, rt)
        if rt.plural == "events" and rt.group in ("", "events.k8s.io"):
            validation.raise_if(events.validate_create(obj, strict=rt.is_view), rt, name)
        if rt.is_custom:
            obj, causes = validation.validate_custom(obj, rt)
            validation.raise_if(causes, rt, name)
        self._check_namespace(rt, ns, name)
        ts = self.ts(rt)
        if ts.get(ns if rt.namespaced else "", name) is not None:
            raise errors.already_exists(rt.plural, name, group=rt.group)
        if rt.group == "" and rt.plural == "pods":
            admission.admit_pod(self, obj)
        if dry_run:
            obj["metadata"]["resourceVersion"] = ""
            return Entry(obj, orjson.dumps(obj))
        entry = self.store.write(ts, obj, None)
        self._after_write(rt, entry.obj, None)
        return entry

    # ------------------------------------------------------------ update / patch

    def update(
        self, rt: ResourceType, ns: str, name: str, body: Any, *, sub: str = "", dry_run: bool = False
    ) -> Entry:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        ns = ns if rt.namespaced else ""
        ts = self.ts(rt)
        cur_e = ts.get(ns, name)
        if cur_e is None:
            if rt.plural == "events" and rt.group in ("", "events.k8s.io") and not sub:
                return self.create(rt, ns, body, dry_run=dry_run)  # events allow create on update
            raise errors.not_found(rt.plural, name, group=rt.group)
        if rt.is_view:
            body = events.to_core(body, like=cur_e.obj)
        bmd = body.get("metadata")
        if not isinstance(bmd, dict):
            bmd = {}
        if bmd.get("name") and bmd["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({bmd['name']}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and bmd.get("namespace") and bmd["namespace"] != ns:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        return self._replace(rt, ts, cur_e, body, sub=sub, dry_run=dry_run)

    def _replace(
        self, rt: ResourceType, ts: TypeStore, cur_e: Entry, body: Obj, *, sub: str, dry_run: bool
    ) -> Entry:
        cur = cur_e.obj
        cmd = cur["metadata"]
        name = cmd["name"]
        bmd = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        assert isinstance(bmd, dict)
        rv = bmd.get("resourceVersion")
        if rv and str(rv) != cmd["resourceVersion"]:
            raise errors.conflict(rt.plural, name, errors.STALE_RV, group=rt.group)
        if bmd.get("uid") and bmd["uid"] != cmd["uid"]:
            raise errors.conflict(
                rt.plural, name,
                f"Precondition failed: UID in precondition: {bmd['uid']}, UID in object meta: {cmd['uid']}",
                group=rt.group,
            )
        if sub == "status":
            new: Obj = {**cur, "metadata": dict(cmd)}
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
        else:
            md = dict(bmd)
            for k in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
                if k in cmd:
                    md[k] = cmd[k]
                else:
                    md.pop(k, None)
            md.pop("managedFields", None)
            md.pop("selfLink", None)
            new = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
            new = {"apiVersion": cur.get("apiVersion", rt.api_version), "kind": rt.kind, "metadata": md, **new}
            if rt.has_status_subresource:
                if "status" in cur:
                    new["status"] = cur["status"]
                else:
                    new.pop("status", None)
            if rt.group == "" and rt.plural == "pods":
                if isinstance(new.get("spec"), dict):
                    new["spec"] = dict(new["spec"])
                    admission.default_tolerations(new["spec"])
                causes = validation.pod_update_causes(cur, new)
                validation.raise_if(causes, rt, name)
            if rt.group == "" and rt.plural == "namespaces":
                # an update keeps the spec (its finalizers); the finalize subresource takes it
                # from the body (and, like any update, the metadata: only the status is kept)
                new["spec"] = namespaces.finalize_spec(body, rt, name) if sub == "finalize" \
                    else cur.get("spec", {})
                md["labels"] = namespaces.name_labelled(md.get("labels"), name)  # Canonicalize
        new["metadata"]["resourceVersion"] = cmd["resourceVersion"]
        if rt.plural == "events" and rt.group in ("", "events.k8s.io"):
            new = _event_times(new, rt)
        is_dra = dra.is_dra(rt.group, rt.plural)
        if is_dra:
            new = dra.default(new, rt.plural)
            validation.raise_if(dra.update_causes(new, cur, rt.plural, sub=sub), rt, name)
        if sub == "status" and ((rt.group == "" and rt.plural == "pods") or is_dra):
            # kube-apiserver's pod status strategy validates metadata and status only: a pod
            # whose spec a looser server accepted can still get its conditions written.
            validation.raise_if(validation.validate_metadata(new, rt), rt, name)
        else:
            validation.check(new, rt, old=cur)
        if rt.plural == "events" and rt.group in ("", "events.k8s.io"):
            validation.raise_if(events.validate_update(new, cur, strict=rt.is_view), rt, name)
        if rt.is_custom:
            new, causes = validation.validate_custom(new, rt)
            validation.raise_if(causes, rt, name)
        if rt.tracks_generation and _spec_part(new, rt) != _spec_part(cur, rt):
            new["metadata"]["generation"] = int(cmd.get("generation", 1)) + 1
        if rt.plural == "customresourcedefinitions" and not sub:
            new["status"] = crds.with_approval_condition(
                {**(cur.get("status") or {}), "acceptedNames": (new.get("spec") or {}).get("names", {})}, new)
        if new == cur:
            return cur_e  # no-op updates keep the resourceVersion and send no event
        if dry_run:
            return Entry(new, orjson.dumps(new))
        if cmd.get("deletionTimestamp") and not new["metadata"].get("finalizers") and self._may_finalize(rt, new):
            # the last finalizer is gone: the update completes the deletion (DELETED event)
            return self._remove(rt, ts, Entry(new, b""))
        entry = self.store.write(ts, new, cur)
        self._after_write(rt, entry.obj, cur)
        return entry

    def _may_finalize(self, rt: ResourceType, obj: Obj) -> bool:
        """Objects with deletionTimestamp go away once finalizers are empty, except pods that a
        kubelet is still terminating gracefully (``deletionGracePeriodSeconds`` > 0)."""
        if rt.group == "" and rt.plural == "pods":
            # a pod in its grace period stays until the kubelet confirms (grace 0)
            return not obj["metadata"].get("deletionGracePeriodSeconds")
        if rt.group == "" and rt.plural == "namespaces":
            return not (obj.get("spec") or {}).get("finalizers")  # spec finalizers hold it too
        return True

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        sub: str = "",
        dry_run: bool = False,
        field_manager: str = "",
    ) -> tuple[Entry, bool]:
        """Returns (entry, created) — created only for server-side apply of a new object."""
        ns = ns if rt.namespaced else ""
        ts = self.ts(rt)
        ct = content_type.split(";")[0].strip().lower()
        if ct == APPLY_PATCH:
            if not field_manager:
                raise errors.invalid("PatchOptions", "", [("fieldManager", "FieldValueRequired",
                                                            "Required value: is required for apply patch")],
                                     group="meta.k8s.io")
            try:
                doc = yaml.safe_load(body)
            except yaml.YAMLError as e:
                raise errors.bad_request(f"error decoding YAML: {e}") from None
            if not isinstance(doc, dict):
                raise errors.bad_request("apply patch must be an object")
            cur_e = ts.get(ns, name)
            if cur_e is None:
                if sub:
                    raise errors.not_found(rt.plural, name, group=rt.group)
                doc.setdefault("metadata", {})["name"] = name
                return self.create(rt, ns, doc, dry_run=dry_run), True
            cur = orjson.loads(cur_e.raw)
            if rt.is_view:
                cur = events.from_core(cur)
            if rt.is_custom:
                new = merge_patch(cur, doc)
            else:
                new = strategic_merge_patch(cur, doc, service=rt.plural == "services")
            if rt.is_view:
                new = events.to_core(new, like=cur_e.obj)
            return self._replace(rt, ts, cur_e, new, sub=sub, dry_run=dry_run), False
        cur_e = ts.get(ns, name)
        if cur_e is None:
            raise errors.not_found(rt.plural, name, group=rt.group)
        try:
            patch = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise errors.bad_request(f"error decoding patch: {e}") from None
        cur = orjson.loads(cur_e.raw)
        if rt.is_view:
            cur = events.from_core(cur)
        if ct == MERGE_PATCH:
            if not isinstance(patch, dict):
                raise errors.bad_request("merge patch must be a JSON object")
            new = merge_patch(cur, patch)
        elif ct == JSON_PATCH:
            new = json_patch(cur, patch)
        elif ct == STRATEGIC_PATCH:
            if rt.is_custom:
                raise errors.ApiError(
                    415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                )
            if not isinstance(patch, dict):
                raise errors.bad_request("strategic merge patch must be a JSON object")
            new = strategic_merge_patch(cur, patch, service=rt.plural == "services")
        else:
            raise errors.unsupported_media_type(content_type)
        if not isinstance(new, dict):
            raise errors.bad_request("patch result must be an object")
        if rt.is_view:
            new = events.to_core(new, like=cur_e.obj)
        md = new.get("metadata")
        if not isinstance(md, dict):
            raise errors.bad_request("patch removed metadata")
        if md.get("name") != name:
            raise errors.bad_request(
                f"the name of the object ({md.get('name')}) does not match the name on the URL ({name})"
            )
        return self._replace(rt, ts, cur_e, new, sub=sub, dry_run=dry_run), False

    # ------------------------------------------------------------ delete

    def delete(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        options: Obj,
        *,
        dry_run: bool = False,
    ) -> tuple[Entry, bool]:
        """Returns (object state, removed now)."""
        ns = ns if rt.namespaced else ""
        ts = self.ts(rt)
        e = ts.get(ns, name)
        if e is None:
            raise errors.not_found(rt.plural, name, group=rt.group)
        obj = e.obj
        md = obj["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != md["uid"]:
            raise errors.conflict(rt.plural, name,
                                  f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {md['uid']}",
                                  group=rt.group)
        if pre.get("resourceVersion") and pre["resourceVersion"] != md["resourceVersion"]:
            raise errors.conflict(rt.plural, name,
                                  f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {md['resourceVersion']}",
                                  group=rt.group)
        if dry_run:
            return e, False
        grace = options.get("gracePeriodSeconds")
        if rt.group == "" and rt.plural == "namespaces":
            return namespaces.start_deletion(self, ts, e), False
        if rt.group == "" and rt.plural == "pods" and self.graceful_pod_deletion:
            g = self._pod_grace(obj, grace)
            if g > 0:
                if md.get("deletionTimestamp"):
                    return e, False
                nmd = {**md, "deletionTimestamp": iso_at(self.clock() + g), "deletionGracePeriodSeconds": g}
                new = {**obj, "metadata": nmd}
                return self.store.write(ts, new, obj), False
        fin = self._propagation_finalizer(rt, options)
        if fin and fin not in (md.get("finalizers") or []) and not md.get("deletionTimestamp"):
            md = {**md, "finalizers": [*(md.get("finalizers") or []), fin]}
        if md.get("finalizers"):
            if md.get("deletionTimestamp"):
                return e, False
            nmd = {**md, "deletionTimestamp": now_iso(), "deletionGracePeriodSeconds": 0}
            if rt.tracks_generation:
                nmd["generation"] = int(md.get("generation", 1)) + 1
            return self.store.write(ts, {**obj, "metadata": nmd}, obj), False
        if rt.plural == "customresourcedefinitions":
            crds.drop_crd(self, obj)
        return self._remove(rt, ts, e), True

    def _pod_grace(self, pod: Obj, requested: Any) -> float:
        """Grace period to record for a pod deletion; 0 means remove immediately: a pod not
        bound, finished, or on a node no simulated kubelet runs (nobody would confirm)."""
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        node = self.ts_of("", "nodes").get("", spec["nodeName"])
        if not is_simulated_node(node.obj if node is not None else None):
            return 0
        g = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
        try:
            g = float(g)
        except (TypeError, ValueError):
            g = 30.0
        if g <= 0:
            return 0
        return int(g) if g >= 1 else 1

    def _propagation_finalizer(self, rt: ResourceType, options: Obj) -> str | None:
        """The finalizer a deletion's propagation policy puts on the owner while the garbage
        collector works: Foreground waits for the dependents, Orphan releases them. Without a
        policy, batch/v1 Jobs orphan their pods (upstream's default for that kind)."""
        if not self.garbage_collection:
            return None
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy is None and rt.group == "batch" and rt.plural == "jobs":
            policy = "Orphan"
        if policy == "Foreground":
            return FOREGROUND
        if policy == "Orphan":
            return ORPHAN
        return None

    def _remove(self, rt: ResourceType, ts: TypeStore, e: Entry) -> Entry:
        out = self.store.remove(ts, e)
        if rt.plural == "customresourcedefinitions":
            crds.drop_crd(self, e.obj)
        return out

    def remove_now(self, rt: ResourceType, ns: str, name: str) -> None:
        """Final removal (the kubelet's zero-grace delete once a pod's grace period is over)."""
        ts = self.ts(rt)
        e = ts.get(ns, name)
        if e is None:
            return
        if e.obj["metadata"].get("finalizers"):
            return
        self._remove(rt, ts, e)

    def delete_collection(
        self, rt: ResourceType, ns: str | None, match: Matcher | None, options: Obj, *, dry_run: bool = False
    ) -> list[Entry]:
        ts = self.ts(rt)
        entries, _, _, _ = self.store.list_objects(ts, ns, match)
        out = []
        for e in entries:
            md = e.obj["metadata"]
            try:
                out.append(self.delete(rt, md.get("namespace", ""), md["name"], options, dry_run=dry_run)[0])
            except ApiError:
                continue
        return out

    # ------------------------------------------------------------ raw writes (a fault)

    def raw_put(self, obj: Any) -> Obj:
        """Store ``obj`` bypassing defaulting, validation and admission (a fault: an object written
        by an API server with looser validation). Creates or replaces by kind/namespace/name with
        the usual uid/creationTimestamp/resourceVersion and watch event; returns what was stored
        (in the view of the object's apiVersion)."""
        if not isinstance(obj, dict):
            raise errors.bad_request("the raw object must be a JSON object")
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        group, _, version = api_version.rpartition("/")
        rt = next((t for (g, v, _), t in self.catalog.by_gvr.items()
                   if g == group and v == version and t.kind == kind), None)
        if rt is None:
            raise errors.bad_request(f"no served resource has apiVersion {api_version!r} and kind {kind!r}")
        md = obj.get("metadata")
        md = dict(md) if isinstance(md, dict) else {}
        name = md.get("name")
        if not isinstance(name, str) or not name:
            raise errors.bad_request("the raw object needs metadata.name")
        ns = str(md.get("namespace") or "default") if rt.namespaced else ""
        body = events.to_core(obj) if rt.is_view else dict(obj)
        ts = self.ts(rt)
        cur = ts.get(ns, name)
        if rt.namespaced:
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if cur is not None:
            md["uid"] = cur.obj["metadata"]["uid"]
            md["creationTimestamp"] = cur.obj["metadata"]["creationTimestamp"]
        else:
            md["uid"] = new_uid()
            md["creationTimestamp"] = now_iso()
        body["apiVersion"] = rt.storage_api_version if not rt.is_custom else api_version
        body["metadata"] = md
        prev = cur.obj if cur is not None else None
        entry = self.store.write(ts, body, prev)
        try:
            self._after_write(rt, entry.obj, prev)
        except Exception:  # simulations must survive the malformed object they were handed
            log.exception("sandbox: registering raw object %s %s/%s failed", kind, ns, name)
        return events.from_core(entry.obj) if rt.is_view else entry.obj

    # ------------------------------------------------------------ CRDs

    def _after_write(self, rt: ResourceType, obj: Obj, prev: Obj | None) -> None:
        if rt.plural == "customresourcedefinitions":
            crds.register_crd(self, obj, prev)

def _event_times(obj: Obj, rt: ResourceType) -> Obj:
    try:
        return events.canonical_times(obj, version=rt.api_version)
    except ValueError as e:
        raise errors.bad_request(str(e)) from None

