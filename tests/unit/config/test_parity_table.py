"""docs/parity.md cannot drift: its gate table is the gate list of ``scheduler.config.features``
(names, stages, defaults, and "yes" exactly for the gates the code implements), every test it
names exists, and the release it names is the one ``--version`` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scheduler import KUBE_SCHEDULER_RELEASE
from scheduler.config.features import GATES
from scheduler.config.defaults import DEFAULT_PLUGINS

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "parity.md"
_TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _section(title: str) -> list[list[str]]:
    """The rows (cells) of the table under ``## title``."""
    text = PAGE.read_text()
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


def test_gate_table_is_the_code_gate_list() -> None:
    rows = {r[0].strip("`"): r for r in _section("Feature gates")}
    assert sorted(rows) == sorted(g.name for g in GATES)
    for gate in GATES:
        _, stage, default, ours, test = rows[gate.name]
        assert (stage, default) == (gate.stage, "on" if gate.default else "off"), gate.name
        assert ours.startswith("yes") is gate.implemented, gate.name
        # an implemented gate shows its test; an unimplemented one none
        assert bool(_TEST_REF.search(test)) is gate.implemented, gate.name


def _all_refs() -> list[tuple[str, str]]:
    return _TEST_REF.findall(PAGE.read_text())


@pytest.mark.parametrize(("path", "name"), _all_refs())
def test_every_named_test_exists(path: str, name: str) -> None:
    source = (ROOT / path).read_text()
    assert re.search(rf"^(async )?def {name}\(", source, re.MULTILINE), f"{path}::{name}"


def test_every_other_change_names_a_test() -> None:
    for row in _section("Other changes since 1.30"):
        assert _TEST_REF.search(row[-1]), row[0]


def test_page_names_the_release_we_match() -> None:
    assert f"kube-scheduler v{KUBE_SCHEDULER_RELEASE}" in PAGE.read_text()


def test_cloud_disk_plugins_are_not_defaults() -> None:
    names = {n for n, _ in DEFAULT_PLUGINS}
    assert not names & {"EBSLimits", "GCEPDLimits", "AzureDiskLimits"}
    assert "NodeDeclaredFeatures" in names
