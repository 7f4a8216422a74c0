"""The README's quick start and CI agree; the configuration and command-line pages' blocks
and the reliability page's figures hold."""

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


def test_configuration_example_is_accepted_by_the_daemon() -> None:
    """The example was once rejected (its profiles used different queueSort plugins)."""
    from scheduler.app import validate_profiles
    from scheduler.config.load import parse_config_text
    from scheduler.plugins.registry import in_tree_registry

    (block,) = section_blocks("Configuration", lang="yaml", page="docs/configuration.md")
    config = parse_config_text(block.text, source="docs/configuration.md")
    validate_profiles(config, in_tree_registry(), source="docs/configuration.md")
    assert [p.scheduler_name for p in config.profiles] == ["py-scheduler", "py-binpack"]


def test_shell_completion_command_installs_the_completion() -> None:
    """The command-line page's completion line, run in bash with the installed command on PATH."""
    import os
    import subprocess
    import sys

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


def test_reliability_section_describes_the_fuzz_suite_as_it_is() -> None:
    """The counts the reliability page gives for the malformed-object fuzz suite are the suite's."""
    import random

    from tests.integration import test_malformed_fuzz as fuzz

    page = (REPO / "docs" / "reliability.md").read_text()
    assert page.startswith("# Reliability: faults and malformed objects\n")
    text = " ".join(page.split())
    plan = fuzz.Plan(random.Random(fuzz.SEED))
    assert "tests/integration/test_malformed_fuzz.py" in text
    for phrase in (
        f"{len(plan.pending)} malformed pending pods drawn from "
        f"{len(fuzz.PENDING_CORRUPTIONS)} corruptions",
        f"{len(plan.bound)} malformed pods already bound",
        f"{len(plan.bad_nodes)} malformed nodes",
        f"{len(fuzz.PV_CORRUPTIONS)} malformed PVs, {len(fuzz.PVC_CORRUPTIONS)} PVCs, "
        f"{len(fuzz.POD_GROUP_CORRUPTIONS)} PodGroups",
        f"among {len(plan.well_formed) + len(plan.gang)} well-formed pods",
        f"and {len(plan.dependents)} that depend on a malformed PVC or PodGroup",
    ):
        assert phrase in text, phrase
