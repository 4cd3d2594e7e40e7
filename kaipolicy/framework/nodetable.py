"""Node fields as numpy arrays, so node-level rules evaluate over all candidate nodes at once.

The session marks a node dirty whenever a task lands on or leaves it; `view()` refreshes the
dirty rows and hands out arrays for the requested node indices under the same attribute
names the scalar rules read from a `Node`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kaipolicy.api.node import Node
from kaipolicy.api.task import Task


class NodeVector:
    """Attribute access like a Node, but every attribute is an array over the chosen nodes."""

    def __init__(self, table: NodeTable, idx: np.ndarray) -> None:
        self._table = table
        self._idx = idx

    @property
    def index(self) -> np.ndarray:
        """Table rows of the chosen nodes (rows are in node-name order)."""
        return self._idx

    @property
    def nodes(self) -> list[Node]:
        nodes = [self._table.nodes[i] for i in self._idx]
        self.__dict__["nodes"] = nodes
        return nodes

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
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
        self._last_list: Sequence[Node] | None = None
        self._last_idx = np.zeros(0, dtype=np.intp)

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
        if nodes is self._last_list:
            idx = self._last_idx
        else:
            idx = np.fromiter((n.index for n in nodes), dtype=np.intp, count=len(nodes))
            self._last_list, self._last_idx = nodes, idx
        return NodeVector(self, idx)


def _array(values: list[Any]) -> np.ndarray:
    if values and all(isinstance(v, bool) for v in values):
        return np.array(values, dtype=bool)
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.float64)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def fits_mask(view: NodeVector, task: Task, with_releasing: bool) -> np.ndarray:
    """Node.fits_idle / fits_idle_or_releasing for every node of the view, vectorised for
    plain requests (CPU-only or whole GPUs); shared and MIG requests ask each node."""
    req = task.request
    if req.is_shared or req.mig:
        check: Callable[[Node], bool] = (
            (lambda n: n.fits_idle_or_releasing(task)) if with_releasing else (lambda n: n.fits_idle(task)))
        return np.fromiter((check(n) for n in view.nodes), dtype=bool, count=len(view))
    if not with_releasing and req.is_empty:
        return np.ones(len(view), dtype=bool)
    cpu: np.ndarray  # NodeVector columns are numeric arrays, looked up by name at run time
    mem: np.ndarray
    gpus: np.ndarray
    pods: np.ndarray
    if with_releasing:
        cpu, mem, gpus, pods = view.free_cpu_millis, view.free_memory_bytes, view.free_gpus, view.free_pods
    else:
        cpu, mem, gpus, pods = view.idle_cpu_millis, view.idle_memory_bytes, view.idle_gpus, view.idle_pods
    return (cpu >= req.cpu) & (mem >= req.memory) & (pods >= 1) & (gpus + 1e-9 >= req.gpus)
