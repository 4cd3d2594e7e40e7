"""The simulation report: what it says about jobs and cycles, whatever the scenario."""

from __future__ import annotations

import gc

import pytest

from kaipolicy import simulate as simulate_module
from kaipolicy.api.task import Task
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz.generate import scenario
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import collections_noted, noted


@pytest.mark.parametrize("seed", [*range(0, 60, 3), 556])
def test_only_a_job_with_pods_still_waiting_reports_a_fit_error(seed: int) -> None:
    report = simulate(scenario_from_doc(scenario(seed), f"<seed {seed}>"), default_bundle()).report()
    waiting = {t["job"] for t in report["tasks"] if t["status"] in ("Pending", "Gated")}
    assert {j["name"] for j in report["jobs"] if j["fitError"]} <= waiting


def test_two_runs_differ_only_in_their_timings() -> None:
    runs = [simulate(scenario_from_doc(scenario(7), "<seed 7>"), default_bundle()).report() for _ in range(2)]
    assert without_timings(runs[0]) == without_timings(runs[1])
    assert all("seconds" in c for c in runs[0]["perCycle"])


def _tracked_tasks() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Task))


def test_cycle_after_cycle_only_the_last_cycles_model_is_kept() -> None:
    # The cluster model is all reference cycles, freed only by the cyclic collector; with it
    # switched off (as a long run's rare full passes leave it), a run of cycles must still not
    # pile up the clusters of the cycles before the last.
    gc.collect()
    doc = {**scenario(7), "cycles": 6}
    pods = sum(len(j["tasks"]) for j in doc["jobs"])
    gc.disable()
    try:
        before = _tracked_tasks()
        result = simulate(scenario_from_doc(doc, "<seed 7>"), default_bundle())
        kept = _tracked_tasks() - before
    finally:
        gc.enable()
    assert result.report()["cycles"] == 6
    assert pods <= kept <= 2 * pods      # the last cycle's cluster, and the scenario's own copy at most


def test_the_collector_waits_until_each_cycle_is_released(monkeypatch: pytest.MonkeyPatch) -> None:
    # resumed before the release, the collector's first pass walks the whole snapshot and session
    # of a cycle still alive; the last cycle is kept for the report, the ones before are released
    events: list[str] = []
    scn = scenario_from_doc({**scenario(7), "cycles": 3}, "<seed 7>")
    noted(monkeypatch, simulate_module, "release", events, "released")
    noted(monkeypatch, scn, "snapshot", events, "snapshot")
    with collections_noted(events):
        result = simulate(scn, default_bundle())
    assert result.report()["cycles"] == 3 and events.count("released") == 2
    last = len(events) - events[::-1].index("released")
    assert "collected" not in events[events.index("snapshot"):last]
