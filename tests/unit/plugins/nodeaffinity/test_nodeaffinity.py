"""NodeAffinity: nodeSelector, required/preferred node affinity, addedAffinity, hints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from scheduler.config.defaults import merge_plugin_args
from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
)
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeScore, PreFilterResult
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.nodeaffinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NAME,
    NodeAffinity,
)
from scheduler.plugins.registry import in_tree_registry
from tests.builders import NodeBuilder, PodBuilder, node_term
from tests.fakes import FakeHandle, node_infos

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def _name_field(*names_: str, op: str = "In") -> dict[str, Any]:
    return {"key": "metadata.name", "operator": op, "values": list(names_)}


def _term(exprs: list[dict[str, Any]] | None = None,
          fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if exprs is not None:
        t["matchExpressions"] = exprs
    if fields is not None:
        t["matchFields"] = fields
    return t


def _pod(*, selector: dict[str, str] | None = None,
         required: list[dict[str, Any]] | None = None,
         preferred: Sequence[tuple[int, dict[str, Any]]] = ()) -> dict[str, Any]:
    b = PodBuilder("p").container()
    if selector is not None:
        b.node_selector(selector)
    if required is not None:
        b.required_node_affinity(required)
    for weight, term in preferred:
        b.preferred_node_affinity(weight, term)
    return b.obj()


def _node(name: str = "node1", **labels: str) -> dict[str, Any]:
    return NodeBuilder(name).labels(labels).obj()


def _plugin(args: dict[str, Any] | None = None, infos: Any = ()) -> NodeAffinity:
    return NodeAffinity(args if args is not None else {}, FakeHandle(infos))


def _added(required: list[dict[str, Any]] | None = None,
           preferred: Sequence[tuple[int, dict[str, Any]]] = ()) -> dict[str, Any]:
    added: dict[str, Any] = {}
    if required is not None:
        added[REQ] = {"nodeSelectorTerms": required}
    if preferred:
        added[PREF] = [{"weight": w, "preference": t} for w, t in preferred]
    return {"addedAffinity": added}


def _unres(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)


# --- construction ---------------------------------------------------------------------------


def test_name_and_registry() -> None:
    assert NAME == names.NODE_AFFINITY == NodeAffinity.NAME == _plugin().name
    assert in_tree_registry().get(names.NODE_AFFINITY) is NodeAffinity


def test_default_args_build() -> None:
    plugin = NodeAffinity(merge_plugin_args(NAME, None), FakeHandle())
    assert plugin.added_node_selector is None and plugin.added_pref_sched_terms is None


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"bogus": 1}, r"NodeAffinity\.args\.bogus: unknown field"),
        ({"addedAffinity": []}, r"NodeAffinity\.args\.addedAffinity: must be an object"),
        ({"addedAffinity": {"requiredDuringSchedulingRequiredDuringExecution": {}}},
         "unknown field"),
        (_added(required=[_term([_expr("zone", "Bogus", "a")])]),
         (r"addedAffinity\.requiredDuringSchedulingIgnoredDuringExecution\.nodeSelectorTerms\[0\]"
          r"\.matchExpressions\[0\]\.operator")),
        (_added(required=[_term([_expr("bad key!", "In", "a")])]), "invalid label key"),
        (_added(preferred=[(1, _term([_expr("zone", "In")]))]),
         r"addedAffinity\.preferredDuringSchedulingIgnoredDuringExecution\[0\]"),
        (_added(required=[_term(fields=[_name_field("a", "b")])]), "exactly one"),
    ],
)
def test_invalid_args(args: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        NodeAffinity(args, FakeHandle())


def test_broken_pod_affinity_is_reported_when_parsing_the_pod() -> None:
    # Upstream skips unparsable terms; here PodInfo refuses the pod and names the field, so the
    # plugin never sees it.
    pod = _pod(preferred=[(2, _term([_expr("invalid key", "In", "bar")]))])
    with pytest.raises(ObjectError, match="preferredDuringSchedulingIgnoredDuringExecution"):
        PodInfo.from_pod(pod)


# --- PreFilter + Filter ---------------------------------------------------------------------

GPU_EXISTS_NOT_AMD = [_term([_expr("gpu", "Exists"), _expr("gpu", "NotIn", "amd", "intel")])]

FILTER_CASES: list[tuple[str, dict[str, Any], dict[str, Any], Status | None]] = [
    ("selector, node without labels", _pod(selector={"disk": "ssd"}), _node(), _unres(ERR_REASON_POD)),
    ("selector matches", _pod(selector={"disk": "ssd"}), _node(disk="ssd"), None),
    ("node labels are a superset", _pod(selector={"disk": "ssd"}),
     _node(disk="ssd", zone="z1"), None),
    ("node labels are a subset", _pod(selector={"disk": "ssd", "zone": "z1"}),
     _node(disk="ssd"), _unres(ERR_REASON_POD)),
    ("In matches", _pod(required=[_term([_expr("disk", "In", "ssd", "nvme")])]),
     _node(disk="nvme"), None),
    ("Gt matches", _pod(required=[_term([_expr("kernel", "Gt", "510")])]),
     _node(kernel="515"), None),
    ("Lt does not match", _pod(required=[_term([_expr("kernel", "Lt", "510")])]),
     _node(kernel="515"), _unres(ERR_REASON_POD)),
    ("NotIn matches", _pod(required=[_term([_expr("mem", "NotIn", "ddr3", "ddr4")])]),
     _node(mem="ddr5"), None),
    ("NotIn matches a node without the label",
     _pod(required=[_term([_expr("mem", "NotIn", "ddr3")])]), _node(), None),
    ("Exists matches", _pod(required=[_term([_expr("gpu", "Exists")])]), _node(gpu="a100"), None),
    ("DoesNotExist rejects", _pod(required=[_term([_expr("gpu", "DoesNotExist")])]),
     _node(gpu="a100"), _unres(ERR_REASON_POD)),
    ("In does not match", _pod(required=[_term([_expr("disk", "In", "hdd", "tape")])]),
     _node(disk="ssd"), _unres(ERR_REASON_POD)),
    ("empty matchExpressions match nothing", _pod(required=[_term([])]),
     _node(disk="ssd"), _unres(ERR_REASON_POD)),
    ("no terms match nothing", _pod(required=[]), _node(disk="ssd"), _unres(ERR_REASON_POD)),
    ("expressions ANDed, all hold", _pod(required=GPU_EXISTS_NOT_AMD), _node(gpu="nvidia"), None),
    ("expressions ANDed, one fails",
     _pod(required=[_term([_expr("gpu", "Exists"), _expr("gpu", "In", "amd")])]),
     _node(gpu="nvidia"), _unres(ERR_REASON_POD)),
    ("terms ORed, second matches",
     _pod(required=[_term([_expr("a", "In", "x")]), _term([_expr("disk", "In", "ssd")])]),
     _node(disk="ssd"), None),
    ("selector and affinity both satisfied",
     _pod(selector={"disk": "ssd"}, required=[_term([_expr("disk", "Exists")])]),
     _node(disk="ssd"), None),
    ("affinity satisfied but selector not",
     _pod(selector={"disk": "ssd"}, required=[_term([_expr("disk", "Exists")])]),
     _node(disk="hdd"), _unres(ERR_REASON_POD)),
    ("matchFields name In matches", _pod(required=[_term(fields=[_name_field("node1")])]),
     _node("node1"), None),
    ("matchFields name In does not match", _pod(required=[_term(fields=[_name_field("node1")])]),
     _node("node2"), _unres(ERR_REASON_POD)),
    ("matchFields name NotIn", _pod(required=[_term(fields=[_name_field("node1", op="NotIn")])]),
     _node("node1"), _unres(ERR_REASON_POD)),
    ("fields term fails, expressions term matches",
     _pod(required=[_term(fields=[_name_field("node1")]), _term([_expr("disk", "In", "ssd")])]),
     _node("node2", disk="ssd"), None),
    ("one term: fields fail although expressions match",
     _pod(required=[_term([_expr("disk", "In", "ssd")], [_name_field("node1")])]),
     _node("node2", disk="ssd"), _unres(ERR_REASON_POD)),
    ("one term: fields and expressions match",
     _pod(required=[_term([_expr("disk", "In", "ssd")], [_name_field("node1")])]),
     _node("node1", disk="ssd"), None),
    ("two terms, neither matches",
     _pod(required=[_term(fields=[_name_field("node1")]), _term([_expr("disk", "In", "nope")])]),
     _node("node2", disk="ssd"), _unres(ERR_REASON_POD)),
    ("two name terms, second matches",
     _pod(required=[_term(fields=[_name_field("node1")]), _term(fields=[_name_field("node2")])]),
     _node("node2"), None),
    ("conflicting name fields in one term",
     _pod(required=[_term(fields=[_name_field("node1"), _name_field("node2")])]),
     _node("node2"), _unres(ERR_REASON_POD)),
    ("no constraints at all", _pod(), _node(), None),
]


@pytest.mark.parametrize(
    ("pod", "node", "want"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
@pytest.mark.parametrize("run_pre_filter", [True, False], ids=["prefilter", "no-prefilter"])
def test_filter(pod: dict[str, Any], node: dict[str, Any], want: Status | None,
                run_pre_filter: bool) -> None:
    plugin = _plugin()
    [info] = node_infos([node])
    pod_info = PodInfo.from_pod(pod)
    state = CycleState()
    if run_pre_filter:
        _, status = plugin.pre_filter(state, pod_info, [info])
        if status is not None and status.is_skip():
            return  # the runtime would not call Filter
    assert plugin.filter(state, pod_info, info) == want


PRE_FILTER_CASES: list[tuple[str, dict[str, Any], PreFilterResult | None, Status | None]] = [
    ("no affinity: skip", _pod(), None, Status(Code.SKIP)),
    ("affinity without required: skip",
     PodBuilder("p").container().set("spec.affinity.nodeAffinity", {}).obj(),
     None, Status(Code.SKIP)),
    ("only preferred: skip", _pod(preferred=[(1, _term([_expr("a", "Exists")]))]),
     None, Status(Code.SKIP)),
    ("node selector: all nodes", _pod(selector={"a": "b"}), None, None),
    ("empty node selector still filters",
     PodBuilder("p").container().set("spec.nodeSelector", {}).obj(), None, None),
    ("expressions only: all nodes", _pod(required=[_term([_expr("a", "Exists")])]), None, None),
    ("no terms: all nodes", _pod(required=[]), None, None),
    ("one name", _pod(required=[_term(fields=[_name_field("node1")])]),
     PreFilterResult({"node1"}), None),
    ("name plus expression in one term",
     _pod(required=[_term([_expr("a", "Exists")], [_name_field("node1")])]),
     PreFilterResult({"node1"}), None),
    ("names in two terms are unioned",
     _pod(required=[_term(fields=[_name_field("node1")]), _term(fields=[_name_field("node2")])]),
     PreFilterResult({"node1", "node2"}), None),
    ("a term without a name field opens all nodes",
     _pod(required=[_term(fields=[_name_field("node1")]), _term([_expr("a", "Exists")])]),
     None, None),
    ("an empty term opens all nodes",
     _pod(required=[_term(fields=[_name_field("node1")]), _term()]), None, None),
    ("NotIn name field does not pin",
     _pod(required=[_term(fields=[_name_field("node1", op="NotIn")])]), None, None),
    ("names in one term are intersected (conflict)",
     _pod(required=[_term(fields=[_name_field("node1"), _name_field("node2")])]),
     None, _unres(ERR_REASON_CONFLICT)),
    ("same name twice in one term",
     _pod(required=[_term(fields=[_name_field("node1"), _name_field("node1")])]),
     PreFilterResult({"node1"}), None),
]


@pytest.mark.parametrize(
    ("pod", "want_result", "want_status"),
    [c[1:] for c in PRE_FILTER_CASES],
    ids=[c[0] for c in PRE_FILTER_CASES],
)
def test_pre_filter(pod: dict[str, Any], want_result: PreFilterResult | None,
                    want_status: Status | None) -> None:
    result, status = _plugin().pre_filter(CycleState(), PodInfo.from_pod(pod), [])
    assert result == want_result
    assert status == want_status


def test_pre_filter_not_skipped_with_added_affinity() -> None:
    plugin = _plugin(_added(required=[_term([_expr("zone", "In", "a")])]))
    result, status = plugin.pre_filter(CycleState(), PodInfo.from_pod(_pod()), [])
    assert (result, status) == (None, None)


ADDED_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], Status | None]] = [
    ("matches added and pod affinity",
     _added(required=[_term(fields=[_name_field("node2")])]),
     _pod(required=[_term([_expr("zone", "In", "z1")])]), _node("node2", zone="z1"), None),
    ("matches added but not pod affinity",
     _added(required=[_term(fields=[_name_field("node2")])]),
     _pod(required=[_term([_expr("zone", "In", "z2")])]), _node("node2", zone="z1"),
     _unres(ERR_REASON_POD)),
    ("does not match added affinity", _added(required=[_term([_expr("zone", "In", "z2")])]),
     _pod(), _node("node2", zone="z1"), _unres(ERR_REASON_ENFORCED)),
    ("added mismatch is reported before the pod's",
     _added(required=[_term([_expr("zone", "In", "z2")])]),
     _pod(selector={"disk": "ssd"}), _node("node2", zone="z1"), _unres(ERR_REASON_ENFORCED)),
    ("added affinity with no terms rejects everything", _added(required=[]), _pod(),
     _node("node2"), _unres(ERR_REASON_ENFORCED)),
    ("added preferred only does not filter",
     _added(preferred=[(1, _term([_expr("zone", "In", "z2")]))]), _pod(),
     _node("node2", zone="z1"), None),
]


@pytest.mark.parametrize(
    ("args", "pod", "node", "want"), [c[1:] for c in ADDED_CASES], ids=[c[0] for c in ADDED_CASES]
)
def test_filter_added_affinity(args: dict[str, Any], pod: dict[str, Any], node: dict[str, Any],
                               want: Status | None) -> None:
    plugin = _plugin(args)
    [info] = node_infos([node])
    pod_info = PodInfo.from_pod(pod)
    state = CycleState()
    _, status = plugin.pre_filter(state, pod_info, [info])
    if status is not None and status.is_skip():
        assert want is None
        return
    assert plugin.filter(state, pod_info, info) == want


# --- PreScore + Score -----------------------------------------------------------------------

GOLD = _term([_expr("tier", "In", "gold")])
SSD = _term([_expr("disk", "In", "ssd")])
ALL3 = _term([_expr("tier", "In", "gold"), _expr("disk", "In", "ssd"), _expr("zone", "In", "z1")])

NODES = {
    "gold": {"tier": "gold"},
    "ssd": {"disk": "ssd"},
    "zone": {"zone": "z1"},
    "all": {"tier": "gold", "disk": "ssd", "zone": "z1"},
    "other": {"abc": "x", "def": "y"},
}

SCORE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str], dict[str, int]]] = [
    ("no preferences: all zero", {}, _pod(), ["gold", "ssd", "zone"],
     {"gold": 0, "ssd": 0, "zone": 0}),
    ("no node matches", {}, _pod(preferred=[(2, GOLD)]), ["other", "ssd", "zone"],
     {"other": 0, "ssd": 0, "zone": 0}),
    ("only one node matches", {}, _pod(preferred=[(2, GOLD)]), ["gold", "ssd", "zone"],
     {"gold": MAX_NODE_SCORE, "ssd": 0, "zone": 0}),
    ("different sums, truncated", {}, _pod(preferred=[(3, GOLD), (6, SSD), (7, ALL3)]),
     ["gold", "all", "ssd"], {"gold": 18, "all": MAX_NODE_SCORE, "ssd": 37}),
    ("added preferred only", _added(preferred=[(2, GOLD)]), _pod(), ["gold", "ssd"],
     {"gold": MAX_NODE_SCORE, "ssd": 0}),
    ("added preferred plus pod preferred", _added(preferred=[(4, SSD)]),
     _pod(preferred=[(1, GOLD)]), ["gold", "ssd", "all"],
     {"gold": 20, "ssd": 80, "all": MAX_NODE_SCORE}),
    ("zero-weight terms are ignored", {}, _pod(preferred=[(0, GOLD), (1, SSD)]), ["gold", "ssd"],
     {"gold": 0, "ssd": MAX_NODE_SCORE}),
    ("name field preference",
     {}, _pod(preferred=[(5, _term(fields=[_name_field("ssd")]))]), ["gold", "ssd"],
     {"gold": 0, "ssd": MAX_NODE_SCORE}),
]


def _run_score(plugin: NodeAffinity, pod: dict[str, Any], infos: list[Any], *,
               run_pre_score: bool) -> dict[str, int]:
    pod_info = PodInfo.from_pod(pod)
    state = CycleState()
    if run_pre_score:
        status = plugin.pre_score(state, pod_info, infos)
        if status is not None and status.is_skip():
            return {i.name: 0 for i in infos}  # the runtime leaves a skipped plugin's scores at 0
        assert status is None
    scores = []
    for info in infos:
        raw, status = plugin.score(state, pod_info, info)
        assert status is None
        scores.append(NodeScore(info.name, raw))
    ext = plugin.score_extensions()
    assert ext is not None and ext.normalize_score(state, pod_info, scores) is None
    return {s.name: s.score for s in scores}


@pytest.mark.parametrize(
    ("args", "pod", "nodes", "want"), [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES]
)
@pytest.mark.parametrize("run_pre_score", [True, False], ids=["prescore", "no-prescore"])
def test_score(args: dict[str, Any], pod: dict[str, Any], nodes: list[str],
               want: dict[str, int], run_pre_score: bool) -> None:
    infos = node_infos([_node(n, **NODES[n]) for n in nodes])
    got = _run_score(_plugin(args, infos), pod, infos, run_pre_score=run_pre_score)
    assert got == want


def test_raw_score_sums_weights() -> None:
    infos = node_infos([_node("all", **NODES["all"])])
    plugin = _plugin(_added(preferred=[(10, SSD)]), infos)
    pod_info = PodInfo.from_pod(_pod(preferred=[(3, GOLD), (6, SSD), (7, ALL3)]))
    state = CycleState()
    assert plugin.pre_score(state, pod_info, infos) is None
    assert plugin.score(state, pod_info, infos[0]) == (26, None)


@pytest.mark.parametrize(
    ("args", "pod", "want"),
    [
        ({}, _pod(), Status(Code.SKIP)),
        ({}, _pod(required=[GOLD]), Status(Code.SKIP)),
        ({}, _pod(preferred=[(1, GOLD)]), None),
        (_added(preferred=[(1, GOLD)]), _pod(), None),
        (_added(required=[GOLD]), _pod(), Status(Code.SKIP)),
    ],
)
def test_pre_score_status(args: dict[str, Any], pod: dict[str, Any], want: Status | None) -> None:
    assert _plugin(args).pre_score(CycleState(), PodInfo.from_pod(pod), []) == want


# --- events and hints -----------------------------------------------------------------------


def test_events_to_register() -> None:
    [registered] = _plugin().events_to_register()
    assert registered.event.resource is EventResource.NODE
    assert registered.event.action_type == ActionType.ADD | ActionType.UPDATE_NODE_LABEL
    assert registered.hint is not None
    assert not registered.event.matches(
        ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE))


_POD_FOO_BAR = _pod(required=[node_term(foo="bar")])
_ADDED_FOO_BAR = _added(required=[node_term(foo="bar")])

HINT_CASES: list[tuple[str, dict[str, Any], dict[str, Any], Any, Any, QueueingHint]] = [
    ("added node does not match", {}, _POD_FOO_BAR, None, _node("n"), QueueingHint.SKIP),
    ("added node matches", {}, _POD_FOO_BAR, None, _node("n", foo="bar"), QueueingHint.QUEUE),
    ("unrelated update", {}, _POD_FOO_BAR, _node("n"),
     NodeBuilder("n").capacity(cpu="8").obj(), QueueingHint.SKIP),
    ("unrelated label update", {}, _POD_FOO_BAR, _node("n"), _node("n", k="v"),
     QueueingHint.SKIP),
    ("label update from matching to not matching", {}, _POD_FOO_BAR, _node("n", foo="bar"),
     _node("n", k="v"), QueueingHint.SKIP),
    ("label update keeps matching", {}, _POD_FOO_BAR, _node("n", foo="bar"),
     _node("n", foo="bar", k="v"), QueueingHint.SKIP),
    ("label update makes it match", {}, _POD_FOO_BAR, _node("n"), _node("n", foo="bar"),
     QueueingHint.QUEUE),
    ("added node fails enforced affinity", _ADDED_FOO_BAR, _POD_FOO_BAR, None, _node("n"),
     QueueingHint.SKIP),
    ("added node passes enforced affinity", _ADDED_FOO_BAR, _POD_FOO_BAR, None,
     _node("n", foo="bar"), QueueingHint.QUEUE),
    ("enforced affinity only, node matches", _ADDED_FOO_BAR, _pod(), None,
     _node("n", foo="bar"), QueueingHint.QUEUE),
    ("node selector pod, update makes it match", {}, _pod(selector={"disk": "ssd"}), _node("n"),
     _node("n", disk="ssd"), QueueingHint.QUEUE),
]


@pytest.mark.parametrize(
    ("args", "pod", "old", "new", "want"),
    [c[1:] for c in HINT_CASES],
    ids=[c[0] for c in HINT_CASES],
)
def test_node_change_hint(args: dict[str, Any], pod: dict[str, Any], old: Any, new: Any,
                          want: QueueingHint) -> None:
    assert _plugin(args).is_schedulable_after_node_change(pod, old, new) == want


@pytest.mark.parametrize(("old", "new"), [(None, "not-a-node"), ("not-a-node", _node("n"))])
def test_node_change_hint_wrong_object_raises(old: Any, new: Any) -> None:
    with pytest.raises(TypeError):
        _plugin().is_schedulable_after_node_change(_POD_FOO_BAR, old, new)


@pytest.mark.parametrize(
    ("spec", "added", "skipped"),
    [
        ({}, False, True),  # the common pod: Skip before any parsing
        ({"affinity": {}}, False, True),  # the full check, same answer
        ({"affinity": {"podAffinity": {}}}, False, True),
        ({"nodeSelector": {}}, False, False),  # present, even empty: Filter runs (upstream)
        ({"nodeSelector": {"zone": "a"}}, False, False),
        ({}, True, False),  # addedAffinity applies to every pod
    ],
)
def test_prefilter_skip(spec: dict[str, Any], added: bool, skipped: bool) -> None:
    pod = PodBuilder("p").obj()
    pod["spec"].update(spec)
    plugin = _plugin(_added([node_term(zone="a")]) if added else None)
    _, status = plugin.pre_filter(CycleState(), PodInfo.from_pod(pod), [])
    assert (status is not None and status.code == Code.SKIP) is skipped, status
