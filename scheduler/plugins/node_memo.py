"""Per-node memo of PreFilter work, valid while a node's NodeInfo ``plugin_generation`` is
unchanged;
and ``NodeChanges``, which tells state kept per node across cycles which nodes changed.

Replicas of one workload ask the same question of the cluster cycle after cycle ("which pods
match these terms, per node?"), and between two cycles only the node the previous replica went
to has changed.  Remembering each node's answer together with the NodeInfo
``plugin_generation`` it was computed from turns a walk over every pod into a walk over nodes
with one dict lookup each.  Every change to a NodeInfo a plugin can read (pods, labels) takes
a fresh one, so a stale answer is never used; a pod swapped for a version that reads alike
(``reads_alike``: a binding's confirmation) keeps it, so answers computed from what
``reads_alike`` compares survive it.  An answer that reads pod fields ``reads_alike`` ignores
(status.startTime, conditions) must not be kept here: key it on ``generation``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

from scheduler.framework.node_info import NodeInfo, changed_nodes

T = TypeVar("T")


class NodeMemo(Generic[T]):
    """``query key -> {node name: (plugin_generation, answer)}``, LRU-bounded in query keys."""

    __slots__ = ("_tables", "_max_queries")

    def __init__(self, max_queries: int = 64) -> None:
        self._tables: OrderedDict[Hashable, dict[str, tuple[int, T]]] = OrderedDict()
        self._max_queries = max_queries

    def table(self, key: Hashable) -> dict[str, tuple[int, T]]:
        """The ``{node name: (plugin_generation, answer)}`` table of one query: the caller's
        loop looks a node up, uses the answer when the generation is the node's, else
        computes and stores it (inline, the loops being the plugins' hottest)."""
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = {}
            if len(self._tables) > self._max_queries:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return table

    def clear(self) -> None:
        self._tables.clear()


class NodeChanges:
    """Which nodes of a list changed since the previous call, for one piece of state kept
    per node across cycles (per-domain counts, pair sums, gang members per node).

    When the list is the snapshot's node list and the snapshot keeps a change log
    (``change_serial``, ``list_version``, ``changed_positions_since``), the answer costs
    in proportion to the nodes that changed: between two cycles that is the node the
    previous pod went to.  Otherwise every node's plugin_generation is compared with the one seen
    last time (``changed_nodes``: C loops, but still a pass over every node).
    """

    __slots__ = ("_known", "_list", "_list_version", "_serial")

    def __init__(self) -> None:
        self._known: dict[str, int] = {}  # node name -> plugin_generation seen
        # The snapshot list (and its version and change serial) seen by the previous call,
        # when that call looked at the snapshot's whole list.
        self._list: Sequence[NodeInfo] | None = None
        self._list_version: Any = None
        self._serial: Any = None

    def since_last(
        self, node_infos: Sequence[NodeInfo], *, snapshot: Any = None
    ) -> tuple[list[int], list[str]]:
        """``(changed, removed)``: the indexes of ``node_infos`` that are new or changed since
        the previous call, and the names of the nodes that have left ``node_infos`` since.
        ``snapshot`` is the lister ``node_infos`` came from, when it is its ``list()``."""
        known = self._known
        logged = self._from_log(node_infos, snapshot)
        if logged is not None:
            for i in logged:
                node_info = node_infos[i]
                known[node_info.name] = node_info.plugin_generation
            return logged, []
        names, changed = changed_nodes(node_infos, known)
        for i in changed:
            known[names[i]] = node_infos[i].plugin_generation
        removed: list[str] = []
        if len(known) != len(names):  # known holds every name of node_infos, and more
            current = set(names)
            removed = [n for n in known if n not in current]
            for name in removed:
                del known[name]
        return changed, removed

    def _from_log(self, node_infos: Sequence[NodeInfo], snapshot: Any) -> list[int] | None:
        since = getattr(snapshot, "changed_positions_since", None)
        if since is None or snapshot.list() is not node_infos:
            self._list = None
            return None
        previous, version, serial = self._list, self._list_version, self._serial
        self._list = node_infos
        self._list_version = snapshot.list_version
        self._serial = snapshot.change_serial
        if previous is not node_infos or version != self._list_version:
            return None
        positions = since(serial)
        if positions is None:
            return None
        if len(positions) > 1:
            positions = sorted(set(positions))
        return list(positions)
