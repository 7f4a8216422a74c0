"""Opportunistic batching places every pod exactly where the unbatched cycle would.

For random clusters and random streams of pods (drawn from a few shapes, so signatures
repeat), interleaved with node changes and pods leaving, the scheduling cycle runs twice
with the same tie-break seed: once with batching, once without.  Every pod must land on the
same node, or be rejected with the same message, and batching must actually have reused
results (so the test cannot pass by never batching).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.framework.types import FitError
from scheduler.objects.pod import PodInfo
from tests.offline import cache_with, default_framework, scheduling_cycle

ZONES = ("a", "b", "c")
IMAGES = {"img-big": 900 * 1024 * 1024, "img-small": 40 * 1024 * 1024}


def _node(i: int, shape: dict[str, Any], *, name: str = "") -> dict[str, Any]:
    name = name or f"n{i:03d}"
    capacity = {"cpu": shape["cpu"], "memory": shape["memory"], "pods": shape["pods"]}
    taints = [{"key": "dedicated" if j == 0 else f"dedicated-{j}", "value": "x", "effect": e}
              for j, e in enumerate(shape["taints"])]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"u-{name}", "labels": {
            "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": shape["zone"]}},
        "spec": {"taints": taints, "unschedulable": shape["cordoned"]},
        "status": {"capacity": capacity, "allocatable": dict(capacity),
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "images": [{"names": [img], "sizeBytes": IMAGES[img]}
                              for img in shape["images"]]},
    }


node_shapes = st.fixed_dictionaries({
    "cpu": st.sampled_from(["1", "2", "4"]),
    "memory": st.sampled_from(["1Gi", "4Gi"]),
    "pods": st.sampled_from(["1", "2", "110"]),
    "zone": st.sampled_from(ZONES),
    "taints": st.sampled_from([[], ["NoSchedule"], ["PreferNoSchedule"],
                               ["PreferNoSchedule", "PreferNoSchedule"]]),
    "cordoned": st.booleans(),
    "images": st.sampled_from([[], ["img-big"], ["img-small"], ["img-big", "img-small"]]),
})

pod_shapes = st.fixed_dictionaries({
    "cpu": st.sampled_from(["100m", "500m", "1"]),
    "memory": st.sampled_from(["128Mi", "1Gi"]),
    "tolerate": st.sampled_from([None, "NoSchedule", "PreferNoSchedule", "all"]),
    "zone": st.sampled_from([None, "a", "b"]),
    "prefer_zone": st.sampled_from([None, "c"]),
    "image": st.sampled_from(["img-big", "img-small", "other"]),
    "host_port": st.sampled_from([None, 8080]),
    # PodTopologySpread and InterPodAffinity cannot sign such pods: partial batching.
    "spread": st.sampled_from([None, None, "zone", "hostname", "zone-soft"]),
    "anti_affinity": st.sampled_from([False, False, True, "preferred"]),
})


def _pod(i: int, shape: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": shape["image"], "resources": {
        "requests": {"cpu": shape["cpu"], "memory": shape["memory"]}}}
    if shape.get("host_port"):
        container["ports"] = [{"containerPort": 80, "hostPort": shape["host_port"]}]
    spec: dict[str, Any] = {"schedulerName": "default-scheduler", "containers": [container]}
    if shape["tolerate"] == "all":
        spec["tolerations"] = [{"operator": "Exists"}]
    elif shape["tolerate"]:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "x",
                                "effect": shape["tolerate"]}]
    if shape["zone"]:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": shape["zone"]}
    if shape["prefer_zone"]:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{
                "key": "topology.kubernetes.io/zone", "operator": "In",
                "values": [shape["prefer_zone"]]}]}}]}}
    app = f"{shape['cpu']}-{shape['image']}"
    topology = {"zone": "topology.kubernetes.io/zone",
                "hostname": "kubernetes.io/hostname"}
    spread = shape.get("spread")
    if spread:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": topology[spread.removesuffix("-soft")],
            "whenUnsatisfiable": "ScheduleAnyway" if spread.endswith("-soft")
            else "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}}}]
    term = {"labelSelector": {"matchLabels": {"app": app}},
            "topologyKey": "kubernetes.io/hostname"}
    if shape.get("anti_affinity") == "preferred":
        spec.setdefault("affinity", {})["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term}]}
    elif shape.get("anti_affinity"):
        spec.setdefault("affinity", {})["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"uid-{i}",
                         "resourceVersion": "1", "labels": {"app": app}},
            "spec": spec}


# A step: ("pod", shape index) | ("node", node index, new shape) | ("forget", placed index)
# | ("add", shape, zoneless) a node joins (zoneless: a zone of its own, listed among the
# first, so every later position moves) | ("remove", node index) a node leaves
# | ("confirm", placed index, change) an assumed pod's bound version arrives (``_bound``)
steps = st.one_of(
    st.tuples(st.just("pod"), st.integers(0, 3)),
    st.tuples(st.just("pod"), st.integers(0, 3)),
    st.tuples(st.just("pod"), st.integers(0, 3)),
    st.tuples(st.just("node"), st.integers(0, 200), node_shapes),
    st.tuples(st.just("forget"), st.integers(0, 200)),
    st.tuples(st.just("add"), node_shapes, st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 200)),
    st.tuples(st.just("confirm"), st.integers(0, 200),
              st.sampled_from(["echo", "echo", "running", "labels"])),
)


def _run(nodes: list[dict[str, Any]], shapes: list[dict[str, Any]], stream: list[Any], *,
         batched: bool, seed: int, percentage: int,
         stats: dict[str, int] | None = None) -> tuple[list[str], int]:
    cache, snapshot = cache_with(nodes)
    fwk = default_framework(snapshot)
    cycle = scheduling_cycle(cache, snapshot, seed=seed, percentage=percentage)
    if not batched:
        cycle.batches = None
    else:
        # Every batched score table (kept windows included) equals scoring afresh.
        batched_score = cycle._score

        def checked_score(fwk: Any, state: Any, pod_info: Any, feasible: Any) -> Any:
            table = batched_score(fwk, state, pod_info, feasible)
            if table is not None:
                fresh, status = fwk.score_table(state, pod_info, feasible)
                assert status is None
                assert (table.names, table.totals, table.by_plugin) == (
                    fresh.names, fresh.totals, fresh.by_plugin)
                if table.best is not None:  # a kept window's highest total, kept up to date
                    top = max(fresh.totals)
                    assert table.best == (top, fresh.totals.count(top))
            return table

        cycle._score = checked_score  # type: ignore[method-assign]  # checking wrapper
    reused = 0
    outcomes: list[str] = []
    placed: list[dict[str, Any]] = []
    current = list(nodes)
    for i, step in enumerate(stream):
        if step[0] == "node":
            index = step[1] % len(current)
            new = _node(index, step[2], name=current[index]["metadata"]["name"])
            cache.update_node(current[index], new)
            current[index] = new
            continue
        if step[0] == "add":
            new = _node(1000 + i, dict(step[1], zone="") if step[2] else step[1])
            cache.add_node(new)
            current.append(new)
            continue
        if step[0] == "remove":
            if len(current) > 1:
                cache.remove_node(current.pop(step[1] % len(current)))
            continue
        if step[0] == "forget":
            if placed:
                cache.forget_pod(placed.pop(step[1] % len(placed)))
            continue
        if step[0] == "confirm":  # the informer's bound version of an assumed pod
            if placed:
                cache.add_pod(PodInfo.from_pod(_bound(placed.pop(step[1] % len(placed)),
                                                      step[2])))
            continue
        pod_info = PodInfo.from_pod(_pod(i, shapes[step[1]]))
        state = fwk.new_cycle_state()
        try:
            result = cycle.schedule_pod(fwk, state, pod_info)
        except FitError as exc:
            outcomes.append(f"rejected: {exc}")
            continue
        finally:
            batch = cycle._batch
        # the nodes examined and found feasible too (the walk's, or a kept window's)
        outcomes.append(f"{result.suggested_host} {result.evaluated_nodes}"
                        f" {result.feasible_nodes}")
        assumed = dict(pod_info.pod)
        assumed["spec"] = {**pod_info.pod["spec"], "nodeName": result.suggested_host}
        cache.assume_pod(PodInfo.from_pod(assumed))
        placed.append(assumed)
        del batch
    if cycle.batches is not None:
        reused = cycle.batches.reused
        if stats is not None:
            stats["windows_reused"] = cycle.batches.windows_reused
            stats["score_windows_reused"] = cycle.batches.score_windows_reused
            stats["scattered_windows_reused"] = cycle.batches.scattered_windows_reused
    return outcomes, reused


def _bound(assumed: dict[str, Any], change: str) -> dict[str, Any]:
    """The API server's version of a pod assumed and bound: a new resourceVersion and the
    binding's PodScheduled condition (``echo``: what every bound pod's MODIFIED brings), the
    kubelet's Running phase (``running``) or new labels (``labels``)."""
    bound = {**assumed, "metadata": {**assumed["metadata"], "resourceVersion": "2"},
             "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    if change == "running":
        bound["status"] = {**bound["status"], "phase": "Running"}
    elif change == "labels":
        bound["metadata"]["labels"] = {"app": "relabelled"}
    return bound


# The shapes the example-based tests below start from: a 4-CPU node of zone a, and
# upstream's pod-default-like 100m pod.
NODE_SHAPE: dict[str, Any] = {"cpu": "4", "memory": "4Gi", "pods": "110", "zone": "a", "taints": [],
                              "cordoned": False, "images": []}
POD_SHAPE: dict[str, Any] = {"cpu": "100m", "memory": "128Mi", "tolerate": None, "zone": None,
                             "prefer_zone": None, "image": "x", "host_port": None}


def _batched_like_plain(nodes: list[dict[str, Any]], stream: list[Any], *, seed: int,
                        pod_shape: dict[str, Any] = POD_SHAPE,
                        ) -> tuple[list[str], int, dict[str, int]]:
    """The stream run unbatched, then batched (every node examined, pods of one shape): the
    batched outcomes must be the unbatched ones. Returns those outcomes, the results the
    batched run reused and batching's counters."""
    plain, _ = _run(nodes, [pod_shape] * 4, stream, batched=False, seed=seed, percentage=0)
    stats: dict[str, int] = {}
    batched, reused = _run(nodes, [pod_shape] * 4, stream, batched=True, seed=seed,
                           percentage=0, stats=stats)
    assert batched == plain
    return plain, reused, stats


# 60 streams per CI run (was 150, 6.4 s of the suite).
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node_count=st.one_of(st.integers(1, 8), st.integers(100, 130)),
    shape_list=st.lists(node_shapes, min_size=1, max_size=4),
    pod_shape_list=st.lists(pod_shapes, min_size=4, max_size=4),
    stream=st.lists(steps, min_size=1, max_size=40),
    seed=st.integers(0, 2**16),
    percentage=st.sampled_from([0, 10, 70]),
)
def test_batched_cycles_place_and_reject_like_unbatched_ones(
    node_count: int, shape_list: list[dict[str, Any]], pod_shape_list: list[dict[str, Any]],
    stream: list[Any], seed: int, percentage: int,
) -> None:
    nodes = [_node(i, shape_list[i % len(shape_list)]) for i in range(node_count)]
    plain, _ = _run(nodes, pod_shape_list, stream, batched=False, seed=seed,
                    percentage=percentage)
    batched, _ = _run(nodes, pod_shape_list, stream, batched=True, seed=seed,
                      percentage=percentage)
    assert batched == plain


def test_a_stream_of_alike_pods_reuses_results() -> None:
    """The property above could pass by never batching: here batching must kick in."""
    nodes = [_node(i, dict(NODE_SHAPE, images=["img-small"])) for i in range(120)]
    stream: list[Any] = [("pod", 0)] * 30
    _, reused, stats = _batched_like_plain(nodes, stream, seed=3,
                                           pod_shape=dict(POD_SHAPE, image="img-small"))
    # 30 cycles over 100 of 120 nodes: all but the first pass and the changed nodes reused.
    assert reused > 20 * 100
    # 120 nodes, 100 examined per cycle: the walk comes back to each of 6 start indexes,
    # and from the second visit on takes the kept window through the change log.
    assert stats["windows_reused"] >= 20
    # ... and scores it from the kept scores: every Score plugin signs such a pod
    # (DynamicResources included: a pod without claims scores 0 everywhere).
    assert stats["score_windows_reused"] >= 20


def test_kept_windows_follow_node_changes_that_move_a_normalized_column() -> None:
    """A node of a kept window gains two PreferNoSchedule taints while another has one
    (TaintToleration's highest raw score moves, so its normalized column changes on nodes
    that did not change), then is cordoned (it leaves
    the feasible set, so the window is walked again): placements stay those of the
    unbatched cycle, and windows were reused around the changes."""
    plain_shape = NODE_SHAPE
    tainted = dict(plain_shape, taints=["PreferNoSchedule", "PreferNoSchedule"])
    cordoned = dict(plain_shape, cordoned=True)
    nodes = [_node(i, plain_shape) for i in range(8)]
    nodes[1] = _node(1, dict(plain_shape, taints=["PreferNoSchedule"]))
    stream: list[Any] = [("pod", 0)] * 5 + [("node", 3, tainted)] + [("pod", 0)] * 5
    stream += [("node", 3, cordoned)] + [("pod", 0)] * 5 + [("node", 3, plain_shape)]
    stream += [("pod", 0)] * 5
    for seed in range(5):
        plain, _, stats = _batched_like_plain(nodes, stream, seed=seed)
        assert any(o.startswith("n003 ") for o in plain)  # the node came back, picked again
        assert stats["windows_reused"] >= 10


def test_plugins_that_cannot_sign_run_every_cycle_while_the_others_are_reused() -> None:
    """Pods with required anti-affinity run InterPodAffinity, which has no ``sign``: it
    filters afresh each cycle (each replica takes a node of its own, the sixth finds none)
    while the signed plugins' results are reused (partial batching)."""
    nodes = [_node(i, NODE_SHAPE) for i in range(5)]
    stream: list[Any] = [("pod", 0)] * 6
    plain, reused, _ = _batched_like_plain(nodes, stream, seed=1,
                                           pod_shape=dict(POD_SHAPE, anti_affinity=True))
    assert len(set(plain[:5])) == 5 and plain[5].startswith("rejected")
    assert "didn't match pod anti-affinity rules" in plain[5]
    assert reused >= 4 * 5 - 5  # every node unchanged since the last cycle


@settings(max_examples=200, deadline=None)
@given(old=st.lists(st.integers(0, 4), min_size=1, max_size=30), data=st.data())
def test_the_highest_total_follows_a_few_changed_nodes(old: list[int], data: Any) -> None:
    """A kept window's (highest total, how many) after its changed nodes' totals moved is
    what counting the whole list gives, whichever way the changes go."""
    from scheduler.framework.batching import _best, _best_after

    offsets = sorted(data.draw(st.sets(st.integers(0, len(old) - 1), min_size=1)))
    new = list(old)
    for o in offsets:
        new[o] = data.draw(st.integers(0, 5))
    assert _best_after(_best(old), old, new, offsets) == _best(new)


def test_node_churn_between_cycles_places_like_unbatched_and_keeps_results() -> None:
    """MixedChurn's shape: a zoneless node (a zone of its own, listed fourth, so every later
    position moves by one) replaced every few pods, with pods scheduled while it is gone.
    Placements stay those of the unbatched cycle, and the kept results follow their nodes
    across each rebuilt node list (by NodeInfo generation) instead of being dropped."""
    nodes = [_node(i, dict(NODE_SHAPE, zone=ZONES[i % 3])) for i in range(120)]
    churn = dict(NODE_SHAPE, zone="")
    stream: list[Any] = [("pod", 0)] * 10
    for _ in range(6):
        stream += [("add", churn, True)] + [("pod", 0)] * 8 + [("remove", -1), ("pod", 0)]
    cycles = sum(1 for step in stream if step[0] == "pod")
    for seed in range(3):
        plain, reused, stats = _batched_like_plain(nodes, stream, seed=seed)
        assert any(host.startswith("n1") for host in plain)  # churn nodes were picked
        # 100 nodes examined per cycle; only the first pass, the nodes that changed and
        # the joining nodes are filtered again (dropping every kept result at each of
        # the 12 list rebuilds would filter ~100 more per rebuild).
        assert reused >= cycles * 100 - 400
        # With the churn node in, 121 nodes: the round robin starts 21 nodes earlier each
        # cycle after the first lap, so kept windows are reused shifted (4 without).
        assert stats["windows_reused"] >= 12


def test_confirmations_between_cycles_place_like_unbatched_and_keep_results() -> None:
    """Each pod's bound version (the informer's MODIFIED after the binding) arrives a
    cycle after the pod was assumed, as in the daemon.  Placements stay those of the
    unbatched cycle; a confirmation that reads alike (the binding's echo) keeps every
    kept result, as if no confirmation had come; a relabelled pod's node is recomputed."""
    nodes = [_node(i, dict(NODE_SHAPE, zone=ZONES[i % 3])) for i in range(120)]
    quiet: list[Any] = [("pod", 0)] * 30
    echoed: list[Any] = [("pod", 0)] + [step for _ in range(29)
                                        for step in (("pod", 0), ("confirm", 0, "echo"))]
    relabelled: list[Any] = [("pod", 0)] + [step for _ in range(29)
                                            for step in (("pod", 0), ("confirm", 0, "labels"))]
    for seed in range(3):
        plain, reused, _ = _batched_like_plain(nodes, quiet, seed=seed)
        plain_echoed, reused_echoed, _ = _batched_like_plain(nodes, echoed, seed=seed)
        assert plain_echoed == plain
        assert reused_echoed == reused
        _, reused_relabelled, _ = _batched_like_plain(nodes, relabelled, seed=seed)
        assert reused_relabelled < reused


def test_a_window_kept_a_few_nodes_away_is_reused_shifted() -> None:
    """The node count is no multiple of the nodes examined per cycle (103 nodes, 100
    examined): no start index comes back, every window is a kept one shifted by a few
    nodes.  Nodes with PreferNoSchedule taints (TaintToleration normalizes by the highest
    count in the window) enter and leave the window as it moves: placements and every
    score table stay those of the unbatched cycle."""
    nodes = [_node(i, dict(NODE_SHAPE, taints=["PreferNoSchedule"] * (i % 3 == 0) * (1 + i % 2)))
             for i in range(103)]
    stream: list[Any] = [("pod", 0)] * 40
    for seed in range(3):
        _, _, stats = _batched_like_plain(nodes, stream, seed=seed)
        assert stats["windows_reused"] >= 30
        assert stats["score_windows_reused"] >= 30


def test_a_window_found_among_rejected_nodes_is_reused_while_its_nodes_answer_alike() -> None:
    """Every fifth node is tainted NoSchedule: each walk meets rejected nodes, so the
    feasible nodes it keeps are no one run of the node list.  That window is reused (the
    same nodes examined, the same rejections counted) while the nodes it examined that
    changed still pass or fail as before; a feasible node tainted, a tainted one cleared
    and a rejected one cordoned (still rejected, another reason) change it.  Placements,
    the nodes examined and found feasible, and every score table stay those of the
    unbatched cycle."""
    shape = NODE_SHAPE
    tainted = dict(shape, taints=["NoSchedule"])
    cordoned = dict(shape, cordoned=True)
    for count in (125, 250):
        nodes = [_node(i, tainted if i % 5 == 0 else shape) for i in range(count)]
        stream: list[Any] = [("pod", 0)] * 12 + [("node", 7, tainted)] + [("pod", 0)] * 6
        stream += [("node", 10, shape)] + [("pod", 0)] * 6 + [("node", 15, cordoned)]
        stream += [("pod", 0)] * 6 + [("node", 7, shape), ("node", 10, tainted)]
        stream += [("pod", 0)] * 6
        for seed in range(3):
            _, _, stats = _batched_like_plain(nodes, stream, seed=seed)
            assert stats["scattered_windows_reused"] >= 15
            assert stats["score_windows_reused"] >= 15
