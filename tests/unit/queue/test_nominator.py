"""Nominator bookkeeping, alone and as the queue drives it."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.objects.pod import PodInfo
from scheduler.queue import Nominator
from tests.builders import PodBuilder, make_pod
from tests.unit.queue.helpers import FIT, fail, make_queue, pop


def nominated(name: str, node: str = "") -> dict[str, Any]:
    b = PodBuilder(name)
    if node:
        b.nominated_node(node)
    return b.obj()


def on(nominator: Nominator, node: str) -> list[str]:
    return [p.name for p in nominator.nominated_pods_for_node(node)]


@pytest.mark.parametrize(
    ("status_node", "override", "expected"),
    [
        pytest.param("n1", None, "n1", id="from-status"),
        pytest.param("", None, None, id="no-nomination"),
        pytest.param("n1", "n2", "n2", id="preemption-overrides"),
        pytest.param("n1", "", None, id="empty-override-clears"),
    ],
)
def test_add_nominated_pod(status_node: str, override: str | None, expected: str | None) -> None:
    nominator = Nominator()
    pod = nominated("p", status_node)
    nominator.add_nominated_pod(PodInfo.from_pod(pod), override)
    assert nominator.nominated_node_for(pod) == expected
    for node in ("n1", "n2"):
        assert on(nominator, node) == (["p"] if node == expected else [])


def test_renomination_moves_the_pod() -> None:
    nominator = Nominator()
    pod = nominated("p")
    nominator.add_nominated_pod(PodInfo.from_pod(pod), "n1")
    nominator.add_nominated_pod(PodInfo.from_pod(nominated("q")), "n1")
    nominator.add_nominated_pod(PodInfo.from_pod(pod), "n2")
    assert on(nominator, "n1") == ["q"] and on(nominator, "n2") == ["p"]
    assert len(nominator) == 2
    nominator.delete_nominated_pod_if_exists(pod)
    nominator.delete_nominated_pod_if_exists(pod)  # idempotent
    assert on(nominator, "n2") == [] and len(nominator) == 1


@pytest.mark.parametrize(
    ("old_node", "new_node", "expected"),
    [
        pytest.param("", "", "mem", id="update-without-nomination-keeps-preemption-choice"),
        pytest.param("", "n3", "n3", id="nomination-added"),
        pytest.param("n1", "", None, id="nomination-removed"),
        pytest.param("n1", "n3", "n3", id="nomination-changed"),
    ],
)
def test_update_nominated_pod(old_node: str, new_node: str, expected: str | None) -> None:
    nominator = Nominator()
    old = nominated("p", old_node)
    nominator.add_nominated_pod(PodInfo.from_pod(old), "mem" if not old_node else None)
    new_info = PodInfo.from_pod(nominated("p", new_node))
    nominator.update_nominated_pod(old, new_info)
    assert nominator.nominated_node_for(old) == expected
    if expected:
        assert nominator.nominated_pods_for_node(expected) == [new_info]


def test_pod_lookup_skips_gone_or_bound_pods() -> None:
    live = {"default/alive": nominated("alive"), "default/bound": make_pod("bound", node="x")}
    nominator = Nominator(
        pod_lookup=lambda p: live.get(f"{p['metadata']['namespace']}/{p['metadata']['name']}")
    )
    for name in ("alive", "bound", "gone"):
        nominator.add_nominated_pod(PodInfo.from_pod(nominated(name)), "n1")
    assert on(nominator, "n1") == ["alive"]


def test_queue_tracks_nominations() -> None:
    queue = make_queue()
    pod = nominated("p", "n1")
    queue.add(pod)
    assert [p.name for p in queue.nominator.nominated_pods_for_node("n1")] == ["p"]
    qpi = pop(queue)
    # Preemption nominated it to n2 (in memory) and it went back to the queue.
    queue.nominator.add_nominated_pod(qpi.pod_info, "n2")
    fail(queue, qpi, FIT)
    updated = nominated("p", "n2")
    queue.update(pod, updated)
    infos = queue.nominator.nominated_pods_for_node("n2")
    assert [i.pod for i in infos] == [updated]
    queue.delete(updated)
    assert queue.nominator.nominated_pods_for_node("n2") == []
    assert len(queue.nominator) == 0
