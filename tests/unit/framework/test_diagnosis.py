"""Diagnosis' bulk rejections (expanded when read) against the per-node bookkeeping they
replace, and the FailedScheduling histogram counted by reasons groups against a count per
status."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis, FitError, reason_counts
from tests.builders import NodeBuilder

REASONS = ["Insufficient cpu", "Insufficient memory",
           "node(s) didn't match pod topology spread constraints",
           "node(s) had untolerated taint {dedicated: gpu}"]
PLUGINS = ["NodeResourcesFit", "PodTopologySpread", "TaintToleration", ""]
CODES = [Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING]


def nodes(count: int, prefix: str = "n") -> list[NodeInfo]:
    return [NodeInfo(NodeBuilder(f"{prefix}{i}").obj()) for i in range(count)]


def random_status(rng: random.Random) -> Status:
    reasons = rng.sample(REASONS, rng.choice([0, 1, 1, 1, 2]))
    return Status(rng.choice(CODES), *reasons, plugin=rng.choice(PLUGINS))


def eager(diagnosis: Diagnosis, chunk: list[NodeInfo], statuses: list[Status | None]) -> None:
    """The per-node bookkeeping the walk did before bulk rejections."""
    for node_info, status in zip(chunk, statuses):
        if status is None:
            continue
        diagnosis.node_to_status[node_info.name] = status
        if status.plugin:
            diagnosis.unschedulable_plugins.add(status.plugin)
            if status.code == Code.PENDING:
                diagnosis.pending_plugins.add(status.plugin)


@pytest.mark.parametrize("seed", range(12))
def test_bulk_rejections_expand_to_the_per_node_bookkeeping(seed: int) -> None:
    rng = random.Random(seed)
    lazy, want = Diagnosis(), Diagnosis()
    for c in range(rng.randrange(1, 5)):
        chunk = nodes(rng.randrange(1, 40), prefix=f"c{c}-")
        if rng.random() < 0.25:
            shared = random_status(rng)
            lazy.reject_all(chunk, shared)
            eager(want, chunk, [shared] * len(chunk))
            continue
        statuses = [None if rng.random() < 0.4 else random_status(rng) for _ in chunk]
        lazy.add_rejected(chunk, statuses, sum(s is not None for s in statuses))
        eager(want, chunk, statuses)
    assert lazy.num_rejected == len(want.node_to_status)
    assert list(lazy.node_to_status.items()) == list(want.node_to_status.items())
    assert lazy.unschedulable_plugins == want.unschedulable_plugins
    assert lazy.pending_plugins == want.pending_plugins
    assert lazy.num_rejected == len(want.node_to_status)  # unchanged by the expansion
    assert str(FitError(pod_key="ns/p", num_all_nodes=200, diagnosis=lazy)) == str(
        FitError(pod_key="ns/p", num_all_nodes=200, diagnosis=want))


@pytest.mark.parametrize(
    ("read", "want"),
    [
        pytest.param(lambda d: sorted(d.unschedulable_plugins), ["NodeResourcesFit", "Pre"],
                     id="plugins-read-first"),
        pytest.param(lambda d: sorted(d.node_to_status), ["a0", "a1", "b0"],
                     id="statuses-read-first"),
        pytest.param(lambda d: sorted(d.pending_plugins), ["Pre"], id="pending-read-first"),
    ],
)
def test_direct_writes_after_bulk_rejections_keep_both(read: object, want: list[str]) -> None:
    d = Diagnosis()
    a = nodes(2, prefix="a")
    d.add_rejected(a, [Status(Code.UNSCHEDULABLE, "x", plugin="NodeResourcesFit")] * 2, 2)
    # what the extenders' Filter or a PostFilter does: write into the expanded fields
    d.node_to_status["b0"] = Status(Code.PENDING, "y", plugin="Pre")
    d.unschedulable_plugins.add("Pre")
    d.pending_plugins.add("Pre")
    assert read(d) == want  # type: ignore[operator]
    assert d.num_rejected == 3


@pytest.mark.parametrize("seed", range(8))
def test_reason_counts_is_the_per_status_histogram(seed: int) -> None:
    rng = random.Random(seed)
    shared = random_status(rng)
    statuses = [random_status(rng) for _ in range(rng.randrange(0, 60))] + [shared] * 30
    rng.shuffle(statuses)
    per_status: Counter[str] = Counter()
    for status in statuses:
        per_status.update(status.reasons)
    counts = reason_counts(statuses)
    assert counts == dict(per_status)
    # first-seen order, as the per-status count gave it (the debug store's JSON)
    assert list(counts) == list(per_status)


def test_fit_error_counts_a_shared_status_once_per_node() -> None:
    d = Diagnosis()
    d.reject_all(nodes(5001), Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                     "Preemption is not helpful for scheduling"))
    assert str(FitError(pod_key="ns/p", num_all_nodes=5001, diagnosis=d)) == (
        "0/5001 nodes are available: 5001 Preemption is not helpful for scheduling.")


@pytest.mark.parametrize(("change", "recounted"), [
    ("nothing", False),
    ("a status added", True),
    ("the statuses replaced", True),
])
def test_fit_error_counts_its_histogram_once_for_message_and_store(
        monkeypatch: pytest.MonkeyPatch, change: str, recounted: bool) -> None:
    """The message and the diagnosis store read one count of the statuses
    (``reason_histogram``), counted again only when the statuses changed since."""
    import scheduler.framework.types as types_module

    calls: list[int] = []

    def counting(statuses: object) -> dict[str, int]:
        calls.append(1)
        return reason_counts(statuses)  # type: ignore[arg-type]

    monkeypatch.setattr(types_module, "reason_counts", counting)
    d = Diagnosis()
    d.reject_all(nodes(3), Status(Code.UNSCHEDULABLE, "Insufficient cpu", plugin="F"))
    fit_error = FitError(pod_key="ns/p", num_all_nodes=3, diagnosis=d)
    assert str(fit_error) == "0/3 nodes are available: 3 Insufficient cpu."
    if change == "a status added":
        d.node_to_status["n9"] = Status(Code.UNSCHEDULABLE, "Insufficient memory", plugin="F")
    elif change == "the statuses replaced":
        d.node_to_status = {"n0": Status(Code.UNSCHEDULABLE, "Insufficient memory")}
    histogram = fit_error.reason_histogram()
    assert histogram == reason_counts(d.node_to_status.values())
    assert len(calls) == (2 if recounted else 1)


class _Scripted:
    """A framework whose Filter answers each node as scripted: "." passes (None), "s" a
    Success status, "r" a rejection, "e" an Error."""

    def __init__(self, script: str) -> None:
        self.script = script

    def _answer(self, node_info: NodeInfo) -> Status | None:
        kind = self.script[int(node_info.name[1:])]
        if kind == "s":
            return Status(Code.SUCCESS)
        if kind == "r":
            return Status(Code.UNSCHEDULABLE, f"rejected {node_info.name}", plugin="R")
        if kind == "e":
            return Status(Code.ERROR, f"broken {node_info.name}", plugin="E")
        return None

    def run_filter_plugins_on_nodes(self, state: object, pod_info: object,
                                    chunk: list[NodeInfo]) -> list[Status | None]:
        return [self._answer(n) for n in chunk]


@pytest.mark.parametrize(
    ("script", "start", "to_find", "want"),
    [
        # (feasible, processed, rejected) or the node whose Error stops the cycle
        pytest.param("r.r..rr.", 0, 3, (["n1", "n3", "n4"], 5, ["n0", "n2"]), id="stops-at-cut"),
        pytest.param("r.r..e..", 0, 3, (["n1", "n3", "n4"], 5, ["n0", "n2"]),
                     id="error-after-the-cut-unseen"),
        pytest.param("r.e..r..", 0, 3, "n2", id="error-before-the-cut-raises"),
        pytest.param("rs.rsr", 4, 2, (["n4", "n1"], 4, ["n5", "n0"]), id="success-passes"),
        pytest.param("rrrr", 1, 2, ([], 4, ["n1", "n2", "n3", "n0"]), id="none-fits"),
    ],
)
def test_walk_with_rejections(script: str, start: int, to_find: int, want: object) -> None:
    from scheduler.find_nodes import _StatusError, filter_nodes_from

    all_nodes = nodes(len(script))
    diagnosis = Diagnosis()
    fwk = _Scripted(script)
    if isinstance(want, str):
        with pytest.raises(_StatusError) as raised:
            filter_nodes_from(fwk, None, None, all_nodes, start=start,  # type: ignore[arg-type]
                              to_find=to_find, diagnosis=diagnosis)
        assert raised.value.status.message() == f"broken {want}"
        return
    feasible, processed = filter_nodes_from(
        fwk, None, None, all_nodes, start=start, to_find=to_find,  # type: ignore[arg-type]
        diagnosis=diagnosis)
    assert ([n.name for n in feasible], processed, list(diagnosis.node_to_status)) == want
    assert diagnosis.unschedulable_plugins == ({"R"} if want[2] else set())  # type: ignore[index]
