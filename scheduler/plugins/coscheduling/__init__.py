"""Gang scheduling compatible with kubernetes-sigs/scheduler-plugins' Coscheduling.

``plugin`` holds the scheduler plugin and ``core`` the group bookkeeping it relies on.  The
PodGroup status controller is not a plugin: it is ``scheduler.controllers.podgroup``.
"""

from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL

__all__ = ["POD_GROUP_LABEL"]
