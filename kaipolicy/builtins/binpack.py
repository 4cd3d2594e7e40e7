"""The nodeplacement plugin's bin-packing score over arrays of nodes: fullest first, relative
to the emptiest and fullest of the nodes that have the resource at all."""

from __future__ import annotations

import numpy as np


def scores(free: np.ndarray, allocatable: np.ndarray,
           nodes: tuple[np.ndarray, np.ndarray | None] | None = None,
           span: tuple[float, float] | None = None) -> np.ndarray:
    """9 x (1 - (free - min) / (max - min)), min and max over nodes that have the resource
    (`nodes`, from `having`, and `span`, from `bounds`, when the caller knows them)."""
    counted, rows = nodes if nodes is not None else having(allocatable)
    if span is None:
        span = bounds(free, (counted, rows))
    if span is None:
        return np.zeros(free.shape)
    lo, hi = span
    if hi == 0:
        return np.zeros(free.shape)
    if lo == hi:
        return np.where(counted, 9.0, 0.0)
    # 9 x (1 - (free - lo) / (hi - lo)), in place: the same operations in the same order
    out: np.ndarray = free - lo
    out /= hi - lo
    np.subtract(1, out, out=out)
    out *= 9.0
    if rows is not None:
        out[~counted] = 0.0
    return out


def having(allocatable: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Which nodes have the resource, and their positions (None when every node has it)."""
    counted = np.asarray(allocatable, dtype=float) != 0
    return counted, None if counted.all() else np.flatnonzero(counted)


def score_of(free: float, counted: bool, lo: float, hi: float) -> float:
    """`scores` for one node, given the emptiest and fullest of the counted nodes: the same
    operations in the same order, so the same bits."""
    if hi == 0:
        return 0.0
    if lo == hi:
        return 9.0 if counted else 0.0
    if not counted:
        return 0.0
    return (1 - (free - lo) / (hi - lo)) * 9.0


def bounds(free: np.ndarray, nodes: tuple[np.ndarray, np.ndarray | None]) -> tuple[float, float] | None:
    """The least and most free of the nodes that have the resource (None when none has it)."""
    _, rows = nodes
    if rows is not None and len(rows) == 0:
        return None
    values = free if rows is None else free.take(rows)   # take: far cheaper than a boolean mask
    # (the ufuncs' reductions are what ndarray.min and max call, without their Python wrapper)
    return float(np.minimum.reduce(values)), float(np.maximum.reduce(values))
