"""The placement's ranking of the nodes a pod fits, worked on those nodes alone, is the ranking
worked on every node with the others masked out: highest score first, equal scores by table
row, whatever the scores (ties, NaN, -inf) and rows."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kaipolicy.actions.placement import best_first


def every_node_first(scores: np.ndarray, allowed: np.ndarray, rows: np.ndarray, probes: int,
                     in_row_order: bool) -> list[int]:
    """The ranking worked on every node at once (the others masked to -inf), as it was before it
    was worked on the allowed positions alone."""
    masked = np.where(allowed, scores, -np.inf)
    in_row_order = in_row_order or len(rows) < 2
    picked: list[int] = []
    for _ in range(probes):
        pick = int(masked.argmax())
        best = masked[pick]
        if best == -np.inf or np.isnan(best):
            break
        if not in_row_order:
            ties = np.flatnonzero(masked == best)
            pick = int(ties[np.argmin(rows[ties])])
        masked[pick] = -np.inf
        picked.append(pick)
    open_ = allowed.copy()
    open_[picked] = False
    order = np.lexsort((rows, -scores))
    return picked + [int(i) for i in order[open_[order]]]


@pytest.mark.parametrize("seed", range(300))
def test_the_ranking_is_that_of_every_node_masked(seed: int) -> None:
    r = random.Random(seed)
    n = r.choice([1, 2, 5, 40])
    pool = [0.0, 1.0, 2.5, 9.0, float("nan"), -np.inf] if r.random() < 0.3 else [0.0, 1.0, 2.5, 9.0]
    scores = np.array([r.choice(pool) for _ in range(n)])
    allowed = np.array([r.random() < 0.4 for _ in range(n)])
    ascending = r.random() < 0.5
    rows = np.arange(n) if ascending else np.array(r.sample(range(3 * n), n))
    probes = r.choice([0, 1, 3])
    want = every_node_first(scores, allowed, rows, probes, ascending)
    assert list(best_first(scores, allowed, rows, probes, ascending)) == want
    if not (np.isnan(scores[allowed]).any() or np.isneginf(scores[allowed]).any()):
        # highest first, equal scores by row
        assert want == sorted(want, key=lambda i: (-scores[i], rows[i]))


def test_no_allowed_node_ranks_nothing() -> None:
    assert list(best_first(np.array([1.0, 2.0]), np.array([False, False]), np.arange(2), 2)) == []
