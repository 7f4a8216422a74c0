"""DefaultBinder: binds a pod by POSTing a v1.Binding to ``pods/{name}/binding``.

A POST that gets no answer is ambiguous (the pod may have been bound): it is sent once more,
and a 409 then (or no answer again) is settled by reading the pod, so that a pod bound by the
first POST counts as bound here rather than as a failure to retry (a gang member's failure
would roll its gang back; issue 22).

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
POD_PATH = "/api/v1/namespaces/{namespace}/pods/{name}"


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
        body = binding_body(pod_info, node_name)
        # A Binding's success answer (a Status) is never read: like upstream's client, only
        # a refusal's body is decoded (its message goes into the Status).
        request = self._handle.client.request
        try:
            response = await request("POST", path, body=body, discard_ok_body=True)
        except Exception:
            # No answer (a timeout, a dropped connection): the pod may or may not be bound.
            # Ask again: a Binding to the same node cannot bind twice (the API server answers
            # 409 once the pod has a node), so the second answer settles it.
            try:
                response = await request("POST", path, body=body, discard_ok_body=True)
            except Exception:
                landed = await self._binding_landed(pod_info, node_name)
                if landed is None:
                    raise
                return landed
            if response.status == 409:
                landed = await self._binding_landed(pod_info, node_name)
                if landed is not None:
                    return landed
        if response.status in (200, 201):
            return None
        return self._status_of(response)

    async def _binding_landed(self, pod_info: PodInfo, node_name: str) -> Status | None:
        """After a Binding POST that got no answer the pod may or may not be bound: read it.
        Bound here: success (retrying would schedule a bound pod again, and a gang member
        would roll its gang back for nothing); bound elsewhere: AlreadyBound; gone:
        PodGone; still unbound (or unreadable): None, the caller reports the failure and
        the pod is retried (a binding that lands later turns the retry into a 409)."""
        path = POD_PATH.format(namespace=pod_info.namespace or "default", name=pod_info.name)
        try:
            response = await self._handle.client.request("GET", path)
        except Exception:
            return None
        if response.status == 404:
            message = f"pod {pod_info.key} is gone"
            return Status(Code.ERROR, message, error=PodGoneError(message))
        body = response.body if response.status == 200 else None
        if not isinstance(body, dict):
            return None
        meta = body.get("metadata") or {}
        if pod_info.uid and meta.get("uid") not in (None, pod_info.uid):
            message = f"pod {pod_info.key} was replaced while binding"
            return Status(Code.ERROR, message, error=PodGoneError(message))
        bound_to = (body.get("spec") or {}).get("nodeName")
        if not bound_to:
            return None
        if bound_to == node_name:
            return Status(Code.SUCCESS)
        message = f"pod {pod_info.key} is bound to {bound_to}"
        return Status(Code.ERROR, message, error=AlreadyBoundError(message))

    @staticmethod
    def _status_of(response: Any) -> Status | None:
        message = _api_message(response.body, response.status)
        if response.status == 409:
            return Status(Code.ERROR, message, error=AlreadyBoundError(message))
        if response.status == 404:
            return Status(Code.ERROR, message, error=PodGoneError(message))
        return Status(Code.ERROR, f"binding rejected (HTTP {response.status}): {message}")
