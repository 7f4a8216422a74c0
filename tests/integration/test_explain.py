"""``kube-py-scheduler explain`` against the sandbox, checked against what the daemon does.

The done-means of issue 14: for a pod the daemon leaves pending, explain's counts per reason
are the daemon's FailedScheduling counts; for a pod with a unique best node, explain names
the node the daemon then binds it to.  Plus bad input (exit 2) and read-only-ness.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config.defaults import shipped_config
from scheduler.config.types import KubeSchedulerConfiguration
from scheduler.explain.cli import amain
from scheduler.sandbox import Sandbox
from tests.builders import NodeBuilder, PodBuilder, make_node
from tests.integration.harness import for_api, running_scheduler, user_client, wait_until
from tests.integration.procs import create_pod_group, gang_pod, install_crd, pod_group

SCHEDULER = "py-scheduler"


def daemon_config() -> KubeSchedulerConfiguration:
    """What ``explain`` uses without --config: the shipped configuration."""
    config = shipped_config()
    config.leader_election.leader_elect = False
    return config


async def explain(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await amain(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def pod(name: str, *, cpu: str = "100m", priority: int | None = None,
        scheduler: str = SCHEDULER, node: str | None = None) -> dict[str, Any]:
    b = PodBuilder(name).scheduler_name(scheduler).req(cpu=cpu, memory="64Mi")
    if priority is not None:
        b.priority(priority)
    if node:
        b.node(node)
    return for_api(b.obj())


async def _cluster(sandbox_factory: Any, tmp_path: Path, nodes: list[dict[str, Any]]) -> Path:
    sb: Sandbox = await sandbox_factory(nodes=0, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        for node in nodes:
            await cluster.create_node(for_api(node))
    return kc


def _table_counts(text: str) -> Counter[str]:
    """The grouped Filter lines of the table: '  <count>  <plugin>  <reason>'."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        m = re.match(r"^\s+(\d+)\s{2}(\S+)\s+(.+)$", line)
        if m and m.group(2) != "(feasible)":
            counts[m.group(3).strip()] += int(m.group(1))
    return counts


def _event_counts(note: str) -> Counter[str]:
    """'0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had ... preemption: ...'"""
    head = note.split(" preemption:")[0]
    histogram = head.split("nodes are available: ", 1)[1].rstrip(".")
    counts: Counter[str] = Counter()
    for part in histogram.split(", "):
        number, reason = part.split(" ", 1)
        counts[reason] = int(number)
    return counts


MIXED_NODES = [
    make_node("small-0", cpu="1"),
    make_node("small-1", cpu="1"),
    NodeBuilder("gpu-0").capacity(cpu="8", memory="16Gi", pods=110)
    .taint("dedicated", "gpu").obj(),
    NodeBuilder("cordoned").capacity(cpu="8", memory="16Gi", pods=110).unschedulable().obj(),
    make_node("busy", cpu="4"),
]


async def test_pending_pod_counts_per_reason_equal_the_daemons_failed_scheduling_event(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, MIXED_NODES)
    async with user_client(kc) as cluster:
        await cluster.create_pod(pod("hog", cpu="3500m", node="busy"))
        async with running_scheduler(kc, config=daemon_config()):
            await cluster.create_pod(pod("wants-2-cpus", cpu="2"))

            async def failed() -> list[str]:
                return [str(e.get("note") or "") for e in await cluster.events_for("wants-2-cpus")
                        if e["reason"] == "FailedScheduling"]

            await wait_until(failed, timeout=15, message="a FailedScheduling event")
            note = (await failed())[-1]
            code, table, err = await explain("wants-2-cpus", "--kubeconfig", str(kc))
            assert code == 0, err
            code, raw, err = await explain("wants-2-cpus", "--kubeconfig", str(kc), "-o", "json")
            assert code == 0, err
    expected = _event_counts(note)
    assert expected == Counter({"Insufficient cpu": 3, "node(s) had untolerated taint "
                                "{dedicated: gpu}": 1, "node(s) were unschedulable": 1})
    assert _table_counts(table) == expected
    result = json.loads(raw)
    assert result["failed-scheduling-message"] == note
    from_json: Counter[str] = Counter()
    for node, plugins in result["filter-result"].items():
        reasons = [r for r in plugins.values() if r != "passed"]
        assert len(reasons) == 1, node  # the first rejecting plugin ends the node's row
        from_json[reasons[0]] += 1
    assert from_json == expected
    assert result["selected-node"] == ""
    assert result["filter-result"]["gpu-0"] == {
        "NodeUnschedulable": "passed", "NodeName": "passed",
        "TaintToleration": "node(s) had untolerated taint {dedicated: gpu}",
    }


async def test_explain_names_the_node_the_daemon_then_binds_the_pod_to(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    nodes = [make_node(f"n-{i}", cpu="4", memory="8Gi") for i in range(4)]
    kc = await _cluster(sandbox_factory, tmp_path, nodes)
    async with user_client(kc) as cluster:
        # Different loads: the least allocated node is the unique best.
        for i, used in enumerate(["3", "2", "500m", "1"]):
            await cluster.create_pod(pod(f"load-{i}", cpu=used, node=f"n-{i}"))
        await cluster.create_pod(pod("web", cpu="500m"))
        code, raw, err = await explain("web", "--kubeconfig", str(kc), "-o", "yaml")
        assert code == 0, err
        result = yaml.safe_load(raw)
        assert result["ties"] == [result["selected-node"]]
        chosen = result["selected-node"]
        assert chosen == "n-2"
        totals = {n: int(t) for n, t in result["totalscore-result"].items()}
        assert totals[chosen] == max(totals.values())
        weights = result["score-weights"]
        assert weights["TaintToleration"] == 3 and weights["NodeResourcesFit"] == 1
        for node, plugins in result["finalscore-result"].items():
            assert sum(int(v) for v in plugins.values()) == totals[node]
            for plugin, final in plugins.items():
                normalized = int(result["normalizedscore-result"][node][plugin])
                assert int(final) == normalized * weights[plugin], (node, plugin)
        # NodeResourcesFit (LeastAllocated) has no NormalizeScore: raw is what is weighted.
        fit = {n: p["NodeResourcesFit"] for n, p in result["score-result"].items()}
        assert fit == {n: p["NodeResourcesFit"]
                       for n, p in result["normalizedscore-result"].items()}
        code, table, _ = await explain("web", "--kubeconfig", str(kc))
        assert f"Result: the scheduler would pick {chosen}" in table

        async with running_scheduler(kc, config=daemon_config()):
            async def bound() -> str:
                return await cluster.node_name("web")

            await wait_until(bound, timeout=15, message="web bound")
            assert await cluster.node_name("web") == chosen


async def test_preemption_is_a_dry_run_naming_node_and_victims(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("only", cpu="2")])
    async with user_client(kc) as cluster:
        await cluster.create_pod(pod("low", cpu="1500m", priority=0, node="only"))
        await cluster.create_pod(pod("urgent", cpu="1", priority=1000))
        code, table, err = await explain("urgent", "--kubeconfig", str(kc))
        assert code == 0, err
        assert "Preemption (dry run): would nominate only, evicting default/low (priority 0)" \
            in table
        code, raw, _ = await explain("urgent", "--kubeconfig", str(kc), "-o", "json")
        result = json.loads(raw)
        assert result["preemption"]["chosen"] == "only"
        assert result["postfilter-result"]["only"]["DefaultPreemption"].startswith(
            "nominated (dry run)")
        # Nothing was evicted or nominated.
        low = await cluster.get_pod("low")
        assert low is not None and not low["metadata"].get("deletionTimestamp")
        urgent = await cluster.get_pod("urgent")
        assert urgent is not None and not (urgent.get("status") or {}).get("nominatedNodeName")


async def test_pod_file_asks_where_a_pod_that_does_not_exist_would_go(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path,
                        [make_node("a", cpu="1"), make_node("b", cpu="4")])
    manifest = PodBuilder("planned").scheduler_name(SCHEDULER).req(cpu="2", memory="1Gi").obj()
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(for_api(manifest)))
    code, table, err = await explain("--pod-file", str(path), "--kubeconfig", str(kc))
    assert code == 0, err
    assert "Result: the scheduler would pick b (the only feasible node)" in table
    async with user_client(kc) as cluster:
        assert await cluster.get_pod("planned") is None


async def test_gang_member_shows_its_pod_groups_state(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a", cpu="4")])
    async with user_client(kc) as cluster:
        await install_crd(cluster.client)
        await create_pod_group(cluster.client, pod_group("train", 3))
        await cluster.create_pod(gang_pod("train-0", "train"))
        code, table, err = await explain("train-0", "--kubeconfig", str(kc))
        assert code == 0, err
        assert "PodGroup default/train: minMember 3, 1 member(s) exist, 0 hold a node" in table
        assert "missing: 2 more member pod(s) must exist" in table
        code, raw, _ = await explain("train-0", "--kubeconfig", str(kc), "-o", "json")
        group = json.loads(raw)["podgroup"]
        assert (group["minMember"], group["members"], group["found"]) == (3, 1, True)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["ghost"], "pod default/ghost not found"),
        (["other"], "is for scheduler 'default-scheduler', not one of this configuration's "
         "profiles"),
        (["web", "--profile", "nope"], "--profile 'nope': no such profile"),
        (["web", "--config", "{tmp}/missing.yaml"], "missing.yaml: cannot read"),
        (["web", "--config", "{tmp}/broken.yaml"], "broken.yaml"),
        (["--pod-file", "{tmp}/broken.yaml"], "--pod-file"),
        ([], "name a pod, or give --pod-file"),
        (["--pod-file", "{tmp}/broken.yaml", "--from-scheduler", "http://127.0.0.1:1"],
         "--from-scheduler needs an existing pod"),
    ],
)
async def test_bad_input_is_one_clear_line_and_exit_2(
    sandbox_factory: Any, tmp_path: Path, argv: list[str], needle: str
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a")])
    (tmp_path / "broken.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                                          "kind: KubeSchedulerConfiguration\nprofiles: [{\n")
    async with user_client(kc) as cluster:
        await cluster.create_pod(pod("web"))
        await cluster.create_pod(pod("other", scheduler="default-scheduler"))
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = await explain(*args, "--kubeconfig", str(kc))
    assert code == 2
    assert out == ""
    assert needle in err
    assert err.count("\n") == 1


async def test_a_pod_of_another_scheduler_is_explained_with_the_named_profile(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a")])
    async with user_client(kc) as cluster:
        await cluster.create_pod(pod("other", scheduler="default-scheduler"))
    code, out, err = await explain("other", "--profile", SCHEDULER, "--kubeconfig", str(kc))
    assert code == 0, err
    assert f"profile {SCHEDULER}" in out
    assert "Result: the scheduler would pick a" in out


async def test_extenders_filter_and_prioritize_as_in_the_daemon(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    from tests.integration.extender_server import FakeExtender

    fake = FakeExtender(reject={"n-a": "widget slots full"}, scores={"n-c": 10})
    await fake.start()
    try:
        kc = await _cluster(sandbox_factory, tmp_path, [make_node(f"n-{x}") for x in "abc"])
        config = tmp_path / "config.yaml"
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            "profiles: [{schedulerName: py-scheduler}]\n"
            "extenders:\n"
            f"  - urlPrefix: {fake.url}\n"
            "    filterVerb: filter\n    prioritizeVerb: prioritize\n    weight: 2\n"
            "    nodeCacheCapable: true\n"
        )
        async with user_client(kc) as cluster:
            await cluster.create_pod(pod("web"))
        code, raw, err = await explain("web", "--kubeconfig", str(kc), "--config", str(config),
                                       "-o", "json")
        assert code == 0, err
        result = json.loads(raw)
        assert result["filter-result"]["n-a"] == {
            "NodeUnschedulable": "passed", "NodeName": "passed", "TaintToleration": "passed",
            "NodeResourcesFit": "passed", "Extender": "widget slots full"}
        assert result["finalscore-result"]["n-c"]["Extender"] == "200"
        assert result["finalscore-result"]["n-b"]["Extender"] == "0"
        assert result["selected-node"] == "n-c"
        assert len(fake.calls("filter")) == 1 and len(fake.calls("prioritize")) == 1
    finally:
        await fake.stop()


async def test_a_gated_pod_is_said_not_to_be_attempted(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a")])
    gated = PodBuilder("gated").scheduler_name(SCHEDULER).req(cpu="100m", memory="64Mi").obj()
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    async with user_client(kc) as cluster:
        await cluster.create_pod(for_api(gated))
    code, out, err = await explain("gated", "--kubeconfig", str(kc))
    assert code == 0, err
    flat = " ".join(out.split())
    assert "Not attempted: PreEnqueue SchedulingGates keeps the pod out of the active queue: " \
        "waiting for scheduling gates: [example.com/quota]" in flat
    assert "Result: the scheduler would pick a" in out


@pytest.mark.parametrize("corruption", [
    pytest.param(("spec", "containers", 0, "resources", "requests", "cpu"), id="bad-quantity"),
    pytest.param(("spec", "tolerations"), id="tolerations-not-a-list"),
])
async def test_unrelated_malformed_pods_are_not_mentioned(
    sandbox_factory: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str],
    corruption: tuple[Any, ...],
) -> None:
    """explain writes nothing and says nothing about what it did not write: another pod
    it cannot parse gets no warning (no refused condition update, no 'malformed')."""
    from scheduler.sandbox.testing import SandboxAdmin

    sb: Sandbox = await sandbox_factory(nodes=0, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await cluster.create_node(for_api(make_node("a")))
        await cluster.create_pod(pod("web"))
    bad = pod("broken")
    target: Any = bad
    for key in corruption[:-1]:
        target = target[key]
    target[corruption[-1]] = "not-a-value"
    bad["metadata"]["namespace"] = "default"
    await SandboxAdmin(sb.url, sb.token).araw_put(bad)
    capfd.readouterr()
    code, out, err = await explain("web", "--kubeconfig", str(kc))
    assert code == 0, err
    assert "web" in out
    logged = capfd.readouterr()
    for text in (err, logged.err, logged.out):
        assert "ReadOnlyViolation" not in text
        assert "side task" not in text
        assert "broken" not in text
