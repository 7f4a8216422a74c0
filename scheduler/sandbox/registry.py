"""Resource semantics between HTTP and storage: what kube-apiserver's registries do.

Create/update/patch/delete with metadata rules (uid, resourceVersion, generation,
generateName, deletionTimestamp + finalizers), status subresource separation, pod defaulting
(the bits a scheduler reads: schedulerName, priority, QoS, requests from limits, default
tolerations), namespace lifecycle, CRD registration, pods/binding and pods/eviction with
PodDisruptionBudgets. Transport-agnostic: the HTTP layer lives in ``app.py``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from . import errors, events, validation
from .errors import ApiError
from .patch import json_patch, merge_patch, strategic_merge_patch
from .resources import ResourceType, builtin_types, types_from_crd, storage_version
from .selectors import Matcher, selector_dict_matches
from .store import Entry, Store, TypeStore
from .util import iso_at, name_suffix, new_uid, now_iso, set_condition

if TYPE_CHECKING:
    from .kubelet import KubeletSim
    from .pvcontroller import PVControllerSim

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")

SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
_PV_CONTROLLER_INPUTS = frozenset({"persistentvolumes", "persistentvolumeclaims", "storageclasses"})
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class Catalog:
    """Served resource types, by (group, version, plural)."""

    def __init__(self) -> None:
        self.by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self.crd_types: dict[str, list[ResourceType]] = {}
        self._builtin: dict[tuple[str, str], ResourceType] = {}
        for rt in builtin_types():
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self.by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.by_gvr.get((group, version, plural))

    def builtin(self, group: str, plural: str) -> ResourceType:
        rt = self._builtin.get((group, plural))
        if rt is None:
            for (g, _, p), cand in self.by_gvr.items():
                if g == group and p == plural:
                    rt = self._builtin[(group, plural)] = cand
                    break
            else:
                raise KeyError(plural)
        return rt

    def has_group_version(self, group: str, version: str) -> bool:
        return any(g == group and v == version for g, v, _ in self.by_gvr)

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for g, v, _ in self.by_gvr:
            vs = out.setdefault(g, [])
            if v not in vs:
                vs.append(v)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self.by_gvr.items() if g == group and v == version]


def _now() -> str:
    return now_iso()


def _spec_part(obj: Obj, rt: ResourceType) -> Obj:
    skip = ("metadata", "status") if rt.has_status_subresource or rt.is_custom else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip and k not in ("apiVersion", "kind")}


def _qos(spec: Obj) -> str:
    conts = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in conts:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r in req or r in lim:
                any_set = True
            if r not in lim or (r in req and str(req[r]) != str(lim[r])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(c: Obj) -> Obj:
    c = dict(c)
    image = str(c.get("image", ""))
    if "imagePullPolicy" not in c:
        tag = image.rsplit("/", 1)[-1]
        c["imagePullPolicy"] = "Always" if (":" not in tag or tag.endswith(":latest")) and "@" not in tag else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    res = dict(c.get("resources") or {})
    lim = res.get("limits") or {}
    if lim:
        req = dict(res.get("requests") or {})
        for k, v in lim.items():
            req.setdefault(k, v)
        res["requests"] = req
    c["resources"] = res
    return c


class Registry:
    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.catalog = Catalog()
        self.clock = clock
        self.kubelet: KubeletSim | None = None
        self.pv_controller: PVControllerSim | None = None
        self.terminating_ns: set[str] = set()
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
        if ns in self.terminating_ns or nse.obj["metadata"].get("deletionTimestamp"):
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
        md["creationTimestamp"] = _now()
        if rt.tracks_generation:
            md["generation"] = 1
        else:
            md.pop("generation", None)
        obj: Obj = {"apiVersion": rt.storage_api_version, "kind": rt.kind,
                    **{k: v for k, v in body.items() if k not in ("apiVersion", "kind")}}
        obj["metadata"] = md
        if rt.has_status_subresource and not rt.keep_status_on_create:
            obj.pop("status", None)
        obj = self._prepare_create(rt, obj)
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
            self._admit_pod(obj)
        if dry_run:
            obj["metadata"]["resourceVersion"] = ""
            return Entry(obj, orjson.dumps(obj))
        entry = self.store.write(ts, obj, None)
        self._after_write(rt, entry.obj, None)
        return entry

    def _prepare_create(self, rt: ResourceType, obj: Obj) -> Obj:
        g, p = rt.group, rt.plural
        if g == "" and p == "pods":
            spec = dict(obj.get("spec") or {})
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("securityContext", {})
            spec.setdefault("enableServiceLinks", True)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            spec.setdefault("serviceAccountName", "default")
            for k in ("containers", "initContainers"):
                if isinstance(spec.get(k), list):
                    spec[k] = [_default_container(c) if isinstance(c, dict) else c for c in spec[k]]
            tols = list(spec.get("tolerations") or [])
            for dt in DEFAULT_TOLERATIONS:
                if not any(t.get("key") == dt["key"] and t.get("effect") in (None, "", "NoExecute") for t in tols if isinstance(t, dict)):
                    tols.append(dict(dt))
            spec["tolerations"] = tols
            obj["spec"] = spec
            status: Obj = {"phase": "Pending", "qosClass": _qos(spec)}
            obj["status"] = status
        elif g == "" and p == "namespaces":
            md = obj["metadata"]
            md["labels"] = {**(md.get("labels") or {}), "kubernetes.io/metadata.name": md.get("name", "")}
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif g == "" and p == "persistentvolumes":
            obj["status"] = {"phase": "Available"}
        elif g == "" and p == "persistentvolumeclaims":
            obj["status"] = {"phase": "Pending"}
            pvc_spec = obj.get("spec")
            if isinstance(pvc_spec, dict) and pvc_spec.get("storageClassName") is None:
                # DefaultStorageClass admission: a claim without a class gets the default one
                from .pvcontroller import default_class

                dc = default_class([e.obj for e in self.ts_of("storage.k8s.io", "storageclasses").entries()])
                if dc is not None:
                    obj["spec"] = {**pvc_spec, "storageClassName": dc["metadata"]["name"]}
        elif p == "customresourcedefinitions":
            spec = dict(obj.get("spec") or {})
            names = dict(spec.get("names") or {})
            if names.get("kind"):
                names.setdefault("singular", str(names["kind"]).lower())
                names.setdefault("listKind", f"{names['kind']}List")
            spec["names"] = names
            spec.setdefault("conversion", {"strategy": "None"})
            obj["spec"] = spec
            obj["status"] = self._crd_status(obj)
        elif g == "" and p == "services":
            spec = dict(obj.get("spec") or {})
            spec.setdefault("type", "ClusterIP")
            obj["spec"] = spec
            obj["status"] = {"loadBalancer": {}}
        return obj

    def _crd_status(self, crd: Obj) -> Obj:
        now = _now()
        names = (crd.get("spec") or {}).get("names") or {}
        return {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
            "storedVersions": [storage_version(crd)],
        }

    def _admit_pod(self, pod: Obj) -> None:
        """Priority admission: resolve priorityClassName into spec.priority."""
        spec = pod["spec"]
        pcname = spec.get("priorityClassName")
        if pcname:
            if pcname in SYSTEM_PRIORITIES:
                value = SYSTEM_PRIORITIES[pcname]
                pc: Obj | None = None
            else:
                e = self.ts_of("scheduling.k8s.io", "priorityclasses").get("", pcname)
                if e is None:
                    raise errors.forbidden("pods", pod["metadata"]["name"],
                                           f"no PriorityClass with name {pcname} was found")
                pc = e.obj
                value = int(pc.get("value", 0))
            spec.setdefault("priority", value)
            if pc is not None and pc.get("preemptionPolicy"):
                spec["preemptionPolicy"] = pc["preemptionPolicy"]
        else:
            default = None
            for e in self.ts_of("scheduling.k8s.io", "priorityclasses").entries():
                if e.obj.get("globalDefault"):
                    default = e.obj
            if default is not None:
                spec["priorityClassName"] = default["metadata"]["name"]
                spec.setdefault("priority", int(default.get("value", 0)))
            else:
                spec.setdefault("priority", 0)

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
                causes = validation.pod_update_causes(cur, new)
                validation.raise_if(causes, rt, name)
            if rt.group == "" and rt.plural == "namespaces":
                new["spec"] = cur.get("spec", {})
        new["metadata"]["resourceVersion"] = cmd["resourceVersion"]
        if rt.plural == "events" and rt.group in ("", "events.k8s.io"):
            new = _event_times(new, rt)
        if sub == "status" and rt.group == "" and rt.plural == "pods":
            # kube-apiserver's pod status strategy validates metadata and status only: a pod
            # whose spec a looser server accepted can still get its conditions written.
            validation.raise_if(validation.validate_metadata(new, rt), rt, name)
        else:
            validation.check(new, rt)
        if rt.plural == "events" and rt.group in ("", "events.k8s.io"):
            validation.raise_if(events.validate_update(new, cur, strict=rt.is_view), rt, name)
        if rt.is_custom:
            new, causes = validation.validate_custom(new, rt)
            validation.raise_if(causes, rt, name)
        if rt.tracks_generation and _spec_part(new, rt) != _spec_part(cur, rt):
            new["metadata"]["generation"] = int(cmd.get("generation", 1)) + 1
        if rt.plural == "customresourcedefinitions" and not sub:
            new["status"] = {**(cur.get("status") or {}), "acceptedNames": (new.get("spec") or {}).get("names", {})}
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
        simulated kubelet is still terminating gracefully."""
        if rt.group == "" and rt.plural == "pods" and self.kubelet is not None:
            return self.kubelet.may_remove(obj)
        if rt.group == "" and rt.plural == "namespaces":
            return False
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
            return self._delete_namespace(ts, e), False
        if rt.group == "" and rt.plural == "pods" and self.kubelet is not None:
            g = self.kubelet.grace_for_delete(obj, grace)
            if g > 0:
                if md.get("deletionTimestamp"):
                    return e, False
                nmd = {**md, "deletionTimestamp": iso_at(self.clock() + g), "deletionGracePeriodSeconds": g}
                new = {**obj, "metadata": nmd}
                entry = self.store.write(ts, new, obj)
                self.kubelet.pod_terminating(entry.obj, g)
                return entry, False
        if md.get("finalizers"):
            if md.get("deletionTimestamp"):
                return e, False
            nmd = {**md, "deletionTimestamp": _now(), "deletionGracePeriodSeconds": 0}
            if rt.tracks_generation:
                nmd["generation"] = int(md.get("generation", 1)) + 1
            entry = self.store.write(ts, {**obj, "metadata": nmd}, obj)
            return entry, False
        if rt.plural == "customresourcedefinitions":
            self._drop_crd(obj)
        return self._remove(rt, ts, e), True

    def _remove(self, rt: ResourceType, ts: TypeStore, e: Entry) -> Entry:
        out = self.store.remove(ts, e)
        if self.pv_controller is not None and rt.plural in _PV_CONTROLLER_INPUTS and rt.group in ("", "storage.k8s.io"):
            self.pv_controller.poke()
        ns = e.obj["metadata"].get("namespace", "")
        if ns and ns in self.terminating_ns:
            self._maybe_finish_namespace(ns)
        if rt.plural == "customresourcedefinitions":
            self._drop_crd(e.obj)
        return out

    def remove_now(self, rt: ResourceType, ns: str, name: str) -> None:
        """Final removal used by the kubelet simulation once a pod's grace period is over."""
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
            md["creationTimestamp"] = _now()
        body["apiVersion"] = rt.storage_api_version if not rt.is_custom else api_version
        body["metadata"] = md
        prev = cur.obj if cur is not None else None
        entry = self.store.write(ts, body, prev)
        try:
            self._after_write(rt, entry.obj, prev)
        except Exception:  # simulations must survive the malformed object they were handed
            log.exception("sandbox: reacting to raw object %s %s/%s failed", kind, ns, name)
        return events.from_core(entry.obj) if rt.is_view else entry.obj

    # ------------------------------------------------------------ namespaces

    def _delete_namespace(self, ts: TypeStore, e: Entry) -> Entry:
        obj = e.obj
        name = obj["metadata"]["name"]
        if obj["metadata"].get("deletionTimestamp"):
            return e
        new = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": _now()},
               "status": {**(obj.get("status") or {}), "phase": "Terminating"}}
        entry = self.store.write(ts, new, obj)
        self.terminating_ns.add(name)
        for ots in list(self.store.types.values()):
            if not ots.rt.namespaced:
                continue
            for oe in list((ots.by_ns.get(name) or {}).values()):
                try:
                    self.delete(ots.rt, name, oe.obj["metadata"]["name"], {})
                except ApiError:
                    pass
        self._maybe_finish_namespace(name)
        return self.ts_of("", "namespaces").get("", name) or entry

    def _maybe_finish_namespace(self, ns: str) -> None:
        for ts in self.store.types.values():
            if ts.rt.namespaced and ts.by_ns.get(ns):
                return
        self.terminating_ns.discard(ns)
        nts = self.ts_of("", "namespaces")
        e = nts.get("", ns)
        if e is not None:
            self.store.remove(nts, e)

    # ------------------------------------------------------------ CRDs

    def _after_write(self, rt: ResourceType, obj: Obj, prev: Obj | None) -> None:
        if self.pv_controller is not None and rt.plural in _PV_CONTROLLER_INPUTS and rt.group in ("", "storage.k8s.io"):
            self.pv_controller.poke()
        if rt.plural == "customresourcedefinitions":
            self._register_crd(obj, prev)
        elif rt.group == "" and rt.plural == "pods" and self.kubelet is not None:
            self.kubelet.pod_changed(obj)
        elif rt.group == "" and rt.plural == "nodes" and self.kubelet is not None and prev is None:
            self.kubelet.node_added(obj)

    def _register_crd(self, crd: Obj, prev: Obj | None) -> None:
        name = crd["metadata"]["name"]
        for old in self.catalog.crd_types.pop(name, []):
            self.catalog.by_gvr.pop((old.group, old.version, old.plural), None)
        new_types = types_from_crd(crd)
        for rt in new_types:
            self.catalog.add(rt)
        self.catalog.crd_types[name] = new_types
        if new_types:
            ts = self.store.types.get(new_types[0].key)
            if ts is not None:
                ts.rt = next((t for t in new_types if t.version == storage_version(crd)), new_types[0])
        if self.on_crd_change:
            self.on_crd_change()

    def _drop_crd(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        types = self.catalog.crd_types.pop(name, [])
        for rt in types:
            self.catalog.by_gvr.pop((rt.group, rt.version, rt.plural), None)
        if types:
            ts = self.store.types.get(types[0].key)
            if ts is not None:
                for e in list(ts.entries()):
                    self.store.remove(ts, e)
                self.store.drop_type(types[0])
        if self.on_crd_change:
            self.on_crd_change()

    # ------------------------------------------------------------ pods/binding

    def bind(self, ns: str, name: str, binding: Any) -> None:
        if not isinstance(binding, dict):
            raise errors.bad_request("the body of the request must be a Binding object")
        bmd = binding.get("metadata") or {}
        if bmd.get("name") and bmd["name"] != name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        err = validation.binding_error(binding, name)
        if err:
            raise err
        node = str(binding["target"]["name"])
        ts = self.ts_of("", "pods")
        e = ts.get(ns, name)
        if e is None:
            raise errors.not_found("pods", name)
        pod = e.obj
        md = pod["metadata"]
        if bmd.get("uid") and bmd["uid"] != md["uid"]:
            raise errors.conflict("pods", name,
                                  f"Precondition failed: UID in precondition: {bmd['uid']}, UID in object meta: {md['uid']}")
        if bmd.get("resourceVersion") and bmd["resourceVersion"] != md["resourceVersion"]:
            raise errors.conflict("pods", name, errors.STALE_RV)
        spec = pod.get("spec") or {}
        if md.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise errors.conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        status = dict(pod.get("status") or {})
        status["conditions"] = set_condition(
            list(status.get("conditions") or []),
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": _now()},
        )
        nmd = dict(md)
        if bmd.get("annotations"):
            nmd["annotations"] = {**(md.get("annotations") or {}), **bmd["annotations"]}
        new = {**pod, "metadata": nmd, "spec": {**spec, "nodeName": node}, "status": status}
        entry = self.store.write(ts, new, pod)
        self.bump("bindings")
        if self.kubelet is not None:
            self.kubelet.pod_changed(entry.obj)

    # ------------------------------------------------------------ pods/eviction

    def evict(self, ns: str, name: str, eviction: Any) -> None:
        if not isinstance(eviction, dict):
            raise errors.bad_request("the body of the request must be an Eviction object")
        emd = eviction.get("metadata") or {}
        if emd.get("name") and emd["name"] != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        pods = self.ts_of("", "pods")
        e = pods.get(ns, name)
        if e is None:
            raise errors.not_found("pods", name)
        pod = e.obj
        options = eviction.get("deleteOptions") or {}
        phase = (pod.get("status") or {}).get("phase")
        if not (phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp")):
            labels = pod["metadata"].get("labels") or {}
            pdbs = [p.obj for p in (self.ts_of("policy", "poddisruptionbudgets").by_ns.get(ns) or {}).values()
                    if selector_dict_matches((p.obj.get("spec") or {}).get("selector"), labels)]
            if len(pdbs) > 1:
                raise ApiError(500, "InternalError",
                               "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
            if pdbs:
                pdb = pdbs[0]
                healthy, desired, expected = self._pdb_numbers(pdb, ns)
                pod_ready = _pod_ready(pod)
                allowed = healthy - desired
                if not pod_ready and healthy >= desired:
                    allowed = 1  # unhealthy pods may go when the budget is met (IfHealthyBudget)
                if allowed <= 0:
                    err = errors.too_many_requests(
                        "Cannot evict pod as it would violate the pod's disruption budget.", retry_after=0
                    )
                    err.details = {"causes": [{
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {pdb['metadata']['name']} needs {desired} "
                                   f"healthy pods and has {healthy} currently",
                    }]}
                    raise err
        self.bump("evictions")
        self.delete(self.catalog.builtin("", "pods"), ns, name, options)

    def _pdb_numbers(self, pdb: Obj, ns: str) -> tuple[int, int, int]:
        spec = pdb.get("spec") or {}
        sel = spec.get("selector")
        matching = [p.obj for p in (self.ts_of("", "pods").by_ns.get(ns) or {}).values()
                    if selector_dict_matches(sel, p.obj["metadata"].get("labels") or {})
                    and (p.obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        # terminating pods still count as expected (a controller would replace them) but
        # not as healthy, so consecutive evictions see the budget shrink
        expected = len(matching)
        healthy = sum(1 for p in matching if _pod_ready(p) and not p["metadata"].get("deletionTimestamp"))
        if "minAvailable" in spec:
            desired = _int_or_percent(spec["minAvailable"], expected, round_up=True)
        elif "maxUnavailable" in spec:
            desired = max(0, expected - _int_or_percent(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = expected
        return healthy, desired, expected


def _event_times(obj: Obj, rt: ResourceType) -> Obj:
    try:
        return events.canonical_times(obj, version=rt.api_version)
    except ValueError as e:
        raise errors.bad_request(str(e)) from None


def _pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _int_or_percent(v: Any, total: int, *, round_up: bool) -> int:
    if isinstance(v, str) and v.endswith("%"):
        try:
            pct = int(v[:-1])
        except ValueError:
            return 0
        x = pct * total / 100
        return math.ceil(x) if round_up else math.floor(x)
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0
