"""The scheduling queue (activeQ, backoffQ, unschedulable and gated pods) and the nominator."""

from scheduler.queue.nominator import Nominator, nominated_node_name
from scheduler.queue.scheduling_queue import (
    ACTIVE,
    BACKOFF,
    GATED,
    UNSCHEDULABLE,
    HintEntry,
    QueueError,
    SchedulingQueue,
)

__all__ = [
    "ACTIVE", "BACKOFF", "GATED", "UNSCHEDULABLE", "HintEntry", "Nominator", "QueueError",
    "SchedulingQueue", "nominated_node_name",
]
