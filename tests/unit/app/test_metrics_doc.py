"""docs/metrics.md lists exactly the series /metrics exports (its tables are the reference):
a new series needs its row there, a removed one loses it. tests/integration/test_prometheus.py
checks the same against a real scrape."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import generate_latest

from scheduler.metrics import SchedulerMetrics

DOCS_METRICS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_docs_tables_list_every_exported_series_and_no_other() -> None:
    documented = set(re.findall(
        r"^\| `((?:scheduler|rest_client|leader_election|process)_[a-z_]+)`",
        DOCS_METRICS.read_text(), re.M))
    exposition = generate_latest(SchedulerMetrics().registry).decode()
    exported = set(re.findall(r"^# TYPE (\S+) \S+$", exposition, re.M))
    assert documented == exported, (
        "docs/metrics.md's tables and the exported series differ: "
        f"undocumented {sorted(exported - documented)}, gone {sorted(documented - exported)}")
