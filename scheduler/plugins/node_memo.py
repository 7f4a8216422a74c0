"""Per-node memo of PreFilter work, valid while a node's NodeInfo generation is unchanged.

Replicas of one workload ask the same question of the cluster cycle after cycle ("which pods
match these terms, per node?"), and between two cycles only the node the previous replica went
to has changed.  Remembering each node's answer together with the NodeInfo generation it was
computed from turns a walk over every pod into a walk over nodes with one dict lookup each.
Every change to a NodeInfo (pods, labels) takes a fresh generation, so a stale answer is never
used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from scheduler.framework.node_info import NodeInfo

T = TypeVar("T")


class NodeMemo(Generic[T]):
    """``query key -> {node name: (generation, answer)}``, LRU-bounded in query keys."""

    __slots__ = ("_tables", "_max_queries")

    def __init__(self, max_queries: int = 64) -> None:
        self._tables: OrderedDict[Hashable, dict[str, tuple[int, T]]] = OrderedDict()
        self._max_queries = max_queries

    def table(self, key: Hashable) -> dict[str, tuple[int, T]]:
        """The raw ``{node name: (generation, answer)}`` table of one query (for hot loops)."""
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = {}
            if len(self._tables) > self._max_queries:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return table

    def answers(
        self, key: Hashable, node_infos: Iterable[NodeInfo], compute: Callable[[NodeInfo], T]
    ) -> Iterable[tuple[NodeInfo, T]]:
        """Each node's answer, computing only for nodes changed since it was last asked."""
        table = self.table(key)
        for node_info in node_infos:
            name = node_info.name
            entry = table.get(name)
            if entry is not None and entry[0] == node_info.generation:
                yield node_info, entry[1]
            else:
                answer = compute(node_info)
                table[name] = (node_info.generation, answer)
                yield node_info, answer

    def clear(self) -> None:
        self._tables.clear()
