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
        assert answer["unschedulablePlugins"] == ["CapacityScheduling", "NodeResourcesFit"]
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


# The daemon's serving path with delegated authentication and authorization: /debug/* is
# authorized on its own path, like /metrics.
SRE, SCRAPER = "sre-token", "scraper-token"
USERS = {SCRAPER: ("prometheus", ["system:serviceaccounts"]), SRE: ("alice", ["sre"])}
ALLOW = [("prometheus", "get", "/metrics"), ("alice", "get", "/debug/*")]


async def test_debug_endpoints_answer_authorized_users_only_and_feed_explain(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    import json

    from prometheus_client import CollectorRegistry

    from scheduler.client.api import ApiClient
    from scheduler.client.connection import load_connection
    from scheduler.client.delegated_auth import DelegatedAuth
    from scheduler.server import HealthServer, HealthState, ServingOptions, prepare_serving
    from tests.integration.test_secure_serving import get

    sb = await sandbox_factory(nodes=0, simulate_kubelet=False, auth_users=USERS,
                               auth_allow=ALLOW)
    kc = sb.write_kubeconfig(tmp_path / "kc")
    async with user_client(kc) as cluster:
        await cluster.create_node(make_node("a", cpu="1"))
    options = ServingOptions(host="127.0.0.1", port=0, secure=True, authentication=True,
                             authorization=True)
    auth_client = ApiClient(load_connection(kubeconfig=str(kc)), qps=0)
    server = HealthServer.serving(
        prepare_serving(options), registry=CollectorRegistry(), health=HealthState(synced=True),
        guard=DelegatedAuth(auth_client, authentication=True, authorization=True),
    )
    try:
        async with user_client(kc) as cluster, \
                running_scheduler(kc, config=daemon_config()) as parts:
            SchedulerIntrospection(parts.scheduler).register(server)
            await server.start()
            url = f"https://127.0.0.1:{server.bound_port}"
            await cluster.create_pod(pod("big", cpu="2"))
            await wait_until(lambda: parts.scheduler.diagnoses.get("default", "big") is not None,
                             timeout=15, message="a diagnosis")

            pod_url = url + "/debug/pods/default/big"
            assert (await get(pod_url))[0] == 401
            assert (await get(pod_url, SCRAPER))[0] == 403
            assert (await get(url + "/debug/queue", SCRAPER))[0] == 403
            status, body = await get(pod_url, SRE)
            assert status == 200
            answer = json.loads(body)
            assert answer["pod"] == "default/big"
            assert answer["lastAttempt"]["reasons"] == {"Insufficient cpu": 1}
            assert answer["lastAttempt"]["message"].startswith(
                "0/1 nodes are available: 1 Insufficient cpu.")
            status, body = await get(url + "/debug/queue", SRE)
            assert status == 200
            queue = json.loads(body)
            assert sum(q["count"] for q in (queue["active"], queue["backoff"],
                                            queue["unschedulable"])) == 1
            assert (await get(url + "/debug/pods/default/nobody", SRE))[0] == 404
            assert (await get(url + "/debug/queue?limit=x", SRE))[0] == 400

            code, out, err = await explain(
                "big", "--kubeconfig", str(kc), "--from-scheduler", url, "--token", SRE,
                "--insecure-skip-tls-verify")
            assert code == 0, err
            assert "The scheduler's view: queue " in out
            assert "0/1 nodes are available: 1 Insufficient cpu." in out
            code, out, _ = await explain(
                "big", "--kubeconfig", str(kc), "--from-scheduler", url, "--token", SCRAPER,
                "--insecure-skip-tls-verify", "-o", "json")
            daemon = json.loads(out)["daemon"]
            assert daemon["found"] is False and "HTTP 403" in daemon["message"]
            # Without --insecure-skip-tls-verify the self-signed certificate is refused.
            code, out, _ = await explain(
                "big", "--kubeconfig", str(kc), "--from-scheduler", url, "--token", SRE)
            assert "The scheduler's view: cannot reach" in out
    finally:
        await server.stop()
        await auth_client.close()
