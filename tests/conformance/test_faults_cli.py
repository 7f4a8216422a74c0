"""Fault injection, flow control, and the command line (subprocess)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import pytest
from kubernetes import client, config
from sbhelpers import Http, pod

from scheduler.sandbox import Sandbox
from scheduler.sandbox.cli import main
from scheduler.sandbox.testing import SandboxAdmin, SandboxProcess

PODS = "/api/v1/namespaces/default/pods"


async def test_fail_n_times_then_recover(http: Http, sandbox: Sandbox) -> None:
    admin = SandboxAdmin(sandbox.url, sandbox.token)
    await admin.afail("create", "pods", code=500, times=2)
    codes = [(await http.post(PODS, pod(f"f{i}")))[0] for i in range(3)]
    assert codes == [500, 500, 201]
    await admin.afail("create", "pods", subresource="binding", code=409, times=1, message="nope")
    s, st = await http.post(f"{PODS}/f2/binding", {"metadata": {"name": "f2"}, "target": {"name": "node-0000"}})
    assert s == 409 and st["reason"] == "Conflict" and st["message"] == "nope"
    counters = await admin.acounters()
    assert counters["requests"]["create pods"] == 3 and counters["requests"]["create pods/binding"] == 1
    assert counters["bindings"] == 0
    await admin.areset_counters()
    assert (await admin.acounters())["requests"] == {}


async def test_probability_and_429_retry_after(http: Http, sandbox: Sandbox) -> None:
    sandbox.faults.rng.seed(1)
    sandbox.faults.fail("list", "pods", code=429, times=None, probability=0.5)
    codes = [(await http.get(PODS))[0] for _ in range(40)]
    assert 5 < codes.count(429) < 35 and codes.count(200) + codes.count(429) == 40
    sandbox.faults.clear()
    sandbox.faults.fail("list", "pods", code=429, times=1, retry_after=7)
    async with http.s.get(sandbox.url + PODS) as r:
        assert r.status == 429 and r.headers["Retry-After"] == "7"
        assert (await r.json())["details"]["retryAfterSeconds"] == 7
    assert (await http.get(PODS))[0] == 200


async def test_latency_and_pause(http: Http, sandbox: Sandbox) -> None:
    admin = SandboxAdmin(sandbox.url)
    await admin.aadd_latency(0.2, verb="get", resource="nodes")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    s, _ = await http.get("/api/v1/nodes/node-0000")
    assert s == 200 and loop.time() - t0 >= 0.2
    await admin.aclear()
    await admin.apause()
    task = asyncio.create_task(http.get("/api/v1/nodes"))
    await asyncio.sleep(0.1)
    assert not task.done()
    await admin.aresume()
    s, _ = await asyncio.wait_for(task, 2)
    assert s == 200


async def test_admin_compact_and_drop_over_http(http: Http, sandbox: Sandbox) -> None:
    admin = SandboxAdmin(sandbox.url)
    _, p = await http.post(PODS, pod("c"))
    await http.post(PODS, pod("d"))
    rv = await admin.acompact()
    assert int(rv) > int(p["metadata"]["resourceVersion"])
    evs = await http.watch(PODS, {"resourceVersion": p["metadata"]["resourceVersion"]})
    assert evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410
    assert await admin.adrop_watches() == 0
    s, _ = await http.post("/sandbox/v1/faults/failures", {"code": 500, "bogus": 1})
    assert s == 400


@pytest.mark.sandbox(max_requests_inflight=1)
async def test_max_inflight_returns_429_with_retry_after(http: Http, sandbox: Sandbox) -> None:
    sandbox.faults.add_latency(0.3, verb="list")
    slow = asyncio.create_task(http.get(PODS))
    await asyncio.sleep(0.1)
    async with http.s.get(sandbox.url + "/api/v1/nodes") as r:
        assert r.status == 429 and r.headers["Retry-After"] == "1"
        body = await r.json()
        assert body["reason"] == "TooManyRequests"
    assert (await slow)[0] == 200


def test_cli_subprocess_serves_and_stops_on_sigterm(sandbox_process: object) -> None:
    with SandboxProcess(nodes=2, token="tok", node_labels={"pool": "a"}, simulate_kubelet=False) as sp:
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(sp.kubeconfig_path)))
        nodes = api.list_node().items
        assert [n.metadata.name for n in nodes] == ["node-0000", "node-0001"]
        assert nodes[0].metadata.labels["pool"] == "a"
        sp.admin.fail("list", "nodes", code=500, times=1)
        with pytest.raises(client.ApiException) as ei:
            api.list_node()
        assert ei.value.status == 500
        assert sp.admin.counters()["requests"]["list nodes"] == 2
        assert sp.proc is not None
        sp.proc.send_signal(signal.SIGTERM)
        assert sp.proc.wait(10) == 0


def test_cli_sigint_exit_code_and_ready_line() -> None:
    p = subprocess.Popen([sys.executable, "-m", "scheduler.sandbox", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("sandbox ready at http://127.0.0.1:") and "ready" in line
        p.send_signal(signal.SIGINT)
        assert p.wait(10) == 0
    finally:
        p.kill()


@pytest.mark.parametrize("argv", [["--nodes", "-1"], ["--node-cpu", "lots"], ["--node-labels", "novalue"],
                                  ["--port", "x"], ["--bogus"]])
def test_cli_bad_flags_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_sandbox_process_fixture(sandbox_process: object) -> None:
    start = time.monotonic()
    sp = sandbox_process(nodes=1)  # type: ignore[operator]
    assert sp.url.startswith("http://") and sp.kubeconfig_path.exists()
    assert time.monotonic() - start < 30
