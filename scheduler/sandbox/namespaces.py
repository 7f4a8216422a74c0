"""Namespace deletion, the API server's half (kube-apiserver's namespace registry).

DELETE of a namespace does not remove it: the API server sets ``deletionTimestamp`` and
``status.phase: Terminating`` and answers with the object (200). Meanwhile creating anything
in it is 403 Forbidden (``NamespaceTerminating``, ``Registry._check_namespace``). The rest is
the namespace controller's (``nscontroller.py``): it sees the Terminating namespace through
its watch, deletes everything in it, and once nothing is left removes the ``kubernetes``
finalizer from ``spec.finalizers``; with no finalizers left the namespace is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .store import Entry, TypeStore
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
FINALIZER = "kubernetes"


def start_deletion(reg: Registry, ts: TypeStore, e: Entry) -> Entry:
    """Mark the namespace Terminating; the namespace controller takes it from there."""
    obj = e.obj
    if obj["metadata"].get("deletionTimestamp"):
        return e
    new = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": now_iso()},
           "status": {**(obj.get("status") or {}), "phase": "Terminating"}}
    return reg.store.write(ts, new, obj)
