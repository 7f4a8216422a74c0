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

import re
from typing import TYPE_CHECKING, Any

from .dra import DNS_SUBDOMAIN_MSG, invalid_value
from .store import Entry, TypeStore
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
FINALIZER = "kubernetes"
# the finalizer names that need no domain (core's standardFinalizers)
STANDARD_FINALIZERS = frozenset({FINALIZER, "orphan", "foregroundDeletion"})
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
             "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


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
        if not isinstance(f, str):
            out.append(invalid_value(path, f, "must be a string"))
            continue
        prefix, slash, name = f.rpartition("/")
        if slash and "/" in prefix:
            out.append(invalid_value(path, f, f"a qualified name {_NAME_MSG} with an optional DNS "
                                              "subdomain prefix and '/' (e.g. 'example.com/MyName')"))
            continue
        if slash and not prefix:
            out.append(invalid_value(path, f, "prefix part must be non-empty"))
        elif slash and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
            out.append(invalid_value(path, f, f"prefix part {DNS_SUBDOMAIN_MSG}"))
        if not name:
            out.append(invalid_value(path, f, "name part must be non-empty"))
        elif len(name) > 63:
            out.append(invalid_value(path, f, "name part must be no more than 63 characters"))
        elif not _NAME.match(name):
            out.append(invalid_value(path, f, f"name part {_NAME_MSG}"))
        if not slash and f not in STANDARD_FINALIZERS:
            out.append(invalid_value(path, f, "name is neither a standard finalizer name nor is it "
                                              "fully qualified"))
    return out
