"""The vectorised and the node-by-node evaluators place every scenario the same way, and the
order in which a scenario lists its jobs, tasks and nodes does not change the placements."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.errors import KaipolicyError
from kaipolicy.simulate import simulate
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
