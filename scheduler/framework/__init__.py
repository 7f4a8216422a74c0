"""The public plugin API of kube-py-scheduler: everything a plugin needs, in one import.

A plugin (in-tree or from an installed package) imports from ``scheduler.framework`` only::

    from scheduler.framework import Code, CycleState, FilterPlugin, NodeInfo, PodInfo, Status

**Public** (stable, typed, listed in ``__all__``):

- the extension-point interfaces (``PreEnqueuePlugin`` ... ``PostBindPlugin``), their base
  ``Plugin``, ``EnqueueExtensions`` and the optional ``PreFilterExtensions`` /
  ``ScoreExtensions`` / ``ScoreValuesNormalizer`` protocols, ``SignPlugin`` (a Filter
  or Score plugin signing the pod fields it reads, for opportunistic batching) and
  ``PodGroupPlugin`` (a plugin whose groups of pods are tried in one pass);
- ``Status`` and ``Code`` (unschedulable is a Status, never an exception), ``CycleState``,
  ``read_state``/``missing_state`` (a Pre* step's data read back, with upstream's error);
- the views plugins receive: ``NodeInfo``, ``PodInfo``, ``QueuedPodInfo``, ``NodeScore``,
  ``PreFilterResult``, ``PostFilterResult``, ``MIN_NODE_SCORE``/``MAX_NODE_SCORE``;
- cluster events for requeueing: ``ClusterEvent``, ``ClusterEventWithHint``, ``ActionType``,
  ``EventResource``, ``QueueingHint``, ``QueueingHintFn``, and ``KeyedHint`` (a hint whose
  keys let the queue ask only the waiting pods an event names);
- ``Handle`` (what a plugin reaches besides its args) and the protocols its members return;
- ``Registry``, ``PluginFactory``, ``PluginArgs``, ``PluginOrigin`` for registering plugins
  (out-of-tree packages do it through the ``kube_py_scheduler.plugins`` entry-point group).

**Private**: every submodule (``scheduler.framework.runtime``, ``.builder``,
``.instrumentation``, ``.handle``, ``.types`` ...) and every name not in ``__all__``: the
runtime that runs plugins, metrics plumbing, the scheduling cycle's bookkeeping.  They change
without notice; ``tests/unit/framework/test_public_api.py`` pins this list.

Importing this package stays cheap: it loads the vocabulary, never the runtime, the plugins
or prometheus_client.
"""

from scheduler.framework.batching import SignPlugin
from scheduler.framework.cycle_state import CycleState, missing_state, read_state
from scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    KeyedHint,
    QueueingHint,
    QueueingHintFn,
)
from scheduler.framework.interfaces import (
    ApiClient,
    ApiResponse,
    BindPlugin,
    EnqueueExtensions,
    EventRecorder,
    FilterPlugin,
    Handle,
    NodeInfoLister,
    ObjectLister,
    PermitPlugin,
    Plugin,
    PluginArgs,
    PluginFactory,
    PodGroupPlugin,
    PodNominator,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    ScoreValuesNormalizer,
    WaitingPod,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.registry import PluginOrigin, Registry, extension_points_of
from scheduler.framework.status import Code, Status
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NodeScore,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from scheduler.objects.pod import PodInfo

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "ActionType",
    "ApiClient",
    "ApiResponse",
    "BindPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "CycleState",
    "EnqueueExtensions",
    "EventRecorder",
    "EventResource",
    "FilterPlugin",
    "Handle",
    "KeyedHint",
    "NodeInfo",
    "NodeInfoLister",
    "NodeScore",
    "ObjectLister",
    "PermitPlugin",
    "Plugin",
    "PluginArgs",
    "PluginFactory",
    "PluginOrigin",
    "PodInfo",
    "PodNominator",
    "PodGroupPlugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "QueueingHint",
    "QueueingHintFn",
    "Registry",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "ScoreValuesNormalizer",
    "SignPlugin",
    "Status",
    "WaitingPod",
    "extension_points_of",
    "missing_state",
    "read_state",
]
