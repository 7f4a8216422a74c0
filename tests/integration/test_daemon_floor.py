"""The daemon's per-pod work outside the plugins (issue 15's floor), against the sandbox:
the cuts made to it keep every behaviour (events posted, metrics counted, the cache right)."""

from __future__ import annotations

import gc
from pathlib import Path

from scheduler.app import GC_YOUNG_THRESHOLD
from scheduler.sandbox import Sandbox
from tests.integration.harness import running_scheduler, user_client


async def test_synced_cache_is_frozen_out_of_the_cyclic_gc_until_close(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    assert gc.get_freeze_count() == 0
    before = gc.get_threshold()
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        assert await cluster.list_nodes()
        # The synced cache's NodeInfos are in the permanent generation, not rescanned.
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
        info = next(iter(parts.scheduler.cache._nodes.values()))
        assert gc.is_tracked(info)
        assert not any(info is o for o in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


async def test_each_bind_is_counted_once(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``scheduler_py_bind_requests_total`` counts each bind the binding cycle makes once,
    by result (the Bind plugins' POST is not counted a second time by the client)."""
    from tests.integration.harness import wait_until
    from tests.integration.scenarios import api, pod

    kc = sandbox.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster, running_scheduler(kc) as parts:
        await cluster.create_pods([api(pod(f"b-{i}", cpu="10m")) for i in range(5)])

        async def all_bound() -> bool:
            return all(p["spec"].get("nodeName") for p in await cluster.list_pods("default"))

        await wait_until(all_bound, timeout=30, interval=0.1, message="5 pods bound")
        registry = parts.scheduler.metrics.registry
        samples = {
            s.labels["result"]: s.value
            for metric in registry.collect() if metric.name == "scheduler_py_bind_requests"
            for s in metric.samples if s.name.endswith("_total")
        }
        assert samples == {"success": 5.0}
