"""DefaultBinder: binds a pod by POSTing a v1.Binding to ``pods/{name}/binding``.

409 means another scheduler (or a retry) bound it first, 404 that the pod is gone; both are
carried as typed errors inside ``Status(ERROR)`` so the binding cycle can forget the pod
instead of retrying it.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import AlreadyBoundError, PodGoneError
from scheduler.framework.interfaces import BindPlugin, Handle, PluginArgs
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.DEFAULT_BINDER

BINDING_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/binding"


def binding_body(pod_info: PodInfo, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": pod_info.name,
            "namespace": pod_info.namespace,
            "uid": pod_info.uid,
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


def _api_message(body: Any, status: int) -> str:
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    if isinstance(body, (str, bytes)) and body:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return text[:512]
    return f"the server answered HTTP {status}"


class DefaultBinder(BindPlugin):
    NAME = NAME

    def __init__(self, args: PluginArgs | None, handle: Handle) -> None:
        validate_no_args(NAME, args)
        self._handle = handle

    async def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        path = BINDING_PATH.format(namespace=pod_info.namespace or "default", name=pod_info.name)
        response = await self._handle.client.request(
            "POST", path, body=binding_body(pod_info, node_name)
        )
        if response.status in (200, 201):
            return None
        message = _api_message(response.body, response.status)
        if response.status == 409:
            return Status(Code.ERROR, message, error=AlreadyBoundError(message))
        if response.status == 404:
            return Status(Code.ERROR, message, error=PodGoneError(message))
        return Status(Code.ERROR, f"binding rejected (HTTP {response.status}): {message}")
