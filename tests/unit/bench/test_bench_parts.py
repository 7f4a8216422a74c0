"""The bench's pieces that need no sandbox: workload shapes, progress bar, churn loop, curve,
the run's figures from injected timestamps."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from scheduler.bench import build_parser
from scheduler.bench.report import Progress, cores_bound, curve_table, format_result
from scheduler.bench.creator import CreatorReport
from scheduler.bench.machine import Machine, cpu_model
from scheduler.bench.run import SchedulerRun, _result, churn_loop, delete_loop, sandbox_flags
from scheduler.bench.workloads import (
    EXISTING_NAMESPACE,
    MEASURED_NAMESPACE,
    WORKLOADS,
    churn_object,
    gated_pod,
)
from scheduler.objects.node import node_allocatable
from scheduler.objects.pod import pod_requests


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_a_bar_on_a_terminal_and_clears_it() -> None:
    stream = _Tty()
    progress = Progress(stream)
    progress.update("scheduling", 5, 10)
    assert "[###############...............] 5/10" in stream.getvalue()
    progress.close()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_progress_writes_nothing_on_a_pipe() -> None:
    stream = io.StringIO()
    progress = Progress(stream)
    progress.update("scheduling", 5, 10)
    progress.close()
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("name", "nodes", "floor", "measured", "existing", "gated", "node_pods", "zones"),
    [
        # upstream's node-default template: no zone label
        pytest.param("SchedulingBasic", 5000, 680, 10000, 1000, 0, "110", False, id="basic"),
        pytest.param("SchedulingPodAntiAffinity", 5000, 60, 2000, 1000, 0, "110", False,
                     id="anti-affinity"),
        # labelNodePrepareStrategy: moon-1/2/3, and zone1
        pytest.param("TopologySpreading", 5000, 460, 5000, 5000, 0, "110", True, id="spread"),
        pytest.param("NodeAffinity", 5000, 220, 10000, 5000, 0, "110", True,
                     id="node-affinity"),
        pytest.param("PreemptionAsync", 5000, 570, 5000, 20000, 0, "110", False,
                     id="preemption"),
        # upstream's 1Node_10000GatedPods: node-with-name (90000 pods), 20000 deleting pods
        pytest.param("SchedulingWhileGated", 1, 910, 20000, 20000, 10000, "90000", False,
                     id="gated"),
        pytest.param("MixedChurn", 5000, 710, 10000, 0, 0, "110", False, id="churn"),
    ],
)
def test_upstream_shapes_at_their_size(name: str, nodes: int, floor: float, measured: int,
                                       existing: int, gated: int, node_pods: str,
                                       zones: bool) -> None:
    w = WORKLOADS[name]
    assert (w.upstream_floor, w.measured_pods) == (floor, measured)
    assert (w.before(w.existing_pods, nodes=nodes, pods=measured),
            w.before(w.gated_pods, nodes=nodes, pods=measured)) == (existing, gated)
    assert (w.node_cpu, w.node_memory, w.node_pods) == ("4", "32Gi", node_pods)
    assert w.node_zones is zones


def test_only_the_shapes_whose_nodes_have_zones_upstream_keep_them() -> None:
    """Upstream's node-default, node-with-name and node-with-dra-test-driver templates have
    no zone; the Backlog is SchedulingBasic's nodes. Our own shapes (no upstream template)
    keep the sandbox's zones, as their earlier figures had them."""
    zoned = {name for name, w in WORKLOADS.items() if w.node_zones}
    ours = {"gang", "plain", "anti-affinity", "spread", "extender",
            *(f"GangMixed{size}{topo}" for size in (8, 32, 128) for topo in ("", "Topology"))}
    assert zoned == {"TopologySpreading", "NodeAffinity"} | ours
    assert not WORKLOADS["Backlog"].node_zones
    assert not any(w.node_zones for name, w in WORKLOADS.items() if w.dra_devices)


@pytest.mark.parametrize(("name", "flag"), [
    pytest.param("SchedulingBasic", "--no-node-topology", id="no-zones"),
    pytest.param("TopologySpreading", "--node-topology", id="zones"),
])
def test_the_sandbox_is_told_whether_its_nodes_have_zones(name: str, flag: str,
                                                         tmp_path: Path) -> None:
    from scheduler.sandbox.testing import SandboxProcess

    flags = sandbox_flags(WORKLOADS[name], nodes=5, node_cpu="4", node_memory="32Gi")
    argv = SandboxProcess(workdir=tmp_path, **flags).argv()
    assert flag in argv and argv[argv.index("--nodes") + 1] == "5"


def test_while_gated_is_upstreams_light_and_gated_pods_scaled_with_the_measured_pods() -> None:
    w = WORKLOADS["SchedulingWhileGated"]
    assert w.existing is not None and w.light and w.delete_existing_per_s == 50.0
    gated = gated_pod(0, "s")
    for p in (w.measured(0, "s"), w.existing(0, "s"), gated):
        assert "resources" not in p["spec"]["containers"][0]  # no requests, no limits
    assert gated["spec"]["schedulingGates"] == [{"name": "test.k8s.io/hold"}]
    # upstream's 1Node_10GatedPods: 10 gated, 10 deleting, 10 measured; on any node count
    assert (w.before(w.gated_pods, nodes=12, pods=10),
            w.before(w.existing_pods, nodes=12, pods=10)) == (5, 10)
    assert w.before(w.gated_pods, nodes=1, pods=1) == 1
    basic = WORKLOADS["SchedulingBasic"]
    assert basic.before(basic.existing_pods, nodes=500, pods=7) == 100  # by nodes


@pytest.mark.parametrize(
    ("delete_takes", "slept"),
    [
        pytest.param(0.0, [0.02, 0.02, 0.02], id="instant-deletes"),
        # each DELETE takes 5 ms: the ticker waits 15 ms, not 20 after it
        pytest.param(0.005, [0.02, 0.015, 0.015], id="slow-deletes"),
        # a DELETE slower than the interval: the next one goes at once
        pytest.param(0.03, [0.02], id="deletes-slower-than-the-rate"),
    ],
)
async def test_delete_loop_deletes_in_order_on_a_ticker(delete_takes: float,
                                                        slept: list[float]) -> None:
    now = [100.0]
    waits: list[float] = []

    class _Slow(_Recorder):
        async def delete(self, path: str) -> None:
            await super().delete(path)
            now[0] += delete_takes

    async def sleep(seconds: float) -> None:
        waits.append(round(seconds, 6))
        now[0] += seconds

    user = _Slow()
    pods = [{"namespace": "ns", "name": f"p-{i}"} for i in range(3)]
    await delete_loop(user, pods, per_second=50.0, sleep=sleep, clock=lambda: now[0])()
    assert user.calls == [("delete", f"/api/v1/namespaces/ns/pods/p-{i}") for i in range(3)]
    assert waits == slept


def test_existing_pods_scale_with_the_node_count() -> None:
    w = WORKLOADS["PreemptionAsync"]
    assert w.scaled(w.existing_pods, 500) == 2000  # 4 low-priority pods per node
    assert w.scaled(w.existing_pods, 1) == 4
    assert WORKLOADS["SchedulingBasic"].scaled(0, 500) == 0


def test_anti_affinity_pods_repel_each_other_across_both_namespaces() -> None:
    w = WORKLOADS["SchedulingPodAntiAffinity"]
    assert w.existing is not None
    for p in (w.measured(0, "s"), w.existing(0, "s")):
        term = p["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert set(term["namespaces"]) == {MEASURED_NAMESPACE, EXISTING_NAMESPACE}
        assert p["metadata"]["labels"] == term["labelSelector"]["matchLabels"]


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_notes_have_no_unfilled_placeholder(name: str) -> None:
    # a note missing its f prefix printed "{floor_qh}" literally
    note = WORKLOADS[name].note or ""
    assert "{" not in note and "}" not in note, note


def test_workload_names_are_the_parser_choices() -> None:
    parser = build_parser()
    args = parser.parse_args(["--workload", "MixedChurn", "--curve", "500,1000"])
    assert (args.workload, args.curve) == ("MixedChurn", [500, 1000])
    with pytest.raises(SystemExit):
        parser.parse_args(["--curve", "500,x"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--workload", "NoSuchShape"])


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def create(self, path: str, obj: dict[str, Any]) -> None:
        self.calls.append(("create", f"{path}/{obj['metadata']['name']}"))

    async def delete(self, path: str) -> None:
        self.calls.append(("delete", path))


async def _no_sleep(_: float) -> None:
    return None


async def test_recreate_churn_creates_then_deletes_every_other_interval() -> None:
    # upstream's churn op, mode recreate, number 1: a tick creates what is absent and
    # deletes what the tick before created, so each object lives one interval
    user = _Recorder()
    run = churn_loop(user, WORKLOADS["MixedChurn"], scheduler_name="s", iterations=5,
                     sleep=_no_sleep)
    await run()
    verbs = [verb for verb, _ in user.calls]
    assert verbs == ["create"] * 3 + ["delete"] * 3 + ["create"] * 3 + ["delete"] * 3 + [
        "create"] * 3
    assert [path for _, path in user.calls[3:6]] == [path for _, path in user.calls[:3]]
    assert [path for _, path in user.calls[9:12]] == [path for _, path in user.calls[6:9]]
    assert len({path for _, path in user.calls}) == 9  # new names at every creation


@pytest.mark.parametrize(
    ("kind", "collection", "requests", "priority"),
    [
        pytest.param("high-priority-pod", "/api/v1/namespaces/sched-churn/pods",
                     {"cpu": 3000, "memory": 500 * 2**20}, 10, id="preemptor"),
        pytest.param("large-pod", "/api/v1/namespaces/sched-churn/pods",
                     {"cpu": 9000, "memory": 500 * 2**20}, 10, id="large"),
    ],
)
def test_churn_pods_follow_upstreams_templates(kind: str, collection: str,
                                               requests: dict[str, int],
                                               priority: int) -> None:
    path, obj = churn_object(kind, 3, scheduler_name="s")
    assert path == collection
    assert obj["spec"]["priority"] == priority
    req = pod_requests(obj)
    assert (req.milli_cpu, req.memory) == (requests["cpu"], requests["memory"])


def test_churn_node_takes_no_pod() -> None:
    # upstream's churn/node-default: capacity pods 0 only, no allocatable, no labels
    path, node = churn_object("node", 0, scheduler_name="s")
    assert path == "/api/v1/nodes"
    assert "labels" not in node["metadata"]
    alloc = node_allocatable(node)
    assert (alloc.allowed_pod_number, alloc.milli_cpu, alloc.memory) == (0, 0, 0)


async def test_create_churn_only_adds() -> None:
    user = _Recorder()
    run = churn_loop(user, WORKLOADS["PreemptionAsync"], scheduler_name="s", iterations=4,
                     sleep=_no_sleep)
    await run()
    assert [verb for verb, _ in user.calls] == ["create"] * 4
    assert len({path for _, path in user.calls}) == 4


def test_curve_table_has_a_row_per_point() -> None:
    table = curve_table([{"nodes": 500, "scheduler_pods_per_s": 900.0,
                          "scheduler_pods_per_s_avg": 950.0},
                         {"nodes": 5000, "scheduler_pods_per_s": 700.0,
                          "scheduler_pods_per_s_avg": None}])
    lines = table.splitlines()
    assert lines[0].startswith("| nodes | pods/s | avg pods/s (1 s samples) | pods/s incl. sync |")
    rows = [[cell.strip() for cell in line.split("|")[1:5]] for line in lines[2:]]
    # a run too short for a 1 s sample has no average; a missing figure is a dash too
    assert rows == [["500", "900.0", "950.0", "—"], ["5000", "700.0", "—", "—"]]


def test_result_table_shows_a_missing_average_as_a_dash() -> None:
    text = format_result({"scheduler_pods_per_s": 12.5, "scheduler_pods_per_s_avg": None})
    assert text.splitlines() == ["scheduler_pods_per_s      12.5",
                                 "scheduler_pods_per_s_avg  —"]


def _run(*, binds: list[float], started: float = 0.0, synced: float = 2.0,
         creation: tuple[float, float] = (2.01, 4.0), backlog: bool = False) -> SchedulerRun:
    return SchedulerRun(
        bound=len(binds), started=started, synced=synced, released=synced,
        creation=CreatorReport(created=len(binds), failed=0, error="",
                               started=creation[0], finished=creation[1]),
        last_bind=max(binds), bind_times=binds, cpu=1.0, cycle_cpu=0.5, cycle_latencies=[],
        backlog=backlog)


def test_run_figures_time_the_window_from_the_first_creation_to_the_last_bind() -> None:
    # 400 pods bound evenly from 2.5 to 6.5 s; scheduler started at 0, synced at 2.
    binds = [2.5 + (i + 1) / 100 for i in range(400)]
    run = _run(binds=binds)
    assert run.sync_seconds == 2.0
    assert run.window == pytest.approx(6.5 - 2.01)
    assert run.rate == pytest.approx(400 / (6.5 - 2.01))
    assert run.rate_incl_sync == pytest.approx(400 / 6.5)
    # Ticks from the release (2): 3 is the baseline, 4, 5, 6 record 100/s; the barrier's
    # polls from 4.0 see the last bind (6.5) at 7, so the tick at 7 records the last half
    # second's 50 pods over a whole second.
    assert run.throughput().samples == pytest.approx((100.0, 100.0, 100.0, 50.0))
    # 150 binds by the end of creation (4.0), 250 in the 2.5 s after it
    assert run.rates_around_creation() == pytest.approx((150 / (4.0 - 2.01), 250 / 2.5))


def test_a_phase_that_took_no_time_has_no_rate() -> None:
    run = _run(binds=[2.5, 3.0], creation=(2.01, 3.0))
    assert run.rates_around_creation() == (pytest.approx(2 / 0.99), None)


def test_result_compares_upstreams_floor_with_the_average() -> None:
    binds = [2.5 + (i + 1) / 100 for i in range(400)]
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=400, existing=0,
                     gated=0, confirmed=400, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=_run(binds=binds))
    assert result["scheduler_pods_per_s_avg"] == 87.5
    assert result["ratio_to_upstream_floor"] == round(87.5 / 680, 3)
    assert result["ratio_to_binding_with_event"] == round(400 / (6.5 - 2.01) / 800, 3)
    assert result["throughput_samples"] == 4
    assert result["pods_per_s_incl_sync"] == round(400 / 6.5, 1)


def test_too_short_a_run_has_no_average_and_no_upstream_ratio() -> None:
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=3, existing=0,
                     gated=0, confirmed=3, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=_run(binds=[2.1, 2.2, 2.3]))
    assert (result["scheduler_pods_per_s_avg"], result["throughput_samples"],
            result["ratio_to_upstream_floor"]) == (None, 0, None)
    assert result["scheduler_pods_per_s"] > 0


@pytest.mark.parametrize(("binds", "advice"), [
    # 3 pods in 0.3 s: 10 pods/s, so 3 s of binds is 30 pods: the advice is at least 100
    pytest.param([2.1, 2.2, 2.3], "--pods 100 or more gives a figure", id="tiny"),
    # 600 pods bound from the release at 2.0 to 2.65 s (about 940/s): 3 s is about 2820
    pytest.param([2.05 + i / 1000 for i in range(600)], "--pods 2900 or more gives a figure",
                 id="fast"),
])
def test_a_missing_average_says_why_and_what_size_gives_one(
        binds: list[float], advice: str) -> None:
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=len(binds), existing=0,
                     gated=0, confirmed=len(binds), raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=_run(binds=binds,
                                                                 creation=(2.01, 2.02)))
    assert result["scheduler_pods_per_s_avg"] is None
    reason = result["no_average_because"]
    assert reason.startswith("too few 1 s samples (0): ")
    assert reason.endswith(advice)
    lines = format_result(result).splitlines()
    (avg,) = [line for line in lines if line.startswith("scheduler_pods_per_s_avg ")]
    assert avg.split(None, 1)[1] == "—  (too few 1 s samples: see no_average_because)"
    (ratio,) = [line for line in lines if line.startswith("ratio_to_upstream_floor ")]
    assert ratio.endswith("(too few 1 s samples: see no_average_because)")
    table = curve_table([result]).splitlines()
    assert table[-1] == f"— at 10 nodes: {reason}"


def test_a_run_with_an_average_gives_no_reason() -> None:
    binds = [2.5 + (i + 1) / 100 for i in range(400)]
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=400, existing=0,
                     gated=0, confirmed=400, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=_run(binds=binds))
    assert "no_average_because" not in result
    assert "see no_average_because" not in format_result(result)


def test_dra_shape_pods_each_use_a_claim_from_the_template() -> None:
    from scheduler.bench.workloads import CLAIM_TEMPLATE, claim_template

    w = WORKLOADS["SchedulingWithResourceClaimTemplate"]
    assert (w.upstream_floor, w.measured_pods, w.dra_devices) == (40, 2500, "gpu=10")
    # upstream's 2500 init pods: half of the 5000 devices held before the measured pods
    assert w.allocated_claims is not None and w.allocated_claims(5000) == 2500
    p = w.measured(3, "py-scheduler")
    assert p["spec"]["resourceClaims"] == [{"name": "resource",
                                            "resourceClaimTemplateName": CLAIM_TEMPLATE}]
    assert p["spec"]["containers"][0]["resources"]["claims"] == [{"name": "resource"}]
    t = claim_template()
    assert t["metadata"]["name"] == CLAIM_TEMPLATE
    [req] = t["spec"]["spec"]["devices"]["requests"]
    assert req["exactly"]["deviceClassName"] == "gpu.example.com"


def test_a_backlog_is_timed_from_the_first_bind_and_reports_the_wait_for_it() -> None:
    # Pods created at -3..-1 (before the scheduler started at 0), synced at 2, binds from
    # 2.5 to 6.5: the window is the binds' span, the first bind came 2.5 s after the start.
    binds = [2.5 + i / 100 for i in range(401)]
    run = _run(binds=binds, creation=(-3.0, -1.0), backlog=True)
    assert run.window == pytest.approx(4.0)
    assert run.rate == pytest.approx(401 / 4.0)
    assert run.first_bind_seconds == pytest.approx(2.5)
    assert run.rates_around_creation() == (None, pytest.approx(401 / 4.0))
    result = _result(WORKLOADS["Backlog"], nodes=10, measured=401, existing=0, gated=0,
                     confirmed=401, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=run, run=run)
    assert result["backlog"] is True
    assert result["measured_s"] == 4.0
    assert result["time_to_first_bind_s"] == result["floor_time_to_first_bind_s"] == 2.5
    assert result["ratio_to_binding_with_event"] == round(401 / 4.0 / 800, 3)
    assert result["pods_per_s_while_creating"] is None


def test_a_stream_is_timed_from_the_first_creation_and_has_no_backlog_key() -> None:
    run = _run(binds=[2.5, 3.0, 4.5])
    assert run.window == pytest.approx(4.5 - 2.01)
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=3, existing=0,
                     gated=0, confirmed=3, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=run, run=run)
    assert "backlog" not in result and "floor_time_to_first_bind_s" not in result
    assert result["time_to_first_bind_s"] == 2.5
    assert result["release_to_first_bind_s"] == 0.5  # released at the sync (2.0)


def test_the_backlog_shape_is_pending_before_the_scheduler_starts() -> None:
    w = WORKLOADS["Backlog"]
    assert (w.backlog, w.measured_pods, w.existing_pods, w.upstream_floor) == (
        True, 10000, 0, None)
    assert not any(o.backlog for name, o in WORKLOADS.items() if name != "Backlog")


@pytest.mark.parametrize(("cpuinfo", "model"), [
    pytest.param("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
                 "processor\t: 1\nmodel name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13", id="x86"),
    pytest.param("processor\t: 0\nBogoMIPS\t: 50.00\nModel\t: Raspberry Pi 4\n",
                 "Raspberry Pi 4", id="arm"),
])
def test_the_cpu_model_is_read_from_cpuinfo(cpuinfo: str, model: str) -> None:
    assert cpu_model(cpuinfo) == model


def test_the_machine_line_names_the_model_cores_affinity_and_load() -> None:
    line = Machine(cpu_model="AMD EPYC", cores=2, affinity=1, load=(3.5, 2.25, 1.0)).line()
    assert line == ("AMD EPYC, 2 cores (the scheduler may use 1); "
                    "load average 3.50 / 2.25 / 1.00")
    assert Machine(cpu_model="X", cores=2, affinity=2, load=None).line() == (
        "X, 2 cores; load average unknown")


def test_the_result_names_the_machine_and_the_load_at_both_ends() -> None:
    run = _run(binds=[2.5, 3.0, 4.5])
    machine = Machine(cpu_model="AMD EPYC", cores=2, affinity=2, load=(4.0, 3.0, 2.0))
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=3, existing=0,
                     gated=0, confirmed=3, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=run, machine=machine,
                     load_at_end=(5.0, 3.5, 2.1))
    assert (result["cpu_model"], result["cores"], result["scheduler_affinity"],
            result["load_average_start"], result["load_average_end"]) == (
        "AMD EPYC", 2, 2, [4.0, 3.0, 2.0], [5.0, 3.5, 2.1])
    assert "AMD EPYC" in format_result(result)


@pytest.mark.parametrize(
    ("creator_cpu", "sandbox_cpu", "backlog", "split"),
    [
        # 400 pods, released at 2.0, last bind at 6.0: 4 s of window
        pytest.param(0.2, 1.3, False,
                     {"creator_cpu_per_pod_ms": 0.5, "sandbox_cpu_per_pod_ms": 3.25,
                      "scheduler_cpu_per_pod_ms": 1.25, "event_process_cpu_per_pod_ms": None,
                      "busy_cores": 0.5},
                     id="stream"),
        # --event-process on: the child's CPU is a fourth share of the window's cores
        pytest.param(0.2, 1.3, False,
                     {"creator_cpu_per_pod_ms": 0.5, "sandbox_cpu_per_pod_ms": 3.25,
                      "scheduler_cpu_per_pod_ms": 1.25, "event_process_cpu_per_pod_ms": 1.0,
                      "busy_cores": 0.6},
                     id="event-process"),
        pytest.param(None, 1.3, False,
                     {"creator_cpu_per_pod_ms": None, "sandbox_cpu_per_pod_ms": 3.25,
                      "scheduler_cpu_per_pod_ms": 1.25, "event_process_cpu_per_pod_ms": None,
                      "busy_cores": 0.45},
                     id="a-creator-that-does-not-report-its-cpu"),
        pytest.param(0.2, None, False,
                     {"creator_cpu_per_pod_ms": 0.5, "sandbox_cpu_per_pod_ms": None,
                      "scheduler_cpu_per_pod_ms": 1.25, "event_process_cpu_per_pod_ms": None,
                      "busy_cores": None},
                     id="sandbox-unreadable"),
        # a backlog's pods were created before the release: not in the window's cores
        pytest.param(0.2, 1.3, True,
                     {"creator_cpu_per_pod_ms": 0.5, "sandbox_cpu_per_pod_ms": 3.25,
                      "scheduler_cpu_per_pod_ms": 1.25, "event_process_cpu_per_pod_ms": None,
                      "busy_cores": 0.45},
                     id="backlog"),
    ],
)
def test_the_cpu_split_says_who_used_the_cores(creator_cpu: float | None,
                                               sandbox_cpu: float | None, backlog: bool,
                                               split: dict[str, float | None]) -> None:
    binds = [2.0 + (i + 1) / 100 for i in range(400)]
    run = SchedulerRun(
        bound=400, started=0.0, synced=2.0, released=2.0,
        creation=CreatorReport(created=400, failed=0, error="", started=2.01, finished=4.0,
                               cpu=creator_cpu),
        last_bind=6.0, bind_times=binds, cpu=1.0, cycle_cpu=0.5, cycle_latencies=[],
        backlog=backlog, sandbox_cpu=sandbox_cpu,
        event_process_cpu=0.4 if split["event_process_cpu_per_pod_ms"] is not None else None)
    assert run.cpu_split() == split
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=400, existing=0,
                     gated=0, confirmed=400, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=run)
    assert {k: result[k] for k in split} == split
    assert result["event_process"] is (split["event_process_cpu_per_pod_ms"] is not None)


def test_the_result_text_ends_with_the_cpu_split() -> None:
    text = format_result({"cores": 2, "creator_cpu_per_pod_ms": 0.1,
                          "sandbox_cpu_per_pod_ms": 0.6, "scheduler_cpu_per_pod_ms": 1.3,
                          "busy_cores": 1.85})
    assert text.splitlines()[-1] == (
        "CPU per measured pod: creator 0.100 ms (5%), sandbox 0.600 ms (30%), "
        "scheduler 1.300 ms (65%); 1.85 of 2 cores busy from the release to the last bind")
    assert "CPU per measured pod" not in format_result({"scheduler_pods_per_s": 1.0})
    with_child = format_result({"scheduler_cpu_per_pod_ms": 0.9,
                                "event_process_cpu_per_pod_ms": 0.1})
    assert with_child.splitlines()[-1] == (
        "CPU per measured pod: scheduler 0.900 ms (90%), event process 0.100 ms (10%)")


_SPLIT = {"creator_cpu_per_pod_ms": 0.2, "sandbox_cpu_per_pod_ms": 0.6,
          "scheduler_cpu_per_pod_ms": 1.2, "binding_with_event_rate_per_s": 2000.0}


@pytest.mark.parametrize(("result", "bound"), [
    # 2 cores ÷ 2.0 ms = 1000/s; one core ÷ the scheduler's 1.2 ms = 833.3/s binds
    pytest.param({"cores": 2, **_SPLIT}, (1000.0, 833.3, 833.3, "scheduler core", 0.417),
                 id="the-scheduler-core-binds"),
    # a cheaper scheduler: 2 ÷ 1.4 ms = 1428.6/s binds before one core ÷ 0.6 ms
    pytest.param({"cores": 2, **_SPLIT, "scheduler_cpu_per_pod_ms": 0.6},
                 (1428.6, 1666.7, 1428.6, "shared cores", 0.714), id="the-shared-cores-bind"),
    # the sandbox's own core: one core ÷ 0.9 ms binds before 2 ÷ 1.6 ms
    pytest.param({"cores": 2, **_SPLIT, "sandbox_cpu_per_pod_ms": 0.9,
                  "scheduler_cpu_per_pod_ms": 0.5},
                 (1250.0, 1111.1, 1111.1, "sandbox core", 0.556), id="the-sandbox-core-binds"),
    # the scheduler may use 1 of 2 cores, and so may the processes it starts
    pytest.param({"cores": 2, "scheduler_affinity": 1, **_SPLIT},
                 (500.0, 833.3, 500.0, "shared cores", 0.25), id="affinity"),
    # a backlog's creator ran before the window: 2 ÷ 1.1 ms (with it, 2 ÷ 1.3 ms would bind)
    pytest.param({"cores": 2, "backlog": True, **_SPLIT,
                  "scheduler_cpu_per_pod_ms": 0.5},
                 (1818.2, 1666.7, 1666.7, "sandbox core", 0.833), id="backlog"),
    # the event process is a fourth share: 2 ÷ 2.5 ms
    pytest.param({"cores": 2, **_SPLIT, "event_process_cpu_per_pod_ms": 0.5},
                 (800.0, 833.3, 800.0, "shared cores", 0.4), id="event-process"),
    pytest.param({"cores": 2, **_SPLIT, "binding_with_event_rate_per_s": 0.0},
                 (1000.0, 833.3, 833.3, "scheduler core", None), id="no-ceiling"),
    pytest.param({**_SPLIT}, None, id="no-cores"),
    pytest.param({"cores": 2, **_SPLIT, "sandbox_cpu_per_pod_ms": None}, None,
                 id="sandbox-unreadable"),
])
def test_the_cores_bound_is_the_lower_of_the_shared_cores_and_one_core(
        result: dict[str, Any], bound: tuple[Any, ...] | None) -> None:
    keys = ("cores_bound_shared_pods_per_s", "cores_bound_single_core_pods_per_s",
            "cores_bound_pods_per_s", "cores_bound_by", "cores_bound_ratio")
    got = cores_bound(result)
    assert set(got) == set(keys)
    assert tuple(got[k] for k in keys) == (bound if bound is not None else (None,) * 5)


def test_the_result_carries_the_cores_bound_and_its_text_line_says_what_binds() -> None:
    binds = [2.0 + (i + 1) / 100 for i in range(400)]
    run = SchedulerRun(
        bound=400, started=0.0, synced=2.0, released=2.0,
        creation=CreatorReport(created=400, failed=0, error="", started=2.01, finished=4.0,
                               cpu=0.2),
        last_bind=6.0, bind_times=binds, cpu=1.0, cycle_cpu=0.5, cycle_latencies=[],
        sandbox_cpu=1.3)
    machine = Machine(cpu_model="AMD EPYC", cores=2, affinity=2, load=None)
    result = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=400, existing=0,
                     gated=0, confirmed=400, raw_rate=1000.0, official_rate=900.0,
                     with_event_rate=800.0, floor=None, run=run, machine=machine)
    # creator 0.5 + sandbox 3.25 + scheduler 1.25 ms: 2 cores ÷ 5 ms = 400/s; the
    # sandbox's one core ÷ 3.25 ms = 307.7/s binds, 0.385 of the 800/s ceiling
    assert (result["cores_bound_shared_pods_per_s"], result["cores_bound_pods_per_s"],
            result["cores_bound_by"], result["cores_bound_ratio"]) == (
        400.0, 307.7, "sandbox core", 0.385)
    assert format_result(result).splitlines()[-1].endswith(
        "; the cores carry at most 307.7 pods/s at this CPU (shared cores 400.0, one core "
        "307.7), bound by the sandbox core: 0.385 of the ceiling")
    without_machine = _result(WORKLOADS["SchedulingBasic"], nodes=10, measured=400,
                              existing=0, gated=0, confirmed=400, raw_rate=1000.0,
                              official_rate=900.0, with_event_rate=800.0, floor=None, run=run)
    assert without_machine["cores_bound_pods_per_s"] is None
    assert "carry at most" not in format_result(without_machine)
