"""CRD registration: a created, updated or deleted CRD changes what the catalog serves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .resources import storage_version, types_from_crd

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]


def register_crd(reg: Registry, crd: Obj, prev: Obj | None) -> None:
    name = crd["metadata"]["name"]
    for old in reg.catalog.crd_types.pop(name, []):
        reg.catalog.by_gvr.pop((old.group, old.version, old.plural), None)
    new_types = types_from_crd(crd)
    for rt in new_types:
        reg.catalog.add(rt)
    reg.catalog.crd_types[name] = new_types
    if new_types:
        ts = reg.store.types.get(new_types[0].key)
        if ts is not None:
            ts.rt = next((t for t in new_types if t.version == storage_version(crd)), new_types[0])
    if reg.on_crd_change:
        reg.on_crd_change()


def drop_crd(reg: Registry, crd: Obj) -> None:
    name = crd["metadata"]["name"]
    types = reg.catalog.crd_types.pop(name, [])
    for rt in types:
        reg.catalog.by_gvr.pop((rt.group, rt.version, rt.plural), None)
    if types:
        ts = reg.store.types.get(types[0].key)
        if ts is not None:
            for e in list(ts.entries()):
                reg.store.remove(ts, e)
            reg.store.drop_type(types[0])
    if reg.on_crd_change:
        reg.on_crd_change()
