"""The snapshot's (anti-)affinity node lists, updated node by node, equal a full rebuild.

Pods with and without (anti-)affinity come and go on random nodes (nodes come and go too);
after every snapshot update the incremental lists must be exactly the nodes of the node list
that hold such pods, in node-list order, as a scan of every node would give.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cache import Cache, Snapshot
from scheduler.objects.pod import PodInfo
from tests.builders import PodBuilder, make_node

NODES = [f"n{i}" for i in range(8)]


def _pod(i: int, node: str, kind: str) -> dict[str, Any]:
    b = PodBuilder(f"p{i}").uid(f"u{i}").node(node).labels(app="x")
    if kind == "anti":
        b = b.pod_anti_affinity_required({"app": "x"}, "kubernetes.io/hostname")
    elif kind == "affinity":
        b = b.pod_affinity_required({"app": "x"}, "kubernetes.io/hostname")
    return b.obj()


steps = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NODES), st.sampled_from(["plain", "anti",
                                                                        "affinity"])),
    st.tuples(st.just("remove"), st.integers(0, 100)),
    st.tuples(st.just("node"), st.sampled_from(NODES)),
), max_size=40)


@settings(max_examples=80, deadline=None)
@given(steps=steps)
def test_incremental_affinity_lists_equal_a_full_scan(steps: list[Any]) -> None:
    cache, snapshot = Cache(), Snapshot()
    present = set(NODES[:6])
    for name in sorted(present):
        cache.add_node(make_node(name))
    cache.update_snapshot(snapshot)
    pods: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        if step[0] == "add":
            pod = _pod(i, step[1], step[2])
            cache.add_pod(PodInfo.from_pod(pod))
            pods.append(pod)
        elif step[0] == "remove" and pods:
            cache.remove_pod(pods.pop(step[1] % len(pods)))
        elif step[0] == "node":
            if step[1] in present:
                cache.remove_node(make_node(step[1]))
                present.discard(step[1])
            else:
                cache.add_node(make_node(step[1]))
                present.add(step[1])
        cache.update_snapshot(snapshot)
        listed = snapshot.list()
        assert snapshot.have_pods_with_affinity() == [i for i in listed if i.pods_with_affinity]
        assert snapshot.have_pods_with_required_anti_affinity() == [
            i for i in listed if i.pods_with_required_anti_affinity]
