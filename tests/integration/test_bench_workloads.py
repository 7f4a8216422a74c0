"""``kube-py-scheduler bench`` flag checks (every named workload and the curve run from the
benchmark page's commands in tests/docs/test_benchmarks_page.py).  No timing is asserted."""

from __future__ import annotations

import subprocess
import sys


def test_plot_without_curve_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "bench", "--plot", "x.png"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "--plot needs --curve" in done.stderr


def test_write_pipeline_below_one_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "bench", "--write-pipeline", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "--write-pipeline must be at least 1, got 0" in done.stderr
