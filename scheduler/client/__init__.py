"""API connection (kubeconfig / in-cluster), HTTP client, informers, event recorder, pod status.

The scheduler talks to any API server over HTTP through this package only.
"""

from scheduler.client.api import (
    AlreadyExists,
    ApiClient,
    ApiConnectionError,
    ApiError,
    ApiResponse,
    Backoff,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    RetryPolicy,
    ServerError,
    TokenBucket,
    TooManyRequests,
    Unauthorized,
    error_for,
    raise_for_status,
    resource_path,
)
from scheduler.client.connection import ConfigurationError, ConnectionConfig, load_connection
from scheduler.client.events import EventRecorder
from scheduler.client.informer import (
    DEFAULT_RESOURCES,
    RESOURCES,
    DeletedFinalStateUnknown,
    Informer,
    InformerFactory,
    Listers,
    Store,
    object_key,
)
from scheduler.client.pod_status import update_pod_condition

__all__ = [
    "DEFAULT_RESOURCES",
    "RESOURCES",
    "AlreadyExists",
    "ApiClient",
    "ApiConnectionError",
    "ApiError",
    "ApiResponse",
    "Backoff",
    "BadRequest",
    "ConfigurationError",
    "Conflict",
    "ConnectionConfig",
    "DeletedFinalStateUnknown",
    "EventRecorder",
    "Forbidden",
    "Gone",
    "Informer",
    "InformerFactory",
    "Invalid",
    "Listers",
    "NotFound",
    "RetryPolicy",
    "ServerError",
    "Store",
    "TokenBucket",
    "TooManyRequests",
    "Unauthorized",
    "error_for",
    "load_connection",
    "object_key",
    "raise_for_status",
    "resource_path",
    "update_pod_condition",
]
