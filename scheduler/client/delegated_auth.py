"""Delegated authentication and authorization for the endpoint server, as kube-scheduler does it.

Every request to port 10259 except the probes must carry a bearer token; the API server decides
who it belongs to (TokenReview) and whether that user may use the request's verb on the
non-resource path, e.g. ``get`` on ``/metrics`` or ``/debug/queue`` (SubjectAccessReview).
Answers are cached briefly (10 s, like the delegating authenticator's and authorizer's caches)
so Prometheus scraping every few seconds does not double the API traffic.

``DelegatedAuth`` is the server's ``RequestGuard``; either half can be switched off
(``--authentication-token-webhook=false``, ``--authorization-mode=AlwaysAllow``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.client.api import ApiClient, ApiConnectionError

log = structlog.get_logger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_TTL_SECONDS = 10.0
CACHE_MAX_ENTRIES = 1024

UNAUTHORIZED = (401, "Unauthorized")
AUTHORIZATION_FAILED = (500, "Internal Server Error: authorization check failed")


class _TTLCache:
    """Definite answers for ``ttl`` seconds; expired entries pruned when it grows."""

    def __init__(self, clock: Callable[[], float], ttl: float) -> None:
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> tuple[bool, Any]:
        hit = self._entries.get(key)
        if hit is not None and hit[0] > self._clock():
            return True, hit[1]
        return False, None

    def put(self, key: Any, value: Any) -> None:
        now = self._clock()
        self._entries[key] = (now + self._ttl, value)
        if len(self._entries) > CACHE_MAX_ENTRIES:
            self._entries = {k: v for k, v in self._entries.items() if v[0] > now}


class DelegatedAuth:
    def __init__(
        self,
        client: ApiClient,
        *,
        authentication: bool = True,
        authorization: bool = True,
        clock: Callable[[], float] = time.monotonic,
        ttl: float = CACHE_TTL_SECONDS,
    ) -> None:
        if authorization and not authentication:
            raise ValueError("authorization needs authentication (a user to authorize)")
        self._client = client
        self.authentication = authentication
        self.authorization = authorization
        self._users = _TTLCache(clock, ttl)  # sha256(token) -> user dict, or None if refused
        self._decisions = _TTLCache(clock, ttl)  # (user, groups, verb, path) -> (allowed, reason)

    async def __call__(self, token: str | None, verb: str, path: str) -> tuple[int, str] | None:
        """None when the request may be served; otherwise (HTTP status, message)."""
        if not self.authentication:
            return None
        if token is None:
            return UNAUTHORIZED
        key = hashlib.sha256(token.encode()).hexdigest()
        cached, user = self._users.get(key)
        if not cached:
            definite, user = await self._token_review(token)
            if definite:
                self._users.put(key, user)
        if user is None:
            return UNAUTHORIZED
        if not self.authorization:
            return None
        return await self._authorize(user, verb, path)

    async def _token_review(self, token: str) -> tuple[bool, dict[str, Any] | None]:
        """(definite answer?, the user or None)."""
        try:
            review = await self._client.request(
                "POST", TOKEN_REVIEWS,
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": token}},
            )
        except ApiConnectionError as exc:
            log.warning("TokenReview failed", error=str(exc))
            return False, None
        if review.status >= 300:
            log.warning("TokenReview refused", status=review.status)
            return False, None
        status: dict[str, Any] = (review.body or {}).get("status") or {}
        if not status.get("authenticated"):
            return True, None
        user: dict[str, Any] = status.get("user") or {}
        return True, user

    async def _authorize(self, user: dict[str, Any], verb: str,
                         path: str) -> tuple[int, str] | None:
        username = str(user.get("username") or "")
        groups = [str(g) for g in user.get("groups") or []]
        key = (username, tuple(groups), verb, path)
        cached, allowed = self._decisions.get(key)
        if not cached:
            spec: dict[str, Any] = {
                "user": username, "groups": groups,
                "nonResourceAttributes": {"path": path, "verb": verb},
            }
            if user.get("uid"):
                spec["uid"] = user["uid"]
            if user.get("extra"):
                spec["extra"] = user["extra"]
            try:
                sar = await self._client.request(
                    "POST", SUBJECT_ACCESS_REVIEWS,
                    body={"apiVersion": "authorization.k8s.io/v1",
                          "kind": "SubjectAccessReview", "spec": spec},
                )
            except ApiConnectionError as exc:
                log.warning("SubjectAccessReview failed", error=str(exc))
                return AUTHORIZATION_FAILED
            if sar.status >= 300:
                log.warning("SubjectAccessReview refused", status=sar.status)
                return AUTHORIZATION_FAILED
            allowed = bool(((sar.body or {}).get("status") or {}).get("allowed"))
            self._decisions.put(key, allowed)
        if allowed:
            return None
        return 403, f'Forbidden: User "{username}" cannot {verb} path "{path}"'
