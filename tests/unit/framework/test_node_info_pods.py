"""NodeInfo's pod list: replacing a pod by its UID keeps every pod in its place, wherever the
replaced pod stands; the cache's NodeInfos find it by its UID's number (a bisection), copies
by a scan from the end (where a just-assumed pod is)."""

from __future__ import annotations

import pytest

from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo
from tests.builders import make_node, make_pod


def _info(name: str, *, label: str = "v1") -> PodInfo:
    pod = make_pod(name, cpu="100m", node="node")
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["metadata"]["labels"] = {"version": label}
    return PodInfo.from_pod(pod)


@pytest.mark.parametrize("replaced", ["a", "b", "c", "d", "e"])
def test_replace_pod_takes_the_place_of_the_pod_with_its_uid(replaced: str) -> None:
    node = NodeInfo(make_node("node"))
    names = ["a", "b", "c", "d", "e"]
    for name in names:
        node.add_pod(_info(name))
    requested, generation = node.requested.clone(), node.generation
    new = _info(replaced, label="v2")
    assert node.replace_pod(new)
    assert [p.pod["metadata"]["name"] for p in node.pods] == names
    assert node.pods[names.index(replaced)] is new
    assert [p.pod["metadata"]["labels"]["version"] for p in node.pods].count("v2") == 1
    assert node.requested == requested and node.generation != generation


def test_replace_pod_of_a_pod_not_on_the_node_changes_nothing() -> None:
    node = NodeInfo(make_node("node"))
    node.add_pod(_info("a"))
    before, generation = list(node.pods), node.generation
    assert not node.replace_pod(_info("z"))
    assert node.pods == before and node.generation == generation


class _CountingList(list[PodInfo]):
    """A pod list that counts the reads by index (the steps of a search through it)."""

    reads = 0

    def __getitem__(self, index):  # type: ignore[no-untyped-def,override]
        _CountingList.reads += 1
        return super().__getitem__(index)



def _node_of_1000(counting: type[_CountingList], *, copy: bool = False) -> NodeInfo:
    """A node of pods p0..p999 whose pod list counts the reads made from now on; with
    ``copy``, a clone of it (copies keep no index of their pods: they scan)."""
    node = NodeInfo(make_node("node"))
    for i in range(1000):
        node.add_pod(_info(f"p{i}"))
    if copy:
        node = node.clone()
    node.pods = counting(node.pods)
    _CountingList.reads = 0
    return node


@pytest.mark.parametrize("position", [999, 998, 500, 0])
def test_replace_pod_reads_no_pod_to_find_it(position: int) -> None:
    # The cache's NodeInfos find a pod's place by its UID's number (a bisection), wherever
    # it is: on SchedulingWhileGated's node of 40000 pods, no scan.
    node = _node_of_1000(_CountingList)
    new = _info(f"p{position}", label="v2")
    assert node.replace_pod(new)
    assert _CountingList.reads == 0 and node.pods[position] is new


@pytest.mark.parametrize(("from_end", "steps"), [(0, 1), (1, 2), (3, 4)])
def test_replace_pod_of_a_recent_pod_on_a_copy_reads_only_the_tail(
        from_end: int, steps: int) -> None:
    # A copy scans from the end, where a binding's confirmation finds the pod assumed last.
    node = _node_of_1000(_CountingList, copy=True)
    assert node.replace_pod(_info(f"p{999 - from_end}", label="v2"))
    assert _CountingList.reads == steps


@pytest.mark.parametrize("removed", ["a", "b", "c", "d", "e", "z"])
def test_remove_pod_takes_out_the_pod_with_its_uid_and_keeps_the_order(removed: str) -> None:
    node = NodeInfo(make_node("node"))
    names = ["a", "b", "c", "d", "e"]
    for name in names:
        node.add_pod(_info(name))
    empty = NodeInfo(make_node("node"))
    for name in names:
        if name != removed:
            empty.add_pod(_info(name))
    generation = node.generation
    on_node = removed in names
    assert node.remove_pod(_info(removed).pod) is on_node
    assert [p.pod["metadata"]["name"] for p in node.pods] == [n for n in names if n != removed]
    assert node.requested == empty.requested
    assert (node.generation != generation) is on_node


def test_remove_pod_from_an_empty_node_changes_nothing() -> None:
    node = NodeInfo(make_node("node"))
    generation = node.generation
    assert not node.remove_pod(_info("a").pod)
    assert node.pods == [] and node.generation == generation


class _IterCountingList(_CountingList):
    """Counts the pods read by iteration too (a scan through map)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in super().__iter__():
            _CountingList.reads += 1
            yield item


@pytest.mark.parametrize("position", [999, 0, 500, 998])
def test_remove_pod_reads_only_the_pod_removed(position: int) -> None:
    node = _node_of_1000(_IterCountingList)
    assert node.remove_pod(_info(f"p{position}").pod)
    assert _CountingList.reads <= 1
    assert [p.pod["metadata"]["name"] for p in node.pods] == [
        f"p{i}" for i in range(1000) if i != position]
    # and the pods after it are found at their shifted places
    new = _info("p997", label="v2")
    assert node.replace_pod(new) and node.pods[997 - (position < 997)] is new
    assert node.remove_pod(_info("p1").pod)
    assert not node.remove_pod(_info(f"p{position}").pod)


def test_a_uid_added_twice_is_found_as_a_scan_finds_it() -> None:
    # Not a state the cache makes; the index gives way to the scan (last pod first).
    node = NodeInfo(make_node("node"))
    first, other, second = _info("a"), _info("b"), _info("a", label="v2")
    for pod_info in (first, other, second):
        node.add_pod(pod_info)
    assert node.remove_pod(first.pod) and node.pods == [first, other]
    assert node.remove_pod(first.pod) and node.pods == [other]


@pytest.mark.parametrize(("position", "most_reads"), [(999, 1), (0, 2), (500, 502)])
def test_remove_pod_of_the_last_pod_on_a_copy_reads_only_it(
        position: int, most_reads: int) -> None:
    # A pod assumed and then forgotten is the last: removing it must not read the 999
    # before it; another pod is found by a scan that stops at it.
    node = _node_of_1000(_IterCountingList, copy=True)
    assert node.remove_pod(_info(f"p{position}").pod)
    assert _CountingList.reads <= most_reads
    assert [p.pod["metadata"]["name"] for p in node.pods] == [
        f"p{i}" for i in range(1000) if i != position]
