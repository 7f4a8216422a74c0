"""Legacy discovery documents (/api, /apis, /api/v1, /apis/<g>/<v>, /version).

Aggregated discovery (``as=APIGroupDiscoveryList``) is deliberately not implemented: answering
the legacy documents as plain ``application/json`` makes client-go (kubectl) fall back to the
legacy per-group-version requests, which is what kube-apiserver did before 1.26.
"""

from __future__ import annotations

from typing import Any

from .catalog import Catalog
from .resources import GROUP_ORDER, ResourceType

Obj = dict[str, Any]

VERSION_INFO: Obj = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36",
    "gitVersion": "v1.37.0-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUB_VERBS = {"status": ["get", "patch", "update"], "finalize": ["update"],
              "binding": ["create"], "eviction": ["create"], "scale": ["get", "patch", "update"]}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_order(cat: Catalog) -> list[str]:
    groups = [g for g in cat.group_versions() if g]
    known = [g for g in GROUP_ORDER if g in groups]
    return known + sorted(g for g in groups if g not in GROUP_ORDER)


def _preferred(cat: Catalog, group: str) -> str:
    for types in cat.crd_types.values():
        if types and types[0].group == group:
            # kube sorts CRD versions by kube-aware version priority; served order is close enough
            return types[0].version
    return cat.group_versions()[group][0]


def api_group(cat: Catalog, group: str) -> Obj:
    versions = cat.group_versions()[group]
    pref = _preferred(cat, group)
    ordered = [pref] + [v for v in versions if v != pref]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered],
        "preferredVersion": {"groupVersion": f"{group}/{pref}", "version": pref},
    }


def api_group_list(cat: Catalog) -> Obj:
    out = api_group_list_groups(cat)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}


def api_group_list_groups(cat: Catalog) -> list[Obj]:
    groups = []
    for g in _group_order(cat):
        d = api_group(cat, g)
        d.pop("kind")
        d.pop("apiVersion")
        groups.append(d)
    return groups


def _resource_entry(rt: ResourceType) -> list[Obj]:
    main: Obj = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub in rt.subresources:
        e: Obj = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                  "kind": rt.kind, "verbs": _SUB_VERBS.get(sub, ["get"])}
        if sub == "binding":
            e["kind"] = "Binding"
        elif sub == "eviction":
            e.update({"group": "policy", "version": "v1", "kind": "Eviction"})
        elif sub == "scale":
            e.update({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        out.append(e)
    return out


def api_resource_list(cat: Catalog, group: str, version: str) -> Obj:
    resources: list[Obj] = []
    types = sorted(cat.in_group_version(group, version), key=lambda r: r.plural)
    for rt in types:
        resources.extend(_resource_entry(rt))
    if group == "" and version == "v1":
        resources.append({"name": "bindings", "singularName": "binding", "namespaced": True,
                          "kind": "Binding", "verbs": ["create"]})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
