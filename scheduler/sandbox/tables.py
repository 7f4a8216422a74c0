"""Server-side ``Table`` responses (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``).

kubectl get/get -w print whatever columns the server sends, so these follow kube-apiserver's
printers (pkg/printers/internalversion) for the types users look at, and a CRD's
additionalPrinterColumns (JSONPath) for custom resources. Other types get Name and Age.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .resources import ResourceType
from .util import age

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
        [("Name", "string", 0, NAME_DESC), ("Ready", "string", 0, ""), ("Up-to-date", "integer", 0, ""),
         ("Available", "integer", 0, ""), ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""),
                   f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 1)}",
                   int((o.get("status") or {}).get("updatedReplicas") or 0),
                   int((o.get("status") or {}).get("availableReplicas") or 0), _age(o)],
    ),
    "replicasets": (
        [("Name", "string", 0, NAME_DESC), ("Desired", "integer", 0, ""), ("Current", "integer", 0, ""),
         ("Ready", "integer", 0, ""), ("Age", "string", 0, AGE_DESC)],
        lambda o: [_md(o).get("name", ""), int((o.get("spec") or {}).get("replicas", 1)),
                   int((o.get("status") or {}).get("replicas") or 0),
                   int((o.get("status") or {}).get("readyReplicas") or 0), _age(o)],
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
    if rt.group in ("", "events.k8s.io", "policy", "apps", "scheduling.k8s.io", "coordination.k8s.io",
                    "apiextensions.k8s.io", "resource.k8s.io"):
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
