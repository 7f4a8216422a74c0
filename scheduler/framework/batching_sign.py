"""What opportunistic batching (``batching``) keys kept results by: a pod's signature, one
part per plugin that signs it (``sign``, or ``sign_filter`` after PreFilter), and the
plugins that do not (they run every cycle).  Split out of ``batching`` as the part plugins
call (``sign_requests``, ``freeze``) and the protocols they implement; ``batching`` keeps
and reuses the results.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scheduler.framework.cycle_state import CycleState
    from scheduler.objects.pod import PodInfo


@runtime_checkable
class SignPlugin(Protocol):
    """A Filter or Score plugin whose per-node answer for a pod depends only on ``sign``'s
    value and the node's NodeInfo.  ``None``: this pod cannot be signed (normal path)."""

    def sign(self, pod_info: PodInfo) -> Hashable | None: ...


def sign_requests(pod_info: PodInfo) -> Hashable:
    """What resource plugins read of a pod: its requests and the non-zero defaults."""
    r = pod_info.requests
    last = _last_requests_sign
    if last[0] is r and last[1] == pod_info.non_zero_cpu and last[2] == pod_info.non_zero_memory:
        # Pods parsed alike share one requests object (PodInfo's shared parse, never
        # changed): a backlog of alike pods builds the tuple once.
        return last[3]  # type: ignore[no-any-return]  # the signature kept below
    value = (r.milli_cpu, r.memory, r.ephemeral_storage, r.allowed_pod_number,
             tuple(sorted(r.scalar_resources.items())), pod_info.non_zero_cpu,
             pod_info.non_zero_memory)
    last[:] = (r, pod_info.non_zero_cpu, pod_info.non_zero_memory, value)
    return value


# sign_requests' last answer: [requests object, non-zero cpu, non-zero memory, signature].
_last_requests_sign: list[Any] = [None, 0, 0, None]


def freeze(value: Any) -> Hashable:
    """A hashable copy of a JSON-like value (dicts by sorted key, lists in order)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value  # type: ignore[no-any-return]  # str/int/float/bool/None are hashable


@runtime_checkable
class FilterSignPlugin(Protocol):
    """A Filter plugin whose per-node Filter status for a pod, in this cycle, depends only
    on ``sign_filter``'s value and the node's NodeInfo: it may read what its PreFilter
    computed for the pod (the cycle state), e.g. PodTopologySpread's domains over their
    skew.  Used for the Filter signature only (a Score signature always comes from
    ``sign``); ``None``: not signed (normal path)."""

    def sign_filter(self, state: CycleState, pod_info: PodInfo) -> Hashable | None: ...


# A plugin's name, its ``sign_filter`` and its ``sign`` (None where it has none).
_Signer = tuple[str, Any, Any]


def _signers(plugins: Sequence[tuple[str, object]]) -> list[_Signer]:
    return [(name, getattr(plugin, "sign_filter", None), getattr(plugin, "sign", None))
            for name, plugin in plugins]


def _sign_parts(plugins: Sequence[tuple[str, object]], skip: set[str],
                pod_info: PodInfo, state: CycleState | None = None, *,
                memo: dict[str, Hashable] | None = None,
                signers: list[_Signer] | None = None,
                ) -> tuple[tuple[tuple[str, Hashable], ...], frozenset[str]]:
    """The signatures of the (not skipped) plugins that sign the pod, and the names of
    those that do not (they run every cycle).  ``state``: the Filter signature, after
    PreFilter (a plugin's ``sign_filter`` is asked first).  ``memo``: the ``sign`` values
    already asked of this cycle's plugins for this pod, by plugin name (a plugin with both
    Filter and Score is asked once per cycle), and where the new ones go.  ``signers``:
    ``_signers(plugins)``, when the caller keeps it."""
    parts: list[tuple[str, Hashable]] = []
    unsigned: list[str] = []
    for name, sign_filter, sign in _signers(plugins) if signers is None else signers:
        if name in skip:
            continue
        if sign_filter is not None and state is not None:
            value = sign_filter(state, pod_info)
        elif memo is not None and name in memo:
            value = memo[name]
        else:
            value = sign(pod_info) if sign is not None else None
            if memo is not None:
                memo[name] = value
        if value is None:
            unsigned.append(name)
        else:
            parts.append((name, value))
    return tuple(parts), frozenset(unsigned)
