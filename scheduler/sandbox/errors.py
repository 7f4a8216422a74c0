"""Kubernetes ``Status`` error objects, built the way kube-apiserver builds them.

Clients branch on ``code`` and ``reason`` (the official client raises ``ApiException`` with
the status, kubectl prints ``message``), so the messages follow upstream's wording
(``k8s.io/apimachinery/pkg/api/errors``) closely.
"""

from __future__ import annotations

from typing import Any

import orjson


class ApiError(Exception):
    """An error answered to the client as a ``Status`` object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, details=self.details)

    def body(self) -> bytes:
        return orjson.dumps(self.status())


def status_object(
    code: int, reason: str, message: str, *, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    st: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        st["details"] = details
    st["code"] = code
    return st


def success_status(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    st: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        st["details"] = details
    st["code"] = code
    return st


def qualified(resource: str, group: str) -> str:
    """``pods`` or ``podgroups.scheduling.x-k8s.io`` as upstream's GroupResource.String()."""
    return f"{resource}.{group}" if group else resource


def _details(name: str, resource: str, group: str) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = resource
    return d


def not_found(resource: str, name: str, *, group: str = "") -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        details=_details(name, resource, group),
    )


def not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def already_exists(resource: str, name: str, *, group: str = "") -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        details=_details(name, resource, group),
    )


def conflict(resource: str, name: str, why: str, *, group: str = "") -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_details(name, resource, group),
    )


STALE_RV = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(
    kind: str, name: str, causes: list[tuple[str, str, str]], *, group: str = ""
) -> ApiError:
    """422 Invalid. ``causes`` are ``(field, reason, message)`` like field.ErrorList."""
    qkind = f"{kind}.{group}" if group else kind
    parts = [f"{field}: {msg}" for field, _, msg in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [
        {"reason": reason, "message": msg, "field": field} for field, reason, msg in causes
    ]
    return ApiError(422, "Invalid", f'{qkind} "{name}" is invalid: {joined}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(resource: str, name: str, why: str, *, group: str = "") -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{qualified(resource, group)} "{name}" is forbidden: {why}',
        details=_details(name, resource, group),
    )


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests(message: str = "Too many requests, please try again later.", *, retry_after: int = 1) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        message,
        details={"retryAfterSeconds": retry_after} if retry_after else {},
        retry_after=retry_after or None,
    )


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format - accepted media types include: '
        f'application/json-patch+json, application/merge-patch+json, '
        f'application/apply-patch+yaml, application/strategic-merge-patch+json; got "{content_type}"',
    )


def unsupported_body_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )


def reason_for_code(code: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Expired",
        415: "UnsupportedMediaType",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
    }.get(code, "Unknown")
