"""The benchmark commands of docs/benchmarks.md run as written, with their sizes shrunk: every
upstream shape (and gang) binds every measured pod, with its existing and gated pods in place and the
figures consistent with each other; the curve command writes its plot.  No timing is
asserted."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.bench import build_parser
from scheduler.bench.workloads import WORKLOADS
from tests.docs.readme import section_blocks

# argparse keeps the last value of a repeated flag: these shrink any documented command.
TINY = ["--nodes", "12", "--pods", "8", "--raw-binds", "8"]


def _commands() -> list[list[str]]:
    (block,) = section_blocks("Benchmarks", lang="bash", page="docs/benchmarks.md")
    commands = [shlex.split(c) for c in block.commands()]
    assert all(c[:2] == ["kube-py-scheduler", "bench"] for c in commands)
    return [c[2:] for c in commands]


def test_the_commands_cover_every_upstream_shape_and_gang() -> None:
    named = {build_parser().parse_args(argv).workload for argv in _commands()}
    upstream = {name for name, w in WORKLOADS.items() if w.upstream_floor is not None}
    assert upstream | {"gang"} <= named


@pytest.mark.parametrize("index", range(len(_commands())))
def test_benchmark_command_runs_as_written(index: int, tmp_path: Path) -> None:
    argv = _commands()[index]
    args = build_parser().parse_args(argv)
    if args.curve:
        pytest.importorskip("matplotlib")  # the optional `bench` extra
        plot = tmp_path / "scaling.png"
        argv = [*argv, *TINY, "--curve", "4,8", "--plot", str(plot), "--json"]
    else:
        argv = [*argv, *TINY, "--json"]
    done = subprocess.run([sys.executable, "-m", "scheduler", "bench", *argv],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr, "no progress bar on a pipe"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if args.curve:
        assert [r["nodes"] for r in out["curve"]] == [4, 8]
        assert plot.read_bytes().startswith(b"\x89PNG")
        return
    workload = WORKLOADS[args.workload]
    assert out["workload"] == args.workload
    assert out["bound"] == out["pods"] == 8
    assert out["existing_pods"] == workload.before(workload.existing_pods, nodes=12, pods=8)
    assert out["gated_pods"] == workload.before(workload.gated_pods, nodes=12, pods=8)
    assert out["upstream_floor_pods_per_s"] == workload.upstream_floor
    # both rates are printed rounded to 0.1/s (the ratio to 0.001), so the ratio is checked
    # against the quotient's range over the rates' rounding: at a tiny run's few pods/s
    # rounding alone moves the quotient by parts per thousand
    rate, ceiling = out["scheduler_pods_per_s"], out["binding_with_event_rate_per_s"]
    assert (rate - 0.05) / (ceiling + 0.05) - 6e-4 <= out["ratio_to_binding_with_event"] \
        <= (rate + 0.05) / (ceiling - 0.05) + 6e-4
    assert out["cycles"] >= 8
    if args.batching:
        assert out["batched_node_filters_per_pod"] >= 0
    else:
        assert out["batched_node_filters_per_pod"] == 0
