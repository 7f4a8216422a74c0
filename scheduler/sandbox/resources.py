"""The catalogue of served resource types: built-ins and those defined by CRDs.

Everything the router, discovery and the store need to know about a resource type lives in
one ``ResourceType`` record, so a CRD becomes served by registering one more record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .events import VIEW_FIELD_ALIASES

VERBS_ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# Field selectors kube-apiserver accepts per resource (besides metadata.name/namespace).
_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)
_EVENTS_K8S_FIELDS = frozenset(
    {
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "source",
        "type",
    }
)


@dataclass(eq=False)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    subresources: tuple[str, ...] = ()
    verbs: list[str] = field(default_factory=lambda: list(VERBS_ALL))
    fields: frozenset[str] = frozenset()
    # Writes through the main resource keep status; /status writes touch only status.
    has_status_subresource: bool = False
    # Status sent on create is kept (nodes register with their status) or reset.
    keep_status_on_create: bool = False
    tracks_generation: bool = False
    # DELETE answers the object (pods, custom resources) rather than a Success Status.
    returns_deleted_object: bool = False
    # Filled for custom resources: the defining CRD's version entry and schema.
    crd_version: dict[str, Any] | None = None
    crd_name: str = ""
    all_versions: tuple[str, ...] = ()
    # Another view of a type stored elsewhere (events.k8s.io/v1 events are core/v1 events):
    # the storage key and the apiVersion objects are stored under.
    storage_key: str = ""
    stored_api_version: str = ""
    # Field selector labels of this view -> the stored field they read.
    field_aliases: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()
        if not self.all_versions:
            self.all_versions = (self.version,)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Storage identity: one store per group+plural, shared by all served versions."""
        if self.storage_key:
            return self.storage_key
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_api_version(self) -> str:
        return self.stored_api_version or self.api_version

    @property
    def is_view(self) -> bool:
        """Served from another type's storage with conversion (events.k8s.io/v1 events)."""
        return bool(self.stored_api_version)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def is_custom(self) -> bool:
        return self.crd_version is not None

    def supports_field(self, name: str) -> bool:
        if name in ("metadata.name", "metadata.namespace"):
            return True
        return name in self.fields


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool, **kw: Any) -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced, **kw)


def builtin_types() -> list[ResourceType]:
    return [
        _rt("", "v1", "namespaces", "Namespace", False, short_names=["ns"],
            subresources=("status", "finalize"), has_status_subresource=True,
            fields=frozenset({"status.phase"}), returns_deleted_object=True,
            verbs=["create", "delete", "get", "list", "patch", "update", "watch"]),
        _rt("", "v1", "pods", "Pod", True, short_names=["po"], categories=["all"],
            subresources=("status", "binding", "eviction"), has_status_subresource=True,
            fields=_POD_FIELDS, tracks_generation=True, returns_deleted_object=True),
        _rt("", "v1", "nodes", "Node", False, short_names=["no"], subresources=("status",),
            has_status_subresource=True, keep_status_on_create=True,
            fields=frozenset({"spec.unschedulable"})),
        _rt("", "v1", "events", "Event", True, short_names=["ev"], fields=_EVENT_FIELDS),
        _rt("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=["pv"],
            subresources=("status",), has_status_subresource=True,
            fields=frozenset({"name"})),
        _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, short_names=["pvc"],
            subresources=("status",), has_status_subresource=True),
        _rt("", "v1", "services", "Service", True, short_names=["svc"], categories=["all"],
            subresources=("status",), has_status_subresource=True),
        _rt("", "v1", "configmaps", "ConfigMap", True, short_names=["cm"]),
        _rt("", "v1", "secrets", "Secret", True, fields=frozenset({"type"})),
        _rt("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=["sa"]),
        _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=["sc"]),
        _rt("storage.k8s.io", "v1", "csinodes", "CSINode", False),
        _rt("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
        _rt("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
        _rt("coordination.k8s.io", "v1", "leases", "Lease", True),
        _rt("events.k8s.io", "v1", "events", "Event", True, short_names=["ev"],
            fields=_EVENTS_K8S_FIELDS, storage_key="events", stored_api_version="v1",
            field_aliases=dict(VIEW_FIELD_ALIASES)),
        _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
            short_names=["pdb"], subresources=("status",), has_status_subresource=True,
            tracks_generation=True),
        _rt("", "v1", "replicationcontrollers", "ReplicationController", True, short_names=["rc"],
            categories=["all"], subresources=("status", "scale"), has_status_subresource=True,
            tracks_generation=True),
        _rt("apps", "v1", "replicasets", "ReplicaSet", True, short_names=["rs"],
            categories=["all"], subresources=("status", "scale"), has_status_subresource=True,
            tracks_generation=True),
        _rt("apps", "v1", "deployments", "Deployment", True, short_names=["deploy"],
            categories=["all"], subresources=("status", "scale"), has_status_subresource=True,
            tracks_generation=True),
        _rt("apps", "v1", "statefulsets", "StatefulSet", True, short_names=["sts"],
            categories=["all"], subresources=("status", "scale"), has_status_subresource=True,
            tracks_generation=True),
        _rt("batch", "v1", "jobs", "Job", True, categories=["all"], subresources=("status",),
            has_status_subresource=True, tracks_generation=True),
        _rt("batch", "v1", "cronjobs", "CronJob", True, short_names=["cj"], categories=["all"],
            subresources=("status",), has_status_subresource=True, tracks_generation=True),
        _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        _rt("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=["create"]),
        _rt("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
            verbs=["create"]),
        _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False,
            short_names=["pc"]),
        _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions",
            "CustomResourceDefinition", False, short_names=["crd", "crds"],
            categories=["api-extensions"], subresources=("status",),
            has_status_subresource=True, tracks_generation=True),
        *dra_types(),
    ]


def dra_types() -> list[ResourceType]:
    """resource.k8s.io/v1 (Dynamic Resource Allocation, GA since 1.34): what kube-apiserver
    serves for it; semantics in ``sandbox/dra.py``."""
    kw: dict[str, Any] = {"returns_deleted_object": True}
    return [
        _rt("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, tracks_generation=True, **kw),
        _rt("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True,
            subresources=("status",), has_status_subresource=True, **kw),
        _rt("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, **kw),
        _rt("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, tracks_generation=True,
            fields=frozenset({"spec.nodeName", "spec.driver"}), **kw),
        # DRADeviceTaintRules (GA in 1.37): a taint added to every device the rule selects
        _rt("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False,
            subresources=("status",), has_status_subresource=True, tracks_generation=True, **kw),
    ]


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of an apiextensions.k8s.io/v1 CRD."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    all_versions = tuple(v["name"] for v in versions)
    out = []
    for v in versions:
        subs = v.get("subresources") or {}
        sub_names: tuple[str, ...] = tuple(s for s in ("status", "scale") if s in subs)
        out.append(
            ResourceType(
                group=group,
                version=v["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=namespaced,
                singular=names.get("singular") or names.get("kind", "").lower(),
                short_names=list(names.get("shortNames") or []),
                categories=list(names.get("categories") or []),
                subresources=sub_names,
                has_status_subresource="status" in subs,
                tracks_generation=True,
                returns_deleted_object=True,
                crd_version=v,
                crd_name=crd["metadata"]["name"],
                all_versions=all_versions,
            )
        )
    return out


def storage_version(crd: dict[str, Any]) -> str:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("storage"):
            return str(v["name"])
    vs = (crd.get("spec") or {}).get("versions") or [{"name": "v1"}]
    return str(vs[0]["name"])


# Preferred versions of built-in groups, in the order kube-apiserver lists them.
GROUP_ORDER = [
    "",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "batch",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "policy",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "resource.k8s.io",
    "apiextensions.k8s.io",
]
