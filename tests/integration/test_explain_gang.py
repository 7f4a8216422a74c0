"""``kube-py-scheduler explain`` on a gang member (issue 22): the gang's topology domains
as a table (free capacity, members that fit, why each was turned down, the chosen one) and
a gang's preemption plan, every member at once; against the sandbox over HTTP."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from scheduler.explain.cli import amain
from scheduler.plugins.coscheduling.topology import REQUIRED_TOPOLOGY_ANNOTATION
from scheduler.sandbox import Sandbox
from tests.builders import make_node
from tests.integration.harness import for_api, user_client
from tests.integration.procs import create_pod_group, gang_pod, install_crd, pod_group

RACK = "example.com/rack"


async def _explain(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await amain(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


async def _cluster(sandbox_factory: Any, tmp_path: Path, nodes: list[dict[str, Any]]) -> Path:
    sb: Sandbox = await sandbox_factory(nodes=0, simulate_kubelet=False)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        for node in nodes:
            await cluster.create_node(for_api(node))
        await install_crd(cluster.client)
    return kc


def _racks() -> list[dict[str, Any]]:
    return ([make_node(f"a-{i}", cpu="8", labels={RACK: "a"}) for i in range(2)]
            + [make_node(f"b-{i}", cpu="8", labels={RACK: "b"}) for i in range(4)]
            + [make_node(f"c-{i}", cpu="8", labels={RACK: "c"}) for i in range(6)]
            + [make_node("loose", cpu="64")])


async def _gang(cluster: Any, name: str, members: int, cpu: str) -> None:
    pg = pod_group(name, members)
    pg["metadata"]["annotations"] = {REQUIRED_TOPOLOGY_ANNOTATION: RACK}
    await create_pod_group(cluster.client, pg)
    await cluster.create_pods([gang_pod(f"{name}-{i}", name, cpu=cpu) for i in range(members)])


async def test_explain_shows_each_topology_domain_and_the_chosen_one(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, _racks())
    async with user_client(kc) as cluster:
        await _gang(cluster, "allreduce", 8, "4")
    code, table, err = await _explain("allreduce-0", "--kubeconfig", str(kc))
    assert code == 0, err
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  topology:"))
    assert lines[start] == f"  topology: required {RACK}, 8 member(s) in one domain: {RACK}=b"
    rows = [line.split() for line in lines[start + 2:start + 5]]
    assert lines[start + 1].split() == ["DOMAIN", "NODES", "FREE", "CPU", "FREE", "MEMORY",
                                        "MEMBERS", "FIT", "VERDICT"]
    assert rows[0][:5] == ["a", "2", "16", rows[0][3], "4/8"]
    assert " ".join(rows[0][5:]) == "rejected: 4 of 8 fit"
    assert rows[1][:5] == ["b", "4", "32", rows[1][3], "8/8"]
    assert " ".join(rows[1][5:]) == "chosen (tightest fit)"
    assert rows[2][:5] == ["c", "6", "48", rows[2][3], "12/8"]
    assert " ".join(rows[2][5:]) == "fits (looser)"
    assert lines[start + 5] == f"    1 node(s) without label {RACK}"
    assert "Filter: 4 feasible" in table  # PreFilter kept rack b only

    code, raw, _ = await _explain("allreduce-0", "--kubeconfig", str(kc), "-o", "json")
    topology = json.loads(raw)["podgroup"]["topology"]
    assert (topology["key"], topology["required"], topology["chosen"]) == (RACK, True, "b")
    assert [(d["value"], d["fits"], d["verdict"]) for d in topology["domains"]] == [
        ("a", 4, "rejected: 4 of 8 fit"), ("b", 8, "chosen (tightest fit)"),
        ("c", 12, "fits (looser)")]


async def test_explain_names_why_no_domain_fits(sandbox_factory: Any, tmp_path: Path) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, _racks())
    async with user_client(kc) as cluster:
        await _gang(cluster, "wide", 8, "6")
    code, table, err = await _explain("wide-0", "--kubeconfig", str(kc))
    assert code == 0, err
    assert (f"  topology: required {RACK}, 8 member(s) in one domain: none fits, they stay "
            "pending") in table
    verdicts = [line.split("  ")[-1] for line in table.splitlines() if "rejected:" in line]
    assert verdicts == ["rejected: 2 of 8 fit", "rejected: 4 of 8 fit", "rejected: 6 of 8 fit"]
    assert f"PodGroup default/wide requires its members in one {RACK} domain" in table


async def test_explain_shows_a_gangs_preemption_plan(sandbox_factory: Any, tmp_path: Path) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node(f"n{i}", cpu="4") for i in range(3)])
    async with user_client(kc) as cluster:
        for i in range(3):
            low = gang_pod(f"low-{i}", None, cpu="3", priority=0)
            low["spec"]["nodeName"] = f"n{i}"
            await cluster.create_pod(low)
        await create_pod_group(cluster.client, pod_group("vip", 2))
        await cluster.create_pods([gang_pod(f"vip-{i}", "vip", cpu="3", priority=100)
                                   for i in range(2)])
    code, table, err = await _explain("vip-0", "--kubeconfig", str(kc), "-o", "wide")
    assert code == 0, err
    assert ("  the gang's plan, every member at once (2 member(s); nothing is evicted unless "
            "all get a node):") in table
    plan = [line.strip() for line in table.splitlines() if line.startswith("    default/vip-")]
    assert plan == ["default/vip-0 -> n0: default/low-0", "default/vip-1 -> n1: default/low-1"]
    async with user_client(kc) as cluster:  # a dry run: nothing evicted, nobody nominated
        assert len(await cluster.list_pods("default")) == 5
        assert not ((await cluster.get_pod("vip-1")) or {}).get("status", {}).get(
            "nominatedNodeName")
