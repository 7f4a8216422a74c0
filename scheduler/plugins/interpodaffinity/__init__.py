"""InterPodAffinity plugin package (see :mod:`.plugin`)."""

from scheduler.plugins.interpodaffinity.plugin import NAME, InterPodAffinity

__all__ = ["NAME", "InterPodAffinity"]
