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
