"""Namespace deletion as kube-apiserver plus the namespace controller do it.

DELETE of a namespace does not remove it: the API server sets ``deletionTimestamp`` and
``status.phase: Terminating`` and answers with the object (200). The namespace controller
then deletes everything in it, and once nothing is left removes the ``kubernetes`` finalizer
from ``spec.finalizers`` (the ``/finalize`` subresource); with no finalizers left the
namespace is gone. Meanwhile creating anything in it is 403 Forbidden
(``NamespaceTerminating``). Here the controller's work starts ``Registry.namespace_delay``
seconds (default 1) after the DELETE, as a real controller acts after its informer and work
queue: a client deleting a namespace and then its contents (``kubectl delete -k``, which
deletes the Namespace first) finds them still there, as on a cluster. The namespace is
finalized when its last object goes (pods on simulated nodes terminate gracefully first).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .store import Entry, TypeStore
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")
FINALIZER = "kubernetes"


def start_deletion(reg: Registry, ts: TypeStore, e: Entry) -> Entry:
    """The API server's half: mark the namespace Terminating and hand it to the controller."""
    obj = e.obj
    name = obj["metadata"]["name"]
    if obj["metadata"].get("deletionTimestamp"):
        return e
    new = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": now_iso()},
           "status": {**(obj.get("status") or {}), "phase": "Terminating"}}
    entry = reg.store.write(ts, new, obj)
    reg.terminating_ns.add(name)
    try:
        asyncio.get_running_loop().call_later(reg.namespace_delay, _delete_contents, reg, name)
    except RuntimeError:  # no loop (synchronous use of the registry): act at once
        _delete_contents(reg, name)
    return entry


def _delete_contents(reg: Registry, ns: str) -> None:
    """The namespace controller's half: delete every namespaced object, then finalize."""
    if ns not in reg.terminating_ns:
        return
    for ots in list(reg.store.types.values()):
        if not ots.rt.namespaced or ots.rt.is_view:
            continue
        for oe in list((ots.by_ns.get(ns) or {}).values()):
            try:
                reg.delete(ots.rt, ns, oe.obj["metadata"]["name"], {"propagationPolicy": "Background"})
            except ApiError as err:
                if err.code != 404:
                    log.warning("namespace %s: cannot delete %s %s: %s", ns, ots.rt.plural,
                                oe.obj["metadata"]["name"], err.message)
    maybe_finalize(reg, ns)


def maybe_finalize(reg: Registry, ns: str) -> None:
    """Once a Terminating namespace is empty: drop the ``kubernetes`` finalizer, then (no
    finalizers left) remove the namespace."""
    if ns not in reg.terminating_ns:
        return
    for ts in reg.store.types.values():
        if ts.rt.namespaced and ts.by_ns.get(ns):
            return
    nts = reg.ts_of("", "namespaces")
    e = nts.get("", ns)
    if e is None:
        reg.terminating_ns.discard(ns)
        return
    obj = e.obj
    spec = obj.get("spec") or {}
    if FINALIZER in (spec.get("finalizers") or []):
        finalizers = [f for f in spec["finalizers"] if f != FINALIZER]
        new = {**obj, "spec": {**spec, "finalizers": finalizers}}
        e = reg.store.write(nts, new, obj)
        obj = e.obj
        if finalizers:
            return  # another finalizer's owner must remove it
    if obj["metadata"].get("finalizers"):
        return  # metadata finalizers hold the object as for any other kind
    reg.terminating_ns.discard(ns)
    reg.store.remove(nts, e)
