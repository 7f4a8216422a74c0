"""The README's quick start and CI agree."""

from __future__ import annotations

from tests.docs.readme import REPO, section_blocks


def _quick_start() -> list[str]:
    block = section_blocks("Quick start", lang="bash")[0]
    return block.commands()


def test_quick_start_is_two_commands() -> None:
    run, test = _quick_start()
    assert run.endswith("kube-py-scheduler run --sandbox")
    assert test.endswith("python -m pytest")


def test_ci_runs_exactly_the_quick_start_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in ci if line.strip() and not line.lstrip().startswith("#")]
    assert commands[-1] == _quick_start()[1]


def test_the_soak_command_the_readme_quotes_is_the_one_docs_soak_runs() -> None:
    """The README names the soak behind its figures in prose (no block of its own): it is
    the documented command (docs/soak.md's "Running a soak", which
    tests/integration/test_soak.py runs shortened) without its output flags."""
    import re

    readme = (REPO / "README.md").read_text().split("## Measured: a one-hour soak", 1)[1]
    quoted = re.search(r"`(kube-py-scheduler soak [^`]+)`", readme)
    assert quoted is not None, "the README's soak section quotes its command"
    (documented,) = section_blocks("Running a soak", lang="bash", page="docs/soak.md")
    (command,) = documented.commands()
    assert command.startswith(quoted.group(1) + " --report"), (quoted.group(1), command)
