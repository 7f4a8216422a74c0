"""LabelPreference: prefer nodes by the value of one of their labels, in a ranked order."""

from collections.abc import Mapping
from typing import Any

from scheduler.framework import (
    MAX_NODE_SCORE, CycleState, Handle, NodeInfo, PodInfo, ScorePlugin, Status)


class LabelPreference(ScorePlugin):
    """Score 100 for nodes whose ``labelKey`` has the first of ``values``, less for later
    ones, 0 without a listed value.  A pod may give its own order in the annotation
    ``podAnnotation`` (comma-separated), e.g. ``example.com/gpu-preference: h100,a100``."""

    NAME = "LabelPreference"

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        self.label_key = args.get("labelKey")
        self.values = args.get("values") or []
        self.pod_annotation = args.get("podAnnotation", "")
        if not isinstance(self.label_key, str) or not self.label_key:
            raise ValueError("labelKey: required, a node label key")
        if not isinstance(self.values, list) or not all(isinstance(v, str) for v in self.values):
            raise ValueError(f"values: must be a list of label values, got {self.values!r}")

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        annotations = (pod_info.pod.get("metadata") or {}).get("annotations") or {}
        own = annotations.get(self.pod_annotation) if self.pod_annotation else None
        ranked = [v.strip() for v in own.split(",")] if own else self.values
        labels = ((node_info.node or {}).get("metadata") or {}).get("labels") or {}
        value = labels.get(self.label_key)
        if value not in ranked:
            return 0, None
        return MAX_NODE_SCORE * (len(ranked) - ranked.index(value)) // len(ranked), None
