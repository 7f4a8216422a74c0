"""Property tests of gang scheduling over random clusters and gang streams (issue 22), end
to end over HTTP: once the scheduler settles, no gang is partly bound, no node is
overcommitted, and gangs never deadlock (if none is bound, none fits the free room alone).

Each gang's members have one size, so whether a gang fits alone is a count, not a packing
problem (any order places sum(floor(free / size)) members)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.objects.pod import pod_requests
from scheduler.sandbox import Sandbox
from tests.integration.harness import running_scheduler, user_client
from tests.integration.procs import (
    coscheduling_config,
    create_pod_group,
    gang_pod,
    install_crd,
    pod_group,
)

gangs_st = st.lists(
    st.tuples(st.integers(2, 4), st.integers(0, 1), st.integers(1, 5)),  # minMember, extra, cpu
    min_size=1, max_size=3)
plain_st = st.lists(st.integers(1, 3), max_size=3)


async def _settle(parts: Any, cluster: Any, *, quiet: float = 2.0, cap: float = 25.0
                  ) -> list[dict[str, Any]]:
    """Poll until nothing waits at Permit, nothing binds, and the bound set is unchanged
    for ``quiet`` seconds."""
    handle = parts.scheduler.profiles["py-scheduler"].handle
    deadline = time.monotonic() + cap
    last: frozenset[str] | None = None
    since = time.monotonic()
    while True:
        pods = await cluster.list_pods("default")
        bound = frozenset(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))
        busy = bool(list(handle.iterate_waiting_pods())) or bool(parts.scheduler._binding_tasks)
        if bound != last or busy:
            last, since = bound, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return pods
        if time.monotonic() > deadline:
            raise AssertionError("the scheduler did not settle")
        await asyncio.sleep(0.1)


async def _run(nodes: int, node_cpu: int, gangs: list[tuple[int, int, int]],
               plain: list[int]) -> None:
    sb = Sandbox(nodes=nodes, node_cpu=str(node_cpu), node_memory="64Gi")
    await sb.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kc = sb.write_kubeconfig(Path(tmp) / "kc")
            async with user_client(kc) as cluster:
                await install_crd(cluster.client)
                async with running_scheduler(kc, config=coscheduling_config()) as parts:
                    pods = []
                    for g, (min_member, extra, cpu) in enumerate(gangs):
                        await create_pod_group(cluster.client, pod_group(f"g{g}", min_member))
                        pods += [gang_pod(f"g{g}-{i}", f"g{g}", cpu=str(cpu))
                                 for i in range(min_member + extra)]
                    pods += [gang_pod(f"plain-{i}", None, cpu=str(c))
                             for i, c in enumerate(plain)]
                    await cluster.create_pods(pods)
                    settled = await _settle(parts, cluster)
                node_names = [n["metadata"]["name"] for n in await cluster.list_nodes()]
    finally:
        await sb.stop()

    by_name = {p["metadata"]["name"]: p for p in settled}
    used: dict[str, int] = {}
    for p in settled:
        node = p["spec"].get("nodeName")
        if node:
            used[node] = used.get(node, 0) + pod_requests(p).milli_cpu
    assert all(u <= node_cpu * 1000 for u in used.values()), used  # never overcommitted

    bound_gangs = 0
    for g, (min_member, extra, _cpu) in enumerate(gangs):
        n = sum(1 for i in range(min_member + extra)
                if by_name[f"g{g}-{i}"]["spec"].get("nodeName"))
        assert n == 0 or n >= min_member, (g, n, min_member)  # never partly bound
        bound_gangs += n > 0
    if bound_gangs == 0:
        # No deadlock: with no gang bound, no gang fits the room the plain pods left.
        free = [node_cpu * 1000 - used.get(name, 0) for name in node_names]
        for min_member, _extra, cpu in gangs:
            fits = sum(f // (cpu * 1000) for f in free)
            assert fits < min_member, (gangs, plain, free)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(2, 4), node_cpu=st.integers(4, 12), gangs=gangs_st, plain=plain_st)
def test_gangs_are_bound_whole_or_not_at_all(
    nodes: int, node_cpu: int, gangs: list[tuple[int, int, int]], plain: list[int]
) -> None:
    asyncio.run(_run(nodes, node_cpu, gangs, plain))
