"""The default constraints' selector kept per pod shape (``selectors.DefaultSelectors``):
always what ``default_selector`` reads from the listers now, kept only while no Service,
ReplicationController, ReplicaSet or StatefulSet of the pod's namespace changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.common import default_selector
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from scheduler.plugins.podtopologyspread.scoring import PRE_SCORE_STATE_KEY, PreScoreState
from scheduler.plugins.podtopologyspread.selectors import DEFAULTING_RESOURCES, DefaultSelectors
from tests.builders import PodBuilder
from tests.fakes import DictListers, FakeHandle, WatchingListers, node_infos
from tests.unit.plugins.podtopologyspread.helpers import node


def _listers(objects: dict[str, list[dict[str, Any]]] | None = None,
             missing: tuple[str, ...] = ()) -> WatchingListers:
    """Listers of the four defaulting resources but ``missing`` (those have no informer)."""
    listers = WatchingListers({r: [] for r in DEFAULTING_RESOURCES if r not in missing})
    for resource, items in (objects or {}).items():
        for obj in items:
            listers.put(resource, obj)
    return listers


def service(name: str, namespace: str = "default", **selector: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector or {"app": "web"}}}


def replicaset(name: str = "rs", namespace: str = "default", **match: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": match or {"app": "web"}}}}


def web_pod(name: str = "p", namespace: str = "default") -> dict[str, Any]:
    return PodBuilder(name, namespace).labels(app="web", tier="front").obj()


def rs_pod(name: str = "p", namespace: str = "default") -> dict[str, Any]:
    return PodBuilder(name, namespace).labels(app="web").owner("ReplicaSet", "rs").obj()


@dataclass
class Case:
    name: str
    pod: Callable[[], dict[str, Any]]
    before: dict[str, list[dict[str, Any]]]
    change: Callable[[WatchingListers], None]
    # Whether the kept answer must be dropped (the next one read from the listers).
    dropped: bool
    second_pod: Callable[[], dict[str, Any]] | None = None


CASES = [
    Case("a Service added in the pod's namespace", web_pod, {},
         lambda ls: ls.put("services", service("svc")), True),
    Case("a Service's selector changed", web_pod, {"services": [service("svc")]},
         lambda ls: ls.put("services", service("svc", tier="front")), True),
    Case("a Service deleted", web_pod, {"services": [service("svc")]},
         lambda ls: ls.delete("services", service("svc")), True),
    Case("a Service added in another namespace", web_pod, {"services": [service("svc")]},
         lambda ls: ls.put("services", service("other", "elsewhere")), False),
    Case("the owning ReplicaSet's selector changed", rs_pod, {"replicasets": [replicaset()]},
         lambda ls: ls.put("replicasets", replicaset(app="web", track="stable")), True),
    Case("the owning ReplicaSet created after the pod was first asked about", rs_pod, {},
         lambda ls: ls.put("replicasets", replicaset()), True),
    Case("a StatefulSet added in the namespace", rs_pod, {"replicasets": [replicaset()]},
         lambda ls: ls.put("statefulsets", {
             "apiVersion": "apps/v1", "kind": "StatefulSet",
             "metadata": {"name": "db", "namespace": "default"},
             "spec": {"selector": {"matchLabels": {"app": "db"}}}}), True),
    Case("a ReplicationController deleted", web_pod,
         {"replicationcontrollers": [{"apiVersion": "v1", "kind": "ReplicationController",
                                      "metadata": {"name": "rc", "namespace": "default"},
                                      "spec": {"selector": {"app": "web"}}}]},
         lambda ls: ls.delete("replicationcontrollers", {
             "metadata": {"name": "rc", "namespace": "default"}}), True),
    Case("nothing changed, another replica of the same shape", web_pod,
         {"services": [service("svc")]}, lambda ls: None, False,
         second_pod=lambda: web_pod("q")),
    Case("nothing changed, a pod of other labels", web_pod, {"services": [service("svc")]},
         lambda ls: None, True,
         second_pod=lambda: PodBuilder("q").labels(app="web").obj()),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kept_answer_is_what_the_listers_say_now(case: Case) -> None:
    listers = _listers(case.before)
    selectors = DefaultSelectors(listers)
    pod = case.pod()
    first = selectors.get(pod)
    assert first.selector == default_selector(pod, listers)
    assert selectors.get(pod) is first and selectors.hits == 1  # kept
    case.change(listers)
    second_pod = case.second_pod() if case.second_pod is not None else pod
    lists = len(listers.listed)
    second = selectors.get(second_pod)
    assert (len(listers.listed) > lists) is case.dropped  # read again only when dropped
    assert (second is not first) is case.dropped
    assert second.selector == default_selector(second_pod, listers)


def test_the_answer_follows_every_change_in_a_sequence() -> None:
    listers = _listers()
    selectors = DefaultSelectors(listers)
    pod = rs_pod()
    steps: list[Callable[[], None]] = [
        lambda: listers.put("replicasets", replicaset()),
        lambda: listers.put("services", service("svc")),
        lambda: listers.put("replicasets", replicaset(app="web", track="canary")),
        lambda: listers.delete("services", service("svc")),
        lambda: listers.delete("replicasets", replicaset()),
    ]
    assert selectors.get(pod).selector == default_selector(pod, listers)
    for step in steps:
        step()
        assert selectors.get(pod).selector == default_selector(pod, listers)
        assert selectors.get(pod).selector == default_selector(pod, listers)


@pytest.mark.parametrize("listers", [
    pytest.param(DictListers({"services": [service("svc")]}), id="listers-without-events"),
    pytest.param(_listers({"services": [service("svc")]}, missing=("statefulsets",)),
                 id="an-informer-missing"),
])
def test_nothing_is_kept_without_events_for_every_resource(listers: DictListers) -> None:
    selectors = DefaultSelectors(listers)
    pod = web_pod()
    first, second = selectors.get(pod), selectors.get(pod)
    assert first is not second and selectors.hits == 0 and selectors.misses == 2
    assert first.selector == second.selector == default_selector(pod, listers)
    listers.objects["services"] = []  # changed behind the memo's back: still read
    assert selectors.get(pod).selector.is_empty()


def _pre_score_constraints(plugin: PodTopologySpread, pod: dict[str, Any],
                           handle: FakeHandle) -> list[tuple[str, Any]] | None:
    state = CycleState()
    infos = handle.snapshot().list()
    status = plugin.pre_score(state, PodInfo.from_pod(pod), infos)
    if status is not None and status.code == Code.SKIP:
        return None
    assert status is None, status
    s = state.read(PRE_SCORE_STATE_KEY)
    assert isinstance(s, PreScoreState)
    return [(c.topology_key, c.selector) for c in s.constraints]


def test_plugin_pre_score_uses_the_current_selector() -> None:
    """PreScore over watching listers builds the constraints a plugin over plain listers
    (which reads them every time) builds, through a ReplicaSet's life."""
    nodes = [node("node-a", "zone1"), node("node-b", "zone2")]
    listers = _listers()
    handle = FakeHandle(node_infos(nodes, []))
    handle._listers = listers
    plugin = PodTopologySpread({}, handle)
    pod = rs_pod()

    def reference() -> list[tuple[str, Any]] | None:
        plain = FakeHandle(node_infos(nodes, []),
                           objects={k: list(v) for k, v in listers.objects.items()})
        return _pre_score_constraints(PodTopologySpread({}, plain), pod, plain)

    assert _pre_score_constraints(plugin, pod, handle) is None  # no owner known: skipped
    listers.put("replicasets", replicaset())
    got = _pre_score_constraints(plugin, pod, handle)
    assert got is not None and got == reference()
    listers.put("replicasets", replicaset(app="web", track="canary"))
    got = _pre_score_constraints(plugin, pod, handle)
    assert got is not None and got == reference()
    for _, selector in got:  # the new selector, not the kept one
        assert selector.matches({"app": "web", "track": "canary"})
        assert not selector.matches({"app": "web"})
    listers.delete("replicasets", replicaset())
    assert _pre_score_constraints(plugin, pod, handle) is None
