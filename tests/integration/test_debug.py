"""The daemon's own answer: the last diagnosis of each pending pod, its place in the queue,
and the SIGUSR2 dump of cache and queue, against the sandbox."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from scheduler.logging import configure_logging
from scheduler.explain.debug import SchedulerIntrospection, cache_debugger
from tests.builders import make_node
from tests.integration.harness import running_scheduler, user_client, wait_until
from tests.integration.test_explain import _cluster, daemon_config, explain, pod


async def test_pending_pod_diagnosis_and_queue_position_then_dropped_once_bound(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a", cpu="1"),
                                                    make_node("b", cpu="1")])
    async with user_client(kc) as cluster, running_scheduler(kc, config=daemon_config()) as parts:
        sched = parts.scheduler
        view = SchedulerIntrospection(sched)
        await cluster.create_pod(pod("big", cpu="2"))
        await wait_until(lambda: sched.diagnoses.get("default", "big") is not None,
                         timeout=15, message="a diagnosis")
        await wait_until(lambda: (view.pod("default", "big") or {}).get("queue")
                         in ("unschedulable", "backoff"), timeout=15, message="requeued")
        answer = view.pod("default", "big")
        assert answer is not None
        assert answer["position"] == 0 and answer["queueLength"] == 1
        assert answer["attempts"] >= 1
        assert answer["unschedulablePlugins"] == ["DefaultPreemption", "NodeResourcesFit"]
        last = answer["lastAttempt"]
        assert last["result"] == "unschedulable"
        assert last["reasons"] == {"Insufficient cpu": 2}
        assert last["nodes"] == {"a": "NodeResourcesFit: Insufficient cpu",
                                 "b": "NodeResourcesFit: Insufficient cpu"}
        assert last["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
        # The fresh explanation agrees with the daemon's own.
        code, raw, _ = await explain("big", "--kubeconfig", str(kc), "-o", "json")
        import json

        assert code == 0
        assert json.loads(raw)["failed-scheduling-message"] == last["message"]

        queue = view.queue()
        listed = [row["pod"] for q in ("active", "backoff", "unschedulable")
                  for row in queue[q]["pods"]]
        assert listed == ["default/big"]
        assert queue["diagnosesKept"] == 1

        assert view.pod("default", "nobody") is None
        await cluster.create_node({"apiVersion": "v1", "kind": "Node",
                                   **{k: v for k, v in make_node("c", cpu="4").items()
                                      if k not in ("apiVersion", "kind")}})
        await wait_until(lambda: cluster.node_name("big"), timeout=20, message="big bound")
        await wait_until(lambda: sched.diagnoses.get("default", "big") is None, timeout=10,
                         message="the diagnosis dropped")
        assert view.pod("default", "big") is None


async def test_sigusr2_logs_the_cache_and_the_queue(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    kc = await _cluster(sandbox_factory, tmp_path, [make_node("a", cpu="1")])
    async with user_client(kc) as cluster, running_scheduler(kc, config=daemon_config()) as parts:
        sched = parts.scheduler
        await cluster.create_pod(pod("runs", cpu="500m"))
        await cluster.create_pod(pod("waits", cpu="2"))
        await wait_until(lambda: sched.diagnoses.get("default", "waits") is not None,
                         timeout=15, message="waits failed once")
        await wait_until(lambda: cluster.node_name("runs"), timeout=15, message="runs bound")
        configure_logging(fmt="console", level="info")  # the dump logs at info, as upstream
        try:
            with capture_logs() as logs:
                async with cache_debugger(sched) as debugger:
                    os.kill(os.getpid(), signal.SIGUSR2)
                    await wait_until(lambda: debugger.dumps == 1, timeout=10, message="a dump")
        finally:
            configure_logging(fmt="console", level="warning")
        nodes = [e for e in logs if e["event"] == "cached node"]
        assert [e["node"] for e in nodes] == ["a"]
        assert nodes[0]["pods"] == ["default/runs"]
        assert nodes[0]["requested"].startswith("cpu=500m ")
        assert nodes[0]["allocatable"].startswith("cpu=1000m ")
        (queue,) = [e for e in logs if e["event"] == "dump of the scheduling queue"]
        assert "default/waits" in queue["unschedulable"] + queue["backoff"] + queue["active"]
        # The handler is gone with the context: SIGUSR2 is back to its default.
        assert signal.getsignal(signal.SIGUSR2) in (signal.SIG_DFL, None)
