"""VolumeBinding: place pods with PersistentVolumeClaims where their volumes can be.

Why it exists: a pod whose claims are bound can only run where the bound PVs' node affinity
allows; a pod whose WaitForFirstConsumer claims are still unbound needs a node where an
Available PV matches (or a provisioner may create one), and that choice must be promised to
this pod only.  PreFilter sorts the claims, Filter checks each node, Reserve assumes the chosen
bindings in the shared assume cache, Unreserve restores them, and PreBind writes them to the
API server and waits until the PV controller reports every claim Bound.

Score is upstream's StorageCapacityScoring (beta, on by default in 1.37): with static
bindings, the utilization of the chosen PVs; with only dynamic provisioning, the utilization of
the CSIStorageCapacity that showed the node has room (requested / ``capacity``, per storage
class), through the ``shape`` of VolumeBindingArgs.  The default shape scores an empty pool 10
and a full one 0: nodes with the most free capacity are preferred.  With the gate off there is
no scorer and ``shape`` is refused, as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.config import features
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
    PluginArgs,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import SKIP, Status, error, unresolvable
from scheduler.framework.types import MAX_NODE_SCORE, PreFilterResult
from scheduler.objects.errors import ObjectError
from scheduler.objects.pod import PodInfo
from scheduler.objects.quantity import QuantityError, parse_quantity_nano
from scheduler.plugins import names
from scheduler.plugins.helper import FunctionShapePoint, args_error, build_broken_linear_function
from scheduler.plugins.volumebinding.binder import (
    PodVolumeClaims,
    PodVolumes,
    VolumeBinder,
    VolumeBindingError,
)
from scheduler.plugins.volumebinding.matching import (
    ANN_MIGRATED_PLUGINS,
    annotations_of,
    ephemeral_claim_error,
    meta,
    name_of,
    namespace_of,
    not_found,
    pod_claims,
    pod_namespace,
    pvc_storage_class,
    spec,
    status_of,
    storage_bytes,
    storage_capacity_nano,
    storage_request_nano,
    without_volumes,
)

__all__ = [
    "NAME",
    "VolumeBinding",
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "DEFAULT_BIND_TIMEOUT_SECONDS",
]

NAME = names.VOLUME_BINDING
STATE_KEY = NAME
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
# Poll the listers this often while waiting for the PV controller (upstream: 1 s).
DEFAULT_POLL_INTERVAL_SECONDS = 0.1
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100
STORAGE_CAPACITY_SCORING = "StorageCapacityScoring"
# Upstream SetDefaults_VolumeBindingArgs with StorageCapacityScoring on: most free space wins.
DEFAULT_SHAPE: tuple[dict[str, int], ...] = (
    {"utilization": 0, "score": MAX_CUSTOM_PRIORITY_SCORE},
    {"utilization": MAX_UTILIZATION, "score": 0},
)
ERR_SHAPE_WITHOUT_GATE = ("unexpected field `shape`, remove it or turn on the feature gate "
                          "StorageCapacityScoring")

_ARG_FIELDS = frozenset({"bindTimeoutSeconds", "shape", "apiVersion", "kind"})


@dataclass(slots=True)
class _State:
    """Per-cycle data.  Shared (not copied) by CycleState clones, as upstream."""

    claims: PodVolumeClaims | None = None
    volumes_by_node: dict[str, PodVolumes] = field(default_factory=dict)
    has_static_bindings: bool = False
    # some node provisions a claim whose CSIStorageCapacity is known (dynamic scoring has work)
    has_provision_capacities: bool = False
    all_bound: bool = False

    def clone(self) -> _State:
        return self


def _validate_shape(raw: Any) -> list[FunctionShapePoint]:
    """Upstream ``validateFunctionShape``; scores are scaled from [0, 10] to [0, 100]."""
    if not isinstance(raw, list) or not raw:
        raise args_error(NAME, "shape", "at least one point must be specified")
    points: list[FunctionShapePoint] = []
    for i, point in enumerate(raw):
        where = f"shape[{i}]"
        if not isinstance(point, Mapping):
            raise args_error(NAME, where, "must be an object with utilization and score")
        util, score = point.get("utilization", 0), point.get("score", 0)
        if isinstance(util, bool) or not isinstance(util, int) or not 0 <= util <= MAX_UTILIZATION:
            raise args_error(NAME, f"{where}.utilization",
                             f"Invalid value: {util!r}: not in valid range [0, {MAX_UTILIZATION}]")
        if (isinstance(score, bool) or not isinstance(score, int)
                or not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE):
            raise args_error(NAME, f"{where}.score", f"Invalid value: {score!r}: not in valid "
                             f"range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
        if points and util <= points[-1].utilization:
            raise args_error(NAME, f"{where}.utilization", f"Invalid value: {util}: utilization "
                             "values must be sorted in increasing order")
        points.append(FunctionShapePoint(util, score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)))
    return points


class VolumeBinding(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin,
                    PreBindPlugin, EnqueueExtensions):
    NAME = NAME

    def __init__(
        self,
        args: PluginArgs,
        handle: Handle,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL_SECONDS,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        gates: features.FeatureGates | None = None,
    ) -> None:
        if args is not None and not isinstance(args, Mapping):
            raise args_error(NAME, "", f"must be an object, got {type(args).__name__}")
        args = dict(args or {})
        unknown = sorted(str(k) for k in set(args) - _ARG_FIELDS)
        if unknown:
            raise args_error(NAME, unknown[0], "unknown field")
        timeout = args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            raise args_error(NAME, "bindTimeoutSeconds", f"must be an integer, got {timeout!r}")
        if timeout < 0:
            raise args_error(NAME, "bindTimeoutSeconds", f"Invalid value: {timeout}: invalid "
                             "BindTimeoutSeconds, should not be a negative value")
        self.capacity_scoring = (gates or features.DEFAULT).enabled(STORAGE_CAPACITY_SCORING)
        self._scorer: Callable[[dict[str, list[int]]], int] | None = None
        if self.capacity_scoring:
            # Undefaulted args (a plugin built directly) get the default shape, as upstream's
            # defaulting gives every profile.
            raw_shape = args.get("shape") or [dict(p) for p in DEFAULT_SHAPE]
            self._scorer = _build_scorer(_validate_shape(raw_shape))
        elif "shape" in args and args["shape"] is not None:
            raise args_error(NAME, "shape", f"Invalid value: {args['shape']!r}: "
                             f"{ERR_SHAPE_WITHOUT_GATE}")
        self._handle = handle
        self.binder = VolumeBinder(handle, bind_timeout=float(timeout),
                                   poll_interval=poll_interval, sleep=sleep)

    # --- events -------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A missing or mis-configured class (allowedTopologies) may get fixed.
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS,
                                              ActionType.ADD | ActionType.UPDATE),
                                 _after_storage_class_change),
            # Claims get created and bound; any change to one of the pod's claims may help.
            # Keyed: the queue asks only the pods naming the claim.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD | ActionType.UPDATE),
                                 KeyedHint(_after_pvc_change, event_keys=_pvc_event_keys,
                                           pod_keys=_pod_pvc_keys)),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME,
                                              ActionType.ADD | ActionType.UPDATE)),
            # Node labels decide PV node affinity and allowed topologies.
            ClusterEventWithHint(ClusterEvent(EventResource.NODE,
                                              ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE,
                                              ActionType.ADD | ActionType.UPDATE),
                                 _after_csi_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE),
                                 _after_csi_driver_change),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_STORAGE_CAPACITY,
                                              ActionType.ADD | ActionType.UPDATE),
                                 _after_capacity_change),
        ]

    # --- PreFilter ----------------------------------------------------------------------------

    def _pod_has_pvcs(self, pod_info: PodInfo) -> tuple[bool, str | None]:
        pod = pod_info.pod
        ns = pod_namespace(pod)
        claims = pod_claims(pod)
        for claim in claims:
            pvc = self._handle.listers.get("persistentvolumeclaims", ns, claim.name)
            if pvc is None:
                if claim.ephemeral:
                    return True, ("waiting for ephemeral volume controller to create the "
                                  f'persistentvolumeclaim "{claim.name}"')
                return True, not_found("persistentvolumeclaim", claim.name)
            if status_of(pvc).get("phase") == "Lost":
                return True, (f'persistentvolumeclaim "{claim.name}" bound to non-existent '
                              f'persistentvolume "{spec(pvc).get("volumeName") or ""}"')
            if meta(pvc).get("deletionTimestamp") is not None:
                return True, f'persistentvolumeclaim "{claim.name}" is being deleted'
            if claim.ephemeral:
                problem = ephemeral_claim_error(pod, pvc)
                if problem is not None:
                    return True, problem
        return bool(claims), None

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if without_volumes(pod_info.pod):
            # No claim to look up: what the check below answers for such a pod.
            state.write(STATE_KEY, _State())
            return None, SKIP
        has_pvc, problem = self._pod_has_pvcs(pod_info)
        if problem is not None:
            return None, unresolvable(problem)
        if not has_pvc:
            state.write(STATE_KEY, _State())
            return None, SKIP
        try:
            claims = self.binder.get_pod_volume_claims(pod_info)
        except ObjectError as exc:
            # A malformed claim: the pod waits for the claim's update (a PVC event).
            return None, unresolvable(str(exc))
        except VolumeBindingError as exc:
            return None, Status.from_error(exc)
        if claims.unbound_claims_immediate:
            # The PV controller binds these; the pod waits for the PVC update event.
            return None, unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, _State(claims=claims))
        return None, None

    # --- Filter -------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return error("node not found")
        data = _read_state(state)
        if data is None:
            return missing_state(STATE_KEY)
        if data.claims is None:
            return None
        try:
            volumes, reasons = self.binder.find_pod_volumes(pod_info, data.claims, node)
        except (VolumeBindingError, ObjectError) as exc:
            return Status.from_error(exc)
        if reasons:
            return unresolvable(*reasons)
        data.volumes_by_node[node_info.name] = volumes
        if volumes.static_bindings:
            data.has_static_bindings = True
        if any(cap is not None for cap in volumes.provision_capacities):
            data.has_provision_capacities = True
        return None

    # --- PreScore / Score ---------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        if self._scorer is None:
            return SKIP
        data = _read_state(state)
        if data is None:
            return missing_state(STATE_KEY)
        # Upstream runs Score whenever the gate is on; a node without static bindings or a known
        # capacity scores 0 there, so skipping when no node has either gives the same totals
        # without a call per node.
        if data.has_static_bindings or (self.capacity_scoring and data.has_provision_capacities):
            return None
        return SKIP

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        scorer = self._scorer
        if scorer is None:
            return 0, None
        data = _read_state(state)
        if data is None:
            return 0, missing_state(STATE_KEY)
        volumes = data.volumes_by_node.get(node_info.name)
        if volumes is None:
            return 0, None
        return scorer(class_resources(volumes, capacity_scoring=self.capacity_scoring)), None

    # --- Reserve / Unreserve ------------------------------------------------------------------

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        data = _read_state(state)
        if data is None:
            return missing_state(STATE_KEY)
        volumes = data.volumes_by_node.get(node_name)
        if volumes is None:
            # The pod references no PVC (or Filter was not run for this node).
            data.all_bound = True
            return None
        try:
            data.all_bound = self.binder.assume_pod_volumes(pod_info, node_name, volumes)
        except (VolumeBindingError, ObjectError) as exc:
            return Status.from_error(exc)
        return None

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        data = _read_state(state)
        if data is None:
            return
        volumes = data.volumes_by_node.get(node_name)
        if volumes is not None:
            self.binder.revert_assumed_pod_volumes(volumes)

    # --- PreBind ------------------------------------------------------------------------------

    def pre_bind_pre_flight(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """Skip unless Reserve left volumes to bind (a pod with no PVC, or all bound)."""
        data = _read_state(state)
        if data is None:
            return missing_state(STATE_KEY)
        return SKIP if data.all_bound else None

    async def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        data = _read_state(state)
        if data is None:
            return missing_state(STATE_KEY)
        if data.all_bound:
            return None
        volumes = data.volumes_by_node.get(node_name)
        if volumes is None:
            return error(f'no pod volumes found for node "{node_name}"')
        try:
            await self.binder.bind_pod_volumes(pod_info, node_name, volumes)
        except (VolumeBindingError, ObjectError) as exc:
            return Status.from_error(exc)
        return None


def class_resources(volumes: PodVolumes, *, capacity_scoring: bool) -> dict[str, list[int]]:
    """Storage class -> [requested, capacity] bytes on one node (upstream ``classResourceMap``).

    Static bindings count their PVs' capacity (summed per class).  With only dynamic
    provisioning (and StorageCapacityScoring on), each class counts its claims' requests
    against the capacity of the CSIStorageCapacity found for it, taken once, not summed: the
    claims share that pool.
    """
    per_class: dict[str, list[int]] = {}
    if volumes.static_bindings or not capacity_scoring:
        for b in volumes.static_bindings:
            acc = per_class.setdefault(b.storage_class, [0, 0])
            acc[0] += storage_bytes(storage_request_nano(b.pvc))
            acc[1] += storage_bytes(storage_capacity_nano(b.pv))
        return per_class
    for pvc, cap in zip(volumes.dynamic_provisions, volumes.provision_capacities):
        if cap is None:
            continue
        acc = per_class.setdefault(pvc_storage_class(pvc), [0, 0])
        acc[1] = _capacity_bytes(cap)
        acc[0] += storage_bytes(storage_request_nano(pvc))
    return per_class


def _capacity_bytes(cap: Mapping[str, Any]) -> int:
    """``capacity`` of a CSIStorageCapacity in whole bytes; unset or malformed counts as 0 (a
    full pool: the lowest score the shape gives)."""
    raw = cap.get("capacity")
    if raw is None:
        return 0
    try:
        return storage_bytes(parse_quantity_nano(raw))
    except QuantityError:
        return 0


def _build_scorer(shape: list[FunctionShapePoint]) -> Callable[[dict[str, list[int]]], int]:
    """Upstream ``buildScorerFunction``: each class's utilization through the shape, averaged
    over the classes (all weigh the same), rounded half away from zero."""
    raw = build_broken_linear_function(shape)

    def per_class(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def scorer(resources: dict[str, list[int]]) -> int:
        if not resources:
            return 0
        total = sum(per_class(requested, capacity) for requested, capacity in resources.values())
        return int(math.floor(total / len(resources) + 0.5))

    return scorer


def _read_state(state: CycleState) -> _State | None:
    data = state.get(STATE_KEY)
    return data if isinstance(data, _State) else None


# --- queueing hints ---------------------------------------------------------------------------


def _after_pvc_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if namespace_of(new) != pod_namespace(pod):
        return QueueingHint.SKIP
    if any(c.name == name_of(new) for c in pod_claims(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _pvc_event_keys(old: Any, new: Any) -> list[tuple[str, str]] | None:
    """Keys of a PVC event for ``_after_pvc_change``: the claim's (namespace, name); None
    (every pod) when the event carries no new object."""
    if not isinstance(new, Mapping):
        return None
    return [(namespace_of(new), name_of(new))]


def _pod_pvc_keys(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """Keys of a waiting pod for ``_after_pvc_change``: its claims' (namespace, name)."""
    ns = pod_namespace(pod)
    return [(ns, c.name) for c in pod_claims(pod)]


def _after_storage_class_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if old.get("allowedTopologies") != new.get("allowedTopologies"):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_csi_node_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    if annotations_of(old).get(ANN_MIGRATED_PLUGINS) != annotations_of(new).get(ANN_MIGRATED_PLUGINS):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_csi_driver_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    for vol in spec(pod).get("volumes") or ():
        csi = vol.get("csi") if isinstance(vol, Mapping) else None
        if not isinstance(csi, Mapping) or csi.get("driver") != name_of(new):
            continue
        if spec(old).get("storageCapacity") and not spec(new).get("storageCapacity"):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _volume_limit(cap: Mapping[str, Any]) -> Any:
    return cap.get("maximumVolumeSize", cap.get("capacity"))


def _after_capacity_change(pod: dict[str, Any], old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return QueueingHint.QUEUE
    old_limit, new_limit = _volume_limit(old), _volume_limit(new)
    if new_limit is None:
        return QueueingHint.SKIP
    try:
        if old_limit is None or parse_quantity_nano(new_limit) > parse_quantity_nano(old_limit):
            return QueueingHint.QUEUE
    except QuantityError:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
