"""PodTopologySpread plugin package (see :mod:`.plugin`)."""

from scheduler.plugins.podtopologyspread.common import NAME
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["NAME", "PodTopologySpread"]
