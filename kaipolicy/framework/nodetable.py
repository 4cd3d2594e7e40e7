"""Node fields as numpy arrays, so node-level rules evaluate over all candidate nodes at once.

The session marks a node dirty whenever a task lands on or leaves it; `view()` refreshes the
dirty rows and hands out arrays for the requested node indices under the same attribute
names the scalar rules read from a `Node`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Hashable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from kaipolicy.api.node import Node
from kaipolicy.api.resources import Request


class NodeVector:
    """Attribute access like a Node, but every attribute is an array over the chosen nodes."""

    #: The nodes being scored when this view holds only some of them (`part_of`): what a
    #: node-set-relative function (bin-packing's emptiest and fullest node) compares against.
    #: None: the view is the whole set.
    scope: NodeVector | None = None

    def __init__(self, table: NodeTable, idx: np.ndarray, every: bool = False,
                 kept: dict[Hashable, Any] | None = None) -> None:
        self.table = table
        self._idx = idx
        self.every = every      # idx is every table row in order: the columns are used as they are
        # what is worked out for these very nodes and kept while the table keeps their list
        self.kept: dict[Hashable, Any] = {} if kept is None else kept
        # fit masks computed on this view, by (request identity, with releasing): the view lives
        # only until a node changes, and placement and the fits.* rules ask for the same ones
        self.fits: dict[tuple[int, bool], tuple[Request, np.ndarray]] = {}

    @property
    def index(self) -> np.ndarray:
        """Table rows of the chosen nodes (rows are in node-name order)."""
        return self._idx

    @cached_property
    def nodes(self) -> list[Node]:
        """The chosen nodes, built once per view (a plain property would rebuild it per access)."""
        all_nodes = self.table.nodes
        return [all_nodes[i] for i in self._idx.tolist()]

    def node(self, i: int) -> Node:
        """The i-th chosen node (without building the whole list)."""
        return self.table.nodes[int(self._idx[i])]

    def rows_ascending(self) -> bool:
        """Whether the chosen nodes are in table order (known once per node list)."""
        if self.every:
            return True
        known = self.kept.get("rows ascending")
        if known is None:
            idx = self._idx
            known = self.kept["rows ascending"] = len(idx) < 2 or bool((idx[1:] > idx[:-1]).all())
        return bool(known)

    def part_of(self, rows: np.ndarray) -> NodeVector:
        """The view's nodes at positions `rows` (ascending), scored against the whole view."""
        part = NodeVector(self.table, self._idx[rows])
        part.scope = self.scope if self.scope is not None else self
        return part

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self.every:
            # the live column itself, read-only: the view is dropped before any node changes
            arr = self.table.read_only(attr)
        else:
            arr = self.table.column(attr)[self._idx]
        setattr(self, attr, arr)
        return arr

    def __len__(self) -> int:
        return len(self._idx)


#: Marks the change log holds before it starts over.
KEPT_CHANGES = 4096
#: Node lists whose rows are remembered at once.
KEPT_LISTS = 8
#: Changed rows from which a refresh assigns each (numeric) column once rather than row by row.
BATCHED_ROWS = 8
#: Node lists read last whose rows a new list that extends or shortens one of them reuses.
RECENT_LISTS = 4
#: Changed rows past which a derived array is recomputed whole rather than row by row.
PATCH_ROWS = 16
#: Marks past which the changed rows are not told apart: a simulation marks its few nodes again
#: and again (each eviction, placement and undo), so many marks are often few rows.
PATCH_MARKS = 256
#: Node attributes no task changes: never re-read when a node is marked dirty. (Its conditions and
#: taints are the snapshot's all session long.)
STATIC = frozenset({"name", "labels", "gpu_memory", "gpu_memory_synced", "mig_enabled", "mig_strategy",
                    "unschedulable", "gpu_count", "cpu_only", "allocatable_gpus", "allocatable_cpu_millis",
                    "allocatable_memory_bytes", "ready", "not_ready_reason", "tainted"})


class NodeTable:
    """The session's nodes in name order, with numpy columns of their attributes built on first
    use and kept current row by row."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = list(nodes)
        for i, n in enumerate(self.nodes):
            n.index = i
        self._every_row = np.arange(len(self.nodes), dtype=np.intp)    # the rows of `nodes` itself
        self._every_row.setflags(write=False)
        self._columns: dict[str, np.ndarray] = {}
        self._changing: dict[str, np.ndarray] = {}    # the columns a task can change
        # what a refresh reads of a changed node, all those columns at once, and the columns
        self._row: tuple[Callable[[Node], Any], list[np.ndarray], bool] | None = None
        self._read_only: dict[str, np.ndarray] = {}
        self._dirty: set[int] = set()
        # per node list asked for (by identity): its rows, whether it is every row in order, and
        # its view while no node changes; a few lists are kept (the solver alternates between them)
        self._lists: dict[int, tuple[Sequence[Node], np.ndarray, bool, dict[Hashable, Any]]] = {}
        self._views: dict[int, tuple[Sequence[Node], NodeVector]] = {}
        self._recent: list[tuple[Sequence[Node], np.ndarray]] = []   # the lists read last, newest last
        # rows marked, in order, since change number `_base`: what derived arrays catch up on
        self._changes: list[int] = []
        self._base = 0
        self._derived: dict[Hashable, tuple[np.ndarray, int]] = {}
        self._constants: dict[Hashable, Any] = {}

    def mark(self, node: Node) -> None:
        if self._views:
            for _, view in self._views.values():
                if view.every:
                    # its live columns wait for a refresh now: a view held past the change reads
                    # them again (which refreshes), never before the refresh
                    attrs = view.__dict__
                    for attr in self._read_only:
                        attrs.pop(attr, None)
            self._views.clear()
        if len(self._changes) >= KEPT_CHANGES:
            # forget the log (derived arrays older than it are recomputed whole)
            self._base += len(self._changes)
            self._changes = []
        self._changes.append(node.index)
        if self._columns:
            self._dirty.add(node.index)

    def derived(self, key: Hashable, whole: Callable[[], np.ndarray], row: Callable[[Node], Any],
                patch_rows: int = PATCH_ROWS, patch_marks: int = PATCH_MARKS) -> np.ndarray:
        """An array over every node in table order that `whole()` computes at once and `row(node)`
        gives for one node: kept between calls under `key` and brought up to date on the rows
        changed since (all at once past `patch_rows` changed rows or `patch_marks` marks, see
        changed_since). The caller gets its own copy."""
        kept = self._derived.get(key)
        rows = self.changed_since(kept[1], patch_rows, patch_marks) if kept is not None else None
        if kept is None or rows is None:
            values = whole()
        else:
            values = kept[0]
            for i in rows:
                values[i] = row(self.nodes[i])
        self._derived[key] = (values, self.change_count())
        return values.copy()

    def extremes(self, key: Hashable, values: np.ndarray, counted: tuple[np.ndarray, np.ndarray | None],
                 store: dict[Hashable, Any]) -> tuple[float, float] | None:
        """The least and greatest of `values` (an array over every node, current) at the counted
        rows (`counted`: a mask and its positions, None when every row counts, as
        `binpack.having` gives them), or None when none is counted. Kept under `key` and brought
        up to date on the rows changed since, which is exact (a minimum and a maximum only
        compare); worked out whole again when a row holding an extreme moved inward, on a NaN,
        or past many changes. `store`: where it is kept (a view's `kept`, with its node list)."""
        mask, rows = counted
        kept = store.get(key)
        changed = self.changed_since(kept[4]) if kept is not None else None
        if kept is not None and changed is not None:
            lo, hi, lo_row, hi_row, _ = kept
            for i in changed:
                if rows is not None and not mask[i]:
                    continue
                v = float(values[i])
                if math.isnan(v) or (i == lo_row and v > lo) or (i == hi_row and v < hi):
                    break
                if v < lo:
                    lo, lo_row = v, i
                if v > hi:
                    hi, hi_row = v, i
            else:
                store[key] = (lo, hi, lo_row, hi_row, self.change_count())
                return lo, hi
        taken = values if rows is None else values.take(rows)
        if len(taken) == 0:
            store.pop(key, None)
            return None
        low, high = int(np.argmin(taken)), int(np.argmax(taken))
        lo, hi = float(taken[low]), float(taken[high])
        if math.isnan(lo) or math.isnan(hi):
            store.pop(key, None)   # a NaN: asked again whole each time
            return lo, hi
        if rows is not None:
            low, high = int(rows[low]), int(rows[high])
        store[key] = (lo, hi, low, high, self.change_count())
        return lo, hi

    def forget(self, key: Hashable) -> None:
        """Drop a derived array (its caller will not ask for it again)."""
        self._derived.pop(key, None)

    def per_node(self, key: Hashable, row: Callable[[Node], float]) -> np.ndarray:
        """`derived` for a float each node gives alone: the whole array is `row` over every node,
        so it is patched row by row up to a quarter of the nodes changed, however many marks
        the log holds (telling the rows apart is a C loop; a whole recompute is `row` on every
        node)."""
        return self.derived(key, lambda: np.array([row(n) for n in self.nodes], dtype=float), row,
                            max(PATCH_ROWS, len(self.nodes) // 4), KEPT_CHANGES)

    def change_count(self) -> int:
        """How many times nodes were marked changed so far (a position in the change log)."""
        return self._base + len(self._changes)

    def changed_since(self, count: int, most_rows: int = PATCH_ROWS, most_marks: int = PATCH_MARKS) -> list[int] | None:
        """The rows marked changed since `change_count()` was `count`, each once; None when they
        are more than `most_rows`, or the marks since more than `most_marks` (too many to
        recompute one by one), or the log has started over since."""
        since = self.change_count() - count
        if count < self._base or since > most_marks:
            return None
        if since == 1:
            return [self._changes[-1]]     # (what most placements leave)
        rows = list(dict.fromkeys(self._changes[count - self._base:]))
        return rows if len(rows) <= most_rows else None

    def constant(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """A value of the nodes that no task changes (e.g. the most GPUs a node has), computed once."""
        if key not in self._constants:
            self._constants[key] = compute()
        return self._constants[key]

    def column(self, attr: str) -> np.ndarray:
        self._refresh()
        col = self._columns.get(attr)
        if col is None:
            values = [getattr(n, attr) for n in self.nodes]
            col = _array(values)
            self._columns[attr] = col
            if attr not in STATIC:
                self._changing[attr] = col
                self._row = None
        return col

    def read_only(self, attr: str) -> np.ndarray:
        """The live column as a read-only array (one per column: it sees every refresh)."""
        view = self._read_only.get(attr)
        if view is not None and not self._dirty:
            return view     # made before, and no row waits for a refresh
        col = self.column(attr)
        if view is None:
            view = self._read_only[attr] = col.view()
            view.flags.writeable = False
        return view

    def _refresh(self) -> None:
        if not self._dirty:
            return
        if not self._changing:
            self._dirty.clear()
            return
        row = self._row
        if row is None:
            # (the changing column's name twice: attrgetter of several names gives a tuple)
            names = list(self._changing) if len(self._changing) > 1 else [*self._changing] * 2
            cols = list(self._changing.values())
            row = self._row = (operator.attrgetter(*names), cols, all(c.dtype != object for c in cols))
        get, cols, numeric = row
        nodes = self.nodes
        if numeric and len(self._dirty) >= BATCHED_ROWS:
            # many rows (a run's evictions undone): one assignment per column
            rows = list(self._dirty)
            values = np.array([get(nodes[i]) for i in rows], dtype=np.float64)
            for j, col in enumerate(cols):
                col[rows] = values[:, j]
        else:
            for i in self._dirty:
                for col, value in zip(cols, get(nodes[i])):
                    col[i] = value
        self._dirty.clear()

    def view(self, nodes: Sequence[Node]) -> NodeVector:
        """The nodes as arrays; the same view again while no node has changed. A list is known
        by its identity: lists handed to the table must not change afterwards."""
        key = id(nodes)
        kept = self._views.get(key)
        if kept is not None and kept[0] is nodes:
            return kept[1]    # (an id alone is not enough: a list dropped from _lists may be gone and its id reused)
        known = self._lists.get(key)
        if known is None or known[0] is not nodes:
            idx = self._rows_of(nodes)
            every = len(idx) == len(self.nodes) and bool((idx == np.arange(len(idx))).all())
            if len(self._lists) >= KEPT_LISTS:
                self._lists.clear()
            known = self._lists[key] = (nodes, idx, every, {})
        self._refresh()
        view = NodeVector(self, known[1], known[2], known[3])
        if view.every:
            # the live read-only columns handed out so far, as reading each would hand it out now
            # (the table was just refreshed): the view starts with them
            view.__dict__.update(self._read_only)
        self._views[key] = (nodes, view)
        return view

    def _rows_of(self, nodes: Sequence[Node]) -> np.ndarray:
        """The table rows of `nodes`. A list that starts with a list read lately, or with which
        one starts, reuses that list's rows: the solver's feasible nodes grow a node at a time
        and shrink back, between lists of other nodes. Comparing the common part is a C loop
        over identities; reading each node's row is not."""
        if nodes is self.nodes:
            return self._every_row   # (the table's own list: kept apart, it pushes out no other)
        n = len(nodes)
        rows = None
        # (lists only: their slices compare element by element, nodes by identity)
        for last, last_rows in reversed(self._recent if isinstance(nodes, list) else ()):
            k = len(last)
            if not k or not n or last[0] is not nodes[0]:
                continue
            if n >= k and nodes[:k] == last:
                extra = np.fromiter((node.index for node in nodes[k:]), dtype=np.intp, count=n - k)
                rows = np.concatenate((last_rows, extra))
                break
            if n < k and last[:n] == nodes:
                rows = last_rows[:n].copy()
                break
        if rows is None:
            rows = np.fromiter((node.index for node in nodes), dtype=np.intp, count=n)
        if isinstance(nodes, list):
            if len(self._recent) >= RECENT_LISTS:
                del self._recent[0]
            self._recent.append((nodes, rows))
        return rows

    def whole(self) -> NodeVector:
        """Every node, in table order."""
        return self.view(self.nodes)


def distinct(values: np.ndarray) -> tuple[Sequence[int], np.ndarray]:
    """np.unique's first index of each distinct value and, per value, its place among them; one
    value everywhere (most clusters' device sizes and resource kinds) is told by a comparison
    instead of a sort."""
    if len(values) and bool((values == values[0]).all()):
        return (0,), np.zeros(len(values), dtype=np.intp)
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    return first.tolist(), inverse


def _array(values: list[Any]) -> np.ndarray:
    if values and all(isinstance(v, bool) for v in values):
        return np.array(values, dtype=bool)
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.float64)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr
