"""The vectorised and the node-by-node evaluators place every scenario the same way, the order in
which a scenario lists its jobs, tasks and nodes does not change the placements, and scoring only
the nodes a pod fits changes no decision."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.errors import KaipolicyError
from kaipolicy.framework import session
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz.reclaim_pressure import scenario as pressure_scenario
from tests.scenarios.shared import SCENARIOS, default_bundle, scenario_id

ALLOCATE = sorted((SCENARIOS / "kai" / "allocate").glob("*.yaml"))


def placements(doc: dict[str, Any], vectorize: bool = True) -> dict[str, tuple[str, str | None]] | str:
    try:
        res = simulate(scenario_from_doc(doc, "<test>"), default_bundle(), vectorize=vectorize)
    except KaipolicyError as e:
        return f"error: {e}"
    report = res.report()
    assert not report["ruleErrors"], report["ruleErrors"]
    return {t["name"]: (t["status"], t["node"]) for t in report["tasks"]}


@pytest.mark.parametrize("path", ALLOCATE, ids=scenario_id)
def test_vector_and_scalar_evaluation_place_alike(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert placements(doc, vectorize=True) == placements(yaml.safe_load(path.read_text()), vectorize=False)


@pytest.mark.parametrize("path", ALLOCATE, ids=scenario_id)
def test_shuffled_input_order_gives_the_same_placements(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    shuffled = yaml.safe_load(path.read_text())
    rng = random.Random(7)
    rng.shuffle(shuffled["jobs"])
    rng.shuffle(shuffled["nodes"])
    for job in shuffled["jobs"]:
        # unnamed tasks are named by position, so only shuffle when every task is named
        if all("name" in t for t in job["tasks"]):
            rng.shuffle(job["tasks"])
    assert placements(doc) == placements(shuffled)


def decided(doc: dict[str, Any]) -> Any:
    """The report without timings: every placement, pipeline, eviction and fit error."""
    try:
        res = simulate(scenario_from_doc(doc, "<test>"), default_bundle())
    except KaipolicyError as e:
        return f"error: {e}"
    return without_timings(res.report())


@pytest.mark.parametrize("start", range(0, 120, 40))
def test_scoring_only_the_nodes_that_fit_decides_alike(start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The eviction solver scores some nodes (the feasible ones) for pods that fit few of them:
    only those are scored then, and every decision is the same as when all are scored. These
    clusters are small, so here the nodes a pod fits are scored alone however many they are."""
    monkeypatch.setattr(session, "PART_SHARE", 1.0)
    scored_alone = 0
    part_scores = session._part_scores

    def counted(*args: Any) -> Any:
        nonlocal scored_alone
        out = part_scores(*args)
        scored_alone += out is not None
        return out

    monkeypatch.setattr(session, "_part_scores", counted)
    for seed in range(start, start + 40):
        doc = pressure_scenario(seed)
        monkeypatch.setattr(session, "PARTS_SCORED", True)
        fast = decided(doc)
        monkeypatch.setattr(session, "PARTS_SCORED", False)
        assert decided(doc) == fast, seed
    assert scored_alone > 0
