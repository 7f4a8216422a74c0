"""LabelPreference, tested with kube-py-scheduler's builders (run from the repository root:
``python -m pytest examples/plugins/tests``)."""

from typing import Any

import pytest

from label_preference import LabelPreference
from scheduler.framework import CycleState, NodeInfo, PodInfo
from tests.builders import NodeBuilder, PodBuilder

GPU = "example.com/gpu-model"


def node(name: str, model: str | None) -> NodeInfo:
    b = NodeBuilder(name).capacity(cpu="4", memory="16Gi", pods=110)
    if model is not None:
        b.labels({GPU: model})
    return NodeInfo(b.obj())


def plugin(**args: Any) -> LabelPreference:
    return LabelPreference({"labelKey": GPU, "values": ["h100", "a100", "t4"], **args},
                           None)  # type: ignore[arg-type]  # the handle is not used


@pytest.mark.parametrize(
    ("model", "annotation", "expected"),
    [
        ("h100", None, 100), ("a100", None, 66), ("t4", None, 33), ("v100", None, 0),
        (None, None, 0),
        ("t4", "t4,h100", 100), ("h100", "t4,h100", 50), ("a100", "t4,h100", 0),
    ],
)
def test_score_by_rank(model: str | None, annotation: str | None, expected: int) -> None:
    pod = PodBuilder("p")
    if annotation is not None:
        pod.annotations({"example.com/gpu-preference": annotation})
    p = plugin(podAnnotation="example.com/gpu-preference")
    score, status = p.score(CycleState(), PodInfo.from_pod(pod.obj()), node("n", model))
    assert status is None and score == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [({"labelKey": ""}, "labelKey: required"), ({"values": "h100"}, "values: must be a list")],
)
def test_args_are_validated_in_the_constructor(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plugin(**args)
