"""PodTopologySpread plugin package (see :mod:`.plugin`)."""

from scheduler.plugins.podtopologyspread.plugin import NAME, PodTopologySpread

__all__ = ["NAME", "PodTopologySpread"]
