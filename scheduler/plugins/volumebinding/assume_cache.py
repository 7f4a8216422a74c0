"""An assume cache over the PV and PVC informers.

Why: Reserve promises a PV to a claim (or a node to a provisioning claim) long before the API
server and then the informer reflect it.  Until they do, every later scheduling cycle must see
the promise, or two pods would be handed the same PV.  The cache keeps, per object, the
in-memory copy written by Reserve on top of what the informer holds.

It is passive (like upstream's newer ``passiveAssumeCache``): it never receives informer
events.  An assumed copy carries the resourceVersion of the informer object it was made from;
as soon as the lister holds a different version (the informer caught up with our write, or
someone else changed the object) or the object is gone, the assumed copy is dropped and the
informer's object wins.  ``restore`` drops the copy explicitly (Unreserve, failed writes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from scheduler.framework.interfaces import ObjectLister
from scheduler.plugins.volumebinding.matching import name_of, namespace_of, resource_version

__all__ = ["AssumeCache", "AssumeError", "pv_cache", "pvc_cache"]


class AssumeError(Exception):
    """The object to assume is unknown to the informer or out of sync with it."""


class AssumeCache:
    """Assumed copies of one resource's objects, keyed like the informer (``name`` or ``ns/name``)."""

    def __init__(self, listers: Callable[[], ObjectLister], resource: str, *,
                 namespaced: bool, description: str) -> None:
        # ``listers`` is called each time: the Handle's listers may be swapped (tests, relist).
        self._listers = listers
        self._resource = resource
        self._namespaced = namespaced
        self._description = description
        self._assumed: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def key_of(self, obj: dict[str, Any]) -> str:
        return f"{namespace_of(obj)}/{name_of(obj)}" if self._namespaced else name_of(obj)

    def _split(self, key: str) -> tuple[str, str]:
        if self._namespaced:
            ns, _, name = key.partition("/")
            return ns, name
        return "", key

    def get_api_obj(self, key: str) -> dict[str, Any] | None:
        """The informer's version of the object (None if the informer does not have it)."""
        ns, name = self._split(key)
        return self._listers().get(self._resource, ns, name)

    def _latest(self, key: str, api_obj: dict[str, Any] | None) -> dict[str, Any] | None:
        # Caller holds the lock.
        assumed = self._assumed.get(key)
        if assumed is None:
            return api_obj
        if api_obj is None or resource_version(api_obj) != resource_version(assumed):
            # The informer moved on (or the object is gone): the assumption has expired.
            del self._assumed[key]
            return api_obj
        return assumed

    def get(self, key: str) -> dict[str, Any] | None:
        """The assumed copy while it is current, else the informer's object."""
        api_obj = self.get_api_obj(key)
        with self._lock:
            return self._latest(key, api_obj)

    def list(self, predicate: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        """Informer objects (filtered by ``predicate`` on the informer's version), assumed
        copies substituted where current."""
        objs = self._listers().list(self._resource)
        out: list[dict[str, Any]] = []
        with self._lock:
            for obj in objs:
                if predicate is not None and not predicate(obj):
                    continue
                latest = self._latest(self.key_of(obj), obj)
                if latest is not None:
                    out.append(latest)
        return out

    def assume(self, obj: dict[str, Any]) -> None:
        """Record ``obj`` (a modified copy of the informer's object, same resourceVersion)."""
        key = self.key_of(obj)
        stored = self.get_api_obj(key)
        if stored is None:
            raise AssumeError(f"could not find {self._description} {key!r}")
        if resource_version(stored) != resource_version(obj):
            raise AssumeError(
                f"{self._description} {key!r} is out of sync "
                f"(stored: {resource_version(stored)}, assume: {resource_version(obj)})")
        with self._lock:
            self._assumed[key] = obj

    def restore(self, key: str, version: str | None = None) -> None:
        """Forget the assumed copy of ``key`` (only the one made at ``version``, if given)."""
        with self._lock:
            assumed = self._assumed.get(key)
            if assumed is None:
                return
            if version is None or resource_version(assumed) == version:
                del self._assumed[key]

    def is_assumed(self, key: str) -> bool:
        """Whether a current assumed copy exists (expired copies are dropped first)."""
        return self.get(key) is not None and key in self._assumed

    def __len__(self) -> int:
        with self._lock:
            return len(self._assumed)


def pv_cache(listers: Callable[[], ObjectLister]) -> AssumeCache:
    return AssumeCache(listers, "persistentvolumes", namespaced=False,
                       description="v1.PersistentVolume")


def pvc_cache(listers: Callable[[], ObjectLister]) -> AssumeCache:
    return AssumeCache(listers, "persistentvolumeclaims", namespaced=True,
                       description="v1.PersistentVolumeClaim")
