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
