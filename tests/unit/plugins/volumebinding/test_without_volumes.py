"""The volume plugins' PreFilter for a pod without volumes: Skip without looking up claims
(``without_volumes``), the answer their full check gives such a pod."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.nodevolumelimits import NodeVolumeLimits
from scheduler.plugins.volumebinding.matching import without_volumes
from scheduler.plugins.volumebinding.plugin import STATE_KEY, VolumeBinding
from scheduler.plugins.volumerestrictions import VolumeRestrictions
from scheduler.plugins.volumezone import VolumeZone
from tests.builders import PodBuilder
from tests.fakes import FakeHandle, node_infos

EMPTY_DIR = {"name": "scratch", "emptyDir": {}}
CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"spec": {"containers": []}}, True),
        ({"spec": {"containers": [], "volumes": []}}, True),
        ({"spec": {"volumes": [EMPTY_DIR]}}, False),
        ({"spec": {"volumes": [CLAIM]}}, False),
        ({}, False),  # no spec: the full check says what it says
        ({"spec": None}, False),
    ],
)
def test_without_volumes(pod: dict[str, Any], expected: bool) -> None:
    assert without_volumes(pod) is expected


def _plugins() -> list[Any]:
    handle = FakeHandle(node_infos([]))
    return [VolumeBinding({}, handle), VolumeZone({}, handle), VolumeRestrictions({}, handle),
            NodeVolumeLimits({}, handle)]


@pytest.mark.parametrize(
    ("volumes", "skipped"),
    [
        ([], [True, True, True, True]),
        ([EMPTY_DIR], [True, True, True, True]),  # the full check, same answer
        # A claim not found: the claim plugins say so; NodeVolumeLimits counts it.
        ([CLAIM], [False, False, False, False]),
    ],
)
def test_prefilter_skips_a_pod_without_volumes(volumes: list[dict[str, Any]],
                                               skipped: list[bool]) -> None:
    builder = PodBuilder("p")
    for volume in volumes:
        builder.volume(volume)
    pod_info = PodInfo.from_pod(builder.obj())
    for plugin, skip in zip(_plugins(), skipped, strict=True):
        state = CycleState()
        _, status = plugin.pre_filter(state, pod_info, [])
        assert (status is not None and status.code == Code.SKIP) is skip, (plugin, status)
        if isinstance(plugin, VolumeBinding) and skip:
            # Skipped with its (empty) state written, as upstream: PreBind reads it.
            data = state.read(STATE_KEY)
            assert data.claims is None
