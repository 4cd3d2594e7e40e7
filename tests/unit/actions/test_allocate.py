"""allocate: gangs start whole or not at all, pipelining, elastic growth, queue gates, fit errors."""

from __future__ import annotations

from typing import Any

from kaipolicy.simulate import simulate
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


def outcome(scn: Any) -> dict[str, Any]:
    return simulate(scn, default_bundle()).report()


def statuses(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {t["name"]: (t["status"], t["node"]) for t in report["tasks"]}


def test_a_gang_that_does_not_fit_whole_stays_pending_and_binds_nothing() -> None:
    rep = outcome(scenario([node("n0", gpus=2)], [job("g", minAvailable=3, tasks=[{"state": "Pending"}] * 3)]))
    assert {s for s, _ in statuses(rep).values()} == {"Pending"}
    assert rep["binds"] == 0
    fit = rep["jobs"][0]["fitError"]
    assert "Resources were found for 2 pods while 3 are required for gang scheduling" in fit


def test_a_gang_that_fits_binds_every_pod() -> None:
    rep = outcome(scenario([node("n0", gpus=2), node("n1", gpus=2)],
                           [job("g", minAvailable=3, tasks=[{"state": "Pending"}] * 3)]))
    assert {s for s, _ in statuses(rep).values()} == {"Binding"}
    assert rep["binds"] == 3


def test_a_job_that_can_only_wait_for_releasing_gpus_is_pipelined_not_bound() -> None:
    rep = outcome(scenario([node("n0", gpus=1)], [
        job("old", tasks=[{"state": "Releasing", "node": "n0"}], deleted=True),
        job("new", tasks=[{"state": "Pending"}]),
    ]))
    assert statuses(rep)["new-0"] == ("Pipelined", "n0")
    assert (rep["binds"], rep["pipelined"]) == (0, 1)


def test_if_one_pod_of_a_gang_is_pipelined_the_whole_gang_is() -> None:
    rep = outcome(scenario([node("n0", gpus=1), node("n1", gpus=1)], [
        job("old", tasks=[{"state": "Releasing", "node": "n1"}], deleted=True),
        job("g", minAvailable=2, tasks=[{"state": "Pending"}] * 2),
    ]))
    assert {s for n, (s, _) in statuses(rep).items() if n.startswith("g-")} == {"Pipelined"}
    assert rep["binds"] == 0


def test_an_elastic_job_grows_beyond_its_minimum_while_room_remains() -> None:
    rep = outcome(scenario([node("n0", gpus=3)], [job("e", minAvailable=1, tasks=[{"state": "Pending"}] * 5)]))
    assert sum(1 for s, _ in statuses(rep).values() if s == "Binding") == 3


def test_a_queue_limit_keeps_a_job_pending_with_the_queue_named_in_the_reason() -> None:
    rep = outcome(scenario([node("n0")], [job("j", tasks=[{"state": "Pending"}] * 2)],
                           queues=[{"name": "q0", "deserved": {"gpu": 1}, "limit": {"gpu": 1}}]))
    assert rep["binds"] == 0
    assert "q0 quota has reached the allowable limit of GPUs" in rep["jobs"][0]["fitError"]


def test_a_non_preemptible_job_may_not_go_over_its_queue_quota() -> None:
    rep = outcome(scenario([node("n0")], [job("np", priority=125, preemptible=False, tasks=[{"state": "Pending"}] * 2)],
                           queues=[{"name": "q0", "deserved": {"gpu": 1}}]))
    assert rep["binds"] == 0
    assert "Non-preemptible workload is over quota" in rep["jobs"][0]["fitError"]


def test_fractions_share_one_gpu_before_opening_another() -> None:
    rep = outcome(scenario([node("n0", gpus=2)], [
        job(f"f{i}", perTask={"gpus": 0.5, "cpuMillis": 100, "memoryBytes": 10}) for i in range(2)]))
    groups = {tuple(t["gpuGroups"]) for t in rep["tasks"]}
    assert len(groups) == 1
    assert rep["nodes"][0]["idleGpus"] == 1


def test_higher_priority_jobs_of_a_queue_go_first() -> None:
    rep = outcome(scenario([node("n0", gpus=1)], [job("low", priority=50, createdMinutesAgo=10),
                                                   job("high", priority=100, createdMinutesAgo=1)]))
    assert statuses(rep)["high-0"][0] == "Binding"
    assert statuses(rep)["low-0"][0] == "Pending"


def test_a_started_job_records_its_start_time() -> None:
    rep = outcome(scenario([node("n0")], [job("j")]))
    assert rep["jobs"][0]["lastStartSecondsAgo"] == 0
