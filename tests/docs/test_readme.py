"""The README's quick start and CI agree; every README block is accounted for."""

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

    (block,) = section_blocks("Configuration", lang="yaml")
    config = parse_config_text(block.text, source="README.md")
    validate_profiles(config, in_tree_registry(), source="README.md")
    assert [p.scheduler_name for p in config.profiles] == ["py-scheduler", "py-binpack"]


def test_reliability_section_describes_the_fuzz_suite_as_it_is() -> None:
    """The counts the README gives for the malformed-object fuzz suite are the suite's."""
    import random

    from tests.integration import test_malformed_fuzz as fuzz

    readme = (REPO / "README.md").read_text()
    start = readme.index("## Reliability: faults and malformed objects")
    text = " ".join(readme[start:readme.index("\n## ", start + 1)].split())
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
