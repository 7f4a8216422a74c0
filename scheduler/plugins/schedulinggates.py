"""SchedulingGates: keeps pods with ``spec.schedulingGates`` out of activeQ (PreEnqueue) until
every gate is removed; the removal is the only event that can let such a pod in.

Gates are read from the validated :class:`PodInfo`: ``schedulingGates: "x"``, ``[5]`` or an
entry without a name is a malformed pod (reported with an event and a condition), not a gate.
"""

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


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None) -> None:
        validate_no_args(NAME, args)
        del handle

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        # Parsed and validated with the PodInfo: a malformed list never gets this far (the
        # pod is reported as malformed instead of waiting silently on a non-gate).
        gates = pod_info.scheduling_gates
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
