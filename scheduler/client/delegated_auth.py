"""Delegated authentication and authorization for /metrics, as kube-scheduler does it.

With ``--authentication-token-webhook`` a scrape must carry a bearer token; the API server
decides who it belongs to (TokenReview) and whether that user may ``get`` the non-resource
path ``/metrics`` (SubjectAccessReview).  Answers are cached briefly (10 s, like the apiserver's
webhook cache) so Prometheus scraping every few seconds does not double the API traffic.
Health endpoints stay open: kubelets probe them without credentials.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web

from scheduler.client.api import ApiClient, ApiConnectionError

log = structlog.get_logger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_TTL_SECONDS = 10.0


class DelegatedAuthorizer:
    def __init__(
        self,
        client: ApiClient,
        *,
        path: str = "/metrics",
        verb: str = "get",
        clock: Callable[[], float] = time.monotonic,
        ttl: float = CACHE_TTL_SECONDS,
    ) -> None:
        self._client = client
        self._path = path
        self._verb = verb
        self._clock = clock
        self._ttl = ttl
        # sha256(token) -> (expires, refusal or None)
        self._cache: dict[str, tuple[float, tuple[int, str] | None]] = {}

    async def authorize(self, request: web.Request) -> tuple[int, str] | None:
        """None when allowed; otherwise (HTTP status, message) for the response."""
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401, "Unauthorized"
        token = token.strip()
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(key)
        now = self._clock()
        if cached is not None and cached[0] > now:
            return cached[1]
        verdict = await self._review(token)
        if verdict is None or verdict[0] in (401, 403):
            self._cache[key] = (now + self._ttl, verdict)
            if len(self._cache) > 1024:
                self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        return verdict

    async def _review(self, token: str) -> tuple[int, str] | None:
        try:
            review = await self._client.request(
                "POST", TOKEN_REVIEWS,
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": token}},
            )
        except ApiConnectionError as exc:
            log.warning("TokenReview failed", error=str(exc))
            return 401, "Unauthorized"
        if review.status >= 300:
            log.warning("TokenReview refused", status=review.status)
            return 401, "Unauthorized"
        status: dict[str, Any] = (review.body or {}).get("status") or {}
        if not status.get("authenticated"):
            return 401, "Unauthorized"
        user: dict[str, Any] = status.get("user") or {}
        username = str(user.get("username") or "")
        spec: dict[str, Any] = {
            "user": username,
            "groups": list(user.get("groups") or []),
            "nonResourceAttributes": {"path": self._path, "verb": self._verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        try:
            sar = await self._client.request(
                "POST", SUBJECT_ACCESS_REVIEWS,
                body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                      "spec": spec},
            )
        except ApiConnectionError as exc:
            log.warning("SubjectAccessReview failed", error=str(exc))
            return 500, "Internal Server Error: authorization check failed"
        if sar.status >= 300:
            log.warning("SubjectAccessReview refused", status=sar.status)
            return 500, "Internal Server Error: authorization check failed"
        if ((sar.body or {}).get("status") or {}).get("allowed"):
            return None
        return 403, f'Forbidden: User "{username}" cannot {self._verb} path "{self._path}"'
