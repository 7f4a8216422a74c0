"""The ElasticQuota status controller: keeps ``status.used`` of every ElasticQuota equal to
the requests of the running pods it covers, as scheduler-plugins' controller reports it (one
entry per resource its ``min`` or ``max`` names, 0 included).

``used`` is recomputed from the pods the scheduler's informer holds, never trusted from the
old status: after a restart the first pass recounts every quota. Events on pods and on
quotas mark the quotas they touch; one named task patches ``status`` (a merge patch of the
status subresource) only where the count changed. A malformed quota is left alone (the
scheduler's event handlers log it once, naming the field). Runs beside the scheduler while it
leads, when a profile enables CapacityScheduling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import structlog

from scheduler.client.api import ApiClient, ApiError, NotFound, resource_path
from scheduler.client.informer import RESOURCES, InformerFactory
from scheduler.objects.errors import ObjectError
from scheduler.objects.labels import parse_selector_string
from scheduler.objects.pod import pod_requests
from scheduler.objects.quantity import QuantityError, parse_quantity
from scheduler.objects.resources import Resource
from scheduler.objects.validation import validate_object
from scheduler.plugins.capacityscheduling.plugin import claim_devices, claim_names
from scheduler.plugins.capacityscheduling.quota import format_amount

__all__ = ["ElasticQuotaController", "compute_used", "format_amount", "same_usage"]

log = structlog.get_logger(__name__)

GROUP_VERSION = "scheduling.x-k8s.io/v1alpha1"
PLURAL = "elasticquotas"
NAMESPACE_SELECTOR_ANNOTATION = "scheduling.x-k8s.io/namespace-selector"
RETRY_SECONDS = 1.0

Sleep = Callable[[float], Awaitable[None]]
def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def resource_names(quota: Mapping[str, Any]) -> list[str]:
    spec = quota.get("spec") or {}
    return sorted(set(spec.get("min") or {}) | set(spec.get("max") or {}))


def covered_namespaces(quota: Mapping[str, Any], namespaces: Iterable[Mapping[str, Any]]
                       ) -> frozenset[str]:
    """The quota's namespace, and those its namespace-selector annotation selects."""
    own = str(_meta(quota).get("namespace") or "")
    raw = (_meta(quota).get("annotations") or {}).get(NAMESPACE_SELECTOR_ANNOTATION)
    if not raw:
        return frozenset({own})
    try:
        selector = parse_selector_string(str(raw))
    except ValueError:
        return frozenset({own})
    out = {own}
    for ns in namespaces:
        if selector.matches(_meta(ns).get("labels") or {}):
            out.add(str(_meta(ns).get("name") or ""))
    return frozenset(out)


def compute_used(quota: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *,
                 namespaces: frozenset[str] | None = None,
                 claim: Callable[[str, str], Mapping[str, Any] | None] | None = None,
                 ) -> dict[str, str]:
    """``status.used``: the requests of the covered namespaces' Running pods, per resource
    the quota names (upstream counts Running pods only), DRA devices of their
    ResourceClaims included when ``claim`` (namespace, name) -> claim is given."""
    covered = namespaces if namespaces is not None else frozenset(
        {str(_meta(quota).get("namespace") or "")})
    total = Resource()
    for pod in pods:
        if str(_meta(pod).get("namespace") or "") not in covered:
            continue
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        try:
            total.add(pod_requests(pod))
        except (ObjectError, QuantityError, ValueError, TypeError, AttributeError):
            continue  # a malformed pod: the scheduler's handlers report it
        if claim is not None:
            ns = str(_meta(pod).get("namespace") or "")
            for name in claim_names(pod):
                obj = claim(ns, name)
                if obj is not None:
                    for resource, count in claim_devices(obj).items():
                        total.add_amount(resource, count)
    return {name: format_amount(name, total.get(name)) for name in resource_names(quota)}


def same_usage(current: Any, wanted: Mapping[str, str]) -> bool:
    """Whether the status already says ``wanted`` (quantities compared by value)."""
    if not isinstance(current, Mapping) or set(current) != set(wanted):
        return False
    try:
        return all(parse_quantity(current[k]) == parse_quantity(v) for k, v in wanted.items())
    except (QuantityError, TypeError, ValueError):
        return False


class ElasticQuotaController:
    """Marks quotas dirty on informer events; :meth:`run` writes their ``status.used``."""

    def __init__(self, informers: InformerFactory, client: ApiClient, *,
                 sleep: Sleep = asyncio.sleep) -> None:
        self._client = client
        self._sleep = sleep
        self._pods = informers.informer("pods")
        self._quotas = informers.informer(PLURAL)
        self._namespaces = informers.informer("namespaces")
        self._claims = informers.informer("resourceclaims") if "resourceclaims" in RESOURCES else None
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self.patches = 0
        self._quotas.add_handler(self._on_quota, lambda old, new: self._on_quota(new), None)
        self._pods.add_handler(self._on_pod, lambda old, new: self._on_pod(new), self._on_pod)
        self._namespaces.add_handler(None, lambda old, new: self._mark_all(), None)

    # --- events ----------------------------------------------------------------------------

    def _mark(self, key: str) -> None:
        self._dirty.add(key)
        self._wake.set()

    def _mark_all(self) -> None:
        for q in self._quotas.store.list():
            self._mark(_key(q))

    def _on_quota(self, quota: Any) -> None:
        if isinstance(quota, Mapping):
            self._mark(_key(quota))

    def _on_pod(self, pod: Any) -> None:
        pod = getattr(pod, "obj", pod)  # a DeletedFinalStateUnknown carries the last state
        if not isinstance(pod, Mapping):
            return
        ns = str(_meta(pod).get("namespace") or "")
        namespaces = self._namespaces.store.list()
        for q in self._quotas.store.list():
            if ns in covered_namespaces(q, namespaces):
                self._mark(_key(q))

    # --- reconcile -------------------------------------------------------------------------

    async def reconcile(self, key: str) -> bool:
        """Write one quota's status.used if it changed; False when the API call failed."""
        quota = self._quotas.store.get_by_key(key)
        if quota is None or validate_object("ElasticQuota", quota) is not None:
            return True
        covered = covered_namespaces(quota, self._namespaces.store.list())
        pods = [p for ns in sorted(covered) for p in self._pods.store.list(ns)]
        claims = self._claims
        used = compute_used(
            quota, pods, namespaces=covered,
            claim=None if claims is None else (
                lambda ns, name: claims.store.get_by_key(f"{ns}/{name}")))
        current = (quota.get("status") or {}).get("used")
        if same_usage(current, used):
            return True
        patch: dict[str, Any] = dict(used)
        for stale in set(current or {}) - set(used) if isinstance(current, Mapping) else ():
            patch[stale] = None
        meta = _meta(quota)
        path = resource_path(GROUP_VERSION, PLURAL, str(meta.get("namespace") or ""),
                             str(meta.get("name") or ""), "status")
        try:
            await self._client.patch(path, {"status": {"used": patch}}, patch_type="merge")
        except NotFound:
            return True  # deleted meanwhile
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            log.warning("ElasticQuota status not written; will retry", quota=key, error=str(exc))
            return False
        self.patches += 1
        log.debug("ElasticQuota status written", quota=key, used=used)
        return True

    async def run(self, *, stop: asyncio.Event | None = None, iterations: int | None = None) -> None:
        """Reconcile dirty quotas until ``stop`` is set (or ``iterations`` passes ran)."""
        done = 0
        while (iterations is None or done < iterations) and not (stop and stop.is_set()):
            if not self._dirty:
                waiter = asyncio.ensure_future(self._wake.wait())
                stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
                try:
                    await asyncio.wait([f for f in (waiter, stopper) if f is not None],
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for f in (waiter, stopper):
                        if f is not None:
                            f.cancel()
                if stop is not None and stop.is_set():
                    return
            self._wake.clear()
            batch, self._dirty = self._dirty, set()
            failed = False
            for key in sorted(batch):
                if not await self.reconcile(key):
                    self._dirty.add(key)
                    failed = True
            done += 1
            if failed:
                await self._sleep(RETRY_SECONDS)


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{ns}/{name}" if ns else str(name or "")
