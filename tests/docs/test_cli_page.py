"""docs/cli.md's shell-completion line, installed in bash."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.docs.markdown import section_blocks


def test_shell_completion_command_installs_the_completion() -> None:
    """The command-line page's completion line, run in bash with the installed command on PATH."""
    (block,) = [b for b in section_blocks("Command line", lang="bash", page="docs/cli.md")]
    (command,) = block.commands()
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", "-c", f"{command}\ncomplete -p kube-py-scheduler\n"
         "COMP_WORDS=(kube-py-scheduler compl); COMP_CWORD=1; _kube_py_scheduler; "
         'echo "${COMPREPLY[@]}"'],
        capture_output=True, text=True, env=env, check=True,
    )
    assert out.stdout.splitlines() == [
        "complete -F _kube_py_scheduler kube-py-scheduler", "completion"]
