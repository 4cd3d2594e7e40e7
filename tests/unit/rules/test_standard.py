"""Vocabulary functions with a vector form give each node what the scalar form gives it alone,
on the fuzz generator's clusters (every node kind, shared GPUs, overcommitted nodes)."""

from __future__ import annotations

import pytest

from kaipolicy.framework.nodetable import NodeVector
from kaipolicy.rules.standard import FUNCTIONS, _binpack_vector
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


@pytest.mark.parametrize("seed", [0, 8, 120])
def test_binpack_over_the_whole_table_gives_what_a_view_of_the_same_rows_gives(seed: int) -> None:
    ssn = session_for(seed)
    nodes = ssn.node_list
    every = ssn.table.view(nodes)
    same_rows = NodeVector(ssn.table, every.index, every=False)    # scored without the table's constants
    for resource in ("gpu", "cpu"):
        assert _binpack_vector(ssn, every, resource).tobytes() == _binpack_vector(ssn, same_rows, resource).tobytes()
