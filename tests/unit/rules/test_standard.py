"""Vocabulary functions with a vector form give each node what the scalar form gives it alone,
on the fuzz generator's clusters (every node kind, shared GPUs, overcommitted nodes)."""

from __future__ import annotations

import numpy as np
import pytest

from kaipolicy.framework.nodetable import NodeVector
from kaipolicy.rules.standard import FUNCTIONS, _binpack_scores, _binpack_vector
from tests.unit.framework.test_fits import requests, session_for

CLASSES = [(0.0, 1000.0), (0.2, 4000.0), (0.5, 500.0), (1.0, 8000.0), (2.0, 1000.0)]


@pytest.mark.parametrize("seed", [*range(0, 60, 4), 120, 241])
def test_fragment_functions_agree_node_by_node(seed: int) -> None:
    ssn = session_for(seed)
    nodes = ssn.node_list
    view = ssn.table.view(nodes)
    before, after = FUNCTIONS["gpu.fragments"], FUNCTIONS["gpu.fragmentsAfter"]
    for gpus, millis in CLASSES:
        assert before.vector_impl(view, gpus, millis).tolist() == [before.impl(n, gpus, millis) for n in nodes]
        for task in requests(ssn)[:6]:
            assert after.vector_impl(task, view, gpus, millis).tolist() == \
                [after.impl(task, n, gpus, millis) for n in nodes]


def test_fragment_functions_over_a_subset_of_nodes_give_those_nodes() -> None:
    ssn = session_for(8)
    nodes = ssn.node_list[1::2]
    got = FUNCTIONS["gpu.fragments"].vector_impl(ssn.table.view(nodes), 0.5, 1000.0).tolist()
    assert got == [FUNCTIONS["gpu.fragments"].impl(n, 0.5, 1000.0) for n in nodes]


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
    assert _binpack_scores(f, a).tobytes() == _binpack_as_written(f, a).tobytes()


@pytest.mark.parametrize("seed", [0, 8, 120])
def test_binpack_over_the_whole_table_gives_what_a_view_of_the_same_rows_gives(seed: int) -> None:
    ssn = session_for(seed)
    nodes = ssn.node_list
    every = ssn.table.view(nodes)
    same_rows = NodeVector(ssn.table, every.index, every=False)    # scored without the table's constants
    for resource in ("gpu", "cpu"):
        assert _binpack_vector(ssn, every, resource).tobytes() == _binpack_vector(ssn, same_rows, resource).tobytes()
