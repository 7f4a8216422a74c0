"""The bench's gang workloads (issue 22): gangs of 8, 32 and 128 mixed with plain pods, with
and without a required rack topology."""

from __future__ import annotations

import pytest

from scheduler.bench.workloads import (
    GANG_LABEL,
    RACK_KEY,
    RACK_SIZE,
    REQUIRED_TOPOLOGY,
    WORKLOADS,
    gang_member,
    pod_groups,
    rack_of,
)


@pytest.mark.parametrize("size", [8, 32, 128])
@pytest.mark.parametrize("topology", [False, True])
def test_workloads_exist(size: int, topology: bool) -> None:
    w = WORKLOADS[f"GangMixed{size}{'Topology' if topology else ''}"]
    assert w.gang_size == size and w.gang_mixed and w.gang_topology == topology


@pytest.mark.parametrize(("count", "size", "groups", "gang_pods"),
                         [(32, 8, 2, 16), (40, 8, 3, 24), (10, 8, 1, 8), (20, 8, 2, 12)])
def test_mixed_blocks_alternate_and_groups_match_their_members(
    count: int, size: int, groups: int, gang_pods: int
) -> None:
    make = gang_member(size, mixed=True)
    pods = [make(i, "s") for i in range(count)]
    members: dict[str, int] = {}
    for p in pods:
        group = (p["metadata"].get("labels") or {}).get(GANG_LABEL)
        if group:
            members[group] = members.get(group, 0) + 1
    assert sum(members.values()) == gang_pods
    made = pod_groups(count, size, mixed=True)
    assert len(made) == groups
    # Every PodGroup's minMember is the number of its pods (the last may be short).
    assert {g["metadata"]["name"]: g["spec"]["minMember"] for g in made} == members


def test_topology_groups_require_the_rack_key() -> None:
    [group] = pod_groups(8, 8, topology=True)
    assert group["metadata"]["annotations"] == {REQUIRED_TOPOLOGY: RACK_KEY}
    assert [rack_of(i) for i in (0, RACK_SIZE - 1, RACK_SIZE)] == ["rack-0", "rack-0",
                                                                   "rack-1"]
