"""The bin-packing score over arrays is the plugin's formula, bit for bit, whatever nodes lack
the resource."""

from __future__ import annotations

import numpy as np
import pytest

from kaipolicy.builtins import binpack


def _binpack_as_written(free: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    """The bin-packing score as the plugin defines it, with a boolean mask and np.where."""
    counted = allocatable != 0
    if not counted.any():
        return np.zeros(free.shape)
    having = free[counted]
    lo, hi = having.min(), having.max()
    if hi == 0:
        return np.zeros(free.shape)
    if lo == hi:
        return np.where(counted, 9.0, 0.0)
    return np.where(counted, 9.0 * (1 - (free - lo) / (hi - lo)), 0.0)


@pytest.mark.parametrize(("free", "allocatable"), [
    ([0.0, 3.5, 8.0, 1.25], [8, 8, 8, 8]),            # every node has the resource
    ([0.0, 3.5, 8.0, 0.0], [8, 8, 8, 0]),             # one node without it
    ([0.0, 0.0, 0.0], [0, 0, 0]),                     # none has it
    ([2.0, 2.0, 5.0], [4, 4, 0]),                     # the ones that have it are equal
    ([0.0, 0.0, 7.0], [4, 4, 0]),                     # the ones that have it are all full
    ([-0.5, 0.1, 1e-9, 7.999999], [8, 8, 8, 8]),      # overcommitted and nearly equal values
    ([float(i % 7) / 3 for i in range(1523)], [8 * (i % 5 != 0) for i in range(1523)]),
])
def test_binpack_scores_are_the_plugins_formula_bit_for_bit(free: list[float], allocatable: list[int]) -> None:
    f, a = np.array(free), np.array(allocatable, dtype=float)
    assert binpack.scores(f, a).tobytes() == _binpack_as_written(f, a).tobytes()
