"""The "Why is my pod Pending?" page (docs/explain.md), executed.

The walk-through runs as written against ``run --sandbox``, with a free port and temporary
paths in place of 10259, /tmp/explain-demo.kubeconfig and /tmp/planned.yaml (tests never use
fixed ports or paths); the sample output is what the first ``explain`` prints; the RBAC
commands run against a sandbox.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from scheduler.sandbox.testing import SandboxProcess
from tests.docs.readme import REPO, section_blocks
from tests.docs.test_secure_serving_page import _wait, background, free_port  # noqa: F401

SECTION = "Why is my pod Pending?"
PAGE = "docs/explain.md"
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                             f"{os.environ.get('PATH', '')}"}


def sh(command: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], env=ENV, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_the_section_starts_with_explain() -> None:
    blocks = section_blocks(SECTION, lang="bash", page=PAGE)
    assert blocks[0].commands()[1].startswith("kube-py-scheduler explain ")


def test_walk_through_runs_as_written(
    tmp_path: Path, background: list[subprocess.Popen[str]]  # noqa: F811
) -> None:
    commands = section_blocks(SECTION, lang="bash", page=PAGE)[0].commands()
    assert len(commands) == 7
    port = free_port()
    kubeconfig = tmp_path / "explain-demo.kubeconfig"
    planned = tmp_path / "planned.yaml"

    def local(command: str) -> str:
        return (command.replace("10259", str(port))
                .replace("/tmp/explain-demo.kubeconfig", str(kubeconfig))
                .replace("/tmp/planned.yaml", str(planned)))

    run, table, wide, as_json, kubectl_run, pod_file, from_scheduler = map(local, commands)
    assert run.endswith("&")
    log = tmp_path / "scheduler.log"
    with open(log, "w") as log_file:
        background.append(subprocess.Popen(
            ["bash", "-c", "exec " + run.removesuffix("&").strip()], env=ENV, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=log_file, text=True))
    _wait(lambda: kubeconfig.exists(), "the sandbox's kubeconfig", background, log=log)

    # The demo workload is created, then the daemon fails demo-too-big once.
    def daemon_has_tried() -> bool:
        done = sh(from_scheduler)
        return done.returncode == 0 and "last attempt:" in done.stdout

    _wait(daemon_has_tried, "the daemon's first attempt at demo-too-big", background,
          log=log)

    done = sh(table)
    assert done.returncode == 0, done.stderr
    sample = next(b for b in section_blocks(SECTION, page=PAGE) if b.lang == "" and "Filter:" in b.text)
    assert _no_timing(done.stdout) == _no_timing(sample.text)

    done = sh(wide)
    assert done.returncode == 0, done.stderr
    assert all(f"node-000{i}" in done.stdout for i in range(4))

    done = sh(as_json)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result["filter-result"]) == {f"node-000{i}" for i in range(4)}
    assert result["selected-node"] == ""

    done = sh(kubectl_run)
    assert done.returncode == 0, done.stderr
    done = sh(pod_file)
    assert done.returncode == 0, done.stderr
    assert "Result: " in done.stdout and "unschedulable" not in done.stdout

    done = sh(from_scheduler)
    assert done.returncode == 0, done.stderr
    assert "The scheduler's view: queue " in done.stdout
    assert "0/4 nodes are available" in done.stdout.split("The scheduler's view")[1]

    # `kill -USR2 <pid>`: the daemon logs its cache and queue, and keeps running.
    background[0].send_signal(signal.SIGUSR2)
    _wait(lambda: "dump of the scheduling queue" in log.read_text(), "the SIGUSR2 dump",
          background, log=log)
    text = log.read_text()
    assert text.count("cached node") == 4 and "dump of the scheduler cache" in text
    assert sh(from_scheduler).returncode == 0


def _no_timing(text: str) -> str:
    return re.sub(r"\(cycle \d+ ms\)", "(cycle N ms)", text).strip()


def test_rbac_commands_run_against_a_cluster(tmp_path: Path) -> None:
    commands = section_blocks(SECTION, lang="bash", page=PAGE)[1].commands()
    assert commands[0] == "kubectl apply -f manifests/explain/"
    with SandboxProcess(nodes=0) as sp:
        env = {**ENV, "KUBECONFIG": str(sp.kubeconfig_path)}
        for command in commands:
            done = subprocess.run(["bash", "-c", command], env=env, cwd=REPO,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (command, done.stderr)
        done = subprocess.run(
            ["kubectl", "get", "clusterrolebinding", "explain-alice", "-o", "json"], env=env,
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        binding = json.loads(done.stdout)
        assert binding["roleRef"]["name"] == "kube-py-scheduler-explain"
        assert binding["subjects"][0]["name"] == "alice"


COMPARE_SECTION = "Is the cache right?"


def test_cache_compare_runs_as_written(
    tmp_path: Path, background: list[subprocess.Popen[str]]  # noqa: F811
) -> None:
    """The daemon on the demo: both curls print the sample once the demo has settled, and
    SIGUSR2 logs the comparison's summary."""
    commands = section_blocks(COMPARE_SECTION, lang="bash", page=PAGE)[0].commands()
    assert len(commands) == 3
    port = free_port()
    kubeconfig = tmp_path / "compare-demo.kubeconfig"
    run, informers, fresh = (c.replace("10259", str(port))
                             .replace("/tmp/compare-demo.kubeconfig", str(kubeconfig))
                             for c in commands)
    assert run.endswith("&") and "?fresh=true" in fresh and "fresh" not in informers
    log = tmp_path / "scheduler.log"
    with open(log, "w") as log_file:
        background.append(subprocess.Popen(
            ["bash", "-c", "exec " + run.removesuffix("&").strip()], env=ENV, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=log_file, text=True))
    (sample,) = [b for b in section_blocks(COMPARE_SECTION, page=PAGE) if b.lang == ""]
    expected = json.loads(sample.text)

    def answers(command: str) -> bool:
        done = sh(command)
        return done.returncode == 0 and done.stdout.strip() != "" and \
            json.loads(done.stdout) == expected

    _wait(lambda: answers(informers), "a clean comparison with the informers", background,
          log=log)
    _wait(lambda: answers(fresh), "a clean comparison with a fresh LIST", background, log=log)
    background[0].send_signal(signal.SIGUSR2)
    _wait(lambda: "cache comparison done" in log.read_text(), "the SIGUSR2 comparison",
          background, log=log)
    (line,) = [ln for ln in log.read_text().splitlines() if "cache comparison done" in ln]
    assert "differences=0" in line and "pods=14" in line
    assert "cache mismatch" not in log.read_text()
