"""docs/reliability.md describes the malformed-object fuzz suite as it is."""

from __future__ import annotations

import random

from tests.docs.markdown import REPO


def test_reliability_section_describes_the_fuzz_suite_as_it_is() -> None:
    """The counts the reliability page gives for the malformed-object fuzz suite are the suite's."""
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
