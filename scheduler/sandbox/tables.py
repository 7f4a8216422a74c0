"""Server-side ``Table`` responses (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``).

kubectl get/get -w print whatever columns the server sends, so these follow kube-apiserver's
printers (pkg/printers/internalversion) for the types users look at (workloads with their
wide Containers/Images/Selector columns, Jobs and CronJobs, Services, storage), and a CRD's
additionalPrinterColumns (JSONPath) for custom resources. Other types get Name and Age.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from .admission import is_default_class
from .resources import ResourceType
from .util import age, human_duration, parse_iso

Obj = dict[str, Any]
Column = tuple[str, str, int, str]  # name, type, priority, description
RowFn = Callable[[Obj], list[Any]]

NAME_DESC = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
AGE_DESC = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."


def _md(o: Obj) -> Obj:
    md = o.get("metadata")
    return md if isinstance(md, dict) else {}


def _age(o: Obj) -> str:
    return age(_md(o).get("creationTimestamp"))


def _none(v: Any) -> Any:
    return "<none>" if v in (None, "", []) else v


def _pod_row(p: Obj) -> list[Any]:
    spec = p.get("spec") or {}
    st = p.get("status") or {}
    total = len(spec.get("containers") or [])
    statuses = st.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = st.get("reason") or st.get("phase") or "Pending"
    for c in reversed(statuses):
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            t = state["terminated"] or {}
            reason = t.get("reason") or (f"Signal:{t['signal']}" if t.get("signal") else f"ExitCode:{t.get('exitCode', 0)}")
    if _md(p).get("deletionTimestamp"):
        reason = "Terminating"
    return [
        _md(p).get("name", ""), f"{ready}/{total}", reason, str(restarts), _age(p),
        _none(st.get("podIP")), _none(spec.get("nodeName")), _none(st.get("nominatedNodeName")),
        "<none>",
    ]


def _node_row(n: Obj) -> list[Any]:
    st = n.get("status") or {}
    ready = "Unknown"
    for c in st.get("conditions") or []:
        if c.get("type") == "Ready":
            ready = "Ready" if c.get("status") == "True" else "NotReady"
    if (n.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = _md(n).get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = st.get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in st.get("addresses") or []}
    return [
        _md(n).get("name", ""), ready, ",".join(r for r in roles if r) or "<none>", _age(n),
        info.get("kubeletVersion", ""), _none(addrs.get("InternalIP")), _none(addrs.get("ExternalIP")),
        info.get("osImage", ""), info.get("kernelVersion", ""), info.get("containerRuntimeVersion", ""),
    ]


def _event_row(e: Obj) -> list[Any]:
    io = e.get("involvedObject") or e.get("regarding") or {}
    last = e.get("lastTimestamp") or e.get("eventTime") or (e.get("series") or {}).get("lastObservedTime") \
        or _md(e).get("creationTimestamp")
    src = e.get("source") or {}
    return [
        age(last), e.get("type", ""), e.get("reason", ""),
        f"{str(io.get('kind', '')).lower()}/{io.get('name', '')}", io.get("fieldPath", ""),
        ", ".join(x for x in (src.get("component") or e.get("reportingComponent") or e.get("reportingController") or "",
                              src.get("host", "")) if x),
        e.get("message", e.get("note", "")), age(e.get("firstTimestamp") or last),
        int(e.get("count") or (e.get("series") or {}).get("count") or 1), _md(e).get("name", ""),
    ]


def _pdb_row(p: Obj) -> list[Any]:
    spec = p.get("spec") or {}
    st = p.get("status") or {}
    return [_md(p).get("name", ""), str(spec.get("minAvailable", "N/A")), str(spec.get("maxUnavailable", "N/A")),
            int(st.get("disruptionsAllowed") or 0), _age(p)]


def _containers(template_spec: Any) -> list[str]:
    """(names, images) of a pod template's containers, comma-joined (layoutContainerCells)."""
    containers = (template_spec or {}).get("containers") or [] if isinstance(template_spec, dict) else []
    names = ",".join(str(c.get("name", "")) for c in containers if isinstance(c, dict))
    images = ",".join(str(c.get("image", "")) for c in containers if isinstance(c, dict))
    return [names, images]


def _label_map(selector: Any) -> str:
    """labels.FormatLabels: sorted k=v pairs, "<none>" when empty."""
    if not isinstance(selector, dict) or not selector:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _label_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector: matchLabels then matchExpressions; "<none>" when nil or empty."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        op, values = e.get("operator", ""), ",".join(e.get("values") or [])
        key = e.get("key", "")
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _template_spec(o: Obj) -> Any:
    return (((o.get("spec") or {}).get("template") or {}).get("spec")) or {}


def _has_condition(o: Obj, kind: str) -> bool:
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
               for c in (o.get("status") or {}).get("conditions") or [])


def _job_row(j: Obj) -> list[Any]:
    spec, st = j.get("spec") or {}, j.get("status") or {}
    succeeded = int(st.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    duration = ""
    start = parse_iso(st.get("startTime"))
    if start is not None:
        end = parse_iso(st.get("completionTime"))
        duration = human_duration((end if end is not None else time.time()) - start)
    if _has_condition(j, "Complete"):
        status = "Complete"
    elif _has_condition(j, "Failed"):
        status = "Failed"
    elif _md(j).get("deletionTimestamp"):
        status = "Terminating"
    elif _has_condition(j, "Suspended"):
        status = "Suspended"
    elif _has_condition(j, "FailureTarget"):
        status = "FailureTarget"
    else:
        status = "Running"
    return [_md(j).get("name", ""), status, completions, duration, _age(j),
            *_containers(_template_spec(j)), _label_selector(spec.get("selector"))]


def _cronjob_row(c: Obj) -> list[Any]:
    spec, st = c.get("spec") or {}, c.get("status") or {}
    suspend = spec.get("suspend")
    job_spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    return [_md(c).get("name", ""), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            "<unset>" if suspend is None else str(bool(suspend)),
            len(st.get("active") or []),
            age(st["lastScheduleTime"]) if st.get("lastScheduleTime") else "<none>", _age(c),
            *_containers(((job_spec.get("template") or {}).get("spec")) or {}),
            _label_selector(job_spec.get("selector"))]


def _service_row(s: Obj) -> list[Any]:
    spec = s.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    external = ",".join(spec.get("externalIPs") or [])
    if kind == "LoadBalancer":
        ingress = ((s.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        lb = ",".join(str(i.get("ip") or i.get("hostname") or "") for i in ingress)
        external = ",".join(x for x in (lb, external) if x) or "<pending>"
    elif kind == "ExternalName":
        external = spec.get("externalName", "")
    ports = []
    for port in spec.get("ports") or []:
        text = str(port.get("port", ""))
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        ports.append(f"{text}/{port.get('protocol') or 'TCP'}")
    return [_md(s).get("name", ""), kind, spec.get("clusterIP") or "<none>", external or "<none>",
            ",".join(ports) or "<none>", _age(s), _label_map(spec.get("selector"))]


_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                 ("ReadWriteOncePod", "RWOP"))


def _access_modes(modes: Any) -> str:
    given = set(modes or [])
    return ",".join(short for mode, short in _ACCESS_MODES if mode in given)


def _phase(o: Obj) -> str:
    return "Terminating" if _md(o).get("deletionTimestamp") else \
        str((o.get("status") or {}).get("phase", ""))


def _pv_row(v: Obj) -> list[Any]:
    spec = v.get("spec") or {}
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""
    return [_md(v).get("name", ""), str((spec.get("capacity") or {}).get("storage", "")),
            _access_modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), _phase(v), claim,
            spec.get("storageClassName", ""), spec.get("volumeAttributesClassName") or "<unset>",
            (v.get("status") or {}).get("reason", ""), _age(v), spec.get("volumeMode", "")]


def _pvc_row(c: Obj) -> list[Any]:
    spec, st = c.get("spec") or {}, c.get("status") or {}
    volume = spec.get("volumeName", "")
    capacity, modes = "", ""
    if volume:
        capacity = str((st.get("capacity") or {}).get("storage", ""))
        modes = _access_modes(st.get("accessModes"))
    storage_class = spec.get("storageClassName") or \
        (_md(c).get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")
    return [_md(c).get("name", ""), _phase(c), volume, capacity, modes, storage_class,
            spec.get("volumeAttributesClassName") or "<unset>", _age(c), spec.get("volumeMode", "")]


def _storage_class_row(c: Obj) -> list[Any]:
    name = _md(c).get("name", "")
    if is_default_class(c):
        name += " (default)"
    return [name, c.get("provisioner", ""), c.get("reclaimPolicy") or "Delete",
            c.get("volumeBindingMode") or "Immediate", bool(c.get("allowVolumeExpansion")),
            _age(c)]


_CONTAINERS_DESC = "Names of each container in the template."
_IMAGES_DESC = "Images referenced by each container in the template."
_SELECTOR_DESC = "Label selector of the pods."
_WIDE_TEMPLATE: list[Column] = [("Containers", "string", 1, _CONTAINERS_DESC),
                                ("Images", "string", 1, _IMAGES_DESC),
                                ("Selector", "string", 1, _SELECTOR_DESC)]


_T: dict[str, tuple[list[Column], RowFn]] = {
    "pods": (
        [("Name", "string", 0, NAME_DESC), ("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
         ("Status", "string", 0, "The aggregate status of the containers in this pod."),
         ("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
         ("Age", "string", 0, AGE_DESC), ("IP", "string", 1, "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
         ("Node", "string", 1, "NodeName is a request to schedule this pod onto a specific node."),
         ("Nominated Node", "string", 1, "nominatedNodeName is set only when this pod preempts other pods on the node."),
         ("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness.")],
        _pod_row,
    ),
    "nodes": (
        [("Name", "string", 0, NAME_DESC), ("Status", "string", 0, "The status of the node"),
         ("Roles", "string", 0, "The roles of the node"), ("Age", "string", 0, AGE_DESC),
         ("Version", "string", 0, "Kubelet Version reported by the node."),
         ("Internal-IP", "string", 1, "List of addresses reachable to the node. Queried from cloud provider, if available."),
         ("External-IP", "string", 1, "List of addresses reachable to the node. Queried from cloud provider, if available."),
         ("OS-Image", "string", 1, "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
         ("Kernel-Version", "string", 1, "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
         ("Container-Runtime", "string", 1, "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).")],
        _node_row,
    ),
    "namespaces": (
        [("Name", "string", 0, NAME_DESC), ("Status", "string", 0, "The status of the namespace"), ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), (o.get("status") or {}).get("phase", ""), _age(o)],
    ),
    "events": (
        [("Last Seen", "string", 0, ""), ("Type", "string", 0, ""), ("Reason", "string", 0, ""),
         ("Object", "string", 0, ""), ("Subobject", "string", 1, ""), ("Source", "string", 1, ""),
         ("Message", "string", 0, ""), ("First Seen", "string", 1, ""), ("Count", "string", 1, ""),
         ("Name", "string", 1, NAME_DESC)],
        _event_row,
    ),
    "poddisruptionbudgets": (
        [("Name", "string", 0, NAME_DESC), ("Min Available", "string", 0, ""), ("Max Unavailable", "string", 0, ""),
         ("Allowed Disruptions", "integer", 0, ""), ("Age", "string", 0, AGE_DESC)],
        _pdb_row,
    ),
    "deployments": (
        [("Name", "string", 0, NAME_DESC), ("Ready", "string", 0, "Number of the pod with ready state"),
         ("Up-to-date", "integer", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
         ("Available", "integer", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
         ("Age", "string", 0, AGE_DESC), *_WIDE_TEMPLATE],
        lambda o: [_md(o).get("name", ""),
                   f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 1)}",
                   int((o.get("status") or {}).get("updatedReplicas") or 0),
                   int((o.get("status") or {}).get("availableReplicas") or 0), _age(o),
                   *_containers(_template_spec(o)),
                   _label_selector((o.get("spec") or {}).get("selector"))],
    ),
    "replicasets": (
        [("Name", "string", 0, NAME_DESC), ("Desired", "integer", 0, "Number of desired pods."),
         ("Current", "integer", 0, "The most recently observed number of replicas."),
         ("Ready", "integer", 0, "The number of pods targeted by this ReplicaSet with a Ready Condition."),
         ("Age", "string", 0, AGE_DESC), *_WIDE_TEMPLATE],
        lambda o: [_md(o).get("name", ""), int((o.get("spec") or {}).get("replicas", 1)),
                   int((o.get("status") or {}).get("replicas") or 0),
                   int((o.get("status") or {}).get("readyReplicas") or 0), _age(o),
                   *_containers(_template_spec(o)),
                   _label_selector((o.get("spec") or {}).get("selector"))],
    ),
    "replicationcontrollers": (
        [("Name", "string", 0, NAME_DESC), ("Desired", "integer", 0, "Number of desired pods."),
         ("Current", "integer", 0, "The most recently observed number of replicas."),
         ("Ready", "integer", 0, "The number of ready replicas for this replication controller."),
         ("Age", "string", 0, AGE_DESC), *_WIDE_TEMPLATE],
        lambda o: [_md(o).get("name", ""), int((o.get("spec") or {}).get("replicas", 1)),
                   int((o.get("status") or {}).get("replicas") or 0),
                   int((o.get("status") or {}).get("readyReplicas") or 0), _age(o),
                   *_containers(_template_spec(o)),
                   _label_map((o.get("spec") or {}).get("selector"))],
    ),
    "statefulsets": (
        [("Name", "string", 0, NAME_DESC), ("Ready", "string", 0, "Number of the pod with ready state"),
         ("Age", "string", 0, AGE_DESC), *_WIDE_TEMPLATE[:2]],
        lambda o: [_md(o).get("name", ""),
                   f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 1)}",
                   _age(o), *_containers(_template_spec(o))],
    ),
    "jobs": (
        [("Name", "string", 0, NAME_DESC), ("Status", "string", 0, "Status of the job."),
         ("Completions", "string", 0, "The number of pods which reached phase Succeeded."),
         ("Duration", "string", 0, "Time required to complete the job."),
         ("Age", "string", 0, AGE_DESC), *_WIDE_TEMPLATE],
        _job_row,
    ),
    "cronjobs": (
        [("Name", "string", 0, NAME_DESC), ("Schedule", "string", 0, "The schedule in Cron format."),
         ("Timezone", "string", 0, "The time zone name for the given schedule."),
         ("Suspend", "boolean", 0, "This flag tells the controller to suspend subsequent executions."),
         ("Active", "integer", 0, "A list of pointers to currently running jobs."),
         ("Last Schedule", "string", 0, "Information when was the last time the job was successfully scheduled."),
         ("Age", "string", 0, AGE_DESC), *_WIDE_TEMPLATE],
        _cronjob_row,
    ),
    "services": (
        [("Name", "string", 0, NAME_DESC), ("Type", "string", 0, "type determines how the Service is exposed."),
         ("Cluster-IP", "string", 0, "clusterIP is the IP address of the service."),
         ("External-IP", "string", 0, "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
         ("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
         ("Age", "string", 0, AGE_DESC),
         ("Selector", "string", 1, "Route service traffic to pods with label keys and values matching this selector.")],
        _service_row,
    ),
    "secrets": (
        [("Name", "string", 0, NAME_DESC), ("Type", "string", 0, "Used to facilitate programmatic handling of secret data."),
         ("Data", "string", 0, "Data contains the secret data."), ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), o.get("type") or "Opaque",
                   len(o.get("data") or {}) + len(o.get("stringData") or {}), _age(o)],
    ),
    "serviceaccounts": (
        [("Name", "string", 0, NAME_DESC), ("Secrets", "string", 0, "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."),
         ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), len(o.get("secrets") or []), _age(o)],
    ),
    "persistentvolumes": (
        [("Name", "string", 0, NAME_DESC), ("Capacity", "string", 0, "capacity is the description of the persistent volume's resources and capacity."),
         ("Access Modes", "string", 0, "accessModes contains all ways the volume can be mounted."),
         ("Reclaim Policy", "string", 0, "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
         ("Status", "string", 0, "phase indicates if a volume is available, bound to a claim, or released by a claim."),
         ("Claim", "string", 0, "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
         ("StorageClass", "string", 0, "storageClassName is the name of StorageClass to which this persistent volume belongs."),
         ("VolumeAttributesClass", "string", 0, "Name of VolumeAttributesClass to which this persistent volume belongs."),
         ("Reason", "string", 0, "reason is a brief CamelCase string that describes any failure."),
         ("Age", "string", 0, AGE_DESC),
         ("VolumeMode", "string", 1, "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.")],
        _pv_row,
    ),
    "persistentvolumeclaims": (
        [("Name", "string", 0, NAME_DESC), ("Status", "string", 0, "phase represents the current phase of PersistentVolumeClaim."),
         ("Volume", "string", 0, "volumeName is the binding reference to the PersistentVolume backing this claim."),
         ("Capacity", "string", 0, "capacity represents the actual resources of the underlying volume."),
         ("Access Modes", "string", 0, "accessModes contains the actual access modes the volume backing the PVC has."),
         ("StorageClass", "string", 0, "storageClassName is the name of the StorageClass required by the claim."),
         ("VolumeAttributesClass", "string", 0, "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."),
         ("Age", "string", 0, AGE_DESC),
         ("VolumeMode", "string", 1, "volumeMode defines what type of volume is required by the claim.")],
        _pvc_row,
    ),
    "storageclasses": (
        [("Name", "string", 0, NAME_DESC), ("Provisioner", "string", 0, "provisioner indicates the type of the provisioner."),
         ("ReclaimPolicy", "string", 0, "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class."),
         ("VolumeBindingMode", "string", 0, "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound."),
         ("AllowVolumeExpansion", "string", 0, "allowVolumeExpansion shows whether the storage class allow volume expand."),
         ("Age", "string", 0, AGE_DESC)],
        _storage_class_row,
    ),
    "priorityclasses": (
        [("Name", "string", 0, NAME_DESC), ("Value", "integer", 0, ""), ("Global-Default", "boolean", 0, ""),
         ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), int(o.get("value") or 0), bool(o.get("globalDefault")), _age(o)],
    ),
    "configmaps": (
        [("Name", "string", 0, NAME_DESC), ("Data", "integer", 0, ""), ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age(o)],
    ),
    "leases": (
        [("Name", "string", 0, NAME_DESC), ("Holder", "string", 0, ""), ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), (o.get("spec") or {}).get("holderIdentity", ""), _age(o)],
    ),
    "customresourcedefinitions": (
        [("Name", "string", 0, NAME_DESC), ("Created At", "date", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), _md(o).get("creationTimestamp", "")],
    ),
}


def _claim_state(c: Obj) -> str:
    """kubectl's State column of a ResourceClaim (deleted, pending, allocated, reserved)."""
    st = c.get("status") or {}
    deleted = bool(_md(c).get("deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if not st.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if st.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _slice_row(s: Obj) -> list[Any]:
    spec = s.get("spec") or {}
    return [_md(s).get("name", ""), _none(spec.get("nodeName")), spec.get("driver", ""),
            (spec.get("pool") or {}).get("name", ""), _age(s)]


_T.update({
    "resourceclaims": (
        [("Name", "string", 0, NAME_DESC),
         ("State", "string", 0, "A summary of the current state (allocated, pending, reserved, etc.)."),
         ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), _claim_state(o), _age(o)],
    ),
    "resourceslices": (
        [("Name", "string", 0, NAME_DESC),
         ("Node", "string", 0, "NodeName identifies the node which provides the resources in this pool."),
         ("Driver", "string", 0, "Driver identifies the DRA driver providing the capacity information."),
         ("Pool", "string", 0, "Name is used to identify the pool."),
         ("Age", "string", 0, AGE_DESC)],
        _slice_row,
    ),
})
_DEFAULT: tuple[list[Column], RowFn] = (
    [("Name", "string", 0, NAME_DESC), ("Age", "string", 0, AGE_DESC)],
    lambda o: [_md(o).get("name", ""), _age(o)],
)

# ------------------------------------------------------------------ JSONPath (printer columns)

_SEG = re.compile(r"\.?([A-Za-z0-9_\-/]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_.]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]|\[\*\]")


def jsonpath(obj: Any, path: str) -> Any:
    """The subset of JSONPath used by printer columns: .a.b, [n], [*], [?(@.k=="v")]."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    path = path.lstrip("$")
    cur: list[Any] = [obj]
    pos = 0
    while pos < len(path):
        m = _SEG.match(path, pos)
        if not m or m.end() == pos:
            return None
        pos = m.end()
        nxt: list[Any] = []
        for c in cur:
            if m.group(1) is not None:
                if isinstance(c, dict) and m.group(1) in c:
                    nxt.append(c[m.group(1)])
            elif m.group(2) is not None:
                i = int(m.group(2))
                if isinstance(c, list) and i < len(c):
                    nxt.append(c[i])
            elif m.group(3) is not None:
                if isinstance(c, list):
                    for el in c:
                        if str(jsonpath(el, "." + m.group(3))) == m.group(4):
                            nxt.append(el)
            else:
                if isinstance(c, list):
                    nxt.extend(c)
        cur = nxt
    if not cur:
        return None
    return cur[0] if len(cur) == 1 else cur


def _crd_columns(rt: ResourceType) -> tuple[list[Column], RowFn]:
    cols = (rt.crd_version or {}).get("additionalPrinterColumns")
    if cols is None:
        cols = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    defs: list[Column] = [("Name", "string", 0, NAME_DESC)]
    for c in cols:
        defs.append((c.get("name", ""), c.get("type", "string"), int(c.get("priority", 0)), c.get("description", "")))

    def row(o: Obj) -> list[Any]:
        cells: list[Any] = [_md(o).get("name", "")]
        for c in cols:
            v = jsonpath(o, c.get("jsonPath", ""))
            t = c.get("type", "string")
            if v is None:
                cells.append(None)
            elif t == "date":
                cells.append(age(v))
            elif t == "integer":
                try:
                    cells.append(int(v))
                except (TypeError, ValueError):
                    cells.append(None)
            elif t == "number":
                try:
                    cells.append(float(v))
                except (TypeError, ValueError):
                    cells.append(None)
            elif t == "boolean":
                cells.append(bool(v))
            elif isinstance(v, (dict, list)):
                import orjson

                cells.append(orjson.dumps(v).decode())
            else:
                cells.append(str(v))
        return cells

    return defs, row


def _spec(rt: ResourceType) -> tuple[list[Column], RowFn]:
    if rt.is_custom:
        return _crd_columns(rt)
    if rt.group in ("", "events.k8s.io", "policy", "apps", "batch", "storage.k8s.io",
                    "scheduling.k8s.io", "coordination.k8s.io", "apiextensions.k8s.io",
                    "resource.k8s.io"):
        return _T.get(rt.plural, _DEFAULT)
    return _DEFAULT


def column_definitions(rt: ResourceType) -> list[Obj]:
    cols, _ = _spec(rt)
    return [
        {"name": n, "type": t, "format": "name" if n == "Name" and i == 0 else "", "description": d, "priority": p}
        for i, (n, t, p, d) in enumerate(cols)
    ]


def _row_object(o: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return o
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata", {})}


def table(
    rt: ResourceType,
    objs: list[Obj],
    *,
    include_object: str = "Metadata",
    metadata: Obj | None = None,
    headers: bool = True,
    api_version: str = "meta.k8s.io/v1",
) -> Obj:
    _, row = _spec(rt)
    rows = []
    for o in objs:
        r: Obj = {"cells": row(o)}
        obj = _row_object(o, include_object)
        if obj is not None:
            r["object"] = obj
        rows.append(r)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": metadata or {},
        "columnDefinitions": column_definitions(rt) if headers else [],
        "rows": rows,
    }
