"""Turning an Explanation into what a person or a tool reads.

``table`` fits a 100-column terminal whatever the cluster size: nodes with the same verdict
are one line (a count and the first names), feasible nodes show the best few totals and the
chosen node's per-plugin scores.  ``wide`` lists every node and every score.  ``json`` and
``yaml`` use kube-scheduler-simulator's result keys (``filter-result``, ``score-result``,
``finalscore-result``, ``selected-node`` ...) with string values as the simulator writes
them, so tooling written for its annotations reads ours; our extras use other keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml

from scheduler.explain.engine import (
    PASSED,
    PRE_FILTER_RESULT,
    Explanation,
    GangTopology,
    NodeVerdict,
)

WIDTH = 100
TOP_NODES = 10
FORMATS = ("table", "wide", "json", "yaml")


def render(explanation: Explanation, fmt: str, *, daemon: dict[str, Any] | None = None) -> str:
    if fmt == "json":
        return json.dumps(to_simulator(explanation, daemon=daemon), indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(to_simulator(explanation, daemon=daemon), sort_keys=False))
    return to_table(explanation, wide=fmt == "wide", daemon=daemon)


# --- simulator keys ---------------------------------------------------------------------------


def filter_result(explanation: Explanation) -> dict[str, dict[str, str]]:
    """node -> plugin -> "passed" or the reason, up to the first rejecting plugin (the
    plugins after it did not run), as the simulator's ``filter-result``."""
    plugins = explanation.filter_plugins
    out: dict[str, dict[str, str]] = {}
    pre_filter_rejected = any(
        status not in ("success", "skip") for status in explanation.prefilter_status.values()
    )
    for verdict in explanation.verdicts:
        if pre_filter_rejected and verdict.plugin in explanation.prefilter_status:
            out[verdict.node] = {}  # Filter never ran: PreFilter turned the pod away
            continue
        row: dict[str, str] = {}
        if verdict.plugin == PRE_FILTER_RESULT:
            row[PRE_FILTER_RESULT] = verdict.reason
        else:
            for plugin in plugins:
                if plugin == verdict.plugin:
                    row[plugin] = verdict.reason
                    break
                row[plugin] = PASSED
            else:
                if verdict.plugin:  # an extender, after every Filter plugin passed
                    row[verdict.plugin] = verdict.reason
        out[verdict.node] = row
    return out


def to_simulator(explanation: Explanation, *, daemon: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    e = explanation
    postfilter: dict[str, dict[str, str]] = {}
    if e.preemption is not None:
        for candidate in e.preemption.candidates:
            victims = ", ".join(v.pod for v in candidate.victims)
            what = "nominated (dry run)" if candidate.node == e.preemption.chosen else "candidate"
            postfilter[candidate.node] = {"DefaultPreemption": f"{what}; victims: {victims}"}
    out: dict[str, Any] = {
        "pod": e.pod,
        "profile": e.profile,
        "nodes": e.num_nodes,
        "prefilter-result-status": dict(e.prefilter_status),
        "prefilter-result": {k: list(v) for k, v in e.prefilter_result.items()},
        "filter-result": filter_result(e),
        "postfilter-result": postfilter,
        "prescore-result": dict(e.prescore_status),
        "score-result": _score_map(e, 0),
        "normalizedscore-result": _score_map(e, 1),
        "finalscore-result": _score_map(e, 2),
        "score-weights": dict(e.score_weights),
        "totalscore-result": {node: str(total) for node, total in e.totals.items()},
        "selected-node": e.selected,
        "ties": list(e.ties),
        "nominated-node": e.nominated_node,
        "preenqueue-result": {e.gated_by: e.gated_message} if e.gated_by else {},
        "failed-scheduling-message": e.message,
        "error": e.error,
        "daemon-nodes-to-find": e.daemon_nodes_to_find,
    }
    if e.preemption is not None:
        out["preemption"] = {
            "message": e.preemption.message,
            "chosen": e.preemption.chosen,
            "candidates": [
                {"node": c.node, "pdbViolations": c.pdb_violations,
                 "victims": [{"pod": v.pod, "priority": v.priority} for v in c.victims]}
                for c in e.preemption.candidates
            ],
        }
        if e.preemption.gang:
            out["preemption"]["gang"] = [
                {"member": placed.member, "node": placed.node,
                 "victims": [{"pod": v.pod, "priority": v.priority} for v in placed.victims]}
                for placed in e.preemption.gang]
    if e.gang is not None:
        g = e.gang
        out["podgroup"] = {
            "name": g.pod_group, "found": g.found, "minMember": g.min_member,
            "members": g.members, "assigned": g.assigned, "pending": list(g.pending),
            "missing": g.missing,
        }
        if g.topology is not None:
            t = g.topology
            out["podgroup"]["topology"] = {
                "key": t.key, "required": t.required, "need": t.need, "chosen": t.chosen,
                "unlabeled": t.unlabeled,
                "domains": [{"value": d.value, "nodes": list(d.nodes), "freeCPU": d.free_cpu,
                             "freeMemory": d.free_memory, "fits": d.fits,
                             "verdict": d.verdict} for d in t.domains],
            }
    if e.quota is not None:
        q = e.quota
        out["elasticquota"] = {"name": q.quota, "min": q.min, "max": q.max, "used": q.used,
                               "rejectedBy": q.rejected_by}
    if daemon is not None:
        out["daemon"] = daemon
    return out


def _score_map(e: Explanation, column: int) -> dict[str, dict[str, str]]:
    """node -> plugin -> score (as a string, as the simulator writes it) of one column:
    0 raw, 1 normalized, 2 weighted."""
    out: dict[str, dict[str, str]] = {node: {} for node in e.scored_nodes}
    for plugin, columns in e.score_columns.items():
        for node, value in zip(e.scored_nodes, columns[column]):
            out[node][plugin] = str(value)
    return out


# --- table ------------------------------------------------------------------------------------


def _names(names: list[str], room: int) -> str:
    """As many names as fit in ``room`` columns, then how many more."""
    shown: list[str] = []
    used = 0
    for i, name in enumerate(names):
        more = len(names) - i - 1
        tail = f", +{more} more" if more else ""
        piece = (", " if shown else "") + name
        if used + len(piece) + len(tail) > room and shown:
            return ", ".join(shown) + f", +{len(names) - len(shown)} more"
        shown.append(name)
        used += len(piece)
    return ", ".join(shown)


def _clip(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(room - 3, 0)] + "..."


def _groups(verdicts: Iterable[NodeVerdict]) -> list[tuple[str, str, list[str]]]:
    groups: dict[tuple[str, str], list[str]] = {}
    for v in verdicts:
        if v.feasible:
            continue
        groups.setdefault((v.plugin, v.reason), []).append(v.node)
    return sorted(((p, r, n) for (p, r), n in groups.items()), key=lambda g: (-len(g[2]), g[0], g[1]))


def to_table(e: Explanation, *, wide: bool = False, daemon: dict[str, Any] | None = None) -> str:
    lines: list[str] = []
    feasible = e.feasible
    lines.append(
        f"Pod {e.pod}  profile {e.profile}  {e.num_nodes} node(s), all evaluated "
        f"(cycle {e.elapsed_seconds * 1000:.0f} ms)"
    )
    if e.nodes_sampled_note():
        lines.append(_clip(e.nodes_sampled_note(), WIDTH))
    if e.gated_by:
        lines.extend(_wrap(f"Not attempted: PreEnqueue {e.gated_by} keeps the pod out of the "
                           f"active queue: {e.gated_message}", WIDTH, indent=""))
        lines.append("(below: what would happen once it is let in)")
    rejected_pre = {p: s for p, s in e.prefilter_status.items() if s not in ("success", "skip")}
    for plugin, status in rejected_pre.items():
        lines.append(_clip(f"PreFilter {plugin}: {status}", WIDTH))
    if e.error:
        lines.append(_clip(f"Error: {e.error}", WIDTH))

    lines.append("")
    lines.append(f"Filter: {len(feasible)} feasible, {len(e.verdicts) - len(feasible)} rejected")
    if wide:
        lines.append(f"  {'NODE':<28} {'PLUGIN':<26} REASON")
        for v in e.verdicts:
            plugin = v.plugin or "-"
            reason = v.reason or "passed every Filter plugin"
            lines.append(f"  {v.node:<28} {plugin:<26} {reason}")
    else:
        groups = _groups(e.verdicts)
        if groups:
            lines.append(f"  {'NODES':>6}  {'PLUGIN':<24} REASON / NODES")
        for plugin, reason, nodes in groups:
            lines.append(_clip(f"  {len(nodes):>6}  {plugin:<24} {reason}", WIDTH))
            lines.append(f"  {'':>6}  {'':<24} " + _names(nodes, WIDTH - 35))
        if feasible:
            lines.append(f"  {len(feasible):>6}  {'(feasible)':<24} " + _names(feasible, WIDTH - 35))

    if e.totals:
        lines.append("")
        ranked = list(e.totals.items())
        shown = ranked if wide else ranked[:TOP_NODES]
        title = "Scores (weighted total)" if wide else (
            f"Scores (weighted total, best {len(shown)} of {len(ranked)}; -o wide for all)")
        lines.append(title)
        for node, total in shown:
            lines.append(f"  {node:<40} {total:>8}")
        focus = [e.selected] if e.selected else e.ties[:1]
        detail_nodes = [n for n, _ in shown] if wide else focus
        for node in detail_nodes:
            lines.append(f"  {node}: {'PLUGIN':<34} {'RAW':>6} {'NORMALIZED':>10} {'WEIGHTED':>9}")
            for plugin, s in e.node_scores(node).items():
                lines.append(f"    {plugin:<{len(node) + 34}} {s.raw:>6} {s.normalized:>10} "
                             f"{s.weighted:>9}")

    lines.append("")
    if e.selected:
        how = ""
        if e.nominated_node and e.selected == e.nominated_node:
            how = " (its nominated node, which it tries first)"
        elif len(feasible) == 1:
            how = " (the only feasible node)"
        lines.append(f"Result: the scheduler would pick {e.selected}{how}")
    elif len(e.ties) > 1:
        lines.append(_clip(
            f"Result: {len(e.ties)} nodes tie for the best score; the scheduler picks one at "
            f"random: {_names(e.ties, WIDTH - 60)}", WIDTH))
    elif e.message:
        lines.append("Result: unschedulable. The scheduler would report (FailedScheduling):")
        lines.extend(_wrap(e.message, WIDTH - 2, indent="  "))
    if e.preemption is not None:
        p = e.preemption
        if p.chosen:
            chosen = next((c for c in p.candidates if c.node == p.chosen), None)
            victims = ", ".join(f"{v.pod} (priority {v.priority})"
                                for v in (chosen.victims if chosen else []))
            text = (f"Preemption (dry run): would nominate {p.chosen}, evicting "
                    f"{victims or 'nothing'}")
            lines.append(text if wide else _clip(text, WIDTH))
            if p.gang:
                lines.append(f"  the gang's plan, every member at once ({len(p.gang)} "
                             "member(s); nothing is evicted unless all get a node):")
                for placed in p.gang:
                    evicted = ", ".join(v.pod for v in placed.victims) or "room already freed"
                    line = f"    {placed.member} -> {placed.node}: {evicted}"
                    lines.append(line if wide else _clip(line, WIDTH))
            elif len(p.candidates) > 1:
                lines.append("  other candidates: " + _names(
                    [f"{c.node} ({len(c.victims)} victim(s))" for c in p.candidates
                     if c.node != p.chosen], WIDTH - 22))
        else:
            lines.append("Preemption (dry run): would not help; no node becomes feasible by "
                         "evicting lower-priority pods")
    if e.gang is not None:
        g = e.gang
        lines.append("")
        if not g.found:
            lines.append(f"PodGroup {g.pod_group}: not found (members wait until it exists)")
        else:
            lines.append(f"PodGroup {g.pod_group}: minMember {g.min_member}, {g.members} "
                         f"member(s) exist, {g.assigned} hold a node")
            if g.pending:
                lines.append("  pending: " + _names(g.pending, WIDTH - 11))
            lines.append(_clip("  missing: " + (g.missing or "nothing"), WIDTH))
            if g.topology is not None:
                lines.extend(_topology_lines(g.topology, wide=wide))
    if e.quota is not None:
        q = e.quota

        def amounts(m: dict[str, str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in m.items())

        lines.append("")
        lines.append(f"ElasticQuota {q.quota}: used {amounts(q.used)}; min {amounts(q.min)}; "
                     f"max {amounts(q.max)}")
        rule = {"max": "the pod would take the quota over its max",
                "min": "the pod would take the sum of used over the sum of mins"}.get(
                    q.rejected_by, "the pod fits the quota")
        lines.append(f"  CapacityScheduling: {rule}")
    if daemon is not None:
        lines.append("")
        lines.extend(daemon_lines(daemon))
    if not wide:  # whatever the names' lengths, the table fits the terminal
        lines = [_clip(line, WIDTH) for line in lines]
    return "\n".join(lines) + "\n"


def _topology_lines(t: GangTopology, *, wide: bool) -> list[str]:
    """The gang's topology domains as a table: why each was turned down, which one won."""
    kind = "required" if t.required else "preferred"
    outcome = (f"{t.key}={t.chosen}" if t.chosen else
               "none fits, they stay pending" if t.required else "none fits alone, any nodes")
    lines = [f"  topology: {kind} {t.key}, {t.need} member(s) in one domain: {outcome}"]
    if not t.domains:
        lines.append(f"    no node has label {t.key}")
        return lines
    width = max(len("DOMAIN"), *(len(d.value) for d in t.domains))
    lines.append(f"    {'DOMAIN':<{width}} {'NODES':>5} {'FREE CPU':>9} {'FREE MEMORY':>11} "
                 f"{'MEMBERS FIT':>11}  VERDICT")
    for d in t.domains:
        row = (f"    {d.value:<{width}} {len(d.nodes):>5} {d.free_cpu:>9} {d.free_memory:>11} "
               f"{f'{d.fits}/{t.need}':>11}  {d.verdict}")
        lines.append(row)
        if wide:
            lines.append("      nodes: " + ", ".join(d.nodes))
    if t.unlabeled:
        lines.append(f"    {t.unlabeled} node(s) without label {t.key}")
    return lines


def daemon_lines(daemon: dict[str, Any]) -> list[str]:
    """The daemon's own last diagnosis (from ``/debug/pods/...``), next to the fresh one."""
    if not daemon.get("found", True):
        return [_clip(f"The scheduler's view: {daemon.get('message', 'pod not in its queue')}",
                      WIDTH)]
    lines = [f"The scheduler's view: queue {daemon.get('queue') or '-'}"
             f" (position {daemon.get('position', '-')}), attempts {daemon.get('attempts', 0)}"]
    last = daemon.get("lastAttempt") or {}
    if last:
        lines.append(f"  last attempt: {last.get('time', '')}  result {last.get('result', '')}")
        if last.get("message"):
            lines.extend(_wrap(str(last["message"]), WIDTH - 4, indent="    "))
        plugins = last.get("unschedulablePlugins") or []
        if plugins:
            lines.append(_clip("  unschedulable plugins: " + ", ".join(plugins), WIDTH))
    return lines


def _wrap(text: str, width: int, *, indent: str) -> list[str]:
    import textwrap

    return [indent + line for line in textwrap.wrap(text, width)] or [indent]
