"""Filter masks for opportunistic batching (``batching``): a signing Filter plugin whose
answer for a pod only adds rejected topology domains to its answer for a base signature
(PodTopologySpread: the domains over the skew) keeps its statuses, and every other signed
plugin's, for that base signature once, instead of once per set of rejected domains.

The statuses kept for the base signature are computed with the mask off
(``FilterMask.unmask``); a cycle reads them as always and ``apply_mask`` puts the mask's
rejections on top: a node the mask rejects takes the plugin's status unless a plugin before
it in the Filter order rejected the node (then the kept status is already the answer).
Windows stay per mask (which nodes are feasible depends on it).  Pods of a spreading
workload then share one kept set and one set of raw scores while the domains over the
skew come and go with every placement, where each set of domains used to keep its own,
out of date by every placement made under the others.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from scheduler.framework.batching_kept import Snapshot
    from scheduler.framework.cycle_state import CycleState
    from scheduler.framework.node_info import NodeInfo
    from scheduler.framework.status import Status
    from scheduler.objects.pod import PodInfo

# Masks (sets of rejected domains) whose windows one signature keeps.
MAX_MASKS = 8

_Windows = TypeVar("_Windows")


@runtime_checkable
class FilterMask(Protocol):
    """Domains a Filter plugin rejects for this pod on top of its ``base`` signature;
    ``key`` says which (windows are kept per key)."""

    base: Hashable
    key: Hashable

    def unmask(self, state: CycleState, on: bool) -> None:
        """While on, the plugin's Filter answers for ``base`` (rejects no domain)."""

    def reject(self, snapshot: Snapshot, *, first: int, index: list[int] | None,
               size: int) -> list[int]:
        """Offsets of the nodes whose domain the mask rejects, in the run of ``size``
        nodes of the snapshot's node list from position ``first`` (wrapping), or at the
        positions ``index`` when given (``batching_kept._gather``'s arguments)."""

    def status(self) -> Status:
        """The plugin's status for a rejected node (its name set)."""


@runtime_checkable
class FilterMaskPlugin(Protocol):
    """A ``FilterSignPlugin`` whose pod-dependent part of the signature only says which
    topology domains it rejects: ``filter_mask`` gives them (None: nothing masked, the
    plain signature holds)."""

    def filter_mask(self, state: CycleState, pod_info: PodInfo) -> FilterMask | None: ...


# id(a profile's Filter plugin list) -> (that list, its plugins' (name, ``filter_mask``))
MaskerMemo = dict[int, tuple[list[tuple[str, Any]], list[tuple[str, Any]]]]


def find_mask(
    memo: MaskerMemo, plugins: list[tuple[str, Any]], skip: set[str], state: CycleState,
    pod_info: PodInfo, filter_sig: tuple[tuple[str, Hashable], ...],
) -> tuple[FilterMask | None, frozenset[str], tuple[tuple[str, Hashable], ...]]:
    """The first mask a (not skipped) Filter plugin of ``plugins`` gives, the plugins whose
    rejection it overrides (itself and those after it in the Filter order) and the
    signature with its base in place of that plugin's part; (None, empty, the signature)
    when none masks.  ``memo``: the masking plugins of each (never changed) plugin list."""
    kept = memo.get(id(plugins))
    if kept is None or kept[0] is not plugins:
        kept = memo[id(plugins)] = (plugins, [
            (name, plugin.filter_mask) for name, plugin in plugins
            if isinstance(plugin, FilterMaskPlugin)])
    for name, filter_mask in kept[1]:
        if name in skip:
            continue
        mask: FilterMask | None = filter_mask(state, pod_info)
        if mask is None:
            continue
        base = mask.base
        order = [n for n, _ in plugins if n not in skip]
        return (mask, frozenset(order[order.index(name):]),
                tuple((n, base if n == name else v) for n, v in filter_sig))
    return None, frozenset(), filter_sig


def windows_for(plain: _Windows, kept: OrderedDict[Hashable, _Windows],
                mask: FilterMask | None) -> _Windows:
    """``plain`` (a signature's windows) without a mask, else the windows kept for the
    mask's key in ``kept`` (the oldest of more than ``MAX_MASKS`` keys dropped)."""
    if mask is None:
        return plain
    windows = kept.get(mask.key)
    if windows is None:
        windows = kept[mask.key] = type(plain)()
        while len(kept) > MAX_MASKS:
            kept.popitem(last=False)
    else:
        kept.move_to_end(mask.key)
    return windows


def apply_mask(mask: FilterMask, after: frozenset[str], snapshot: Snapshot,
               statuses: list[Status | None], *, first: int,
               index: list[int] | None) -> list[Status | None]:
    """The kept (base) ``statuses`` of the nodes at ``first``/``index`` with the mask's
    rejections on top: a node the mask rejects takes its status unless a plugin before the
    masking one rejected it (its kept status names a plugin not in ``after``).
    ``statuses`` (a gathered copy) is changed in place."""
    rejected = mask.reject(snapshot, first=first, index=index, size=len(statuses))
    if rejected:
        status = mask.status()  # one per call: kept statuses are shared across cycles too
        for i in rejected:
            kept = statuses[i]
            if kept is None or kept.plugin in after:
                statuses[i] = status
    return statuses


def run_unmasked(mask: FilterMask | None, state: CycleState, run: Any, *args: Any,
                 **kwargs: Any) -> list[Status | None]:
    """``run(*args, **kwargs)`` (a Filter run) with the mask off (statuses kept for the
    base signature); simply the run without a mask."""
    if mask is None:
        return run(*args, **kwargs)  # type: ignore[no-any-return]  # a Filter run's answer
    mask.unmask(state, True)
    try:
        return run(*args, **kwargs)  # type: ignore[no-any-return]  # a Filter run's answer
    finally:
        mask.unmask(state, False)
