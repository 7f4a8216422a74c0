"""Comparable views of NodeInfos and snapshots, shared by the cache tests."""

from __future__ import annotations

from typing import Any

from scheduler.cache import Cache, Snapshot
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.resources import Resource


def resource_view(r: Resource) -> tuple[Any, ...]:
    # Resource.sub leaves zeroed scalar keys behind; a rebuilt NodeInfo has none.
    scalars = tuple(sorted((k, v) for k, v in r.scalar_resources.items() if v))
    return (r.milli_cpu, r.memory, r.ephemeral_storage, r.allowed_pod_number, scalars)


def ports_view(info: NodeInfo) -> tuple[Any, ...]:
    ports = info.used_ports._ports
    return tuple(sorted((ip, tuple(sorted(entries))) for ip, entries in ports.items()))


def info_view(info: NodeInfo) -> dict[str, Any]:
    return {
        "node": info.node,
        "pods": sorted(p.uid for p in info.pods),
        "pods_with_affinity": sorted(p.uid for p in info.pods_with_affinity),
        "anti": sorted(p.uid for p in info.pods_with_required_anti_affinity),
        "ports": ports_view(info),
        "requested": resource_view(info.requested),
        "non_zero": resource_view(info.non_zero_requested),
        "allocatable": resource_view(info.allocatable),
        "pvc": dict(info.pvc_ref_counts),
        "images": {k: (v.size, v.num_nodes) for k, v in info.image_states.items()},
    }


def cache_view(cache: Cache) -> dict[str, Any]:
    """Every NodeInfo of the cache (ghost nodes included), images as num_nodes-free."""
    out = {}
    for name, info in cache._nodes.items():
        view = info_view(info)
        # The cache's own NodeInfos carry num_nodes as of their last change (as upstream);
        # the snapshot carries the live counts.  Compare names and sizes only here.
        view["images"] = {k: v[0] for k, v in view["images"].items()}
        out[name] = view
    return out


def snapshot_view(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "map": {name: info_view(info) for name, info in snapshot.node_info_map.items()},
        "list": sorted(i.name for i in snapshot.list()),
        "list_ids": sorted(id(i) for i in snapshot.list()),
        "map_ids": sorted(id(i) for i in snapshot.node_info_map.values()),
        "affinity": sorted(i.name for i in snapshot.have_pods_with_affinity()),
        "anti": sorted(i.name for i in snapshot.have_pods_with_required_anti_affinity()),
        "pvc": dict(snapshot.used_pvc_ref_counts),
    }


def comparable_snapshot(snapshot: Snapshot) -> dict[str, Any]:
    view = snapshot_view(snapshot)
    del view["list_ids"], view["map_ids"]
    return view
