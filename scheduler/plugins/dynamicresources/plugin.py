"""DynamicResources: schedule pods with ResourceClaims (resource.k8s.io/v1) as kube-scheduler.

Why it exists: a pod that needs a device through a ResourceClaim can only run where the
claim's devices are (or can be allocated); without this plugin such a pod is bound anywhere
and the kubelet never starts it.

- PreEnqueue: every claim of the pod exists (a template's generated name comes from
  ``pod.status.resourceClaimStatuses``), is not being deleted and, if generated, is the pod's.
- PreFilter: pods without claims Skip; a claim reserved for as many pods as it may be is "in
  use"; claims to allocate are checked (classes exist, CEL compiles) once per cycle.
- Filter: allocated claims must be available on the node (their ``nodeSelector``); the others
  are allocated together by the structured allocator on that node's devices, none of them
  held by another claim (informer or in flight: ``ClaimTracker``) or: "cannot allocate all
  claims".  Victims removed by preemption (PreFilter extensions) free the devices of the
  claims reserved for them alone.
- PostFilter: when no node fits and a claim of the pod is allocated but reserved for nobody,
  deallocate it (so the next attempt may pick another node) rather than preempt.
- Score: prefer nodes where ``firstAvailable`` got an earlier subrequest.
- Reserve/Unreserve: the chosen allocation is held in memory; PreBind writes the finalizer,
  then ``status.allocation`` and ``status.reservedFor`` (retried on conflict).
- DRAExtendedResource (the section of that name below; scheduler/dra/extended.py): extended
  resources a DeviceClass backs get the pod's special claim, allocated per node with its
  claims, created at PreBind with ``pod.status.extendedResourceClaimStatus``; a claim a prior
  attempt left is deleted at PostFilter.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import structlog

from scheduler.client.api import resource_path
from scheduler.config import features
from scheduler.config.load import parse_duration
from scheduler.dra import extended as ext_res
from scheduler.dra import index as free_index
from scheduler.dra.allocator import allocated_at as first_fit_allocation
from scheduler.dra.allocator import (
    Allocated,
    AllocationError,
    Alternative,
    Prepared,
    Unfit,
    allocate,
    first_fit_shape,
    prepare,
    selectors_checked,
)
from scheduler.dra.bindingconditions import (
    FAILED,
    READY,
    allocated_at,
    binding_state,
    decorate,
    has_binding_conditions,
    timestamp,
)
from scheduler.dra.capacity import add as add_amounts
from scheduler.dra.capacity import consumed_of
from scheduler.dra.counters import Counters
from scheduler.dra.inventory import (
    TAINT_EFFECTS,
    Device,
    DeviceID,
    Inventory,
    SliceTracker,
    device_ids_of,
)
from scheduler.dra.taintrules import TaintRule, TaintRules, parse_rule
from scheduler.framework.cycle_state import CycleState, missing_state
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    KeyedHint,
    QueueingHint,
)
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    ObjectWatcher,
    PluginArgs,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Code, Status, error, unresolvable
from scheduler.framework.types import MAX_NODE_SCORE, PostFilterResult, PreFilterResult
from scheduler.objects.errors import ObjectError
from scheduler.objects.node_affinity import NodeSelector
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.dynamicresources.claims import (
    FINALIZER,
    RESERVED_FOR_MAX,
    RESOURCE_CLAIMS,
    ClaimProblem,
    ClaimTracker,
    PodClaim,
    allocation_of,
    has_claims,
    is_reserved_for,
    key_of,
    owned_by,
    pod_claims,
    reserved_for,
)
from scheduler.plugins.helper import args_error, device_class_cache

log = structlog.get_logger(__name__)

NAME = names.DYNAMIC_RESOURCES
STATE_KEY = NAME
GROUP_VERSION = "resource.k8s.io/v1"

# Upstream's wording.
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
REASON_IN_USE = "resourceclaim in use"
REASON_BEING_DELETED = 'resourceclaim "{name}" is being deleted'
REASON_NOT_FOUND = 'resourceclaim.resource.k8s.io "{name}" not found'
REASON_NOT_OWNER = "ResourceClaim {name} was not created for pod {pod} (pod is not owner)"
REASON_DEALLOCATED = "deallocation of ResourceClaim completed"
REASON_NOTHING_TO_DEALLOCATE = "still not schedulable"
RESOURCE_SLICES = "resourceslices"
DEVICE_TAINT_RULES = "devicetaintrules"

PREBIND_ATTEMPTS = 5
# PreFilter narrows the nodes to those with a free device only when fewer than this (upstream's
# minFeasibleNodesToFind: below it every node is scanned, so narrowing changes no outcome)
NARROW_BELOW = 100
DEFAULT_FILTER_TIMEOUT_SECONDS = 10.0
# DRADeviceBindingConditions: DynamicResourcesArgs.bindingTimeout's default and minimum, and
# how often PreBind looks at the claims again while it waits (upstream's poll interval)
DEFAULT_BINDING_TIMEOUT_SECONDS = 600.0
MIN_BINDING_TIMEOUT_SECONDS = 1.0
BINDING_POLL_SECONDS = 5.0
EVENT_BINDING_PENDING = "BindingConditionsPending"
EVENT_BINDING_PENDING_MESSAGE = "waiting for binding conditions for device on node {node}"
# DRAExtendedResource: a claim a prior attempt created for the pod's extended resources
REASON_EXTENDED_STALE = "cannot schedule extended resource claim"
REASON_EXTENDED_DELETED = "deletion of ResourceClaim completed"


@dataclass(slots=True)
class _Variant:
    """The special claim for one set of resources a node provides through DRA."""
    claim: dict[str, Any]
    mappings: list[dict[str, str]]
    prepared: Prepared | None  # the pod's claims to allocate and this one, or None:
    problem: str = ""  # why it cannot be prepared
    # its one request when Filter may take the free-device index's first-fit (index.pick)
    first_fit: Alternative | None = None


@dataclass(slots=True)
class _Extended:
    """DRAExtendedResource's part of a cycle: the pod's extended resources a DeviceClass
    backs, and the claim that allocates them on each node that does not advertise them."""
    backed: dict[str, int]
    key: str  # the in-memory claim's key in the tracker (one per pod)
    stale: Mapping[str, Any] | None = None  # a prior attempt's claim, found in the API
    variants: dict[frozenset[str], _Variant] = field(default_factory=dict)
    by_node: dict[str, frozenset[str]] = field(default_factory=dict)
    all_backed: frozenset[str] = frozenset()
    created: dict[str, Any] | None = None  # the claim PreBind created (Unreserve deletes it)
    # the free-device index when it applies (the claims are watched), else None
    index: free_index.FreeIndex | None = None


@dataclass(slots=True)
class _State:
    claims: list[Mapping[str, Any]] = field(default_factory=list)  # as seen, with overlays
    to_allocate: list[Mapping[str, Any]] = field(default_factory=list)
    allocated_selectors: list[tuple[str, NodeSelector | None]] = field(default_factory=list)
    inventory: Inventory | None = None
    counters: Counters | None = None  # partitionable devices' shared counters
    prepared: Prepared | None = None
    # devices held by other claims: the tracker's live view (events) or a scan's set
    in_use: Set[DeviceID] = field(default_factory=set)
    freed: set[DeviceID] = field(default_factory=set)  # by preemption's removed victims
    # shares of devices allocated by capacity that the removed victims free: claim -> its
    # allocation (DRAConsumableCapacity)
    freed_shares: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    by_node: dict[str, Allocated] = field(default_factory=dict)
    # node -> the device the index's first-fit takes there (filter_nodes); its Allocated is
    # built when asked for (``DynamicResources._allocation_on``), then kept in by_node
    picked: dict[str, Device] = field(default_factory=dict)
    details: dict[str, list[str] | Unfit] = field(default_factory=dict)  # node -> why
    # an allocated claim whose binding failed or timed out (binding conditions): no node fits
    # until PostFilter deallocated it
    unavailable: str = ""
    # the free-device index when these claims need a free device and it applies, else None
    index: free_index.FreeIndex | None = None
    # the claims' one request when Filter may take the index's first-fit (index.pick)
    first_fit: Alternative | None = None
    # DRAExtendedResource: the pod's special claim (extended.py), else None
    ext: _Extended | None = None

    def clone(self) -> _State:
        # preemption's what-ifs change ``freed`` on a copy; the rest is shared
        out = copy.copy(self)
        out.freed = set(self.freed)
        out.freed_shares = dict(self.freed_shares)
        return out


class DynamicResources(PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, PostFilterPlugin,
                       ScorePlugin, ReservePlugin, PreBindPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(self, args: PluginArgs | None = None, handle: Handle | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._filter_timeout = _filter_timeout(args)
        self._binding_timeout = _binding_timeout(args)
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        # DRADeviceBindingConditions (it needs DRAResourceClaimDeviceStatus, as upstream)
        self._binding_conditions = (features.DEFAULT.enabled("DRADeviceBindingConditions")
                                    and features.DEFAULT.enabled("DRAResourceClaimDeviceStatus"))
        if handle is None:
            raise ValueError(f"{NAME} needs a framework handle")
        self._handle = handle
        self.tracker = ClaimTracker()
        self._inventory: Inventory | None = None
        self._counters: Counters | None = None
        self._device_taints = features.DEFAULT.enabled("DRADeviceTaints")
        self._partitionable = features.DEFAULT.enabled("DRAPartitionableDevices")
        self._consumable = features.DEFAULT.enabled("DRAConsumableCapacity")
        self._fractional = features.DEFAULT.enabled("DRAFractionalCapacityRange")
        self._inventory_key: tuple[tuple[str, str], ...] = ()
        self._slices = SliceTracker()
        # DeviceTaintRules (DRADeviceTaintRules): applied to the devices of each new
        # inventory, and again whenever a rule changes
        self._taint_rules_on = features.DEFAULT.enabled("DRADeviceTaintRules")
        self.taint_rules = TaintRules()
        self._rules_watched: bool | None = None
        self._rules_applied: tuple[Inventory | None, int] = (None, -1)
        self._slices_watched: bool | None = None  # subscribed on first use, as the claims
        self._tasks: set[asyncio.Task[None]] = set()
        # Whether the tracker follows the claim informer's events (subscribed on first use:
        # the informers exist by then); otherwise every PreFilter scans the claims.
        self._watching: bool | None = None
        # free devices per node (scheduler/dra/index.py), kept from the tracker's changes
        self._index: free_index.FreeIndex | None = None
        self._index_for: Inventory | None = None
        self._extended = features.DEFAULT.enabled("DRAExtendedResource")
        # Follow the claim and slice informers from the start, as upstream's DRA manager
        # (its assume cache and slice tracker register their handlers when the plugin is
        # made): their objects then reach the tracker as the informers list them, during
        # the scheduler's sync, instead of being replayed by the first pod's PreFilter
        # (2500 claims and 500 slices took ~90 ms of the first DRA pod's cycle at 500
        # nodes).  Listers that deliver no events are listed on first use, as before.
        if isinstance(handle.listers, ObjectWatcher):
            self._in_use()
            self._slice_inventory()

    @property
    def follows_claim_events(self) -> bool:
        """Whether the tracker's held devices follow the claim informer's events (the cache
        comparer checks them only then; otherwise every PreFilter scans the claims)."""
        return self._watching is True

    # --- listers -------------------------------------------------------------------------------

    def _list(self, resource: str) -> list[dict[str, Any]]:
        try:
            return self._handle.listers.list(resource)
        except KeyError:  # no informer (an API without resource.k8s.io)
            return []

    def _get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            claim = self._handle.listers.get(RESOURCE_CLAIMS, namespace, name)
        except KeyError:
            return None
        return self.tracker.overlay(claim) if claim is not None else None

    def inventory(self) -> Inventory:
        """The pools of the current ResourceSlices, their devices carrying the taints of the
        DeviceTaintRules that select them (applied again only when a slice or a rule
        changed)."""
        inventory = self._slice_inventory()
        inventory.skip_binding_conditions = not self._binding_conditions
        if not self._taint_rules_on:
            return inventory
        rules = self._current_taint_rules()
        if self._rules_applied != (inventory, rules.version):
            rules.apply(inventory)
            self._rules_applied = (inventory, rules.version)
        return inventory

    def _current_taint_rules(self) -> TaintRules:
        rules = self.taint_rules
        if self._rules_watched is None:
            self._rules_watched = False
            listers = self._handle.listers
            if isinstance(listers, ObjectWatcher):
                try:
                    listers.watch(DEVICE_TAINT_RULES, on_add=rules.rule_added,
                                  on_update=rules.rule_updated, on_delete=rules.rule_deleted)
                    self._rules_watched = True
                except KeyError:  # no informer (an API without DeviceTaintRules)
                    pass
        if not self._rules_watched:
            rules.replace(self._list(DEVICE_TAINT_RULES))
        if rules.new_problems:
            for problem in rules.new_problems:
                log.warning("malformed DeviceTaintRule ignored", problem=problem)
            rules.new_problems.clear()
        return rules

    def _slice_inventory(self) -> Inventory:
        """The pools of the current ResourceSlices: kept from the slice informer's events
        (nothing to walk per pod) when the listers deliver them, else rebuilt when a listed
        slice changed."""
        if self._slices_watched is None:
            self._slices_watched = self._subscribe(
                RESOURCE_SLICES, on_add=self._slices.slice_added,
                on_update=self._slices.slice_updated, on_delete=self._slices.slice_deleted)
        if self._slices_watched:
            if self._slices.new_problems:
                for problem in self._slices.new_problems:
                    log.warning("malformed ResourceSlice ignored", problem=problem)
                self._slices.new_problems.clear()
            inventory = self._slices.inventory()
            if inventory is not self._inventory:  # a slice changed: counters follow
                self._inventory = inventory
                self._counters = Counters(self._slices.slices(), inventory)
                for problem in self._counters.problems:
                    log.warning("invalid shared counters", problem=problem)
            return inventory
        slices = self._list(RESOURCE_SLICES)
        key = tuple((str((s.get("metadata") or {}).get("uid")),
                     str((s.get("metadata") or {}).get("resourceVersion"))) for s in slices)
        if self._inventory is None or key != self._inventory_key:
            self._inventory = Inventory(slices)
            self._inventory_key = key
            for problem in self._inventory.problems:
                log.warning("malformed ResourceSlice ignored", problem=problem)
            self._counters = Counters(slices, self._inventory)
            for problem in self._counters.problems:
                log.warning("invalid shared counters", problem=problem)
        return self._inventory

    def _subscribe(self, resource: str, *, on_add: Callable[[dict[str, Any]], None],
                   on_update: Callable[[dict[str, Any], dict[str, Any]], None],
                   on_delete: Callable[[dict[str, Any]], None]) -> bool:
        """Follow the informer's events of ``resource`` (called once, on first use: the
        informers exist by then); False when the listers deliver none (then the caller
        lists), or there is no informer (an API without resource.k8s.io)."""
        listers = self._handle.listers
        if not isinstance(listers, ObjectWatcher):
            return False
        try:
            listers.watch(resource, on_add=on_add, on_update=on_update, on_delete=on_delete)
        except KeyError:
            return False
        return True

    def counters(self) -> Counters:
        """The shared counters of the current ResourceSlices (partitionable devices)."""
        self.inventory()
        assert self._counters is not None
        return self._counters

    def _in_use(self) -> Set[DeviceID]:
        """The devices held by allocated claims and by allocations in flight."""
        if self._watching is None:
            self._watching = self._subscribe(
                RESOURCE_CLAIMS, on_add=self.tracker.claim_added,
                on_update=self.tracker.claim_updated, on_delete=self.tracker.claim_deleted)
        if self._watching:
            return self.tracker.held()
        return self.tracker.in_use(self._list(RESOURCE_CLAIMS))

    def classes(self) -> dict[str, Mapping[str, Any]]:
        return {str((c.get("metadata") or {}).get("name")): c
                for c in self._list("deviceclasses")}

    def claims_of(self, pod_info: PodInfo) -> list[Mapping[str, Any]]:
        """The pod's claims (overlaid with in-flight allocations), or ClaimProblem."""
        pod = pod_info.pod
        out = []
        for pc in pod_claims(pod):
            claim = self._get_claim(pod_info.namespace, pc.claim_name)
            if claim is None:
                raise ClaimProblem(REASON_NOT_FOUND.format(name=pc.claim_name))
            if (claim.get("metadata") or {}).get("deletionTimestamp") is not None:
                raise ClaimProblem(REASON_BEING_DELETED.format(name=pc.claim_name))
            if pc.from_template and not owned_by(claim, pod):
                raise ClaimProblem(REASON_NOT_OWNER.format(name=pc.claim_name,
                                                           pod=pod_info.key))
            out.append(claim)
        return out

    # --- events --------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A claim created (from a template), allocated elsewhere, deallocated or freed.
            # Keyed: the queue asks only the pods naming the claim, unless it was freed.
            ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_CLAIM,
                                              ActionType.ADD | ActionType.UPDATE
                                              | ActionType.DELETE),
                                 KeyedHint(self._after_claim_change,
                                           event_keys=claim_event_keys,
                                           pod_keys=pod_claim_keys)),
            # The controller wrote the generated claim's name into the pod's status.
            ClusterEventWithHint(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE),
                                 _after_own_update),
            # New or changed devices; a class created or fixed.
            ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_SLICE,
                                              ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS,
                                              ActionType.ADD | ActionType.UPDATE)),
            # A DeviceTaintRule deleted or changed may untaint a device.
            ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_TAINT_RULE,
                                              ActionType.ADD | ActionType.UPDATE
                                              | ActionType.DELETE), _after_taint_rule_change),
            # Node labels decide slice/claim node selectors; a new node may bring devices.
            ClusterEventWithHint(ClusterEvent(EventResource.NODE,
                                              ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
        ]

    def _after_claim_change(self, pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
        obj = new if isinstance(new, Mapping) else old
        if not isinstance(obj, Mapping):
            return QueueingHint.QUEUE
        ns = (pod.get("metadata") or {}).get("namespace", "")
        try:
            mine = {pc.claim_name for pc in pod_claims(pod)}
        except ClaimProblem:
            mine = set()
        meta = obj.get("metadata") or {}
        if meta.get("namespace") == ns and meta.get("name") in mine:
            return QueueingHint.QUEUE
        # Another claim: only freeing devices (deallocation, deletion) can help.
        if _frees_devices(old, new):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    # --- PreEnqueue ----------------------------------------------------------------------------

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        if not has_claims(pod_info.pod):
            return None
        try:
            self.claims_of(pod_info)
        except ClaimProblem as e:
            return unresolvable(str(e))
        return None

    # --- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
                   ) -> tuple[PreFilterResult | None, Status | None]:
        ext = self._pre_filter_extended(pod_info)
        if not has_claims(pod_info.pod) and ext is None:
            return None, SKIP
        try:
            claims = self.claims_of(pod_info)
        except ClaimProblem as e:
            return None, unresolvable(str(e))
        if not claims and ext is None:
            return None, SKIP
        data = _State(claims=claims, ext=ext)
        for claim in claims:
            alloc = allocation_of(claim)
            if alloc is None:
                data.to_allocate.append(claim)
                continue
            if not is_reserved_for(claim, pod_info.pod) and \
                    len(reserved_for(claim)) >= RESERVED_FOR_MAX:
                return None, unresolvable(REASON_IN_USE)
            raw = alloc.get("nodeSelector")
            try:
                sel = (NodeSelector.from_dict(raw, where="status.allocation.nodeSelector",
                                              obj=claim, kind="ResourceClaim")
                       if raw is not None else None)
            except ObjectError as e:
                return None, unresolvable(str(e))
            data.allocated_selectors.append((key_of(claim), sel))
            if self._binding_conditions and not data.unavailable:
                data.unavailable = self._binding_problem(claim)
        if data.to_allocate:
            data.inventory = self.inventory()
            data.counters = self._counters
            data.in_use = self._in_use()
            # Malformed claims, unknown classes, CEL that does not compile: the pod waits
            # for a claim or class event, and says why.
            try:
                data.prepared = prepare(data.to_allocate, self.classes())
            except AllocationError as e:
                return None, unresolvable(str(e))
            if self._watching and free_index.needs_free_device(data.prepared):
                data.index = self.device_index(data.inventory)
                data.first_fit = first_fit_shape(data.prepared)
        if ext is not None and data.inventory is None:
            data.inventory = self.inventory()
            data.counters = self._counters
            data.in_use = self._in_use()
        if ext is not None and self._watching and data.inventory is not None:
            ext.index = self.device_index(data.inventory)
        state.write(STATE_KEY, data)
        if data.index is not None and not data.allocated_selectors and ext is None:
            # Filter only the nodes where the claims could fit (a free device) or could after
            # a preemption; only when they are few (under upstream's minimum of feasible
            # nodes to find: the nodes found feasible are then exactly those found without
            # narrowing) and some; if none of them fits, the framework filters the others
            # too (``shortcut``), so every node gets the status it gets without narrowing.
            count = data.index.open_count()
            if 0 < count < NARROW_BELOW and count < len(nodes):
                return PreFilterResult(data.index.candidates(), shortcut=True), None
        return None, None

    def device_index(self, inventory: Inventory) -> free_index.FreeIndex | None:
        """The free-device index of this inventory (built again when the slices change, then
        kept by the tracker's held/free changes), or None where it does not apply."""
        if self._index_for is not inventory:
            self._index_for = inventory
            self._index = index = free_index.build(inventory, self.tracker.held())
            self.tracker.on_held = index.held_changed if index else None
            self.tracker.on_reserved = index.reserved_changed if index else None
            if index is not None:
                for devices in self.tracker.single_reserved():
                    index.reserved_changed(devices, 1)
        return self._index

    def pre_filter_extensions(self) -> DynamicResources:
        return self

    def add_pod(self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if isinstance(data, _State):
            data.freed -= self._devices_held_only_by(pod_to_add)
            for key in self._shares_held_only_by(pod_to_add):
                data.freed_shares.pop(key, None)
        return None

    def remove_pod(self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if isinstance(data, _State):
            data.freed |= self._devices_held_only_by(pod_to_remove)
            data.freed_shares.update(self._shares_held_only_by(pod_to_remove))
        return None

    def _claims_reserved_only_for(self, pod_info: PodInfo) -> list[Mapping[str, Any]]:
        """The pod's claims reserved for it alone (what they hold is freed when it goes),
        with the claim made for its extended resources (DRAExtendedResource)."""
        extended = _extended_claim_name(pod_info.pod)
        if not has_claims(pod_info.pod) and not extended:
            return []
        try:
            names_ = [pc.claim_name for pc in pod_claims(pod_info.pod)]
        except ClaimProblem:
            names_ = []
        if extended:
            names_.append(extended)
        out: list[Mapping[str, Any]] = []
        for claim_name in names_:
            claim = self._get_claim(pod_info.namespace, claim_name)
            if claim is None:
                continue
            users = reserved_for(claim)
            if len(users) == 1 and users[0].get("uid") == pod_info.uid:
                out.append(claim)
        return out

    def _shares_held_only_by(self, pod_info: PodInfo) -> dict[str, Mapping[str, Any]]:
        """The allocations with shares (consumable capacity) of the claims reserved for this
        pod alone: what they consume is freed when it goes."""
        out: dict[str, Mapping[str, Any]] = {}
        for claim in self._claims_reserved_only_for(pod_info):
            alloc = allocation_of(claim)
            if alloc is not None and consumed_of(alloc):
                out[key_of(claim)] = alloc
        return out

    def _consumed(self, data: _State) -> Mapping[DeviceID, Mapping[str, Fraction]]:
        """What the shares of each device consume, less those preemption's victims free."""
        consumed = self.tracker.consumed()
        if not data.freed_shares:
            return consumed
        out = {dev: dict(use) for dev, use in consumed.items()}
        for alloc in data.freed_shares.values():
            for dev, use in consumed_of(alloc):
                if dev in out:
                    add_amounts(out[dev], use, -1)
        return out

    def _devices_held_only_by(self, pod_info: PodInfo) -> set[DeviceID]:
        """Devices of the claims reserved for this pod alone (freed when it goes)."""
        out: set[DeviceID] = set()
        for claim in self._claims_reserved_only_for(pod_info):
            out.update(device_ids_of(allocation_of(claim)))
        return out

    # --- Filter --------------------------------------------------------------------------------

    def filter_nodes(self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
                     ) -> list[Status | None]:
        """What ``filter`` answers node by node; for the common shape (claims to allocate
        from the free-device index's first-fit: one request of one device, no preemption
        what-if, no shared counters, no allocated claim, no extended resource) the pod's
        checks are made once and the index answers all the nodes in one pass
        (:meth:`FreeIndex.first_fit_into`); a node it cannot answer takes ``filter``."""
        data = state.get(STATE_KEY)
        if (not isinstance(data, _State) or data.allocated_selectors or data.unavailable
                or data.ext is not None or not data.to_allocate or data.index is None
                or data.freed or data.counters or data.first_fit is None
                or data.inventory is None or data.prepared is None):
            return super().filter_nodes(state, pod_info, nodes)
        index, prepared, inventory = data.index, data.prepared, data.inventory
        by_node, details = data.by_node, data.details
        taints, version, shape = self._device_taints, self._rules_applied[1], data.first_fit
        out: list[Status | None] = [None] * len(nodes)
        # One pass of the index over the nodes' names: the nodes whose masks answer at once
        # get their device in ``picked``; only the others are looked at one by one below
        # (a node without its object has no name here, so it is one of the others).
        if shape.count == 1:
            names = [n.name if n.node is not None else "" for n in nodes]
            others = index.first_fit_into(names, data.picked, device_taints=taints,
                                          taints_version=version, shape=shape)
        else:
            others = list(range(len(nodes)))  # pick answers node by node
        may_fit = index.may_fit
        for i in others:
            node_info = nodes[i]
            node = node_info.node
            if node is None:
                out[i] = error("node not found")
            elif not may_fit(node_info.name) and selectors_checked(prepared, inventory, node):
                details[node_info.name] = Unfit(explain=self._explain_full(data, node))
                out[i] = Status(Code.UNSCHEDULABLE, REASON_CANNOT_ALLOCATE)
            else:
                alloc = index.pick(prepared, node, device_taints=taints, taints_version=version,
                                   shape=shape, node_name=node_info.name)
                if alloc is not None:
                    by_node[node_info.name] = alloc
                else:  # the index cannot answer here: the allocator does, and says why
                    out[i] = self.filter(state, pod_info, node_info)
        return out

    def _allocation_on(self, data: _State, node_name: str) -> Allocated | None:
        """What Filter allocated for the pod on this node (None: it did not pass)."""
        out = data.by_node.get(node_name)
        if out is None:
            device = data.picked.get(node_name)
            if device is not None:
                assert data.prepared is not None and data.first_fit is not None
                out = data.by_node[node_name] = first_fit_allocation(
                    data.prepared, [device], node_name, device_taints=self._device_taints,
                    shape=data.first_fit)
        return out

    def _explain_full(self, data: _State, node: Mapping[str, Any], *,
                      prepared: Prepared | None = None) -> Callable[[], list[str]]:
        """Why the allocator fails on a node whose devices are all held (worked out only
        if explain asks); ``prepared``: those claims instead of the pod's."""
        prepared = prepared if prepared is not None else data.prepared
        inventory, counters = data.inventory, data.counters
        in_use = data.in_use - data.freed if data.freed else data.in_use
        assert prepared is not None and inventory is not None

        def explain() -> list[str]:
            out = allocate(prepared, node=node, inventory=inventory, in_use=in_use,
                           counters=counters, device_taints=self._device_taints,
                           partitionable=self._partitionable)
            return out.details if isinstance(out, Unfit) else []
        return explain

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return missing_state(STATE_KEY)
        node = node_info.node
        if node is None:
            return error("node not found")
        for _key, sel in data.allocated_selectors:
            if sel is not None and not sel.match(node):
                data.details[node_info.name] = [f"claim {_key}: allocated for other nodes"]
                return unresolvable(REASON_NOT_AVAILABLE)
        if data.unavailable:
            data.details[node_info.name] = [data.unavailable]
            return unresolvable(REASON_NOT_AVAILABLE)
        if data.ext is not None:
            ext_status = self._filter_extended(data, pod_info, node_info)
            if ext_status is not _NOT_EXTENDED:
                return ext_status
        if not data.to_allocate:
            return None
        assert data.inventory is not None and data.prepared is not None
        in_use = data.in_use - data.freed if data.freed else data.in_use
        index = data.index
        if (index is not None and not data.freed and not index.may_fit(node_info.name)
                and selectors_checked(data.prepared, data.inventory, node)):
            # Every device of the node is held: the allocator would fail (index.py says
            # why); why exactly is worked out if explain asks.
            data.details[node_info.name] = Unfit(explain=self._explain_full(data, node))
            return Status(Code.UNSCHEDULABLE, REASON_CANNOT_ALLOCATE)
        if index is not None and not data.freed and not data.counters:
            # the common shape: the index's masks give first-fit's answer (index.py)
            picked = index.pick(data.prepared, node, device_taints=self._device_taints,
                                taints_version=self._rules_applied[1],
                                shape=data.first_fit, node_name=node_info.name)
            if picked is not None:
                data.by_node[node_info.name] = picked
                return None
        try:
            out = allocate(data.prepared, node=node, inventory=data.inventory, in_use=in_use,
                           counters=data.counters, device_taints=self._device_taints,
                           partitionable=self._partitionable,
                           consumable=self._consumable, fractional=self._fractional,
                           consumed=self._consumed(data),
                           deadline=(self._clock() + self._filter_timeout
                                     if self._filter_timeout else None),
                           clock=self._clock)
        except AllocationError as e:  # a CEL runtime error on one of this node's devices
            data.details[node_info.name] = [str(e)]
            return unresolvable(str(e))
        if isinstance(out, Unfit):
            data.details[node_info.name] = out  # why: worked out if explain asks
            if out.timed_out:
                return unresolvable(out.details[0])
            return Status(Code.UNSCHEDULABLE, REASON_CANNOT_ALLOCATE)
        data.by_node[node_info.name] = out
        return None

    # --- PostFilter ----------------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod_info: PodInfo,
                    node_to_status: Mapping[str, Status]
                    ) -> tuple[PostFilterResult | None, Status | None]:
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return None, Status(Code.UNSCHEDULABLE)
        for claim in data.claims:
            users = reserved_for(claim)
            if allocation_of(claim) is None or any(u.get("uid") != pod_info.uid for u in users):
                continue  # not allocated, or in use by another pod
            if self.tracker.in_flight(key_of(claim)) is not None:
                continue  # ours, being written
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return None, error("deallocation needs a running event loop")
            task = loop.create_task(self._deallocate(claim, pod_info.uid),
                                    name=f"dra-deallocate:{key_of(claim)}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return None, Status(Code.UNSCHEDULABLE, REASON_DEALLOCATED)
        if data.ext is not None and data.ext.stale is not None:
            # a claim a prior attempt created for the pod's extended resources goes
            return None, self._delete_stale_extended(data.ext.stale)
        return None, Status(Code.UNSCHEDULABLE, REASON_NOTHING_TO_DEALLOCATE)

    async def _deallocate(self, claim: Mapping[str, Any], pod_uid: str) -> None:
        meta = claim.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        client = self._handle.client
        path = resource_path(GROUP_VERSION, RESOURCE_CLAIMS, ns, name)
        for _ in range(PREBIND_ATTEMPTS):
            resp = await client.request("GET", path)
            if resp.status != 200 or not isinstance(resp.body, dict):
                return
            latest = resp.body
            if allocation_of(latest) is None or any(
                    u.get("uid") != pod_uid for u in reserved_for(latest)):
                return  # someone else uses it now
            status = dict(latest.get("status") or {})
            status.pop("allocation", None)
            status.pop("devices", None)  # drivers' reports on the devices go with them
            status.pop("reservedFor", None)
            latest["status"] = status
            resp = await client.request("PUT", path + "/status", body=latest)
            if resp.status == 409:
                continue
            if resp.status >= 300:
                log.warning("cannot deallocate ResourceClaim", claim=f"{ns}/{name}",
                            status=resp.status)
                return
            latest = resp.body if isinstance(resp.body, dict) else latest
            fins = (latest.get("metadata") or {}).get("finalizers") or []
            if FINALIZER in fins:
                latest["metadata"]["finalizers"] = [f for f in fins if f != FINALIZER]
                await client.request("PUT", path, body=latest)
            return

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- Score ---------------------------------------------------------------------------------

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
              ) -> tuple[int, Status | None]:
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return 0, None
        out = self._allocation_on(data, node_info.name)
        if out is None:
            return MAX_NODE_SCORE, None
        # an earlier firstAvailable subrequest is better; 10 points per step down the list
        return max(0, MAX_NODE_SCORE - 10 * out.subrequest_rank), None

    def score_nodes(self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
                    ) -> tuple[list[int], Status | None]:
        # A pod without claims scores 0 everywhere: one answer, not one call per node (at
        # 5000 nodes the per-node calls were ~1 ms of every such pod's cycle).
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return [0] * len(nodes), None
        if data.first_fit is not None and data.ext is None:
            # one request without firstAvailable: every allocation is its first choice,
            # so every node scores the maximum (what ``score`` answers node by node)
            return [MAX_NODE_SCORE] * len(nodes), None
        return super().score_nodes(state, pod_info, nodes)

    def sign(self, pod_info: PodInfo) -> Hashable | None:
        """Opportunistic batching's signature: a pod with no claims and no extended
        resources (which a DeviceClass could back) is skipped at PreFilter and scores 0 on
        every node, whatever the node; any other pod is not signed (its answer depends on
        claims and devices beyond the node's NodeInfo).  Without it every plain pod's Score
        was partially batched, and no window was kept for any pod (batching.py)."""
        if has_claims(pod_info.pod) or pod_info.requests.scalar_resources:
            return None
        return ()

    # --- Reserve -------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if isinstance(data, _State) and data.ext is not None:
            return self._reserve_extended(data, pod_info, node_name)
        if not isinstance(data, _State) or not data.to_allocate:
            return None
        out = self._allocation_on(data, node_name)
        if out is None:
            return error(f"no allocation computed for node {node_name}")
        return self._assume_claims(data, pod_info, node_name, out.allocations)

    def _assume_claims(self, data: _State, pod_info: PodInfo, node_name: str,
                       allocations: Sequence[dict[str, Any]]) -> Status | None:
        """Hold each claim to allocate with its allocation on ``node_name`` (the first
        ``len(data.to_allocate)`` of ``allocations``), all or none: a claim another pod
        sharing it reserved since PreFilter undoes those already held."""
        for claim, alloc in zip(data.to_allocate, allocations):
            key = key_of(claim)
            if self.tracker.in_flight(key) is not None:
                self._forget(data, pod_info)
                return Status(Code.UNSCHEDULABLE, REASON_IN_USE)
            if self._binding_conditions and data.inventory is not None:
                alloc = decorate(alloc, data.inventory, node_name)
            self.tracker.assume(key, pod_info.uid, alloc)
        return None

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        data = state.get(STATE_KEY)
        if isinstance(data, _State):
            self._forget(data, pod_info)
            if data.ext is not None:
                self._unreserve_extended(data.ext, pod_info)

    def _forget(self, data: _State, pod_info: PodInfo) -> None:
        for claim in data.to_allocate:
            self.tracker.forget(key_of(claim), pod_info.uid)

    # --- PreBind -------------------------------------------------------------------------------

    def pre_bind_pre_flight(self, state: CycleState, pod_info: PodInfo, node_name: str
                            ) -> Status | None:
        """Skip unless some claim is still to be reserved for the pod in the API (no claims,
        or all of them already reserved for it)."""
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return SKIP
        if data.ext is not None and node_name in data.ext.by_node:
            return None  # the special claim is to be created
        if all(is_reserved_for(claim, pod_info.pod) for claim in data.claims) and not (
                self._binding_conditions and any(
                    has_binding_conditions(allocation_of(c)) and binding_state(c).state != READY
                    for c in data.claims)):
            return SKIP
        return None

    async def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str
                       ) -> Status | None:
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return None
        waiting: list[Mapping[str, Any]] = []
        for claim in data.claims:
            alloc = self.tracker.in_flight(key_of(claim)) if claim in data.to_allocate else None
            if self._binding_conditions and has_binding_conditions(alloc or allocation_of(claim)):
                waiting.append(claim)
            if is_reserved_for(claim, pod_info.pod):
                continue
            try:
                await self._reserve_in_api(claim, pod_info, alloc)
            except _PreBindError as e:
                return error(str(e))
        if data.ext is not None and node_name in data.ext.by_node:
            try:
                await self._bind_extended(data.ext, pod_info, node_name)
            except _PreBindError as e:
                return error(str(e))
        if waiting:
            return await self._wait_for_binding(waiting, pod_info, node_name)
        return None

    def _binding_problem(self, claim: Mapping[str, Any]) -> str:
        """Why an allocated claim cannot be used any more (its binding failed, or timed out
        since ``allocationTimestamp``), or ""."""
        if not has_binding_conditions(allocation_of(claim)):
            return ""
        st = binding_state(claim)
        if st.state == FAILED:
            return f"claim {key_of(claim)}: binding failed: {st.message}"
        if st.state != READY:
            at = allocated_at(claim)
            if at is not None and self._wall_clock() >= at + self._binding_timeout:
                return f"claim {key_of(claim)}: binding timed out: {st.message}"
        return ""

    async def _wait_for_binding(self, claims: list[Mapping[str, Any]], pod_info: PodInfo,
                                node_name: str) -> Status | None:
        """PreBind's wait for binding conditions: the claims as the informer has them are
        looked at every ``BINDING_POLL_SECONDS`` until each device shows its binding
        conditions True (bind), one failure condition True or ``bindingTimeout`` passes
        (an error: Unreserve, and the next attempt deallocates the claim)."""
        self._handle.event_recorder.event(
            pod_info.pod, type="Normal", reason=EVENT_BINDING_PENDING, action="Binding",
            message=EVENT_BINDING_PENDING_MESSAGE.format(node=node_name))
        started = self._clock()
        status = await self._wait_for_conditions(claims, pod_info, started + self._binding_timeout)
        outcome = ("success" if status is None else
                   "timeout" if "binding timeout" in status.message() else "failure")
        metrics = self._handle.metrics.ops
        elapsed = max(0.0, self._clock() - started)
        for driver in sorted(_binding_drivers(claims, self.tracker)):
            labels = (self._handle.profile_name, driver, outcome)
            metrics.dra_bindingconditions_allocations.labels(*labels).inc()
            metrics.dra_bindingconditions_wait_duration.labels(*labels).observe(elapsed)
        return status

    async def _wait_for_conditions(self, claims: list[Mapping[str, Any]], pod_info: PodInfo,
                                   deadline: float) -> Status | None:
        keys = [(str((c.get("metadata") or {}).get("namespace") or ""),
                 str((c.get("metadata") or {}).get("name") or "")) for c in claims]
        while True:
            pending = ""
            for ns, name in keys:
                claim = self._get_claim(ns, name)
                if claim is None:
                    return error(f"resourceclaim {ns}/{name}: gone while waiting for binding "
                                 "conditions")
                st = binding_state(claim)
                if st.state == FAILED:
                    log.info("binding conditions failed", pod=pod_info.key,
                             claim=f"{ns}/{name}", reason=st.message)
                    return error(f"resourceclaim {ns}/{name}: binding failed: {st.message}")
                if st.state != READY and not pending:
                    pending = f"resourceclaim {ns}/{name}: {st.message}"
            if not pending:
                return None
            left = deadline - self._clock()
            if left <= 0:
                log.info("binding conditions timed out", pod=pod_info.key, pending=pending)
                return error(f"binding timeout after {self._binding_timeout:g}s: {pending}")
            await self._sleep(min(BINDING_POLL_SECONDS, left))

    async def _reserve_in_api(self, claim: Mapping[str, Any], pod_info: PodInfo,
                              alloc: dict[str, Any] | None, *,
                              fresh: dict[str, Any] | None = None) -> None:
        meta = claim.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        client = self._handle.client
        path = resource_path(GROUP_VERSION, RESOURCE_CLAIMS, ns, name)
        entry = {"resource": "pods", "name": pod_info.name, "uid": pod_info.uid}
        # As upstream's bindClaim: the first attempt writes over the informer's copy (no
        # read); only a conflict makes the next attempt read the claim from the API.
        cached = fresh if fresh is not None else self._informer_claim(ns, name)
        for _ in range(PREBIND_ATTEMPTS):
            if cached is not None:
                latest: dict[str, Any] = cached
                cached = None
            else:
                resp = await client.request("GET", path)
                if resp.status != 200 or not isinstance(resp.body, dict):
                    raise _PreBindError(f"resourceclaim {ns}/{name}: get: HTTP {resp.status}")
                latest = resp.body
            if (latest.get("metadata") or {}).get("uid") != meta.get("uid"):
                raise _PreBindError(f"resourceclaim {ns}/{name} was replaced")
            current = allocation_of(latest)
            if alloc is not None and current is not None and \
                    device_ids_of(current) != device_ids_of(alloc):
                raise _PreBindError(f"resourceclaim {ns}/{name} got allocated elsewhere")
            if alloc is not None and current is None:
                fins = list((latest.get("metadata") or {}).get("finalizers") or [])
                if FINALIZER not in fins:
                    latest.setdefault("metadata", {})["finalizers"] = fins + [FINALIZER]
                    resp = await client.request("PUT", path, body=latest)
                    if resp.status == 409:
                        continue
                    if resp.status >= 300 or not isinstance(resp.body, dict):
                        raise _PreBindError(f"resourceclaim {ns}/{name}: add finalizer: "
                                            f"HTTP {resp.status}")
                    latest = resp.body
            status = dict(latest.get("status") or {})
            if alloc is not None and current is None:
                if self._binding_conditions and not alloc.get("allocationTimestamp"):
                    # the start of the binding timeout, shared by every pod of the claim
                    alloc = {**alloc, "allocationTimestamp": timestamp(self._wall_clock())}
                status["allocation"] = alloc
            users = list(status.get("reservedFor") or [])
            if any(isinstance(u, Mapping) and u.get("uid") == pod_info.uid for u in users):
                return
            if len(users) >= RESERVED_FOR_MAX:
                raise _PreBindError(f"resourceclaim {ns}/{name}: {REASON_IN_USE}")
            status["reservedFor"] = users + [entry]
            latest["status"] = status
            resp = await client.request("PUT", path + "/status", body=latest)
            if resp.status == 409:
                continue
            if resp.status >= 300:
                raise _PreBindError(f"resourceclaim {ns}/{name}: update status: "
                                    f"HTTP {resp.status}")
            return
        raise _PreBindError(f"resourceclaim {ns}/{name}: still conflicting after "
                            f"{PREBIND_ATTEMPTS} attempts")

    def _informer_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the informer's claim (without in-flight overlays) that PreBind may
        change and write, or None when the informer has none with a resourceVersion."""
        try:
            claim = self._handle.listers.get(RESOURCE_CLAIMS, namespace, name)
        except KeyError:
            return None
        if not isinstance(claim, Mapping):
            return None
        meta = claim.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("resourceVersion"):
            return None
        out = dict(claim)
        out["metadata"] = dict(meta)
        return out

    # --- DRAExtendedResource ------------------------------------------------------------------
    # Extended resources a DeviceClass backs (scheduler/dra/extended.py): the pod's special
    # claim is built at PreFilter, allocated per node with the pod's claims at Filter, held in
    # the tracker at Reserve, and created in the API (with pod.status.extendedResourceClaimStatus)
    # at PreBind.

    def _pre_filter_extended(self, pod_info: PodInfo) -> _Extended | None:
        """The pod's extended resources a DeviceClass backs, and a claim a prior attempt left
        in the API (stale: it is deleted at PostFilter and the pod tried again), or None."""
        if not self._extended:
            return None
        scalars = pod_info.requests.scalar_resources
        if not scalars:
            return None
        backed = ext_res.backed_resources(scalars, self.class_cache())
        if not backed:
            return None
        out = _Extended(backed=backed, all_backed=frozenset(backed),
                        key=f"{pod_info.namespace}/{ext_res.SPECIAL_NAME}{pod_info.uid}")
        out.stale = ext_res.find_claim(pod_info.pod, self._claims_in(pod_info.namespace))
        return out

    def class_cache(self) -> ext_res.ClassCache:
        """Extended resource name -> the DeviceClass that backs it."""
        return device_class_cache(self._handle.listers)

    def _claims_in(self, namespace: str) -> list[dict[str, Any]]:
        try:
            return self._handle.listers.list(RESOURCE_CLAIMS, namespace)
        except KeyError:
            return []

    def _filter_extended(self, data: _State, pod_info: PodInfo, node_info: NodeInfo
                         ) -> Status | None:
        """The special claim on this node: the backed resources the node does not advertise
        are allocated with the pod's claims (all or none); ``_NOT_EXTENDED`` when the node
        advertises them all (Fit's job: the pod's claims alone, if any, are allocated)."""
        ext = data.ext
        assert ext is not None
        name = node_info.name
        if ext.stale is not None:
            data.details[name] = [f"claim {key_of(ext.stale)}: {REASON_EXTENDED_STALE}"]
            return unresolvable(REASON_EXTENDED_STALE)
        advertised = node_info.allocatable.scalar_resources
        if advertised and any(advertised.get(r) for r in ext.backed):
            need = frozenset(r for r in ext.backed if not advertised.get(r))
            if not need:
                return _NOT_EXTENDED
        else:
            need = ext.all_backed  # the usual case: no device plugin for them here
        variant = ext.variants.get(need)
        if variant is None:
            variant = ext.variants[need] = self._variant(data, pod_info, need)
        if variant.prepared is None:
            data.details[name] = [variant.problem]
            return unresolvable(variant.problem)
        assert data.inventory is not None
        index, prepared = ext.index, variant.prepared
        if (index is not None and variant.first_fit is not None and not data.freed
                and not data.counters and node_info.node is not None):
            # as claim pods do (filter_nodes): the index's first-fit, or a full node
            node = node_info.node
            if not index.may_fit(name) and selectors_checked(prepared, data.inventory, node):
                data.details[name] = Unfit(explain=self._explain_full(data, node,
                                                                      prepared=prepared))
                return Status(Code.UNSCHEDULABLE, REASON_CANNOT_ALLOCATE)
            picked = index.pick(prepared, node, device_taints=self._device_taints,
                                taints_version=self._rules_applied[1],
                                shape=variant.first_fit, node_name=name)
            if picked is not None:
                data.by_node[name] = picked
                ext.by_node[name] = need
                return None
        in_use = data.in_use - data.freed if data.freed else data.in_use
        try:
            out = allocate(variant.prepared, node=node_info.node or {}, inventory=data.inventory,
                           in_use=in_use, counters=data.counters,
                           device_taints=self._device_taints, partitionable=self._partitionable,
                           consumable=self._consumable, fractional=self._fractional,
                           consumed=self._consumed(data),
                           deadline=(self._clock() + self._filter_timeout
                                     if self._filter_timeout else None),
                           clock=self._clock)
        except AllocationError as e:
            data.details[name] = [str(e)]
            return unresolvable(str(e))
        if isinstance(out, Unfit):
            data.details[name] = out
            if out.timed_out:
                return unresolvable(out.details[0])
            return Status(Code.UNSCHEDULABLE, REASON_CANNOT_ALLOCATE)
        data.by_node[name] = out
        ext.by_node[name] = need
        return None

    def _variant(self, data: _State, pod_info: PodInfo, need: frozenset[str]) -> _Variant:
        ext = data.ext
        assert ext is not None
        requests, mappings = ext_res.requests_and_mappings(pod_info.pod, need,
                                                           self.class_cache())
        claim = ext_res.special_claim(pod_info.pod, requests)
        try:
            prepared = prepare([*data.to_allocate, claim], self.classes())
        except AllocationError as e:
            return _Variant(claim, mappings, None, str(e))
        first_fit = (first_fit_shape(prepared)
                     if free_index.needs_free_device(prepared) else None)
        return _Variant(claim, mappings, prepared, first_fit=first_fit)

    def _reserve_extended(self, data: _State, pod_info: PodInfo, node_name: str
                          ) -> Status | None:
        """Hold the devices of the pod's claims and of its special claim on this node."""
        ext = data.ext
        assert ext is not None
        if node_name not in ext.by_node and not data.to_allocate:
            return None  # the node advertises the resources: Fit's job
        out = self._allocation_on(data, node_name)
        if out is None:
            return error(f"no allocation computed for node {node_name}")
        allocations = out.allocations
        status = self._assume_claims(data, pod_info, node_name, allocations)
        if status is not None:
            return status
        if node_name in ext.by_node:
            self.tracker.assume(ext.key, pod_info.uid, allocations[len(data.to_allocate)])
        return None

    def _unreserve_extended(self, ext: _Extended, pod_info: PodInfo) -> None:
        self.tracker.forget(ext.key, pod_info.uid)
        created, ext.created = ext.created, None
        if created is not None:
            # PreBind created it: it must not outlive this attempt
            self._spawn(self._delete_claim(created), f"dra-delete:{key_of(created)}")

    def _delete_stale_extended(self, claim: Mapping[str, Any]) -> Status:
        """PostFilter: a claim a prior attempt created goes, then the pod is tried anew
        (its deletion is a claim event that requeues it)."""
        self._spawn(self._delete_claim(claim), f"dra-delete:{key_of(claim)}")
        return Status(Code.UNSCHEDULABLE, REASON_EXTENDED_DELETED)

    def _spawn(self, coro: Any, name: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            log.warning("no running event loop: task not started", task=name)
            return
        task = loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete_claim(self, claim: Mapping[str, Any]) -> None:
        """Drop the finalizer, then delete (upstream's deleteClaim)."""
        meta = claim.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        client = self._handle.client
        path = resource_path(GROUP_VERSION, RESOURCE_CLAIMS, ns, name)
        for _ in range(PREBIND_ATTEMPTS):
            resp = await client.request("GET", path)
            if resp.status == 404:
                return
            if resp.status != 200 or not isinstance(resp.body, dict):
                break
            latest: dict[str, Any] = resp.body
            fins = list((latest.get("metadata") or {}).get("finalizers") or [])
            if FINALIZER not in fins:
                break
            latest["metadata"]["finalizers"] = [f for f in fins if f != FINALIZER]
            resp = await client.request("PUT", path, body=latest)
            if resp.status != 409:
                break
        resp = await client.request("DELETE", path)
        if resp.status >= 300 and resp.status != 404:
            log.warning("cannot delete extended-resource ResourceClaim", claim=f"{ns}/{name}",
                        status=resp.status)

    async def _bind_extended(self, ext: _Extended, pod_info: PodInfo, node_name: str) -> None:
        """Create the special claim (generated name, the pod as owner, the annotation), write
        its allocation and reservation, then the pod's extendedResourceClaimStatus."""
        variant = ext.variants[ext.by_node[node_name]]
        alloc = self.tracker.in_flight(ext.key)
        if alloc is None:
            raise _PreBindError("extended resource claim: no allocation in flight")
        body = copy.deepcopy(variant.claim)
        del body["metadata"]["name"]
        client = self._handle.client
        ns = pod_info.namespace
        resp = await client.request("POST", resource_path(GROUP_VERSION, RESOURCE_CLAIMS, ns),
                                    body=body)
        creates = self._handle.metrics.ops.resourceclaim_creates
        if resp.status >= 300 or not isinstance(resp.body, dict):
            creates.labels("failure").inc()
            raise _PreBindError(f"create claim for extended resources of {pod_info.key}: "
                                f"HTTP {resp.status}")
        creates.labels("success").inc()
        created: dict[str, Any] = resp.body
        ext.created = created
        # the create's answer is the claim as it is: written over, no read
        await self._reserve_in_api(created, pod_info, alloc, fresh=copy.deepcopy(created))
        # the tracker holds the devices (in flight) until the informer shows the claim
        # allocated
        seen = self._get_claim(ns, str(created["metadata"].get("name") or ""))
        if seen is not None and allocation_of(seen) is not None:
            self.tracker.forget(ext.key, pod_info.uid)
        else:
            self.tracker.alias(key_of(created), ext.key)
        patch = {"status": {"extendedResourceClaimStatus": {
            "requestMappings": variant.mappings,
            "resourceClaimName": created["metadata"].get("name")}}}
        resp = await client.request(
            "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod_info.name}/status", body=patch,
            content_type="application/merge-patch+json")
        if resp.status >= 300:
            raise _PreBindError(f"update pod {pod_info.key} ExtendedResourceClaimStatus: "
                                f"HTTP {resp.status}")

    # --- explain -------------------------------------------------------------------------------

    @staticmethod
    def node_details(state: CycleState, node_name: str) -> list[str]:
        """Why the claims could not be allocated on this node (for explain)."""
        data = state.get(STATE_KEY)
        if not isinstance(data, _State):
            return []
        why = data.details.get(node_name, [])
        return list(why.details if isinstance(why, Unfit) else why)


def _filter_timeout(args: PluginArgs | None) -> float:
    """DynamicResourcesArgs: ``filterTimeout`` (a duration, default 10s; 0 turns the limit
    off), read only while the DRASchedulerFilterTimeout gate is on, as upstream."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
    unknown = sorted(str(k) for k in args
                     if k not in ("apiVersion", "kind", "filterTimeout", "bindingTimeout"))
    if unknown:
        raise args_error(NAME, unknown[0], "unknown field")
    raw = args.get("filterTimeout")
    if raw is None:
        seconds = DEFAULT_FILTER_TIMEOUT_SECONDS
    else:
        try:
            seconds = parse_duration(raw)
        except ValueError as e:
            raise args_error(NAME, "filterTimeout", str(e)) from None
        if seconds < 0:
            raise args_error(NAME, "filterTimeout", f"Invalid value: {raw!r}: must be "
                             "zero or positive")
    return seconds if features.DEFAULT.enabled("DRASchedulerFilterTimeout") else 0.0


def _binding_drivers(claims: list[Mapping[str, Any]], tracker: ClaimTracker) -> set[str]:
    """The drivers of the claims' devices that have binding conditions."""
    out: set[str] = set()
    for claim in claims:
        alloc = allocation_of(claim) or tracker.in_flight(key_of(claim))
        devices = alloc.get("devices") if isinstance(alloc, Mapping) else None
        for r in (devices.get("results") or []) if isinstance(devices, Mapping) else []:
            if isinstance(r, Mapping) and r.get("bindingConditions"):
                out.add(str(r.get("driver") or ""))
    return out


def _binding_timeout(args: PluginArgs | None) -> float:
    """DynamicResourcesArgs: ``bindingTimeout`` (a duration, default 600s, at least 1s): how
    long PreBind waits for devices' binding conditions (DRADeviceBindingConditions)."""
    raw = args.get("bindingTimeout") if isinstance(args, Mapping) else None
    if raw is None:
        return DEFAULT_BINDING_TIMEOUT_SECONDS
    try:
        seconds = parse_duration(raw)
    except ValueError as e:
        raise args_error(NAME, "bindingTimeout", str(e)) from None
    if seconds < MIN_BINDING_TIMEOUT_SECONDS:
        raise args_error(NAME, "bindingTimeout", f"Invalid value: {raw!r}: must be at least 1s")
    return seconds


class _PreBindError(Exception):
    pass


# Filter's answer when a node advertises every backed resource: the normal path follows
_NOT_EXTENDED = Status(Code.SUCCESS, "not extended")


def _after_taint_rule_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    """A rule change can only help a pod rejected for devices when the old rule tainted
    devices (NoSchedule/NoExecute) and the rule is gone or no longer the same: a new rule,
    or one that now taints where it did not, only takes devices away."""
    was = _scheduling_rule(old)
    if was is None:
        return QueueingHint.SKIP
    return QueueingHint.SKIP if _scheduling_rule(new) == was else QueueingHint.QUEUE


def _scheduling_rule(obj: Any) -> TaintRule | None:
    """The rule of ``obj`` if it keeps devices from allocation, else None."""
    if not isinstance(obj, Mapping):
        return None
    try:
        rule = parse_rule(obj)
    except ObjectError:
        return None  # a malformed rule is ignored: it taints nothing
    return rule if rule.selects and rule.taint.effect in TAINT_EFFECTS else None


def _extended_claim_name(pod: Mapping[str, Any]) -> str:
    """``status.extendedResourceClaimStatus.resourceClaimName`` (DRAExtendedResource), or ""."""
    st = pod.get("status")
    ers = st.get("extendedResourceClaimStatus") if isinstance(st, Mapping) else None
    name = ers.get("resourceClaimName") if isinstance(ers, Mapping) else None
    return name if isinstance(name, str) else ""


def _frees_devices(old: Any, new: Any) -> bool:
    """The claim event deallocated the claim or deleted an allocated one."""
    return isinstance(old, Mapping) and allocation_of(old) is not None and (
        not isinstance(new, Mapping) or allocation_of(new) is None)


def claim_event_keys(old: Any, new: Any) -> list[tuple[Any, Any]] | None:
    """The claim hint's keys of a claim event: the claim's (namespace, name), the one pod key
    that can make ``_after_claim_change`` answer Queue; None when it answers Queue for
    every pod (the claim freed its devices, or the event carries no object)."""
    obj = new if isinstance(new, Mapping) else old
    if not isinstance(obj, Mapping) or _frees_devices(old, new):
        return None
    meta = obj.get("metadata") or {}
    return [(meta.get("namespace"), meta.get("name"))]


def pod_claim_keys(pod: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The claim hint's keys of a waiting pod: (namespace, name) of each claim it names
    (spec.resourceClaims[].resourceClaimName, and the generated names its status gives
    for template claims); none while a generated name is not known yet."""
    ns = (pod.get("metadata") or {}).get("namespace", "")
    try:
        return [(ns, pc.claim_name) for pc in pod_claims(pod)]
    except ClaimProblem:
        return []


def _after_own_update(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Mapping) or not isinstance(old, Mapping):
        return QueueingHint.SKIP
    if (new.get("metadata") or {}).get("uid") != (pod.get("metadata") or {}).get("uid"):
        return QueueingHint.SKIP
    before = (old.get("status") or {}).get("resourceClaimStatuses")
    after = (new.get("status") or {}).get("resourceClaimStatuses")
    return QueueingHint.QUEUE if before != after else QueueingHint.SKIP


__all__ = ["NAME", "DynamicResources", "PodClaim", "REASON_CANNOT_ALLOCATE", "claim_event_keys",
           "pod_claim_keys"]
