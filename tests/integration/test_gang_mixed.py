"""A gang whose members differ in size is placed in one pass (issue 22): the largest
members are tried first, so the small ones fill what is left next to them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.sandbox import Sandbox
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)


async def test_mixed_member_sizes_fill_the_cluster_exactly(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    # Two 4-CPU nodes, one 4-CPU member and four of 1 CPU: 8 CPUs for 8 CPUs. Tried by
    # name (small first), the small ones would spread over both nodes and leave no node
    # whole for the big one.
    sb: Sandbox = await sandbox_factory(nodes=2, node_cpu="4", node_memory="8Gi")
    kc = sb.write_kubeconfig(tmp_path / "kc")
    members = ["a-small-0", "a-small-1", "a-small-2", "a-small-3", "z-big"]
    async with user_client(kc) as cluster, running_scheduler(kc, config=coscheduling_config()):
        await install_crd(cluster.client)
        await create_pod_group(cluster.client, pod_group("mixed", 5))
        await cluster.create_pods(
            [gang_pod(n, "mixed", cpu="4" if n == "z-big" else "1", memory="64Mi")
             for n in members])

        async def all_bound() -> bool:
            return all([await cluster.node_name(n) for n in members])
        await wait_until(all_bound, timeout=20, interval=0.1, message="the mixed gang bound")
        big = await cluster.node_name("z-big")
        assert all([await cluster.node_name(n) != big for n in members[:4]])
        assert sb.counters()["bindings"] == 5  # one pass, no member bound twice
