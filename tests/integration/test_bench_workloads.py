"""``kube-py-scheduler bench`` on upstream scheduler_perf's named shapes, at a tiny size.

Each run is a real bench (sandbox process, ceiling, scheduler) on a few nodes: every
measured pod is bound, existing and gated pods are there and left alone, and the figures are
consistent with each other.  No timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.bench.workloads import WORKLOADS


def _bench(*args: str) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "bench", "--raw-binds", "8", "--json", *args],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize(
    ("workload", "nodes", "pods", "existing", "gated"),
    [
        pytest.param("SchedulingPodAntiAffinity", 12, 8, 2, 0, id="anti-affinity"),
        pytest.param("TopologySpreading", 6, 12, 6, 0, id="spread"),
        pytest.param("NodeAffinity", 6, 12, 6, 0, id="node-affinity"),
        pytest.param("PreemptionAsync", 6, 12, 24, 0, id="preemption"),
        pytest.param("SchedulingWhileGated", 6, 12, 0, 12, id="gated"),
        pytest.param("MixedChurn", 6, 12, 0, 0, id="churn"),
    ],
)
def test_named_workload_binds_every_measured_pod(
    workload: str, nodes: int, pods: int, existing: int, gated: int
) -> None:
    result, stderr = _bench("--workload", workload, "--nodes", str(nodes), "--pods", str(pods),
                            "--no-floor")
    assert result["workload"] == workload
    assert result["bound"] == result["pods"] == pods
    assert (result["existing_pods"], result["gated_pods"]) == (existing, gated)
    assert result["upstream_floor_pods_per_s"] == WORKLOADS[workload].upstream_floor
    assert result["ratio_to_binding_with_event"] == pytest.approx(
        result["scheduler_pods_per_s"] / result["binding_with_event_rate_per_s"], abs=2e-3)
    assert result["ratio_to_upstream_floor"] == pytest.approx(
        result["scheduler_pods_per_s"] / result["upstream_floor_pods_per_s"], abs=2e-3)
    # Only measured pods count: an existing or churn pod bound on top would overshoot.
    assert result["cycles"] >= pods
    assert "\r" not in stderr, "no progress bar on a pipe"


def test_curve_prints_a_row_per_node_count_and_writes_the_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the optional `bench` extra
    plot = tmp_path / "curve.png"
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "bench", "--workload", "SchedulingBasic",
         "--curve", "4,8", "--pods", "8", "--raw-binds", "8", "--plot", str(plot)],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows] == ["nodes", "4", "8"]
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_plot_without_curve_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "bench", "--plot", "x.png"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "--plot needs --curve" in done.stderr
