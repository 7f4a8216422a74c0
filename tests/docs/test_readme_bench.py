"""The README's benchmark commands are the bench's: each parses, names a real workload, and
the curve command runs end to end (with its sizes shrunk) and writes its plot."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.bench import build_parser
from scheduler.bench.workloads import WORKLOADS
from tests.docs.readme import section_blocks


def _commands() -> list[list[str]]:
    (block,) = section_blocks("Benchmarks", lang="bash")
    commands = [shlex.split(c) for c in block.commands()]
    assert all(c[:2] == ["kube-py-scheduler", "bench"] for c in commands)
    return [c[2:] for c in commands]


def test_every_benchmark_command_parses_and_every_named_workload_is_run() -> None:
    parser = build_parser()
    named = set()
    for argv in _commands():
        args = parser.parse_args(argv)
        named.add(args.workload)
    upstream = {name for name, w in WORKLOADS.items() if w.upstream_floor is not None}
    assert upstream | {"gang"} <= named


def test_the_curve_command_runs_and_writes_its_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the optional `bench` extra
    (curve,) = [argv for argv in _commands() if "--curve" in argv]
    plot = tmp_path / "scaling.png"
    # The README's command with its sizes shrunk (argparse keeps the last value of a flag).
    argv = [*curve, "--curve", "4,8", "--pods", "8", "--raw-binds", "8", "--plot", str(plot)]
    done = subprocess.run([sys.executable, "-m", "scheduler", "bench", *argv],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "| nodes |" in done.stdout
