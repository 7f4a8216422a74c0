"""The stateless half of preemption (upstream ``framework/preemption``): PDB accounting, the
dry run over a sample of candidate nodes, and the choice of one candidate.

Kept apart from the plugin so the rules that decide *who* gets evicted can be tested as plain
functions over PodInfos and NodeInfos, without a client or an event loop.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.objects.labels import LabelSelector, LabelSelectorError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.helper import parse_rfc3339

__all__ = [
    "PDB",
    "Candidate",
    "SelectVictims",
    "Summary",
    "TopStart",
    "candidate_summary",
    "compile_pdbs",
    "dry_run_preemption",
    "earliest_start_of_highest_priority",
    "filter_pods_with_pdb_violation",
    "importance_key",
    "parse_rfc3339",
    "pick_one_node_for_preemption",
    "pod_start_time",
    "start_times",
    "started_at",
    "top_start",
]

# Added to every priority before summing so that a node with several negative-priority
# victims never looks cheaper than a node with fewer of them (upstream adds MaxInt32+1).
_PRIORITY_OFFSET = 2**31


def pod_start_time(pod_info: PodInfo, now: float) -> float:
    """``status.startTime``; a pod that has not started counts as starting ``now``."""
    started = _started((pod_info.pod.get("status") or {}).get("startTime"))
    return now if started is None else started


# parse_rfc3339 behind a cache of its own: the hit is one C call with no Python frame.  The
# start times are read for every pod of every candidate node (the victims' sort keys) and
# again for the victims of every candidate tied on the other criteria (the pick's last
# one): two Python frames a pod made them a third of a preemptor's PostFilter.
_parse_cached = functools.lru_cache(maxsize=4096)(parse_rfc3339)


def _started(value: Any) -> float | None:
    """``parse_rfc3339(value)``, cached (an unhashable malformed value parses uncached)."""
    try:
        return _parse_cached(value)
    except TypeError:
        return parse_rfc3339(value)


def started_at(pod_info: PodInfo) -> float | None:
    """``status.startTime`` parsed (cached); None when the pod has not started."""
    return _started((pod_info.pod.get("status") or {}).get("startTime"))


def importance_key(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """Sort key putting the most important pod first: higher priority, then the one that has
    been running longest (upstream ``util.MoreImportantPod``)."""
    parse = _parse_cached

    def key(pod_info: PodInfo) -> tuple[int, float]:
        # pod_start_time inline: every candidate node's pods are sorted with it
        value = (pod_info.pod.get("status") or {}).get("startTime")
        try:
            started = parse(value)
        except TypeError:
            started = parse_rfc3339(value)
        return (-pod_info.priority, now if started is None else started)

    return key


_PRIORITY: Callable[[PodInfo], int] = attrgetter("priority")
_NO_STATUS: Mapping[str, Any] = {}
_NAME: Callable[[Any], str] = attrgetter("name")


# --- PodDisruptionBudgets --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PDB:
    """What preemption reads from a PodDisruptionBudget."""

    namespace: str
    name: str
    # None: the PDB selects nothing (missing, empty or invalid selector).
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = field(default_factory=frozenset)


def compile_pdbs(raw: Iterable[Mapping[str, Any]]) -> list[PDB]:
    """Parse PDB objects once per preemption attempt.  Malformed fields degrade the way the
    API types would: an invalid selector matches nothing, a bad count is 0."""
    out: list[PDB] = []
    for obj in raw:
        if not isinstance(obj, Mapping):
            continue
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        selector: LabelSelector | None = None
        raw_selector = spec.get("selector") if isinstance(spec, Mapping) else None
        if isinstance(raw_selector, Mapping):
            try:
                compiled = LabelSelector.from_dict(raw_selector)
            except LabelSelectorError:
                compiled = None
            # An empty selector on a PDB selects nothing (policy/v1 semantics for preemption).
            if compiled is not None and not compiled.is_empty() and not compiled.is_nothing():
                selector = compiled
        allowed = status.get("disruptionsAllowed") if isinstance(status, Mapping) else 0
        if not isinstance(allowed, int) or isinstance(allowed, bool):
            allowed = 0
        disrupted = status.get("disruptedPods") if isinstance(status, Mapping) else None
        out.append(
            PDB(
                namespace=str(meta.get("namespace") or ""),
                name=str(meta.get("name") or ""),
                selector=selector,
                disruptions_allowed=allowed,
                disrupted_pods=frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset(),
            )
        )
    return out


def filter_pods_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[PDB]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split ``pods`` into (violating, non-violating), keeping their order.

    Budgets are spent in order: each matching pod takes one disruption from every PDB that
    selects it, and a pod is violating when some PDB's budget goes below zero.  A pod the PDB
    already lists in ``disruptedPods`` was accounted for by the API server and costs nothing.
    """
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod_info in pods:
        violated = False
        if pod_info.labels:
            for i, pdb in enumerate(pdbs):
                if pdb.selector is None or pdb.namespace != pod_info.namespace:
                    continue
                if not pdb.selector.matches(pod_info.labels):
                    continue
                if pod_info.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod_info)
    return violating, non_violating


# --- candidates ------------------------------------------------------------------------------


@dataclass(slots=True)
class Candidate:
    """A node where evicting ``victims`` (most important first) lets the preemptor fit."""

    name: str
    victims: list[PodInfo]
    num_pdb_violations: int


# select(state copy, preemptor, node copy, pdbs) -> (victims, PDB violations, status)
SelectVictims = Callable[
    [CycleState, PodInfo, NodeInfo, Sequence[PDB]], tuple[list[PodInfo], int, Status | None]
]


# The same, on the snapshot's node itself (which it must not change); None: no answer here.
FastSelect = Callable[
    [CycleState, PodInfo, NodeInfo, Sequence[PDB]],
    "tuple[list[PodInfo], int, Status | None] | None",
]


def reprieve_victims(
    violating: Sequence[PodInfo],
    non_violating: Sequence[PodInfo],
    *,
    add: Callable[[PodInfo], Status | None],
    remove: Callable[[PodInfo], Status | None],
    fits: Callable[[], bool],
) -> tuple[list[PodInfo], int, Status | None]:
    """Put removed pods back one by one, PDB-protected ones first, each in the given order
    (most important first), keeping each after which ``fits()`` still holds: the others are
    the victims.  Returns (victims in reprieve order, PDB violations among them, an error
    from ``add``/``remove``)."""
    victims: list[PodInfo] = []
    num_violating = 0

    def reprieve(candidate: PodInfo) -> tuple[bool, Status | None]:
        error = add(candidate)
        if error is not None:
            return False, error
        if fits():
            return True, None
        error = remove(candidate)
        if error is not None:
            return False, error
        victims.append(candidate)
        return False, None

    for candidate in violating:
        kept, error = reprieve(candidate)
        if error is not None:
            return [], 0, error
        if not kept:
            num_violating += 1
    for candidate in non_violating:
        _, error = reprieve(candidate)
        if error is not None:
            return [], 0, error
    return victims, num_violating, None

def dry_run_preemption(
    select_victims: SelectVictims,
    state: CycleState,
    pod_info: PodInfo,
    potential_nodes: Sequence[NodeInfo],
    pdbs: Sequence[PDB],
    *,
    offset: int,
    num_candidates: int,
    clone_state: bool = True,
    fast_select: FastSelect | None = None,
) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
    """Try preemption on the potential nodes, starting at ``offset`` and wrapping around, on
    copies of the node and the cycle state (``clone_state=False``: on the state itself,
    for a caller that knows nothing the dry run does changes it: no PreFilter extension
    is active).  ``fast_select``, when given, answers first from the node itself (no copy);
    None from it means "not here": the node is copied and ``select_victims`` decides.

    Stops once at least one candidate respects every PDB and ``num_candidates`` were found.
    Returns (candidates with PDB-respecting ones first, status of each node that yielded no
    candidate, the error statuses among those).
    """
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    errors: list[Status] = []
    found_ok = found_violating = 0
    n = len(potential_nodes)
    for i in range(n):
        node_info = potential_nodes[(offset + i) % n]
        try:
            answer = None if fast_select is None else fast_select(
                state, pod_info, node_info, pdbs)
            if answer is None:
                answer = select_victims(
                    state.clone() if clone_state else state, pod_info, node_info.clone(), pdbs)
            victims, num_violations, status = answer
        except Exception as exc:  # a plugin bug on one node must not hide the others
            victims, num_violations, status = [], 0, Status.from_error(exc)
        if (status is None or status.is_success()) and victims:
            # counted as they are kept (no len() per node: 500 nodes a preemptor)
            if num_violations == 0:
                if found_ok < num_candidates:
                    non_violating.append(Candidate(node_info.name, victims, num_violations))
                    found_ok += 1
            elif found_violating < num_candidates:
                violating.append(Candidate(node_info.name, victims, num_violations))
                found_violating += 1
            if found_ok and found_ok + found_violating >= num_candidates:
                break
            continue
        if status is None or status.is_success():
            status = Status(
                Code.ERROR, f"expected at least one victim pod on node {node_info.name!r}"
            )
        if status.code == Code.ERROR:
            errors.append(status)
        statuses[node_info.name] = status
    return non_violating + violating, statuses, errors


def earliest_start_of_highest_priority(victims: Sequence[PodInfo], now: float) -> float:
    """The earliest start time among the victims that have the highest priority."""
    top = max(map(_PRIORITY, victims))
    parse = _parse_cached
    earliest = math.inf
    for v in victims:
        if v.priority != top:
            continue
        value = (v.pod.get("status") or {}).get("startTime")
        try:
            started = parse(value)
        except TypeError:
            started = parse_rfc3339(value)
        start = now if started is None else started
        if start < earliest:
            earliest = start
    return earliest


# A candidate's first four criteria of the pick (``candidate_summary``), larger is better.
Summary = tuple[int, int, int, int]
# The earliest start among a candidate's highest-priority victims as a ``now``-free pair:
# (the earliest of those that started, inf if none; whether one of them has not started,
# which counts as starting at the pick's ``now``).
TopStart = tuple[float, bool]


def candidate_summary(victims: Sequence[PodInfo], num_pdb_violations: int) -> Summary:
    """The pick's first four criteria in one tuple, compared as they are ranked: fewest PDB
    violations, lowest highest-victim priority, smallest sum of victim priorities, fewest
    victims."""
    priorities = list(map(_PRIORITY, victims))
    return (-num_pdb_violations, -max(priorities, default=0),
            -(sum(priorities) + _PRIORITY_OFFSET * len(priorities)), -len(priorities))


def start_times(pods: Sequence[PodInfo]) -> list[float | None]:
    """``started_at`` of each pod, in C loops (one frame for them all, not two a pod)."""
    values = [(p.pod.get("status") or _NO_STATUS).get("startTime") for p in pods]
    try:
        return list(map(_parse_cached, values))
    except TypeError:  # an unhashable malformed value: parsed uncached
        return list(map(_started, values))


def top_start(victims: Sequence[PodInfo],
              starts: Sequence[float | None] | None = None) -> TopStart:
    """``earliest_start_of_highest_priority`` of non-empty ``victims`` before ``now`` is
    known: ``min(earliest, now) if unstarted else earliest`` for the pair returned.
    ``starts``: the victims' ``start_times`` when the caller has them."""
    top = max(map(_PRIORITY, victims))
    earliest = math.inf
    unstarted = False
    for v, started in zip(victims, start_times(victims) if starts is None else starts):
        if v.priority != top:
            continue
        if started is None:
            unstarted = True
        elif started < earliest:
            earliest = started
    return earliest, unstarted


def pick_one_node_for_preemption(
    candidates: Sequence[Candidate], *, now: float,
    known_starts: Mapping[str, TopStart] | None = None,
    known_summaries: Mapping[str, Summary] | None = None,
) -> Candidate | None:
    """Choose among candidates by, in turn: fewest PDB violations, lowest highest-victim
    priority, smallest sum of victim priorities, fewest victims, latest start among the
    highest-priority victims (disturb the youngest work), and finally the first one.
    ``known_starts`` and ``known_summaries``: that last start (``top_start``'s pair) and
    the first four criteria per candidate node where the dry run already knew them (the
    candidate's victims as it chose them)."""
    if not candidates:
        return None

    def summary(c: Candidate) -> Summary:
        # the first four criteria in one pass over the victims (one call a candidate)
        return candidate_summary(c.victims, c.num_pdb_violations)

    def latest_start(c: Candidate) -> float:
        if not c.victims:
            return -math.inf
        if known_starts:
            known = known_starts.get(c.name)
            if known is not None:
                earliest, unstarted = known
                return min(earliest, now) if unstarted else earliest
        return earliest_start_of_highest_priority(c.victims, now)

    # Criterion after criterion, each over the candidates the ones before left tied: the
    # first four compared at once as a tuple (the same order), the start times then read
    # only for the candidates tied on all four.
    if len(candidates) == 1:
        return candidates[0]
    if known_summaries:
        found = known_summaries.get
        summaries = [found(c.name) or summary(c) for c in candidates]
    else:
        summaries = list(map(summary, candidates))
    best_summary = max(summaries)
    remaining = [c for c, s in zip(candidates, summaries) if s == best_summary]
    if len(remaining) > 1:
        known = list(map(known_starts.get, map(_NAME, remaining))) if known_starts else []
        if known and None not in known:
            # every one known (PreemptionAsync's 500 tied candidates): one comprehension
            starts = [(earliest if earliest < now else now) if unstarted else earliest
                      for earliest, unstarted in filter(None, known)]
        else:
            starts = list(map(latest_start, remaining))
        best = max(starts)
        remaining = [c for c, s in zip(remaining, starts) if s == best]
    return remaining[0]
