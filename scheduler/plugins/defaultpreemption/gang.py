"""Gang-aware preemption: one plan for every member of a PodGroup that still needs a node.

A gang that fits only after preemption must not preempt member by member: the first
members' victims would die while the last members may still find no room, leaving the gang
pending and the cluster disturbed for nothing (issue 22; upstream KEP-5710, workload-aware
preemption).  The plan is made whole, on copies of the snapshot, before anything is evicted:

* the members are placed one after the other (the largest first, so that small members fill
  what is left) on a simulated cluster where each earlier member holds its node and each
  earlier victim is gone;
* a member that fits a node of the simulation without victims takes it (the room another
  member's victims freed, or a node the first member's shape could not use);
* otherwise the usual per-node selection runs (``select_victims``: lower-priority pods only,
  PDB-protected ones reprieved first, the most important reprieved first) over the nodes
  that may help, and the usual choice picks one node (fewest PDB violations, then the
  lowest-priority victims, ...);
* PodDisruptionBudgets are spent across the whole plan: a budget one member's victims used
  up is no longer available to the next member, so the violations are counted (and
  minimised) for the plan, not per node;
* a victim in a gang takes its whole bound gang with it (``companions``): they leave the
  simulation too, freeing room for later members, and count against the PDBs;
* if some member finds no node even with preemption, there is no plan and nothing is
  preempted.

Pure functions over NodeInfo copies and callbacks, so the rules can be tested without a
client or an event loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultpreemption.evaluator import (
    PDB,
    Candidate,
    SelectVictims,
    dry_run_preemption,
    filter_pods_with_pdb_violation,
    pick_one_node_for_preemption,
)

__all__ = [
    "ERR_GANG_MEMBER_NO_NODE",
    "GangMember",
    "GangPlan",
    "Placement",
    "plan_gang_preemption",
    "spend_pdbs",
]

ERR_GANG_MEMBER_NO_NODE = (
    "PodGroup {group} does not fit even after preemption: member {pod} finds no node "
    "({placed} of {needed} member(s) placed)")


@dataclass(slots=True)
class GangMember:
    """A member to place: its PodInfo, a cycle state PreFilter filled for it, and the nodes
    it may go to (None: every node with a Node object)."""

    pod_info: PodInfo
    state: CycleState
    nodes: Collection[str] | None = None
    # False when Filter already turned the member down on every node as the snapshot is
    # (the preemptor's shape): only the nodes the plan touched are worth a look.
    scan_untouched: bool = True


@dataclass(slots=True)
class Placement:
    member: PodInfo
    node: str
    # The pods evicted on that node for this member (none: it fits room already freed).
    victims: list[PodInfo] = field(default_factory=list)


@dataclass(slots=True)
class GangPlan:
    placements: list[Placement]
    # Every pod to evict, once: the chosen victims and the bound members of their gangs.
    victims: list[PodInfo]
    num_pdb_violations: int

    def node_of(self, uid: str) -> str:
        for placement in self.placements:
            if placement.member.uid == uid:
                return placement.node
        return ""


def spend_pdbs(pdbs: Sequence[PDB], pods: Sequence[PodInfo]) -> tuple[list[PDB], int]:
    """The budgets left once ``pods`` are evicted, and how many of them violate one."""
    violating, _ = filter_pods_with_pdb_violation(pods, pdbs)
    left = list(pdbs)
    for pod_info in pods:
        if not pod_info.labels:
            continue
        for i, pdb in enumerate(left):
            if (pdb.selector is None or pdb.namespace != pod_info.namespace
                    or pod_info.name in pdb.disrupted_pods
                    or not pdb.selector.matches(pod_info.labels)):
                continue
            left[i] = dataclasses.replace(pdb, disruptions_allowed=pdb.disruptions_allowed - 1)
    return left, len(violating)


class _Simulation:
    """The snapshot with the plan so far applied: copies of the nodes it touched."""

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.real = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.touched: dict[str, NodeInfo] = {}
        # (added?, pod, node) in order, replayed on each later member's cycle state so its
        # PreFilter state (pod affinity counts, spreading) sees the plan's changes.
        self.log: list[tuple[bool, PodInfo, str]] = []

    def get(self, name: str) -> NodeInfo:
        return self.touched.get(name) or self.real[name]

    def _own(self, name: str) -> NodeInfo:
        info = self.touched.get(name)
        if info is None:
            info = self.touched[name] = self.real[name].clone()
        return info

    def remove(self, pod_info: PodInfo) -> None:
        node = pod_info.node_name
        if node not in self.real:
            return
        if self._own(node).remove_pod(pod_info.pod):
            self.log.append((False, pod_info, node))

    def add(self, pod_info: PodInfo, node: str) -> None:
        self._own(node).add_pod(pod_info)
        self.log.append((True, pod_info, node))


def plan_gang_preemption(
    members: Sequence[GangMember],
    nodes: Sequence[NodeInfo],
    pdbs: Sequence[PDB],
    *,
    group: str,
    select_victims: SelectVictims,
    fits: Callable[[CycleState, PodInfo, NodeInfo], bool],
    companions: Callable[[Sequence[PodInfo]], list[PodInfo]],
    replay: Callable[[CycleState, PodInfo, PodInfo, NodeInfo, bool], Status | None],
    num_candidates: Callable[[int], int],
    now: float | None = None,
) -> tuple[GangPlan | None, Status | None]:
    """One plan placing every member, or (None, why not).  ``replay(state, member, pod,
    node, added)`` runs the PreFilter extensions for a pod the plan added or removed."""
    now = time.time() if now is None else now
    sim = _Simulation([n for n in nodes if n.node is not None])
    budgets = list(pdbs)
    placements: list[Placement] = []
    evicted: dict[str, PodInfo] = {}
    violations = 0
    # Largest first: small members then fill the room left next to big ones.
    ordered = sorted(members, key=lambda m: (-m.pod_info.requests.milli_cpu,
                                             -m.pod_info.requests.memory))
    for member in ordered:
        pod_info = member.pod_info
        state = member.state.clone()
        for added, other, node_name in sim.log:
            error = replay(state, pod_info, other, sim.get(node_name), added)
            if error is not None and not error.is_success():
                return None, error
        allowed = (sim.order if member.nodes is None
                   else [n for n in sim.order if n in member.nodes])
        # Room the plan freed (or a node this member's shape can use as it is) first.
        free = _first_fitting(sim, state, pod_info, allowed, fits,
                              scan_untouched=member.scan_untouched)
        if free is not None:
            sim.add(pod_info, free)
            placements.append(Placement(pod_info, free))
            continue
        potential = [sim.get(n) for n in allowed]
        candidates, _statuses, errors = dry_run_preemption(
            select_victims, state, pod_info, potential, budgets,
            offset=0, num_candidates=num_candidates(len(potential)))
        best: Candidate | None = pick_one_node_for_preemption(candidates, now=now)
        if best is None:
            if errors:
                return None, errors[0]
            return None, Status(Code.UNSCHEDULABLE, ERR_GANG_MEMBER_NO_NODE.format(
                group=group, pod=pod_info.key, placed=len(placements), needed=len(members)))
        taken = [v for v in best.victims if v.uid not in evicted]
        whole = taken + [c for c in companions(taken)
                         if c.uid not in evicted and c.uid not in {v.uid for v in taken}]
        budgets, violated = spend_pdbs(budgets, whole)
        violations += violated
        for victim in whole:
            evicted[victim.uid] = victim
            sim.remove(victim)
        sim.add(pod_info, best.name)
        placements.append(Placement(pod_info, best.name, list(best.victims)))
    if not evicted:
        return None, Status(Code.UNSCHEDULABLE,
                            f"PodGroup {group} needs no preemption: its members fit as they are")
    # The preemptor's order first, as the caller listed the members.
    rank = {m.pod_info.uid: i for i, m in enumerate(members)}
    placements.sort(key=lambda p: rank.get(p.member.uid, len(rank)))
    return GangPlan(placements, list(evicted.values()), violations), None


def _first_fitting(sim: _Simulation, state: CycleState, pod_info: PodInfo,
                   allowed: Sequence[str],
                   fits: Callable[[CycleState, PodInfo, NodeInfo], bool], *,
                   scan_untouched: bool) -> str | None:
    """A node the member fits without evicting anything: the plan's touched nodes first
    (room its victims freed), then the others."""
    allowed_set = set(allowed)
    for name in list(sim.touched):
        if name in allowed_set and fits(state, pod_info, sim.touched[name]):
            return name
    if not scan_untouched:
        return None
    for name in allowed:
        if name not in sim.touched and fits(state, pod_info, sim.real[name]):
            return name
    return None
