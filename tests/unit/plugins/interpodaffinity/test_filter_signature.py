"""InterPodAffinity signs its Filter (opportunistic batching) only when a node's status is a
function of its own NodeInfo: every topology key Filter reads has values no two nodes share.

The contract checked: two clusters in which a node holds the same pods, and for which
``sign_filter`` gives the same signature, give that node the same Filter status.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.common import UniqueValues
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _node(name: str, *, host: str | None = None, zone: str = "a") -> dict[str, Any]:
    return NodeBuilder(name).labels({HOST: host or name, ZONE: zone}).obj()


def _pod(name: str, node: str = "", *, app: str = "web") -> PodBuilder:
    b = PodBuilder(name).uid(f"uid-{name}").labels(app=app)
    return b.node(node) if node else b


def _sign_and_filter(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                     incoming: dict[str, Any]) -> tuple[Any, dict[str, Status | None]]:
    infos = node_infos(nodes, pods)
    plugin = InterPodAffinity({}, FakeHandle(infos))
    state = CycleState()
    pod_info = PodInfo.from_pod(incoming)
    _, status = plugin.pre_filter(state, pod_info, infos)
    if status is not None and status.code == Code.SKIP:
        return "skipped", {ni.name: None for ni in infos}
    assert status is None, status
    statuses = plugin.filter_nodes(state, pod_info, infos)
    return plugin.sign_filter(state, pod_info), {
        ni.name: st for ni, st in zip(infos, statuses)}


ANTI_HOST = _pod("in").pod_anti_affinity_required({"app": "web"}, HOST).obj()
AFFINITY_HOST = _pod("in").pod_affinity_required({"app": "web"}, HOST).obj()
ANTI_ZONE = _pod("in").pod_anti_affinity_required({"app": "web"}, ZONE).obj()


@pytest.mark.parametrize(("nodes", "pods", "incoming", "signed"), [
    pytest.param([_node("n1"), _node("n2")], [_pod("p", "n1").obj()], ANTI_HOST, True,
                 id="hostname anti-affinity, hostnames unique"),
    pytest.param([_node("n1"), _node("n2", host="n1")], [_pod("p", "n1").obj()], ANTI_HOST,
                 False, id="two nodes share a hostname label"),
    pytest.param([_node("n1"), _node("n2")], [_pod("p", "n1").obj()], AFFINITY_HOST, True,
                 id="hostname affinity"),
    pytest.param([_node("n1"), _node("n2")], [_pod("p", "n1").obj()], ANTI_ZONE, False,
                 id="zone anti-affinity of the incoming pod"),
    pytest.param([_node("n1"), _node("n2")],
                 [_pod("p", "n1").pod_anti_affinity_required({"app": "web"}, ZONE).obj()],
                 _pod("in").obj(), False,
                 id="an existing pod's zone anti-affinity selects the incoming pod"),
    pytest.param([_node("n1"), _node("n2")],
                 [_pod("p", "n1").pod_anti_affinity_required({"app": "db"}, ZONE).obj()],
                 ANTI_HOST, True,
                 id="an existing pod's zone anti-affinity that does not select it"),
])
def test_signed_only_when_every_key_is_unique_per_node(
        nodes: list[dict[str, Any]], pods: list[dict[str, Any]], incoming: dict[str, Any],
        signed: bool) -> None:
    signature, _ = _sign_and_filter(nodes, pods, incoming)
    assert (signature is not None) is signed, signature


def test_equal_signatures_give_a_node_the_status_of_its_own_pods() -> None:
    """A node keeps its pods; the other nodes' pods are redrawn.  Whenever both clusters
    sign the incoming pod alike, the node's status is the same in both."""
    compared = sum(_compare_node_statuses(seed) for seed in range(30))
    assert compared >= 30  # the signature is given often enough to check something


def _compare_node_statuses(seed: int) -> int:
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(6)]
    nodes = [_node(n, zone=rng.choice("ab")) for n in names]
    apps = ["web", "db"]

    def some_pod(i: int, node: str) -> dict[str, Any]:
        b = _pod(f"p{seed}-{i}-{rng.random():.6f}", node, app=rng.choice(apps))
        kind = rng.random()
        if kind < 0.3:
            b.pod_anti_affinity_required({"app": rng.choice(apps)}, HOST)
        elif kind < 0.4:
            b.pod_anti_affinity_required({"app": rng.choice(apps)}, ZONE)
        return b.obj()

    incoming_b = _pod("in", app=rng.choice(apps))
    if rng.random() < 0.5:
        incoming_b.pod_anti_affinity_required({"app": rng.choice(apps)}, HOST)
    else:
        incoming_b.pod_affinity_required({"app": rng.choice(apps)}, HOST)
    incoming = incoming_b.obj()
    kept = [some_pod(i, "n0") for i in range(rng.randrange(3))]
    compared = 0
    for round_ in range(8):
        others = [some_pod(100 * round_ + i, rng.choice(names[1:]))
                  for i in range(rng.randrange(6))]
        sig_a, statuses_a = _sign_and_filter(nodes, kept + others, incoming)
        others_b = [some_pod(1000 + 100 * round_ + i, rng.choice(names[1:]))
                    for i in range(rng.randrange(6))]
        sig_b, statuses_b = _sign_and_filter(nodes, kept + others_b, incoming)
        if sig_a is not None and sig_a == sig_b and sig_a != "skipped":
            compared += 1
            assert statuses_a["n0"] == statuses_b["n0"], (seed, round_, sig_a)
    return compared


def test_unique_values_follow_node_changes() -> None:
    """The duplicate count kept through the snapshot's change log equals a recount after
    nodes are added, relabelled and removed."""
    cache, snapshot = Cache(), Snapshot()
    index = UniqueValues(HOST)
    steps = [
        lambda: cache.add_node(_node("n1")),
        lambda: cache.add_node(_node("n2")),
        lambda: cache.add_node(_node("n3", host="n1")),  # duplicate
        lambda: cache.update_node(_node("n3", host="n1"), _node("n3")),  # unique again
        lambda: cache.update_node(_node("n2"), _node("n2", host="n3")),  # n2 now as n3
        lambda: cache.add_pod(PodInfo.from_pod(_pod("p", "n1").obj())),  # no label change
        lambda: cache.remove_node(_node("n3")),  # n2's value alone again
        lambda: cache.update_node(_node("n2", host="n3"),
                                  NodeBuilder("n2").labels({ZONE: "a"}).obj()),  # no key
    ]
    want = [True, True, False, True, False, False, True, True]
    for step, expected in zip(steps, want):
        step()
        cache.update_snapshot(snapshot)
        values = [ni.node["metadata"]["labels"].get(HOST) for ni in snapshot.list()
                  if ni.node is not None]
        present = [v for v in values if v is not None]
        assert (len(set(present)) == len(present)) is expected
        assert index.refresh(snapshot) is expected
