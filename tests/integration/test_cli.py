"""The daemon as a process: bad configuration exits 2 before any request; SIGTERM exits 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.sandbox.testing import SandboxProcess

RUN = [sys.executable, "-m", "scheduler", "run", "--metrics-bind-address", "127.0.0.1:0",
       "--log-format", "json"]


@pytest.mark.parametrize(
    ("config_text", "expected"),
    [
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n"
                     "      - name: NodeResourcesFit\n        weight: -3\n",
                     "profiles[0].plugins.score.enabled[0].weight", id="negative-weight"),
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFit\n"
                     "    args:\n      scoringStrategy:\n        type: Sideways\n",
                     "scoringStrategy", id="bad-plugin-args"),
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      enabled:\n"
                     "      - name: NoSuchPlugin\n",
                     "NoSuchPlugin", id="unknown-plugin"),
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles: [\n", "line", id="yaml-syntax"),
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "percentageOfNodesToScore: 150\n", "percentageOfNodesToScore",
                     id="out-of-range"),
        # pluginConfig of a plugin the profile does not enable is validated too (a typo there
        # used to be silent).
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFitt\n"
                     "    args: {}\n", "'NodeResourcesFitt' is not registered",
                     id="plugin-config-name-typo"),
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      disabled:\n"
                     "      - name: InterPodAffinity\n  pluginConfig:\n  - name: InterPodAffinity\n"
                     "    args: {hardPodAffinityWeight: 1000}\n", "hardPodAffinityWeight",
                     id="disabled-plugin-bad-args"),
    ],
)
def test_bad_config_exits_2_naming_the_field(tmp_path: Path, config_text: str, expected: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(config_text)
    # A kubeconfig pointing nowhere: exit 2 must come before any connection attempt.
    result = subprocess.run(
        [*RUN, "--config", str(config), "--kubeconfig", str(tmp_path / "missing")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert str(config) in result.stderr or "config" in result.stderr


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = subprocess.run([*RUN, "--config", str(tmp_path / "nope.yaml")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "nope.yaml" in result.stderr


def test_sigterm_stops_cleanly_with_exit_0(tmp_path: Path) -> None:
    with SandboxProcess(nodes=2) as sandbox:
        proc = subprocess.Popen(
            [*RUN, "--kubeconfig", str(sandbox.kubeconfig_path), "--leader-elect", "true"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 30
            lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/py-scheduler"
            import urllib.request

            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(sandbox.url + lease, timeout=2) as r:
                        if b'"holderIdentity"' in r.read():
                            break
                except OSError:
                    pass
                time.sleep(0.1)
            else:
                pytest.fail("scheduler never took the lease")
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert code == 0, proc.stderr.read() if proc.stderr else ""
        with urllib.request.urlopen(sandbox.url + lease, timeout=2) as r:
            body = r.read().decode()
        assert '"holderIdentity":""' in body.replace(" ", ""), "lease released on SIGTERM"


@pytest.mark.parametrize("workload", ["plain", "gang", "extender"])
def test_bench_binds_every_pod_and_reports_its_ratios(workload: str) -> None:
    """A small ``kube-py-scheduler bench`` run: every phase runs against its own sandbox
    process and the figures are consistent with each other (no timing is asserted). The
    floor run (plain pods, no Filter/Score plugins) is the same whatever the workload: the
    plain run has it, the others skip it (``--no-floor``)."""
    import json

    floor = workload == "plain"
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "bench", "--nodes", "8", "--pods", "32",
         "--raw-binds", "32", "--workload", workload, "--gang-size", "4", "--json",
         *([] if floor else ["--no-floor"])],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bound"] == result["pods"] == 32
    assert result["cycles"] >= 32
    for key in ("raw_binding_rate_per_s", "raw_binding_rate_official_client_per_s",
                "binding_with_event_rate_per_s", "scheduler_pods_per_s", "cpu_per_pod_ms",
                *(["floor_pods_per_s"] if floor else [])):
        assert result[key] > 0, key
    # Ratios come from unrounded rates; the printed rates are rounded to 0.1/s.
    assert result["ratio_to_raw_binding"] == pytest.approx(
        result["scheduler_pods_per_s"] / result["raw_binding_rate_per_s"], abs=2e-3)
    if floor:
        assert result["floor_ratio_to_raw_binding"] == pytest.approx(
            result["floor_pods_per_s"] / result["raw_binding_rate_per_s"], abs=2e-3)
    else:
        assert "floor_pods_per_s" not in result
    assert result["cycle_p50_ms"] <= result["cycle_p99_ms"]
    # The sync-inclusive figure times a longer span than the window from the first
    # measured pod's creation; an average exists exactly when a 1 s sample was recorded.
    assert result["pods_per_s_incl_sync"] <= result["scheduler_pods_per_s"]
    assert result["measured_s"] + result["informer_sync_s"] <= result["wall_s"] + 2e-3
    assert (result["scheduler_pods_per_s_avg"] is None) == (result["throughput_samples"] == 0)
    if workload == "extender":
        # one filter and one prioritize call per pod (8 nodes: never a single feasible one)
        assert result["extender_calls"] >= 2 * 32


def _gpu_demo_state(url: str) -> dict[str, tuple[str, str, list[str]]]:
    """demo-gpu pod -> (node, phase, its generated claims' names)."""
    import json
    import urllib.request

    with urllib.request.urlopen(url + "/api/v1/namespaces/default/pods?labelSelector=app%3Ddemo-gpu", timeout=2) as r:
        items = json.loads(r.read())["items"]
    return {p["metadata"]["name"]: (p["spec"].get("nodeName", ""), p["status"].get("phase", ""),
                                    [s.get("resourceClaimName", "") for s in p["status"].get("resourceClaimStatuses") or []])
            for p in items}


def test_run_sandbox_schedules_the_demo_workload_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`run --sandbox`: the CLI layer starts the sandbox and the demo pods, the daemon
    schedules them (the too-big one stays pending), SIGTERM exits 0. The GPU demo (2 GPUs on
    node-0000 by default, 3 pods with a claim from a template each): every pod gets its claim
    from the resourceclaim controller, and no GPU pod ever runs without a device: at most two
    run, on node-0000; with the DynamicResources plugin, exactly two, and the third waits."""
    import json
    import urllib.request

    from scheduler.plugins.registry import IN_TREE

    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen(
        [*RUN, "--sandbox", "--nodes", "2", "--demo-pods", "3",
         "--sandbox-kubeconfig-out", str(kubeconfig), "--log-level", "debug"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:"), url
        assert f"export KUBECONFIG={kubeconfig}" in proc.stdout.readline()
        assert kubeconfig.exists()
        deadline = time.monotonic() + 30
        placed: dict[str, str] = {}
        gpu: dict[str, tuple[str, str, list[str]]] = {}
        with_plugin = "DynamicResources" in IN_TREE
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url + "/api/v1/namespaces/default/pods", timeout=2) as r:
                items = json.loads(r.read())["items"]
            placed = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in items}
            gpu = _gpu_demo_state(url)
            running = [n for n, (_, phase, _) in gpu.items() if phase == "Running"]
            assert len(running) <= 2 and all(gpu[n][0] == "node-0000" for n in running), gpu
            if (len(placed) == 7 and all(placed[f"demo-web-{i}"] for i in range(3))
                    and all(len(c) == 1 and c[0].startswith(f"{n}-gpu-") for n, (_, _, c) in gpu.items())
                    and (len(running) == 2 or not with_plugin)):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"demo pods not scheduled: {placed} {gpu}")
        assert placed["demo-too-big"] == ""
        assert sorted(gpu) == ["demo-gpu-0", "demo-gpu-1", "demo-gpu-2"]
        if with_plugin:
            waiting = [n for n, (node, _, _) in gpu.items() if not node]
            assert len(waiting) == 1, gpu
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 0, err
    # Every log line is JSON (kopf's and aiohttp's too), and debug shows what the README
    # promises: queue moves and each successful binding.
    records = [json.loads(line) for line in err.splitlines() if line.strip()]
    events = {(r.get("event"), r.get("pod")) for r in records}
    for i in range(3):
        assert ("successfully bound pod to node", f"default/demo-web-{i}") in events
        assert ("pod moved to activeQ", f"default/demo-web-{i}") in events
    assert ("pod moved to the unschedulable pool", "default/demo-too-big") in events
