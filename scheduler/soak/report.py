"""What the soak prints and writes: the summary table, the JSON report, the PNG (RSS,
throughput, pending pods and attempts over time; matplotlib, as the bench's plot)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def summary_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    attempts = result["attempts"]
    faults = ", ".join(f"{k} {v}" for k, v in result["faults"].items()) or "none"
    compares = [c for c in result["cache_compares"] if c.get("available")]
    clean = sum(1 for c in compares if not c.get("differences"))
    limits = result["limits"]
    return [
        ("seed / duration", f"{result['seed']} / {result['elapsed_s']:g} s of "
                            f"{result['duration_s']:g} s ({result['stopped_by']})"),
        ("nodes / replicas", f"{result['nodes']} base / {result['replicas']}"),
        ("pods scheduled", str(result["pods_scheduled"])),
        ("events handled", str(result["events_handled"])),
        ("faults injected", f"{result['faults_total']} ({faults})"),
        ("leader changes", str(result["leader_changes"])),
        ("RSS leader, after warm-up / end",
         f"{result['rss_leader_start_mib']:g} MiB / {result['rss_leader_end_mib']:g} MiB"),
        ("latency p50 / p99 (created -> bound)",
         f"{result['latency_p50_s']:.3f} s / {result['latency_p99_s']:.3f} s"),
        ("attempts (scheduled / unschedulable / error)",
         f"{attempts['scheduled']} / {attempts['unschedulable']} / {attempts['error']}"),
        ("cache comparisons (clean / run)",
         f"{clean} / {len(compares)}" if compares else "route not served"),
        ("bounds", f"bound within {limits['pending_bound_s']:g} s; <= "
                   f"{limits['max_attempts_per_window']} attempts per pod per "
                   f"{limits['attempts_window_s']:g} s; RSS within "
                   f"{limits['rss_tolerance']:.0%} after {limits['warmup_s']:g} s; idle CPU "
                   f"<= {limits['idle_cpu_fraction']:.0%} of a core"),
        ("invariant violations", str(len(result["violations"]))),
    ]


def format_summary(result: dict[str, Any]) -> str:
    rows = summary_rows(result)
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    for term in result.get("rss_by_term", []):
        warm = "-" if term["rss_warm_mib"] is None else f"{term['rss_warm_mib']:g}"
        lines.append(f"RSS of leader {term['leader']} over {term['from_s']:g}-{term['to_s']:g} "
                     f"s (start / warm / end): {term['rss_start_mib']:g} / {warm} / "
                     f"{term['rss_end_mib']:g} MiB; pods in the cluster "
                     f"{term.get('pods_start', 0)} -> {term.get('pods_end', 0)}")
    for v in result["violations"]:
        lines.append(f"VIOLATION {v['invariant']} at {v['at']:.1f}s: {v['message']}")
        if v["objects"]:
            lines.append(f"  objects: {', '.join(v['objects'][:10])}")
    return "\n".join(lines)


def markdown_table(result: dict[str, Any]) -> str:
    rows = summary_rows(result)
    return "\n".join(["| figure | value |", "|---|---|",
                      *(f"| {k} | {v} |" for k, v in rows)])


def write_report(result: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(result, indent=1) + "\n")


def _rate(ts: Sequence[float], values: Sequence[float], window: float) -> tuple[list[float],
                                                                               list[float]]:
    """Per-second rate of a cumulative series over ``window`` seconds."""
    xs: list[float] = []
    ys: list[float] = []
    j = 0
    for i, t in enumerate(ts):
        while ts[j] < t - window:
            j += 1
        if t - ts[j] > 0:
            xs.append(t)
            ys.append((values[i] - values[j]) / (t - ts[j]))
    return xs, ys


def plot(result: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = result["timeline"]
    ts = [s["t"] / 60 for s in timeline]
    secs = [s["t"] for s in timeline]
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    replicas = sorted({r for s in timeline for r in s["rss"]})
    for r in replicas:
        pts = [(s["t"] / 60, s["rss"][r] / 2**20) for s in timeline if r in s["rss"]]
        axes[0].plot([p[0] for p in pts], [p[1] for p in pts], ".", markersize=1.5, label=r)
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].legend(loc="lower right", fontsize=7)
    x, y = _rate(secs, [s["binds"] for s in timeline], 30.0)
    axes[1].plot([v / 60 for v in x], y, linewidth=0.8)
    axes[1].set_ylabel("binds/s (30 s)")
    axes[2].plot(ts, [s["pending"] for s in timeline], linewidth=0.8)
    axes[2].set_ylabel("pending pods")
    x, y = _rate(secs, [s["attempts"] for s in timeline], 30.0)
    axes[3].plot([v / 60 for v in x], y, linewidth=0.8)
    axes[3].set_ylabel("failed attempts/s")
    axes[3].set_xlabel("minutes")
    fig.suptitle(f"kube-py-scheduler soak: seed {result['seed']}, {result['replicas']} "
                 f"replicas, {len(result['violations'])} violations", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
