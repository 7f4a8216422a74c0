"""Namespace deletion, the API server's half (kube-apiserver's namespace registry).

DELETE of a namespace does not remove it: the API server sets ``deletionTimestamp`` and
``status.phase: Terminating`` and answers with the object (200). Meanwhile creating anything
in it is 403 Forbidden (``NamespaceTerminating``, ``Registry._check_namespace``). The rest is
the namespace controller's (``nscontroller.py``): it sees the Terminating namespace through
its watch, deletes everything in it, and once nothing is left removes the ``kubernetes``
finalizer from ``spec.finalizers`` through the ``finalize`` subresource (PUT
namespaces/{name}/finalize: an update that, unlike the plain one, takes the spec from the body;
only the status is kept); with no finalizers left that update removes the namespace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.objects.labels import validate_qualified_name

from . import errors, validation
from .dra import invalid_value
from .resources import ResourceType
from .store import Entry, TypeStore
from .util import now_iso

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
FINALIZER = "kubernetes"
NAME_LABEL = "kubernetes.io/metadata.name"
# the finalizer names that need no domain (core's standardFinalizers)
STANDARD_FINALIZERS = frozenset({FINALIZER, "orphan", "foregroundDeletion"})


def name_labelled(labels: Any, name: str) -> dict[str, Any]:
    """A namespace's labels with ``kubernetes.io/metadata.name`` set to its name, as the
    namespace strategy's Canonicalize sets it on every create and update."""
    return {**(labels if isinstance(labels, dict) else {}), NAME_LABEL: name}


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


def finalize_spec(body: Obj, rt: ResourceType, name: str) -> Obj:
    """The spec a PUT namespaces/{name}/finalize stores: the body's, its finalizers validated
    (400 when they do not decode, 422 when a name is invalid); empty finalizers are omitted
    as Go's omitempty does."""
    spec = body.get("spec")
    fins = spec.get("finalizers") if isinstance(spec, dict) else None
    if fins is not None and not isinstance(fins, list):
        raise errors.bad_request(
            f'Namespace in version "v1" cannot be handled as a Namespace: json: cannot unmarshal '
            f"{type(fins).__name__} into Go struct field NamespaceSpec.spec.finalizers of type "
            "[]v1.FinalizerName")
    validation.raise_if(finalize_causes(fins or []), rt, name)
    return {"finalizers": list(fins)} if fins else {}
