"""Defaulting and admission on create: what kube-apiserver's strategies and admission plugins do.

Pod defaulting covers what a scheduler reads (schedulerName, priority, QoS class, requests
from limits, the default NoExecute tolerations); priority admission resolves
priorityClassName; DefaultStorageClass gives a claim the default class; namespaces,
PVs, PVCs, services and CRDs get their initial status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import crds, errors
from .namespaces import name_labelled
from .resources import ResourceType, storage_version
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]

SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
BETA_CLAIM_CLASS = "volume.beta.kubernetes.io/storage-class"  # a claim's class, the old way
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


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


def default_tolerations(spec: Obj) -> None:
    """DefaultTolerationSeconds (on create and on update, as upstream): a pod without its own
    not-ready/unreachable NoExecute tolerations gets the 300 s ones, so an update that
    replaces the list (a merge patch adding one toleration) keeps them."""
    tols = list(spec.get("tolerations") or [])
    for dt in DEFAULT_TOLERATIONS:
        if not any(t.get("key") == dt["key"] and t.get("effect") in (None, "", "NoExecute") for t in tols if isinstance(t, dict)):
            tols.append(dict(dt))
    spec["tolerations"] = tols


def prepare_create(reg: Registry, rt: ResourceType, obj: Obj) -> Obj:
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
        default_tolerations(spec)
        obj["spec"] = spec
        status: Obj = {"phase": "Pending", "qosClass": _qos(spec)}
        if spec.get("schedulingGates"):
            # kube-apiserver's pod strategy marks a pod created gated (kubectl: SchedulingGated)
            status["conditions"] = [{
                "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": None, "lastTransitionTime": now_iso()}]
        obj["status"] = status
    elif g == "" and p == "namespaces":
        md = obj["metadata"]
        md["labels"] = name_labelled(md.get("labels"), md.get("name", ""))
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif g == "" and p == "persistentvolumes":
        obj["status"] = {"phase": "Available"}
    elif g == "" and p == "persistentvolumeclaims":
        obj["status"] = {"phase": "Pending"}
        pvc_spec = obj.get("spec")
        ann = obj["metadata"].get("annotations")
        if isinstance(pvc_spec, dict) and pvc_spec.get("storageClassName") is None \
                and not (isinstance(ann, dict) and BETA_CLAIM_CLASS in ann):
            # DefaultStorageClass admission: a claim without a class (neither the field nor
            # the beta annotation, as PersistentVolumeClaimHasClass) gets the default one
            dc = default_storage_class(reg)
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
        obj["status"] = crds.with_approval_condition(crd_status(obj), obj)
    elif g == "batch" and p == "jobs":
        _default_job(obj)
    elif g == "" and p == "services":
        spec = dict(obj.get("spec") or {})
        spec.setdefault("type", "ClusterIP")
        obj["spec"] = spec
        obj["status"] = {"loadBalancer": {}}
    return obj


def is_default_class(sc: Obj) -> bool:
    """Whether a StorageClass is marked default (either spelling of the annotation, as
    storage's ``IsDefaultAnnotation``)."""
    md = sc.get("metadata")
    ann = md.get("annotations") if isinstance(md, dict) else None
    return isinstance(ann, dict) and any(ann.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)


def default_storage_class(reg: Registry) -> Obj | None:
    """The class the DefaultStorageClass admission plugin gives a claim without one, read
    from the API server's own storage: among the classes marked default, the newest
    (creationTimestamp), the first by name among equally new ones (1.26+); None if none is."""
    defaults = [e.obj for e in reg.ts_of("storage.k8s.io", "storageclasses").entries() if is_default_class(e.obj)]
    if not defaults:
        return None
    newest = max(str(c["metadata"].get("creationTimestamp") or "") for c in defaults)
    return min((c for c in defaults if str(c["metadata"].get("creationTimestamp") or "") == newest),
               key=lambda c: str(c["metadata"]["name"]))


def crd_status(crd: Obj) -> Obj:
    now = now_iso()
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


def admit_pod(reg: Registry, pod: Obj) -> None:
    """Priority admission: resolve priorityClassName into spec.priority."""
    spec = pod["spec"]
    pcname = spec.get("priorityClassName")
    if pcname:
        if pcname in SYSTEM_PRIORITIES:
            value = SYSTEM_PRIORITIES[pcname]
            pc: Obj | None = None
        else:
            e = reg.ts_of("scheduling.k8s.io", "priorityclasses").get("", pcname)
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
        for e in reg.ts_of("scheduling.k8s.io", "priorityclasses").entries():
            if e.obj.get("globalDefault"):
                default = e.obj
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
            spec.setdefault("priority", int(default.get("value", 0)))
        else:
            spec.setdefault("priority", 0)


def _default_job(job: Obj) -> None:
    """What the Job strategy does on create: unless ``manualSelector``, the selector is the
    Job's uid and the template gets the uid and job-name labels (both spellings)."""
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    md = job["metadata"]
    uid, name = md["uid"], md.get("name", "")
    spec = dict(spec)
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = dict(spec.get("template") or {})
    tmd = dict(template.get("metadata") or {})
    tmd["labels"] = {**(tmd.get("labels") or {}), "batch.kubernetes.io/controller-uid": uid,
                     "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name}
    template["metadata"] = tmd
    spec["template"] = template
    job["spec"] = spec
