"""Gang scheduling compatible with kubernetes-sigs/scheduler-plugins' Coscheduling.

``plugin`` holds the scheduler plugin, ``core`` the group bookkeeping it relies on and
``controller`` the kopf-based PodGroup status controller (imported only when run, so the
scheduler does not load kopf unless it runs the controller).
"""

from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL

__all__ = ["POD_GROUP_LABEL"]
