"""The vectorised and the node-by-node evaluators place every scenario the same way, the order in
which a scenario lists its jobs, tasks and nodes does not change the placements, and scoring only
the nodes a pod fits changes no decision."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kaipolicy.actions import placement
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.errors import KaipolicyError
from kaipolicy.framework import session
from kaipolicy.framework.config import DEFAULT_PLUGINS
from kaipolicy.framework.fits import fits_mask
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz import reclaim_pressure as pressure
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


#: node placement's arguments the carrying test draws from: bin-packing's bounds move under
#: either, and spreading makes the node a pod landed on score lower for the next
PLACEMENTS = ({"gpu": "binpack", "cpu": "binpack"}, {"gpu": "spread", "cpu": "spread"},
              {"gpu": "binpack", "cpu": "spread"})


def _with_placement(doc: dict[str, Any], arguments: dict[str, str]) -> dict[str, Any]:
    plugins = [{"name": name, "arguments": arguments if name == "nodeplacement" else args}
               for name, args in DEFAULT_PLUGINS]
    return {**doc, "config": {"tiers": [{"plugins": plugins}]}}


def _gang_runs(seed: int) -> dict[str, Any]:
    """Room on several nodes and pending gangs of alike pods (whole GPUs, fractions, GPU memory,
    CPU only) to place in it: runs that choose among many nodes."""
    r = random.Random(seed)
    doc = pressure_scenario(seed)
    memory = r.choice((16000, 40000))
    nodes = [pressure._Node(f"m{i}", r.choice((2, 4, 8)), memory, r.choice((16000, 64000)), 256 * 2**30)
             for i in range(r.randint(3, 8))]
    running = pressure._running(r, [q["name"] for q in doc["queues"]], nodes)
    pending = [{"name": f"gang{j}", "queue": r.choice(doc["queues"])["name"], "priority": 100,
                "createdMinutesAgo": j + 1, "perTask": pressure._request(r, memory),
                "minAvailable": size, "tasks": [{"state": "Pending"}] * size}
               for j, size in enumerate(r.choices((2, 3, 4, 6, 8), k=r.randint(1, 4)))]
    return {**doc, "actions": r.choice((["allocate"], ["allocate", "reclaim"])), "nodes": [n.spec for n in nodes],
            "jobs": [*running, *pending]}


@pytest.mark.parametrize("start", range(0, 120, 40))
def test_carrying_a_runs_scores_to_its_next_pod_decides_alike(start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pods of one pod set placed one after another onto one node set (a gang, a victim's gang
    placed back) carry their fit masks and scores to the next pod: only the node the last one
    landed on is asked again, and everything is worked out afresh when another node changed or
    bin-packing's bounds moved. What is carried is what working it out would give, bit for bit,
    and every decision is the same as when each pod works them out."""
    seen: Counter[str] = Counter()
    carried, rescored = placement._Run.carried, session.Session.rescored

    def checked(run: Any, ssn: Any, view: Any, task: Any) -> Any:
        before = run.scope if run.request is not None else None
        fits, scores, scope = carried(run, ssn, view, task)
        if fits is not None:
            seen["fits carried"] += 1
            seen["bounds moved"] += before is not None and scope != before
            assert np.array_equal(fits, fits_mask(view, task, with_releasing=True))
        if scores is not None:
            seen["scores carried"] += 1
            fresh = ssn.node_scores(task, ssn.cluster.jobs[task.job], view.nodes, fits)
            others = fits.copy()
            others[run.pos] = False      # scored again by `rescored` when it still fits
            assert fresh[others].tobytes() == scores[others].tobytes()
        return fits, scores, scope

    def rescored_checked(ssn: Any, task: Any, job: Any, nodes: Any, view: Any, scores: Any, pos: int) -> Any:
        out = rescored(ssn, task, job, nodes, view, scores, pos)
        fresh = ssn.node_scores(task, job, nodes, np.ones(len(nodes), dtype=bool))
        assert out is None or out[pos].tobytes() == fresh[pos].tobytes()
        return out

    monkeypatch.setattr(placement._Run, "carried", checked)
    monkeypatch.setattr(session.Session, "rescored", rescored_checked)
    for seed in range(start, start + 40):
        for made in (pressure_scenario, _gang_runs):
            doc = _with_placement(made(seed), PLACEMENTS[seed % len(PLACEMENTS)])
            monkeypatch.setattr(placement, "SCORES_CARRIED", True)
            fast = decided(doc)
            monkeypatch.setattr(placement, "SCORES_CARRIED", False)
            assert decided(doc) == fast, (made.__name__, seed)
    assert seen["fits carried"] > seen["scores carried"] > 0
    assert seen["bounds moved"] > 0
