"""Bin-packing's scores over a view of the node table, with what they compare against kept
between calls: over every node the scores themselves, over some nodes the least and most free."""

from __future__ import annotations

import numpy as np

from kaipolicy.builtins.binpack import having, score_of, scores
from kaipolicy.framework.nodetable import NodeVector

Counted = tuple[np.ndarray, "np.ndarray | None"]


def over_view(node: NodeVector, free_col: str, alloc_col: str, resource: str) -> np.ndarray:
    """`scores` over a view's nodes, of the resource whose free and allocatable columns are named;
    for a view of some of the scored nodes (its `scope`), against the whole set's least and most
    free (the same operations on each node's own values, so the same bits)."""
    span, counted = _set_bounds(node, free_col, alloc_col)
    if span is None:
        return np.zeros(len(node))
    if not node.every:
        alloc = np.asarray(getattr(node, alloc_col), dtype=float)
        return scores(np.asarray(getattr(node, free_col), dtype=float), alloc, having(alloc), span)
    free = np.asarray(getattr(node, free_col), dtype=float)
    table = node.table
    lo, hi = span
    # Kept while the emptiest and fullest counted nodes stay as they are: then only the nodes a
    # task landed on or left change score. Only the latest bounds' array is kept.
    key = ("binpack", resource, lo, hi)
    last = table.constant(("binpack-bounds", resource), dict)
    if last.get("key") not in (None, key):
        table.forget(last["key"])
    last["key"] = key
    mask = counted[0]
    return table.derived(key, lambda: scores(free, getattr(node, alloc_col), counted, span),
                         lambda n: score_of(getattr(n, free_col), bool(mask[n.index]), lo, hi))


def span(node: NodeVector, free_col: str, alloc_col: str) -> tuple[float, float] | None:
    """The least and most free counted node of the view's node set (its `scope` for a part):
    what `over_view` scores each node against."""
    return _set_bounds(node, free_col, alloc_col)[0]


def _set_bounds(node: NodeVector, free_col: str, alloc_col: str) -> tuple[tuple[float, float] | None, Counted]:
    """`_kept_bounds` of the whole node set a view is scored in (its `scope` for a part)."""
    return _kept_bounds(node.scope if node.scope is not None else node, free_col, alloc_col)


def _kept_bounds(nodes: NodeVector, free_col: str, alloc_col: str) -> tuple[tuple[float, float] | None, Counted]:
    """`bounds` over the view's nodes, kept with their list and brought up to date on the rows
    changed since, and the nodes counted (those of the list that have the resource, as a mask
    over every node and its positions, None when every node counts): they never change."""
    table = nodes.table
    counted: Counted | None = nodes.kept.get(("has", alloc_col))
    if counted is None:
        has = having(table.column(alloc_col))
        if nodes.every:
            counted = has
        else:
            mask = np.zeros(len(table.nodes), dtype=bool)
            mask[nodes.index] = True
            mask &= has[0]
            counted = (mask, np.flatnonzero(mask))
        nodes.kept["has", alloc_col] = counted
    return table.extremes(("binpack-span", free_col), table.read_only(free_col), counted, nodes.kept), counted
