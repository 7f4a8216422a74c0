"""The README's quick start, executed as a newcomer would run it: command 1 in a terminal,
the kubectl block in another, then Ctrl-C.

Command 1 is ``python3 -m venv .venv && . .venv/bin/activate && pip install -e . &&
kube-py-scheduler run --sandbox``: the test suite already runs inside that virtualenv with
the package installed (``.ci/run`` runs command 2, which makes the same one), so the test
executes the command after the install steps as written, with one flag added: a free
serving port (``--metrics-bind-address 127.0.0.1:0``) in place of the default 10259, which
the quick start's own scheduler may hold in another terminal while the suite runs (tests
never depend on a fixed port). Command 2 is the test command itself (``test_readme.py``
checks ``.ci/run`` runs it verbatim).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs.readme import REPO, section_blocks

INSTALL_PREFIX = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "


def _run_command() -> str:
    first = section_blocks("Quick start", lang="bash")[0].commands()[0]
    assert first.startswith(INSTALL_PREFIX), first
    return first[len(INSTALL_PREFIX):]


def _kubectl_block() -> list[str]:
    return section_blocks("Quick start", lang="bash")[1].commands()


# The quick start's scheduler, run in another terminal, holds 10259; tests take any free port.
FREE_SERVING_PORT = "--metrics-bind-address 127.0.0.1:0"


def _first_lines(proc: subprocess.Popen[str], count: int) -> list[str]:
    """The first lines the command prints; if it exits first, an AssertionError with its
    exit code and stderr (the cause, e.g. a port in use), not just the empty lines."""
    assert proc.stdout is not None and proc.stderr is not None
    lines = [proc.stdout.readline() for _ in range(count)]
    if not all(lines):
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        stderr = proc.stderr.read() if code is not None else "(still running)"
        raise AssertionError(f"{proc.args} printed {lines!r} and exited {code}: {stderr}")
    return lines


# As in the activated virtualenv of the quick start: its bin first on PATH.
VENV_PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


def _shell(command: str, kubeconfig: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": kubeconfig, "PATH": VENV_PATH}
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                          timeout=60, cwd=REPO)


def test_quick_start_runs_the_demo_and_the_kubectl_block_shows_it(tmp_path: Path) -> None:
    command = _run_command()
    assert command == "kube-py-scheduler run --sandbox"
    proc = subprocess.Popen(["bash", "-c", f"exec {command} {FREE_SERVING_PORT}"], cwd=REPO,
                            text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, "PATH": VENV_PATH})
    try:
        lines = _first_lines(proc, 2)
        match = re.search(r"export KUBECONFIG=(\S+)", lines[1])
        assert match, f"no kubeconfig path printed: {lines!r}"
        kubeconfig = match.group(1)
        block = _kubectl_block()
        export, get_pods, describe, events = block
        assert export.startswith("export KUBECONFIG="), export
        # The block's export names the printed path (its PORT placeholder aside).
        pattern = re.escape(export.split("=", 1)[1]).replace("PORT", r"\d+")
        assert re.fullmatch(pattern, kubeconfig), (export, kubeconfig)

        deadline = time.monotonic() + 60
        out = ""
        while time.monotonic() < deadline:
            out = _shell(get_pods, kubeconfig).stdout
            running = [line for line in out.splitlines()
                       if line.startswith("demo-web-") and " Running " in line]
            if len(running) == 12:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"demo-web pods not all Running:\n{out}")
        nodes = {line.split()[6] for line in running}  # -o wide: NODE column
        assert nodes == {f"node-000{i}" for i in range(4)}, nodes  # spread over the 4 nodes

        done = _shell(describe, kubeconfig)
        assert done.returncode == 0, done.stderr
        assert "FailedScheduling" in done.stdout
        assert "0/4 nodes are available" in done.stdout
        done = _shell(events, kubeconfig)
        assert done.returncode == 0, done.stderr
        assert "Scheduled" in done.stdout and "FailedScheduling" in done.stdout
    finally:
        # Ctrl-C, as the quick start says.
        os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert not Path(kubeconfig).exists(), "the sandbox's kubeconfig is removed on exit"
