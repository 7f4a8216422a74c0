"""Fluent builders of plain Pod / Node dicts for unit tests (in the spirit of upstream
``st.MakePod()...Obj()``). Every method returns the builder; ``obj()`` returns a deep copy so a
builder can be reused as a template.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PodBuilder", "NodeBuilder", "make_pod", "make_node", "node_term", "set_path"]

_uid_counter = itertools.count(1)


def _rl(cpu: Any = None, memory: Any = None, ephemeral_storage: Any = None, pods: Any = None,
        **scalar: Any) -> dict[str, Any]:
    """Resource list from keyword args; ``nvidia_com__gpu`` style keys are not mangled, pass
    odd names via ``**{"nvidia.com/gpu": 1}``."""
    out: dict[str, Any] = {}
    for k, v in (("cpu", cpu), ("memory", memory), ("ephemeral-storage", ephemeral_storage),
                 ("pods", pods)):
        if v is not None:
            out[k] = str(v)
    for k, v in scalar.items():
        out[k] = str(v)
    return out


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts, creating dicts on the way (``a.b[0].c`` for lists)."""
    parts = path.split(".")
    cur: Any = obj
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        idx = None
        if part.endswith("]") and "[" in part:
            part, _, rest = part.partition("[")
            idx = int(rest[:-1])
        if idx is None:
            if last:
                cur[part] = value
            else:
                cur = cur.setdefault(part, {})
        else:
            lst = cur.setdefault(part, [])
            while len(lst) <= idx:
                lst.append({})
            if last:
                lst[idx] = value
            else:
                cur = lst[idx]


def _term(term: Mapping[str, Any] | None = None, **labels_in: Sequence[str] | str) -> dict[str, Any]:
    """A NodeSelectorTerm; ``**labels_in`` is shorthand for ``key In values``."""
    if term is not None:
        return dict(term)
    exprs = []
    for k, v in labels_in.items():
        vals = [v] if isinstance(v, str) else list(v)
        exprs.append({"key": k, "operator": "In", "values": vals})
    return {"matchExpressions": exprs}


def _affinity_term(selector: Mapping[str, Any] | None, topology_key: str,
                   namespaces: Sequence[str] | None,
                   namespace_selector: Mapping[str, Any] | None,
                   match_label_keys: Sequence[str] | None = None,
                   mismatch_label_keys: Sequence[str] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topology_key}
    if selector is not None:
        t["labelSelector"] = dict(selector)
    if namespaces is not None:
        t["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        t["namespaceSelector"] = dict(namespace_selector)
    if match_label_keys:
        t["matchLabelKeys"] = list(match_label_keys)
    if mismatch_label_keys:
        t["mismatchLabelKeys"] = list(mismatch_label_keys)
    return t


def _sel(selector: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Accept either a full LabelSelector or a bare ``{label: value}`` map."""
    if selector is None:
        return None
    if "matchLabels" in selector or "matchExpressions" in selector or not selector:
        return dict(selector)
    return {"matchLabels": dict(selector)}


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": f"uid-{namespace}-{name}"},
            "spec": {"containers": []},
            "status": {"phase": "Pending"},
        }

    # --- metadata ---
    @property
    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._pod["metadata"]
        return meta

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._pod["spec"]
        return spec

    def uid(self, uid: str | None = None) -> PodBuilder:
        self._meta["uid"] = uid if uid is not None else f"uid-{next(_uid_counter)}"
        return self

    def namespace(self, ns: str) -> PodBuilder:
        self._meta["namespace"] = ns
        return self

    def labels(self, labels: Mapping[str, str] | None = None, **kw: str) -> PodBuilder:
        self._meta.setdefault("labels", {}).update({**(labels or {}), **kw})
        return self

    def annotations(self, annotations: Mapping[str, str] | None = None, **kw: str) -> PodBuilder:
        self._meta.setdefault("annotations", {}).update({**(annotations or {}), **kw})
        return self

    def owner(self, kind: str, name: str, *, uid: str = "", controller: bool = True
              ) -> PodBuilder:
        self._meta.setdefault("ownerReferences", []).append(
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid or f"uid-{name}",
             "controller": controller})
        return self

    def resource_version(self, rv: str | int) -> PodBuilder:
        self._meta["resourceVersion"] = str(rv)
        return self

    def creation_timestamp(self, ts: str) -> PodBuilder:
        self._meta["creationTimestamp"] = ts
        return self

    def deletion_timestamp(self, ts: str = "2024-01-01T00:00:00Z") -> PodBuilder:
        self._meta["deletionTimestamp"] = ts
        return self

    # --- spec ---
    def scheduler_name(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def priority(self, p: int) -> PodBuilder:
        self._spec["priority"] = p
        return self

    def priority_class(self, name: str) -> PodBuilder:
        self._spec["priorityClassName"] = name
        return self

    def preemption_policy(self, policy: str) -> PodBuilder:
        self._spec["preemptionPolicy"] = policy
        return self

    def node(self, node_name: str) -> PodBuilder:
        self._spec["nodeName"] = node_name
        return self

    def nominated_node(self, node_name: str) -> PodBuilder:
        self._pod["status"]["nominatedNodeName"] = node_name
        return self

    def _ensure_container(self) -> dict[str, Any]:
        cs: list[dict[str, Any]] = self._spec["containers"]
        if not cs:
            cs.append({"name": "c0", "image": "registry.k8s.io/pause:3.10"})
        return cs[-1]

    def container(self, name: str | None = None, *, image: str = "registry.k8s.io/pause:3.10",
                  requests: Mapping[str, Any] | None = None,
                  limits: Mapping[str, Any] | None = None,
                  ports: Sequence[Mapping[str, Any]] | None = None) -> PodBuilder:
        """Append a container; later ``req()``/``limits()``/``host_port()`` apply to it."""
        cs: list[dict[str, Any]] = self._spec["containers"]
        c: dict[str, Any] = {"name": name or f"c{len(cs)}", "image": image}
        if requests or limits:
            c["resources"] = {}
            if requests:
                c["resources"]["requests"] = {k: str(v) for k, v in requests.items()}
            if limits:
                c["resources"]["limits"] = {k: str(v) for k, v in limits.items()}
        if ports:
            c["ports"] = [dict(p) for p in ports]
        cs.append(c)
        return self

    def req(self, cpu: Any = None, memory: Any = None, ephemeral_storage: Any = None,
            **scalar: Any) -> PodBuilder:
        """Requests on the last container (created if none)."""
        c = self._ensure_container()
        c.setdefault("resources", {}).setdefault("requests", {}).update(
            _rl(cpu, memory, ephemeral_storage, **scalar))
        return self

    def limits(self, cpu: Any = None, memory: Any = None, ephemeral_storage: Any = None,
               **scalar: Any) -> PodBuilder:
        """Limits on the last container (created if none)."""
        c = self._ensure_container()
        c.setdefault("resources", {}).setdefault("limits", {}).update(
            _rl(cpu, memory, ephemeral_storage, **scalar))
        return self

    def pod_resources(self, *, requests: Mapping[str, Any] | None = None,
                      limits: Mapping[str, Any] | None = None) -> PodBuilder:
        """Pod-level ``spec.resources``."""
        r: dict[str, Any] = {}
        if requests:
            r["requests"] = {k: str(v) for k, v in requests.items()}
        if limits:
            r["limits"] = {k: str(v) for k, v in limits.items()}
        self._spec["resources"] = r
        return self

    def init_container(self, name: str | None = None, *,
                       image: str = "registry.k8s.io/pause:3.10",
                       requests: Mapping[str, Any] | None = None,
                       limits: Mapping[str, Any] | None = None,
                       ports: Sequence[Mapping[str, Any]] | None = None,
                       restart_policy: str | None = None) -> PodBuilder:
        """Append an init container; ``restart_policy="Always"`` makes it a sidecar."""
        ics: list[dict[str, Any]] = self._spec.setdefault("initContainers", [])
        c: dict[str, Any] = {"name": name or f"init{len(ics)}", "image": image}
        if requests or limits:
            c["resources"] = {}
            if requests:
                c["resources"]["requests"] = {k: str(v) for k, v in requests.items()}
            if limits:
                c["resources"]["limits"] = {k: str(v) for k, v in limits.items()}
        if ports:
            c["ports"] = [dict(p) for p in ports]
        if restart_policy is not None:
            c["restartPolicy"] = restart_policy
        ics.append(c)
        return self

    def sidecar(self, name: str | None = None, **kw: Any) -> PodBuilder:
        return self.init_container(name, restart_policy="Always", **kw)

    def overhead(self, cpu: Any = None, memory: Any = None, **scalar: Any) -> PodBuilder:
        self._spec["overhead"] = _rl(cpu, memory, **scalar)
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "",
                  container_port: int | None = None) -> PodBuilder:
        """A hostPort on the last container (created if none)."""
        c = self._ensure_container()
        p: dict[str, Any] = {"containerPort": container_port or port, "hostPort": port,
                             "protocol": protocol}
        if host_ip:
            p["hostIP"] = host_ip
        c.setdefault("ports", []).append(p)
        return self

    def node_selector(self, selector: Mapping[str, str] | None = None, **kw: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update({**(selector or {}), **kw})
        return self

    def _node_affinity(self) -> dict[str, Any]:
        na: dict[str, Any] = self._spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        return na

    def required_node_affinity(self, terms: Sequence[Mapping[str, Any]]) -> PodBuilder:
        """``nodeSelectorTerms`` (ORed). See :func:`node_term` for a shorthand."""
        self._node_affinity()["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [dict(t) for t in terms]}
        return self

    def preferred_node_affinity(self, weight: int, term: Mapping[str, Any]) -> PodBuilder:
        self._node_affinity().setdefault(
            "preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": weight, "preference": dict(term)})
        return self

    def toleration(self, key: str = "", operator: str = "Equal", value: str = "",
                   effect: str = "", toleration_seconds: int | None = None) -> PodBuilder:
        t: dict[str, Any] = {"operator": operator}
        if key:
            t["key"] = key
        if value:
            t["value"] = value
        if effect:
            t["effect"] = effect
        if toleration_seconds is not None:
            t["tolerationSeconds"] = toleration_seconds
        self._spec.setdefault("tolerations", []).append(t)
        return self

    def _pod_aff(self, kind: str, which: str, entry: dict[str, Any]) -> PodBuilder:
        self._spec.setdefault("affinity", {}).setdefault(kind, {}).setdefault(
            which, []).append(entry)
        return self

    def pod_affinity_required(self, selector: Mapping[str, Any] | None, topology_key: str, *,
                              namespaces: Sequence[str] | None = None,
                              namespace_selector: Mapping[str, Any] | None = None,
                              match_label_keys: Sequence[str] | None = None,
                              mismatch_label_keys: Sequence[str] | None = None) -> PodBuilder:
        """Required pod affinity; ``selector`` may be a LabelSelector or a bare label map."""
        return self._pod_aff("podAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                             _affinity_term(_sel(selector), topology_key, namespaces,
                                            namespace_selector, match_label_keys,
                                            mismatch_label_keys))

    def pod_anti_affinity_required(self, selector: Mapping[str, Any] | None, topology_key: str,
                                   *, namespaces: Sequence[str] | None = None,
                                   namespace_selector: Mapping[str, Any] | None = None,
                                   match_label_keys: Sequence[str] | None = None,
                                   mismatch_label_keys: Sequence[str] | None = None
                                   ) -> PodBuilder:
        return self._pod_aff("podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                             _affinity_term(_sel(selector), topology_key, namespaces,
                                            namespace_selector, match_label_keys,
                                            mismatch_label_keys))

    def pod_affinity_preferred(self, weight: int, selector: Mapping[str, Any] | None,
                               topology_key: str, *, namespaces: Sequence[str] | None = None,
                               namespace_selector: Mapping[str, Any] | None = None
                               ) -> PodBuilder:
        return self._pod_aff("podAffinity", "preferredDuringSchedulingIgnoredDuringExecution",
                             {"weight": weight, "podAffinityTerm": _affinity_term(
                                 _sel(selector), topology_key, namespaces, namespace_selector)})

    def pod_anti_affinity_preferred(self, weight: int, selector: Mapping[str, Any] | None,
                                    topology_key: str, *,
                                    namespaces: Sequence[str] | None = None,
                                    namespace_selector: Mapping[str, Any] | None = None
                                    ) -> PodBuilder:
        return self._pod_aff("podAntiAffinity",
                             "preferredDuringSchedulingIgnoredDuringExecution",
                             {"weight": weight, "podAffinityTerm": _affinity_term(
                                 _sel(selector), topology_key, namespaces, namespace_selector)})

    def topology_spread(self, max_skew: int, topology_key: str,
                        when_unsatisfiable: str = "DoNotSchedule",
                        selector: Mapping[str, Any] | None = None, *,
                        min_domains: int | None = None,
                        node_affinity_policy: str | None = None,
                        node_taints_policy: str | None = None,
                        match_label_keys: Sequence[str] | None = None) -> PodBuilder:
        c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": topology_key,
                             "whenUnsatisfiable": when_unsatisfiable}
        s = _sel(selector)
        if s is not None:
            c["labelSelector"] = s
        if min_domains is not None:
            c["minDomains"] = min_domains
        if node_affinity_policy is not None:
            c["nodeAffinityPolicy"] = node_affinity_policy
        if node_taints_policy is not None:
            c["nodeTaintsPolicy"] = node_taints_policy
        if match_label_keys:
            c["matchLabelKeys"] = list(match_label_keys)
        self._spec.setdefault("topologySpreadConstraints", []).append(c)
        return self

    def pvc(self, claim_name: str, volume_name: str | None = None) -> PodBuilder:
        self._spec.setdefault("volumes", []).append(
            {"name": volume_name or claim_name,
             "persistentVolumeClaim": {"claimName": claim_name}})
        return self

    def volume(self, volume: Mapping[str, Any]) -> PodBuilder:
        self._spec.setdefault("volumes", []).append(dict(volume))
        return self

    def scheduling_gates(self, *names: str) -> PodBuilder:
        self._spec["schedulingGates"] = [{"name": n} for n in names]
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._pod["status"]["phase"] = phase
        return self

    def condition(self, cond_type: str, status: str = "True", reason: str = "") -> PodBuilder:
        c = {"type": cond_type, "status": status}
        if reason:
            c["reason"] = reason
        self._pod["status"].setdefault("conditions", []).append(c)
        return self

    def container_status(self, name: str, *, allocated: Mapping[str, Any] | None = None,
                         actual: Mapping[str, Any] | None = None,
                         init: bool = False) -> PodBuilder:
        """A container status as the kubelet reports a resize: ``allocatedResources`` (admitted)
        and ``resources.requests`` (running)."""
        cs: dict[str, Any] = {"name": name}
        if allocated is not None:
            cs["allocatedResources"] = {k: str(v) for k, v in allocated.items()}
        if actual is not None:
            cs["resources"] = {"requests": {k: str(v) for k, v in actual.items()}}
        field = "initContainerStatuses" if init else "containerStatuses"
        self._pod["status"].setdefault(field, []).append(cs)
        return self

    def set(self, path: str, value: Any) -> PodBuilder:
        """Generic setter: ``.set("spec.hostNetwork", True)``."""
        set_path(self._pod, path, value)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._pod)


def node_term(term: Mapping[str, Any] | None = None, **labels_in: Sequence[str] | str
              ) -> dict[str, Any]:
    """NodeSelectorTerm shorthand: ``node_term(zone=["a", "b"])`` = zone In (a, b)."""
    return _term(term, **labels_in)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-node-{name}",
                         "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"capacity": {}, "allocatable": {},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }
        self._alloc_set = False

    def labels(self, labels: Mapping[str, str] | None = None, **kw: str) -> NodeBuilder:
        self._node["metadata"]["labels"].update({**(labels or {}), **kw})
        return self

    def annotations(self, annotations: Mapping[str, str] | None = None, **kw: str
                    ) -> NodeBuilder:
        self._node["metadata"].setdefault("annotations", {}).update(
            {**(annotations or {}), **kw})
        return self

    def capacity(self, cpu: Any = None, memory: Any = None, pods: Any = None,
                 ephemeral_storage: Any = None, **scalar: Any) -> NodeBuilder:
        """Capacity; allocatable follows it unless :meth:`allocatable` is called."""
        rl = _rl(cpu, memory, ephemeral_storage, pods, **scalar)
        self._node["status"]["capacity"].update(rl)
        if not self._alloc_set:
            self._node["status"]["allocatable"] = dict(self._node["status"]["capacity"])
        return self

    def allocatable(self, cpu: Any = None, memory: Any = None, pods: Any = None,
                    ephemeral_storage: Any = None, **scalar: Any) -> NodeBuilder:
        if not self._alloc_set:
            self._node["status"]["allocatable"] = {}
            self._alloc_set = True
        self._node["status"]["allocatable"].update(
            _rl(cpu, memory, ephemeral_storage, pods, **scalar))
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        t: dict[str, Any] = {"key": key, "effect": effect}
        if value:
            t["value"] = value
        self._node["spec"].setdefault("taints", []).append(t)
        return self

    def unschedulable(self, flag: bool = True) -> NodeBuilder:
        self._node["spec"]["unschedulable"] = flag
        return self

    def images(self, *images: tuple[Sequence[str] | str, int]) -> NodeBuilder:
        """``images(("nginx:1.25", 50_000_000), (["a", "b"], 10))``."""
        out = self._node["status"].setdefault("images", [])
        for names, size in images:
            out.append({"names": [names] if isinstance(names, str) else list(names),
                        "sizeBytes": size})
        return self

    def condition(self, cond_type: str, status: str = "True", reason: str = "") -> NodeBuilder:
        conds = [c for c in self._node["status"]["conditions"] if c["type"] != cond_type]
        c = {"type": cond_type, "status": status}
        if reason:
            c["reason"] = reason
        conds.append(c)
        self._node["status"]["conditions"] = conds
        return self

    def resource_version(self, rv: str | int) -> NodeBuilder:
        self._node["metadata"]["resourceVersion"] = str(rv)
        return self

    def set(self, path: str, value: Any) -> NodeBuilder:
        set_path(self._node, path, value)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._node)


def make_pod(name: str = "pod", namespace: str = "default", *, cpu: Any = None,
             memory: Any = None, labels: Mapping[str, str] | None = None,
             node: str | None = None, priority: int | None = None,
             scheduler_name: str | None = None, **scalar: Any) -> dict[str, Any]:
    """One-call pod: ``make_pod("p", cpu="100m", memory="1Gi", labels={"app": "x"})``."""
    b = PodBuilder(name, namespace)
    if cpu is not None or memory is not None or scalar:
        b.req(cpu=cpu, memory=memory, **scalar)
    else:
        b.container()
    if labels:
        b.labels(labels)
    if node:
        b.node(node)
    if priority is not None:
        b.priority(priority)
    if scheduler_name:
        b.scheduler_name(scheduler_name)
    return b.obj()


def make_node(name: str = "node", *, cpu: Any = "4", memory: Any = "16Gi", pods: Any = 110,
              labels: Mapping[str, str] | None = None, **scalar: Any) -> dict[str, Any]:
    """One-call node with capacity == allocatable."""
    b = NodeBuilder(name).capacity(cpu=cpu, memory=memory, pods=pods, **scalar)
    if labels:
        b.labels(labels)
    return b.obj()


# ---------------------------------------------------------------- DRA (resource.k8s.io/v1) objects

DRA_API = "resource.k8s.io/v1"


def dra_exact(name: str = "gpu", device_class: str = "gpu.example.com", *, count: int | None = None,
              mode: str | None = None, selectors: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """One ``spec.devices.requests[]`` entry of kind ``exactly``."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, **extra}
    if mode is not None:
        exactly["allocationMode"] = mode
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def dra_device_class(name: str = "gpu.example.com", *, selectors: Sequence[str] = (),
                     **spec: Any) -> dict[str, Any]:
    sp: dict[str, Any] = dict(spec)
    if selectors:
        sp["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": sp}


def dra_claim(name: str = "claim", namespace: str = "default", *,
              requests: Sequence[dict[str, Any]] | None = None, **devices: Any) -> dict[str, Any]:
    reqs = list(requests) if requests is not None else [dra_exact()]
    return {"apiVersion": DRA_API, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": reqs, **devices}}}


def dra_claim_template(name: str = "gpu-template", namespace: str = "default", *,
                       requests: Sequence[dict[str, Any]] | None = None,
                       labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    reqs = list(requests) if requests is not None else [dra_exact()]
    spec: dict[str, Any] = {"spec": {"devices": {"requests": reqs}}}
    if labels:
        spec["metadata"] = {"labels": dict(labels)}
    return {"apiVersion": DRA_API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def dra_device(name: str, **attributes: Any) -> dict[str, Any]:
    """A device with typed attributes (bool/int/str values) and an optional ``capacity`` map."""
    capacity = attributes.pop("capacity", None)
    attrs: dict[str, Any] = {}
    for k, v in attributes.items():
        if isinstance(v, bool):
            attrs[k] = {"bool": v}
        elif isinstance(v, int):
            attrs[k] = {"int": v}
        else:
            attrs[k] = {"string": v}
    d: dict[str, Any] = {"name": name}
    if attrs:
        d["attributes"] = attrs
    if capacity:
        d["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return d


def dra_slice(name: str = "node-1-gpu", *, node: str | None = "node-1", driver: str = "gpu.example.com",
              pool: str | None = None, devices: Sequence[dict[str, Any]] | None = None,
              slice_count: int = 1, generation: int = 0, **spec: Any) -> dict[str, Any]:
    sp: dict[str, Any] = {"driver": driver,
                          "pool": {"name": pool or node or "pool", "generation": generation,
                                   "resourceSliceCount": slice_count}}
    if node is not None:
        sp["nodeName"] = node
    sp["devices"] = list(devices) if devices is not None else [dra_device(f"gpu-{i}", index=i) for i in range(2)]
    sp.update(spec)
    return {"apiVersion": DRA_API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": sp}


def dra_allocation(node: str, results: Sequence[tuple[str, str, str, str]]) -> dict[str, Any]:
    """``status.allocation`` as kube-scheduler writes it: results are (request, driver, pool,
    device); the node selector pins the node by name (matchFields metadata.name)."""
    return {"devices": {"results": [{"request": r, "driver": d, "pool": p, "device": dev}
                                     for r, d, p, dev in results]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def dra_consumer(pod_name: str, uid: str) -> dict[str, Any]:
    """A ``status.reservedFor`` entry naming a pod."""
    return {"resource": "pods", "name": pod_name, "uid": uid}


def with_pod_claims(pod: dict[str, Any], *claims: tuple[str, str, str]) -> dict[str, Any]:
    """Give a pod dict ``spec.resourceClaims`` entries (name, "template"|"claim", source name)
    and a first container that uses them all."""
    spec = pod.setdefault("spec", {})
    spec["resourceClaims"] = [
        {"name": n, "resourceClaimTemplateName": src} if kind == "template" else {"name": n, "resourceClaimName": src}
        for n, kind, src in claims]
    cs = spec.get("containers") or [{"name": "c", "image": "busybox"}]
    cs[0] = {**cs[0], "resources": {**(cs[0].get("resources") or {}), "claims": [{"name": n} for n, _, _ in claims]}}
    spec["containers"] = cs
    return pod


def dra_taint_rule(name: str = "rule", *, key: str = "example.com/unhealthy", value: str = "",
                   effect: str = "NoSchedule", driver: str | None = None, pool: str | None = None,
                   device: str | None = None, selector: bool = True) -> dict[str, Any]:
    """A DeviceTaintRule (resource.k8s.io/v1) adding one taint to the devices its selector
    matches (``selector=False``: no ``deviceSelector`` at all)."""
    spec: dict[str, Any] = {"taint": {"key": key, "effect": effect}}
    if value:
        spec["taint"]["value"] = value
    if selector:
        spec["deviceSelector"] = {k: v for k, v in
                                  (("driver", driver), ("pool", pool), ("device", device)) if v is not None}
    return {"apiVersion": DRA_API, "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def csi_driver(name: str = "csi.example.com", *, attach_required: bool | None = None,
               storage_capacity: bool | None = None,
               prevent_pod_scheduling_if_missing: bool | None = None) -> dict[str, Any]:
    """A CSIDriver (storage.k8s.io/v1) with the spec fields given (None: left out)."""
    spec = {field: value for field, value in (
        ("attachRequired", attach_required), ("storageCapacity", storage_capacity),
        ("preventPodSchedulingIfMissing", prevent_pod_scheduling_if_missing))
        if value is not None}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": spec}
