"""Issue 21 in CI: the documented soak command (docs/soak.md, "Running a soak"), shortened to
100 seconds with its seed, must end with zero invariant violations, having seen every
ingredient of the mix.

Why 100 s: the shortest run whose timeline (``Timeline.for_duration``) still holds every
ingredient as the two-minute one did: two leader changes (at a third and two thirds), a
quiet point mid-way more than 30 s before the end and the final one, faults every 15 s or
so (four kinds in turn), and the paused leader (16 s) resumed by its own timer before the
mid-way quiet point (at 75 s the quiet point resumed it early, another path, where a
replica once logged an asyncgen-close traceback from kopf's watch: left to the soak owners).

Only counts and invariants are asserted, never speed: the soak's bounds carry their margins
(pending bound 60 s, attempts within backoff over 60 s windows, idle CPU a quarter of a
core), and its clock starts once a replica leads, so a slow start on a loaded 2-core
machine costs wall time, not correctness."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.soak.invariants import INVARIANTS
from tests.docs.readme import section_blocks

PAGE = "docs/soak.md"
SECTION = "Running a soak"
CI_DURATION = "100s"


def _documented_command() -> list[str]:
    (block,) = section_blocks(SECTION, lang="bash", page=PAGE)
    (command,) = [c for c in block.commands() if "soak" in c]
    argv = shlex.split(command)
    assert argv[:2] == ["kube-py-scheduler", "soak"], argv
    return argv[2:]


@pytest.mark.slow
def test_documented_soak_shortened_ends_without_violations(tmp_path: Path) -> None:
    # argparse keeps the last value of a repeated flag: the documented command, 100 seconds.
    report, plot = tmp_path / "soak.json", tmp_path / "soak.png"
    argv = [*_documented_command(), "--duration", CI_DURATION, "--report", str(report),
            "--plot", str(plot)]
    done = subprocess.run([sys.executable, "-m", "scheduler", "soak", *argv],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    result = json.loads(report.read_text())
    violations = result["violations"]
    assert done.returncode == 0 and not violations, (
        json.dumps(violations, indent=1)[:6000] + "\n" + done.stdout[-3000:] + done.stderr[-3000:])
    assert result["stopped_by"] == "duration"
    assert "invariant violations" in done.stdout  # the summary table
    assert "[" in done.stdout and "bound" in done.stdout  # progress lines
    assert plot.read_bytes().startswith(b"\x89PNG")
    # Every ingredient came: pods of each kind bound, faults of each kind, a leader change,
    # preemption, the partly fitting gang made whole, quiet points.
    assert result["pods_scheduled"] > 50
    assert result["events_handled"] > 0
    assert {"api-errors", "api-latency", "watch-drop", "watch-410"} <= set(result["faults"])
    assert result["leader_changes"] >= 1
    assert result["attempts"]["scheduled"] > 0
    assert {"preempt", "partial_gang", "add_gang", "add_volume_pod", "scale"} <= set(
        result["mix_actions"])
    assert len(result["idle_cpu"]) >= 2
    assert result["timeline"]
    assert {v["invariant"] for v in violations} <= set(INVARIANTS)
