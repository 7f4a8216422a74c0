"""The default constraints' selector of a pod (upstream ``DefaultSelector``), kept.

With ``defaultingType: System`` (the default) every pod without constraints of its own asks,
in PreScore, for the selector of the Services, ReplicationController, ReplicaSet and
StatefulSet that select it.  That answer is a function of the pod's namespace, labels and
controller reference and of those objects in its namespace, so ``DefaultSelectors`` keeps it
per (namespace, labels, controller) and drops a namespace's answers at every event of one of
those objects there, which the informer delivers right after changing its store (listers
with events: ``ObjectWatcher``).  Listers without events, or without an informer for one of
the four resources, get no memo: every call reads them, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.interfaces import ObjectLister, ObjectWatcher
from scheduler.objects.labels import LabelSelector
from scheduler.plugins.podtopologyspread.common import _NO_FIELDS, Constraint, default_selector

__all__ = ["DEFAULTING_RESOURCES", "MAX_KEPT_PER_NAMESPACE", "DefaultSelectors", "Kept"]

# What default_selector reads besides the pod.
DEFAULTING_RESOURCES = ("services", "replicationcontrollers", "replicasets", "statefulsets")

# Answers kept per namespace (pods of distinct labels or controllers); dropped when full.
MAX_KEPT_PER_NAMESPACE = 1024

_Key = tuple[frozenset[tuple[str, str]], tuple[str, str, str] | None]


class Kept:
    """One pod shape's default selector and the default constraints built on it (by
    whenUnsatisfiable; the caller fills them)."""

    __slots__ = ("selector", "constraints")

    def __init__(self, selector: LabelSelector) -> None:
        self.selector = selector
        self.constraints: dict[str, list[Constraint]] = {}


class DefaultSelectors:
    __slots__ = ("_listers", "_watching", "_kept", "hits", "misses")

    def __init__(self, listers: ObjectLister) -> None:
        self._listers = listers
        self._watching: bool | None = None  # subscribed on first use
        self._kept: dict[str, dict[_Key, Kept]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, pod: Mapping[str, Any]) -> Kept:
        """The pod's default selector (and its kept constraints): a fresh ``Kept`` when
        nothing can be kept."""
        if self._watching is None:
            self._watching = self._subscribe()
        if not self._watching:
            self.misses += 1
            return Kept(default_selector(pod, self._listers))
        meta = pod.get("metadata") or _NO_FIELDS
        key = _key_of(meta)
        if key is None:  # labels or references that are not plain strings
            self.misses += 1
            return Kept(default_selector(pod, self._listers))
        namespace = str(meta.get("namespace") or "")
        kept_in_namespace = self._kept.get(namespace)
        if kept_in_namespace is None:
            kept_in_namespace = self._kept[namespace] = {}
        kept = kept_in_namespace.get(key)
        if kept is not None:
            self.hits += 1
            return kept
        self.misses += 1
        kept = Kept(default_selector(pod, self._listers))
        if len(kept_in_namespace) >= MAX_KEPT_PER_NAMESPACE:
            kept_in_namespace.clear()
        kept_in_namespace[key] = kept
        return kept

    def _subscribe(self) -> bool:
        listers = self._listers
        if not isinstance(listers, ObjectWatcher):
            return False
        for resource in DEFAULTING_RESOURCES:
            try:
                listers.watch(resource, on_add=self._changed, on_update=self._updated,
                              on_delete=self._changed)
            except KeyError:  # no informer for it: nothing tells when to forget
                return False
        return True

    def _changed(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not isinstance(meta, Mapping):
            self._kept.clear()
            return
        self._kept.pop(str(meta.get("namespace") or ""), None)

    def _updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._changed(old)
        self._changed(new)


def _key_of(meta: Mapping[str, Any]) -> _Key | None:
    """What default_selector reads of the pod besides its namespace: its labels and its
    controller reference (the first ``controller: true`` one)."""
    labels = meta.get("labels") or _NO_FIELDS
    try:
        frozen = frozenset(labels.items())
    except (AttributeError, TypeError):
        return None
    owner: tuple[str, str, str] | None = None
    refs = meta.get("ownerReferences")
    if refs:
        if not isinstance(refs, (list, tuple)):
            return None
        for ref in refs:
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                owner = (str(ref.get("apiVersion") or ""), str(ref.get("kind")),
                         str(ref.get("name") or ""))
                break
    return frozen, owner
