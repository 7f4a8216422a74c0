"""InterPodAffinity plugin package (see :mod:`.plugin`)."""

from scheduler.plugins.interpodaffinity.common import NAME
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity

__all__ = ["NAME", "InterPodAffinity"]
