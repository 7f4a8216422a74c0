"""Namespace deletion, the API server's half (kube-apiserver's namespace registry).

DELETE of a namespace does not remove it: the API server sets ``deletionTimestamp`` and
``status.phase: Terminating`` and answers with the object (200). Meanwhile creating anything
in it is 403 Forbidden (``NamespaceTerminating``, ``Registry._check_namespace``). The rest is
the namespace controller's (``nscontroller.py``): it sees the Terminating namespace through
its watch, deletes everything in it, and once nothing is left removes the ``kubernetes``
finalizer from ``spec.finalizers`` through the ``finalize`` subresource (PUT
namespaces/{name}/finalize, which changes nothing else); with no finalizers left that update
removes the namespace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.objects.labels import validate_qualified_name

from .dra import invalid_value
from .store import Entry, TypeStore
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
FINALIZER = "kubernetes"
# the finalizer names that need no domain (core's standardFinalizers)
STANDARD_FINALIZERS = frozenset({FINALIZER, "orphan", "foregroundDeletion"})


def start_deletion(reg: Registry, ts: TypeStore, e: Entry) -> Entry:
    """Mark the namespace Terminating; the namespace controller takes it from there."""
    obj = e.obj
    if obj["metadata"].get("deletionTimestamp"):
        return e
    new = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": now_iso()},
           "status": {**(obj.get("status") or {}), "phase": "Terminating"}}
    return reg.store.write(ts, new, obj)


def finalize_causes(finalizers: list[Any]) -> list[tuple[str, str, str]]:
    """ValidateNamespaceFinalizeUpdate's check of ``spec.finalizers``: each a qualified name
    (an optional DNS subdomain prefix and '/'), and one without a prefix a standard one."""
    out = []
    for i, f in enumerate(finalizers):
        path = f"spec.finalizers[{i}]"
        err = validate_qualified_name(f)
        if err:
            out.append(invalid_value(path, f, err))
        if isinstance(f, str) and "/" not in f and f not in STANDARD_FINALIZERS:
            out.append(invalid_value(path, f, "name is neither a standard finalizer name nor is it "
                                              "fully qualified"))
    return out
