"""Which waiting pods a cluster event can concern, without asking every one of them.

A cluster event runs the queueing hints of each waiting pod's rejecting plugins.  Most hints
look at one object the pod names (its ResourceClaim, its PVC, its PodGroup): a claim created
for one pod of a 2500-pod Job concerns that pod alone, yet running the hint over every
waiting pod made each claim event cost 2500 hint calls, quadratic in the pods waiting.

A hint that declares keys (``framework.events.KeyedHint``) lets this index answer instead:
it keeps the waiting pods (unschedulable and gated) by the keys they name, per keyed hint,
and gives for an event the pods that share a key with it, plus every pod whose answer it
cannot narrow:

* pods with no rejecting plugin, or of a profile without hints (any event may help them:
  upstream's default);
* pods rejected by a plugin that registered the event with a hint that has no keys, or none
  (that hint decides for every pod, as before);
* for a keyed hint whose ``event_keys`` answers None (a claim deallocated frees devices for
  anyone) or raises, every pod its plugin rejected.

The queueing hints still decide for the pods returned: the index only leaves out pods whose
every matching hint would have answered Skip, so the same pods move, in the same order
(``UnschedulablePods`` sorts them back into the pool's order).  Events with no keyed hint
matching them keep the plain scan.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.framework.events import ClusterEvent, KeyedHint, QueueingHintFn
from scheduler.framework.types import QueuedPodInfo

log = structlog.get_logger(__name__)

__all__ = ["RequeueIndex"]

# (registered event, plugin name, hint or None = always Queue), as the queue takes them.
_Entry = tuple[ClusterEvent, str, QueueingHintFn | None]

# Sets of pod keys, by what they hold:
_ALL = ("all",)  # pods any event may concern (no rejector, profile without hints)
# ("plugin", profile, plugin): pods the plugin rejected
# ("key", slot, key): pods naming ``key`` for the keyed hint in ``slot``


class _AnyKey:
    """The key of a pod whose keys could not be computed: every event concerns it."""

    def __repr__(self) -> str:
        return "<any key>"


_ANY = _AnyKey()


@dataclass(slots=True)
class _Plan:
    """What one event kind looks up: whole sets, and keyed hints with the slots and plugin
    sets they narrow."""

    whole: list[Hashable]
    keyed: list[tuple[KeyedHint, list[tuple[int, Hashable]]]]


class RequeueIndex:
    def __init__(self, hints: Mapping[str, Sequence[_Entry]], *,
                 profile_of: Callable[[dict[str, Any]], str]) -> None:
        self._hints = hints
        self._profile_of = profile_of
        # (profile, plugin) -> its distinct keyed hints, each with its slot number
        self._keyed: dict[tuple[str, str], list[tuple[int, KeyedHint]]] = {}
        slots: dict[tuple[str, str, int], int] = {}
        for profile, entries in hints.items():
            for _event, plugin, hint in entries:
                if not isinstance(hint, KeyedHint):
                    continue
                ident = (profile, plugin, id(hint))
                if ident not in slots:
                    slots[ident] = len(slots)
                    self._keyed.setdefault((profile, plugin), []).append((slots[ident], hint))
        self._slots = slots
        # Whether any hint has keys: without one the index would only cost.
        self.enabled = bool(slots)
        self._sets: dict[Hashable, dict[str, None]] = {}
        self._held: dict[str, list[Hashable]] = {}  # pod key -> the sets holding it
        self._plans: dict[ClusterEvent, _Plan | None] = {}

    def __len__(self) -> int:
        return len(self._held)

    def add(self, key: str, qpi: QueuedPodInfo, *, profile: str | None = None) -> None:
        """Index (or re-index) a waiting pod as it is now (``profile``: its profile, when
        the caller has it)."""
        self.discard(key)
        pod = qpi.pod_info.pod
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if profile is None:
            profile = self._profile_of(pod)
        held: list[Hashable] = []
        if not rejectors or profile not in self._hints:
            held.append(_ALL)
        else:
            for plugin in rejectors:
                held.append(("plugin", profile, plugin))
                for slot, hint in self._keyed.get((profile, plugin), ()):
                    held.extend(("key", slot, k) for k in self._pod_keys(hint, pod, key))
        sets = self._sets
        for sid in held:
            members = sets.get(sid)
            if members is None:
                members = sets[sid] = {}
            members[key] = None
        self._held[key] = held

    def discard(self, key: str) -> None:
        held = self._held.pop(key, None)
        if held is None:
            return
        sets = self._sets
        for sid in held:
            members = sets.get(sid)
            if members is None:
                continue  # named twice (a pod naming one key twice)
            members.pop(key, None)
            if not members:
                del sets[sid]

    def candidates(self, event: ClusterEvent, old: Any, new: Any) -> list[str] | None:
        """Keys of the pods whose hints may not all answer Skip to the event (in no
        particular order), or None when the event is not narrowed (scan every pod)."""
        if event.is_wildcard():
            return None
        try:
            plan = self._plans[event]
        except KeyError:
            plan = self._plans[event] = self._plan(event)
        if plan is None:
            return None
        sets = self._sets
        found: dict[str, None] = {}
        for sid in plan.whole:
            members = sets.get(sid)
            if members:
                found.update(members)
        for hint, slots in plan.keyed:
            keys = self._event_keys(hint, event, old, new)
            for slot, plugin_set in slots:
                if keys is None:
                    members = sets.get(plugin_set)
                    if members:
                        found.update(members)
                    continue
                for k in keys:
                    members = sets.get(("key", slot, k))
                    if members:
                        found.update(members)
                members = sets.get(("key", slot, _ANY))
                if members:
                    found.update(members)
        return list(found)

    def _plan(self, event: ClusterEvent) -> _Plan | None:
        whole: list[Hashable] = [_ALL]
        keyed: dict[int, tuple[KeyedHint, list[tuple[int, Hashable]]]] = {}
        for profile, entries in self._hints.items():
            matching: dict[str, list[QueueingHintFn | None]] = {}
            for registered, plugin, hint in entries:
                if registered.matches(event):
                    matching.setdefault(plugin, []).append(hint)
            for plugin, hints in matching.items():
                plugin_set = ("plugin", profile, plugin)
                if not all(isinstance(h, KeyedHint) for h in hints):
                    whole.append(plugin_set)
                    continue
                for h in hints:
                    assert isinstance(h, KeyedHint)
                    slot = self._slots[(profile, plugin, id(h))]
                    _, slots = keyed.setdefault(id(h), (h, []))
                    if (slot, plugin_set) not in slots:
                        slots.append((slot, plugin_set))
        if not keyed:
            return None
        return _Plan(whole=whole, keyed=list(keyed.values()))

    @staticmethod
    def _pod_keys(hint: KeyedHint, pod: dict[str, Any], key: str) -> list[Hashable]:
        try:
            keys = [*hint.pod_keys(pod)]
            for k in keys:
                hash(k)  # a malformed pod may give unhashable keys
            return keys
        except Exception:
            # Never hide a pod: without its keys, every event of the hint concerns it.
            log.exception("queueing hint keys of a pod raised; the pod sees every event",
                          pod=key)
            return [_ANY]

    @staticmethod
    def _event_keys(hint: KeyedHint, event: ClusterEvent, old: Any, new: Any
                    ) -> list[Hashable] | None:
        try:
            keys = hint.event_keys(old, new)
            if keys is None:
                return None
            found = [*keys]
            for k in found:
                hash(k)  # a malformed object may give unhashable keys
            return found
        except Exception:
            log.exception("queueing hint keys of an event raised; asking every pod",
                          cluster_event=event.label)
            return None
