"""Draw the dashboard's main panels with matplotlib from a real Prometheus' query_range
answers, as Grafana would show them (docs/img/dashboard.png; the bench's plots are drawn the
same way). ``tests/integration/test_prometheus.py`` calls ``draw`` on its run; with
``REGENERATE_DOCS_IMAGES=1`` it rewrites the committed picture:

    REGENERATE_DOCS_IMAGES=1 python -m pytest tests/integration/test_prometheus.py -k picture
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.deploy import prometheus_artifacts as artifacts
from tests.integration.prometheus import PrometheusProcess

# (panel title as in the dashboard, unit shown on its axis)
MAIN_PANELS = [
    ("Throughput: pods scheduled per second", "pods/s"),
    ("Attempt latency", "seconds"),
    ("Pending pods by queue", "pods"),
    ("Unschedulable pods by plugin", "pods"),
    ("Preemption", "count per 1m"),
    ("Gangs: Permit waits and gated pods", "count"),
    ("Binding", "seconds"),
    ("Extender calls", "calls/s"),
]


def _legend(fmt: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def draw(prometheus: PrometheusProcess, *, start: float, end: float, out: Path,
         step: float = 1.0) -> dict[str, bool]:
    """Draw MAIN_PANELS over [start, end] into ``out``; returns title -> had data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = {p["title"]: p for p in artifacts.dashboard()["panels"]}
    cols = 2
    rows = (len(MAIN_PANELS) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.1 * rows), squeeze=False)
    had_data: dict[str, bool] = {}
    for ax, (title, unit) in zip(axes.flat, MAIN_PANELS):
        panel: dict[str, Any] = panels[title]
        drawn = False
        for target in panel["targets"]:
            data = prometheus.api("query_range", query=artifacts.concrete(target["expr"]),
                                  start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step}")
            for series in data["result"]:
                points = [(float(t), float(v)) for t, v in series["values"]
                          if v not in ("NaN", "+Inf", "-Inf")]
                if not points:
                    continue
                xs = [datetime.fromtimestamp(t) for t, _ in points]
                ax.plot(xs, [v for _, v in points], linewidth=1.4,
                        label=_legend(target.get("legendFormat", ""), series["metric"]) or None)
                drawn = True
        had_data[title] = drawn
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7, loc="upper left")
        ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%H:%M:%S"))
    for ax in list(axes.flat)[len(MAIN_PANELS):]:
        ax.set_visible(False)
    fig.suptitle("kube-py-scheduler dashboard: one test run on the sandbox "
                 "(Prometheus 2.42, 1 s scrapes)", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return had_data
