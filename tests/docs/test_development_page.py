"""The "Development" block of docs/development.md, executed as written from the repository root."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.docs.readme import REPO, section_blocks


def test_development_commands_run_and_pass() -> None:
    (block,) = section_blocks("Development", lang="bash", page="docs/development.md")
    commands = block.commands()
    assert [shlex.split(c)[0] for c in commands] == ["python", "lint-imports"]
    # As in an activated virtualenv: its bin first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True,
                              text=True, timeout=300, env=env)
        assert done.returncode == 0, f"{command}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert "broken" in done.stdout and "0 broken" in done.stdout
