"""HTTP extenders (KubeSchedulerConfiguration ``extenders``), called as kube-scheduler calls
them: the wire client is in ``http``, where they run in the cycle is in ``runner``."""

from scheduler.extenders.http import ExtenderError, HTTPExtender, build_ssl_context
from scheduler.extenders.runner import EXTENDER_NAME, Extenders, PreemptionVictims

__all__ = [
    "EXTENDER_NAME",
    "ExtenderError",
    "Extenders",
    "HTTPExtender",
    "PreemptionVictims",
    "build_ssl_context",
]
