"""CapacityScheduling (ElasticQuota min/max, lending and reclaiming), scheduler-plugins'."""

from scheduler.plugins.capacityscheduling.plugin import NAME, CapacityScheduling

__all__ = ["NAME", "CapacityScheduling"]
