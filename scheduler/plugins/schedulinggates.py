"""SchedulingGates: keeps pods with ``spec.schedulingGates`` out of activeQ (PreEnqueue) until
every gate is removed; the removal is the only event that can let such a pod in."""

from __future__ import annotations

from typing import Any

from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    Handle,
    PluginArgs,
    PreEnqueuePlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo, pod_uid
from scheduler.plugins import names
from scheduler.plugins.helper import validate_no_args

NAME = names.SCHEDULING_GATES

# Formatted with the gate names as Go prints a []string: "[a b]".
REASON_WAITING_FOR_GATES = "waiting for scheduling gates: [{gates}]"


def scheduling_gates(pod: dict[str, Any]) -> list[str]:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    out: list[str] = []
    for gate in gates:
        if isinstance(gate, dict):
            out.append(str(gate.get("name") or ""))
        else:
            out.append(str(gate))
    return out


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None) -> None:
        validate_no_args(NAME, args)
        del handle

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        gates = scheduling_gates(pod_info.pod)
        if not gates:
            return None
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            REASON_WAITING_FOR_GATES.format(gates=" ".join(gates)),
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.UNSCHEDULED_POD,
                    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                ),
                self.is_schedulable_after_gates_eliminated,
            )
        ]

    @staticmethod
    def is_schedulable_after_gates_eliminated(
        pod: dict[str, Any], old: Any, new: Any
    ) -> QueueingHint:
        # Only the gated pod's own update can ungate it.
        if not isinstance(new, dict) or pod_uid(new) != pod_uid(pod):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE
