"""Per-cycle scratch space shared by a pod's plugins.

A PreFilter computes something once (the pod's parsed requests, the topology counts) and its
Filter reads it for every node; preemption clones the state to try removing victims without
disturbing the real cycle.  Values that are mutated by ``add_pod``/``remove_pod`` extensions must
implement ``clone()`` so that a cloned CycleState can be changed independently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from scheduler.framework.status import Code, Status

if TYPE_CHECKING:
    from scheduler.framework.node_info import NodeInfo


class StateData(Protocol):
    def clone(self) -> StateData: ...


class CycleState:
    __slots__ = ("_data", "get", "read", "write", "skip_filter_plugins", "skip_score_plugins",
                 "skip_pre_bind_plugins", "record_plugin_metrics")

    # The state's dict's own methods, bound per instance (a cycle reads and writes its
    # state a dozen times: a Python method around each was a call more each time):
    # ``read(key)``: the value stored under ``key``, KeyError if a PreFilter did not write
    # it; ``get(key, default=None)``; ``write(key, value)``.
    get: Callable[..., Any]
    read: Callable[[str], Any]
    write: Callable[[str, Any], None]

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.get = self._data.get
        self.read = self._data.__getitem__
        self.write = self._data.__setitem__
        # PreFilter/PreScore returning Skip lets the runtime skip that plugin's Filter/Score.
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # PreBindPreFlight returning Skip lets the runtime skip that plugin's PreBind.
        self.skip_pre_bind_plugins: set[str] = set()
        self.record_plugin_metrics = False

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        copy = CycleState()
        for key, value in self._data.items():
            clone = getattr(value, "clone", None)
            copy._data[key] = clone() if callable(clone) else value
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        copy.skip_pre_bind_plugins = set(self.skip_pre_bind_plugins)
        copy.record_plugin_metrics = self.record_plugin_metrics
        return copy


T = TypeVar("T")


def missing_state(key: str) -> Status:
    """The Error status upstream answers when a Pre* step's data is missing from the cycle
    state (the point ran without it: a bug).  A new Status each call (batches use it per
    node)."""
    return Status(Code.ERROR, f'error reading "{key}" from cycleState: not found')


def missing_state_for_nodes(key: str, nodes: Sequence[NodeInfo]) -> list[Status | None]:
    """A batch Filter's answer when its PreFilter data is missing: each node gets its own
    Error (upstream's "node not found" for a node without its Node object)."""
    return [
        Status(Code.ERROR, "node not found") if n.node is None else missing_state(key)
        for n in nodes
    ]


def read_state(state: CycleState, key: str, kind: type[T]) -> T | Status:
    """What a PreFilter/PreScore stored under ``key``, or ``missing_state(key)``."""
    value = state.get(key)
    if isinstance(value, kind):
        return value
    return missing_state(key)
