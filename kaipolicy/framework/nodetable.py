"""Node fields as numpy arrays, so node-level rules evaluate over all candidate nodes at once.

The session marks a node dirty whenever a task lands on or leaves it; `view()` refreshes the
dirty rows and hands out arrays for the requested node indices under the same attribute
names the scalar rules read from a `Node`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kaipolicy.api.node import Node


class NodeVector:
    """Attribute access like a Node, but every attribute is an array over the chosen nodes."""

    def __init__(self, table: NodeTable, idx: np.ndarray) -> None:
        self._table = table
        self._idx = idx
        self.nodes = [table.nodes[i] for i in idx]

    def __getattr__(self, attr: str) -> Any:
        arr = self._table.column(attr)[self._idx]
        setattr(self, attr, arr)
        return arr

    def __len__(self) -> int:
        return len(self._idx)


class NodeTable:
    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = list(nodes)
        for i, n in enumerate(self.nodes):
            n.index = i
        self._columns: dict[str, np.ndarray] = {}
        self._dirty: set[int] = set()

    def mark(self, node: Node) -> None:
        if self._columns:
            self._dirty.add(node.index)

    def column(self, attr: str) -> np.ndarray:
        self._refresh()
        col = self._columns.get(attr)
        if col is None:
            values = [getattr(n, attr) for n in self.nodes]
            col = _array(values)
            self._columns[attr] = col
        return col

    def _refresh(self) -> None:
        if not self._dirty:
            return
        for i in self._dirty:
            node = self.nodes[i]
            for attr, col in self._columns.items():
                col[i] = getattr(node, attr)
        self._dirty.clear()

    def view(self, nodes: Sequence[Node]) -> NodeVector:
        self._refresh()
        return NodeVector(self, np.fromiter((n.index for n in nodes), dtype=np.intp, count=len(nodes)))


def _array(values: list[Any]) -> np.ndarray:
    if values and all(isinstance(v, bool) for v in values):
        return np.array(values, dtype=bool)
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.float64)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr
