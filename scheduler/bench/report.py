"""What the bench prints: a progress bar on a terminal, the result table, the scaling curve
as a table and as a PNG plot (matplotlib, the optional ``bench`` extra)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO


class Progress:
    """A one-line progress bar on a terminal; nothing at all when the stream is a pipe."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._shown = False

    def update(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * min(done, total) // max(total, 1)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r{label:<28} [{bar}] {done}/{total}\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# The figures upstream's SchedulingThroughput gives (None when a run records no 1 s sample).
THROUGHPUT_KEYS = frozenset({
    "scheduler_pods_per_s_avg", "scheduler_pods_per_s_p50", "scheduler_pods_per_s_p90",
    "scheduler_pods_per_s_p99", "ratio_to_upstream_floor",
})
NO_AVERAGE = "no_average_because"


# CPU milliseconds per measured pod of each of the busy processes of a run (the event
# process only with --event-process on).
CPU_SPLIT = (("creator", "creator_cpu_per_pod_ms"), ("sandbox", "sandbox_cpu_per_pod_ms"),
             ("scheduler", "scheduler_cpu_per_pod_ms"),
             ("event process", "event_process_cpu_per_pod_ms"))


SHARED_CORES = "shared cores"


def cores_bound(result: Mapping[str, Any]) -> dict[str, Any]:
    """The most pods/s the run's cores could carry at the CPU per pod it measured, and that
    as a ratio of the ceiling: whether a target (0.8 of the ceiling) is within what the
    machine allows while the creator, the sandbox and the scheduler share it.

    Two bounds, the lower binds: the cores (the scheduler's affinity, which the sandbox and
    the creator inherit, else the machine's) over the processes' summed CPU per pod; and one
    core over the busiest process's own, for each is a single-threaded Python process. A
    backlog's creator ran before the window and shares no core in it. All None when the
    cores or the sandbox's CPU are unknown: a bound without the API server's share would
    promise what the machine cannot give."""
    counts = [c for c in (result.get("cores"), result.get("scheduler_affinity")) if c]
    cores = min(counts) if counts else None
    per_pod = {name: result.get(key) for name, key in CPU_SPLIT
               if not (name == "creator" and result.get("backlog"))}
    known = {name: ms for name, ms in per_pod.items() if ms}
    if not cores or per_pod.get("sandbox") is None or "scheduler" not in known:
        return dict.fromkeys(CORES_BOUND_KEYS)
    shared = cores * 1000 / sum(known.values())
    busiest = max(known, key=lambda name: known[name])
    single = 1000 / known[busiest]
    bound, by = (shared, SHARED_CORES) if shared <= single else (single, f"{busiest} core")
    ceiling = result.get("binding_with_event_rate_per_s")
    return {
        "cores_bound_shared_pods_per_s": round(shared, 1),
        "cores_bound_single_core_pods_per_s": round(single, 1),
        "cores_bound_pods_per_s": round(bound, 1),
        "cores_bound_by": by,
        "cores_bound_ratio": round(bound / ceiling, 3) if ceiling else None,
    }


CORES_BOUND_KEYS = ("cores_bound_shared_pods_per_s", "cores_bound_single_core_pods_per_s",
                    "cores_bound_pods_per_s", "cores_bound_by", "cores_bound_ratio")


def cpu_split_line(result: dict[str, Any]) -> str | None:
    """Who used the cores, in one line: each process's CPU per measured pod and its share of
    their sum, how many cores they kept busy, and the most pods/s those cores could carry
    at that CPU (:func:`cores_bound`; None when the run has no split)."""
    known = [(name, result[key]) for name, key in CPU_SPLIT if result.get(key) is not None]
    if not known:
        return None
    total = sum(v for _, v in known)
    parts = ", ".join(f"{name} {v:.3f} ms ({v / total:.0%})" if total else f"{name} {v:.3f} ms"
                      for name, v in known)
    line = f"CPU per measured pod: {parts}"
    if result.get("busy_cores") is not None:
        cores = f" of {result['cores']}" if result.get("cores") else ""
        line += f"; {result['busy_cores']}{cores} cores busy from the release to the last bind"
    if result.get("cores_bound_pods_per_s") is not None:
        ratio = result.get("cores_bound_ratio")
        line += (f"; the cores carry at most {result['cores_bound_pods_per_s']} pods/s at this"
                 f" CPU (shared cores {result['cores_bound_shared_pods_per_s']}, one core"
                 f" {result['cores_bound_single_core_pods_per_s']}), bound by the"
                 f" {result['cores_bound_by']}"
                 + (f": {ratio} of the ceiling" if ratio is not None else ""))
    return line


def format_result(result: dict[str, Any]) -> str:
    """One ``key  value`` line per figure; a throughput figure the run was too short for
    points at the reason (``no_average_because``: too few samples, and what size gives one);
    then who used the cores (:func:`cpu_split_line`)."""
    width = max(len(k) for k in result)
    lines = []
    for key, value in result.items():
        cell = _cell(value)
        if value is None and key in THROUGHPUT_KEYS and NO_AVERAGE in result:
            cell += f"  (too few 1 s samples: see {NO_AVERAGE})"
        lines.append(f"{key:<{width}}  {cell}")
    split = cpu_split_line(result)
    return "\n".join(lines + ([split] if split else []))


CURVE_COLUMNS = (
    ("nodes", "nodes"),
    ("scheduler_pods_per_s", "pods/s"),
    ("scheduler_pods_per_s_avg", "avg pods/s (1 s samples)"),
    ("pods_per_s_incl_sync", "pods/s incl. sync"),
    ("ratio_to_binding_with_event", "÷ ceiling"),
    ("binding_with_event_rate_per_s", "ceiling/s"),
    ("cycle_p50_ms", "cycle p50 ms"),
    ("cycle_p99_ms", "cycle p99 ms"),
    ("floor_pods_per_s", "floor pods/s"),
    ("floor_cycle_cpu_per_pod_ms", "floor CPU/pod ms"),
    ("creator_cpu_per_pod_ms", "creator CPU/pod ms"),
    ("sandbox_cpu_per_pod_ms", "sandbox CPU/pod ms"),
    ("cores_bound_ratio", "cores bound ÷ ceiling"),
    ("peak_rss_mib", "peak RSS MiB"),
)


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def curve_table(results: Sequence[dict[str, Any]]) -> str:
    """A Markdown table, one row per node count."""
    lines = ["| " + " | ".join(h for _, h in CURVE_COLUMNS) + " |",
             "|" + "---|" * len(CURVE_COLUMNS)]
    for r in results:
        lines.append("| " + " | ".join(_cell(r.get(k)) for k, _ in CURVE_COLUMNS) + " |")
    notes = [f"— at {r.get('nodes')} nodes: {r[NO_AVERAGE]}" for r in results if NO_AVERAGE in r]
    return "\n".join(lines + ([""] + notes if notes else []))


def _or_nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def plot_curve(results: Sequence[dict[str, Any]], path: str, *, title: str) -> None:
    """Pods/s (with the ceiling and the floor) and cycle p50 against the node count."""
    try:
        import matplotlib
    except ImportError as exc:  # an optional extra
        raise SystemExit(
            "kube-py-scheduler bench --plot needs matplotlib: pip install "
            "'kube-py-scheduler[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = [r["nodes"] for r in results]
    fig, (rate_ax, p50_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    rate_ax.plot(nodes, [r["scheduler_pods_per_s"] for r in results], "o-",
                 label="scheduler (default profile)")
    rate_ax.plot(nodes, [_or_nan(r.get("scheduler_pods_per_s_avg")) for r in results], "x:",
                 label="scheduler, average of 1 s samples (upstream's metric)")
    if all("floor_pods_per_s" in r for r in results):
        rate_ax.plot(nodes, [r["floor_pods_per_s"] for r in results], "s--",
                     label="floor (no Filter/Score plugins)")
    rate_ax.plot(nodes, [r["binding_with_event_rate_per_s"] for r in results], "^:",
                 label="ceiling (binding + event)")
    floor = results[0].get("upstream_floor_pods_per_s")
    if floor:
        rate_ax.axhline(floor, color="grey", linewidth=1,
                        label=f"upstream CI floor at 5000 nodes ({floor:g})")
    rate_ax.set_xscale("log")
    rate_ax.set_xlabel("nodes")
    rate_ax.set_ylabel("pods/s")
    rate_ax.set_ylim(bottom=0)
    rate_ax.legend(fontsize=8)
    rate_ax.grid(True, alpha=0.3)
    p50_ax.plot(nodes, [r["cycle_p50_ms"] for r in results], "o-", label="cycle p50")
    p50_ax.plot(nodes, [r["cycle_p99_ms"] for r in results], "s--", label="cycle p99")
    p50_ax.set_xscale("log")
    p50_ax.set_xlabel("nodes")
    p50_ax.set_ylabel("ms")
    p50_ax.set_ylim(bottom=0)
    p50_ax.legend(fontsize=8)
    p50_ax.grid(True, alpha=0.3)
    for ax in (rate_ax, p50_ax):
        ax.set_xticks(nodes)
        ax.set_xticklabels([str(n) for n in nodes])
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
