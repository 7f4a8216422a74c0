"""The scheduler cache (nodes, bound and assumed pods) and the per-cycle snapshot."""

from scheduler.cache.cache import Cache, CacheDump, CacheError
from scheduler.cache.node_tree import NodeTree, zone_key
from scheduler.cache.snapshot import Snapshot

__all__ = ["Cache", "CacheDump", "CacheError", "NodeTree", "Snapshot", "zone_key"]
