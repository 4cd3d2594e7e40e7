"""Scenarios built ahead of their simulation (the recorded victims evicted once per run): a view
reads a scenario as it stood when built, and what building ahead records (a rule error, scenarios
filtered out) counts only where the walk reaches it, as if each scenario were built at its turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaipolicy.actions.solver import Scenario, solve
from kaipolicy.framework import session
from kaipolicy.framework.audit import Audit
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.simulate import simulate, without_timings
from tests.unit.helpers import job, node, scenario

POLICIES = Path(__file__).resolve().parents[3] / "policies"

# A task-order rule that fails on the pods labelled `boom`: the solver asks it for a victim's pods
# when it builds the scenario that victim joins (a victim of two pods: a lone pod is not ordered).
BOOM = ("plugin: boom\nrules:\n  - {name: boom, hook: taskOrder, key: \"'boom' in task.labels ? "
        "[10 / (size(task.name) - size(task.name))] : [0]\"}\n")

# Six victim gangs of two one-GPU pods, one gang per two-GPU node; reclaim takes them newest first,
# so in this node order: n0, n1, n3, n5, n2, n4. The pending gang asks for two whole nodes of pool a
# (n0, n2, n4). Its first pod takes n0 (n0's victim recorded); the second pod's search, with that
# victim evicted once per run, tries n1 (a run of one), n3 and n5 (pool b, a run of two: n5's
# scenario built ahead of n3's simulation), and is solved by n2 at the start of the run that was
# built past it, to n4.
VICTIM_NODES = ["n4", "n2", "n5", "n3", "n1", "n0"]
SOLVED_BY, BUILT_PAST, REACHED = 1, 0, 2     # victims (by index): n2's, n4's, n5's


def _run(tmp_path: Path, boom: set[int], ahead: bool) -> tuple[Any, ...]:
    policy = tmp_path / "boom"
    policy.mkdir(exist_ok=True)
    (policy / "boom.yaml").write_text(BOOM, encoding="utf-8")
    bundle = load_bundle([POLICIES, policy], VOCABULARY)
    nodes = [node(f"n{i}", gpus=2, labels={"pool": "a" if i % 2 == 0 else "b"}) for i in range(6)]
    jobs = [job(f"v{k}", "q0", createdMinutesAgo=100 - k, minAvailable=2,
                tasks=[{"state": "Running", "node": n, **({"labels": {"boom": "1"}} if k in boom else {})}] * 2)
            for k, n in enumerate(VICTIM_NODES)]
    jobs.append(job("want", "q1", tasks=[{"state": "Pending", "nodeSelector": {"pool": "a"}}] * 2, minAvailable=2,
                    perTask={"gpus": 2, "cpuMillis": 1000, "memoryBytes": 10**9}))
    queues = [{"name": "q0", "deserved": {"gpu": 0}}, {"name": "q1", "deserved": {"gpu": 8}}]
    tiers = [{"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "boom"}, {"name": "gpupack"}]}]
    scn = scenario(nodes, jobs, queues, actions=["reclaim"], config={"tiers": tiers})
    saved = solve.RECORDED_EVICTED_ONCE
    solve.RECORDED_EVICTED_ONCE = ahead
    audit = Audit(enabled=True, detail=True)
    try:
        res = simulate(scn, bundle, audit=audit)
    finally:
        solve.RECORDED_EVICTED_ONCE = saved
    tally = {what: res.last.tally[what, "reclaim"] for what in ("simulated", "filtered", "built ahead")}
    return without_timings(res.report()), audit.records, tally


@pytest.fixture
def held() -> Iterator[list[int]]:
    """How many rule errors each building ahead held back."""
    counts: list[int] = []
    original = session.Session.held_errors

    def counting(self: session.Session, mark: int) -> Any:
        out = original(self, mark)
        counts.append(len(out))
        return out

    session.Session.held_errors = counting  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        session.Session.held_errors = original  # type: ignore[method-assign]


def test_the_search_is_walked_in_runs_built_ahead_and_decides_as_scenario_by_scenario(tmp_path: Path) -> None:
    report, records, tally = _run(tmp_path, set(), True)
    plain = _run(tmp_path, set(), False)
    assert tally["built ahead"] == 1 and plain[2]["built ahead"] == 0
    assert (report, records, {**tally, "built ahead": 0}) == plain
    releasing = {t["job"]: t["node"] for t in report["tasks"] if t["status"] == "Releasing"}
    assert releasing == {"v5": "n0", "v1": "n2"}    # n0's victim, then n2's
    assert tally["simulated"] == 5


def test_a_rule_error_of_a_scenario_built_past_the_solution_is_not_recorded(tmp_path: Path, held: list[int]) -> None:
    report, records, tally = _run(tmp_path, {BUILT_PAST}, True)
    assert any(held), "the failing rule was asked while building ahead"
    assert report["ruleErrors"] == [] and not [r for r in records if r["kind"] == "error"]
    assert (report, records, tally["filtered"]) == (*_run(tmp_path, {BUILT_PAST}, False)[:2], tally["filtered"])
    assert tally["filtered"] == _run(tmp_path, {BUILT_PAST}, False)[2]["filtered"]


def test_a_rule_error_of_a_scenario_built_ahead_is_recorded_at_its_turn(tmp_path: Path, held: list[int]) -> None:
    ahead = _run(tmp_path, {REACHED}, True)
    assert any(held)
    plain = _run(tmp_path, {REACHED}, False)
    assert ahead[0]["ruleErrors"] and ahead[:2] == plain[:2]
    assert [r for r in ahead[1] if r["kind"] == "error"]


def test_a_view_reads_the_scenario_as_it_stood_when_built() -> None:
    scn = scenario([node("n0", gpus=4), node("n1", gpus=4)],
                   [job("e", "q0", tasks=[{"state": "Running", "node": "n0"}] * 3),
                    job("f", "q0", tasks=[{"state": "Running", "node": "n0"}, {"state": "Running", "node": "n1"}]),
                    job("want", "q0")])
    cluster = scn.snapshot()
    jobs = cluster.jobs
    e, f = jobs["e"], jobs["f"]
    e_pods, f_pods = list(e.tasks.values()), list(f.tasks.values())
    live = Scenario("reclaim", jobs, jobs["want"], {}, [])
    live.add_potential(e, e_pods[:1])
    view = live.view()
    live.add_potential(e, e_pods[1:])
    live.add_potential(f, f_pods)
    assert [(v.job.name, v.tasks) for v in view.victims] == [("e", e_pods[:1])]
    assert view.potential_tasks == e_pods[:1] and view.latest_potential_victim is e
    assert view.tasks_on_nodes(["n0"]) == e_pods[:1]
    assert [(v.job.name, v.tasks) for v in live.victims] == [("e", e_pods), ("f", f_pods)]
    assert live.tasks_on_nodes(["n0"]) == [*e_pods, *f_pods]
    later = live.view()
    assert later.tasks_on_nodes(["n1"]) == f_pods and later.group_of(f_pods[1]) is live.group_of(f_pods[1])
    with pytest.raises(ValueError, match="latest victim's nodes"):
        view.tasks_on_nodes(["n1"])


@pytest.mark.parametrize("ahead", [True, False])
def test_a_failure_building_a_scenario_past_the_solution_is_never_met(tmp_path: Path, ahead: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from kaipolicy.actions.solver import victim_queue

    original = victim_queue.tasks_to_evict

    def failing(ssn: Any, view: Any) -> Any:
        if view.name in failing_on:
            raise RuntimeError(f"building failed at {view.name}")
        return original(ssn, view)

    monkeypatch.setattr(victim_queue, "tasks_to_evict", failing)
    failing_on = {f"v{BUILT_PAST}"}
    report, _, tally = _run(tmp_path, set(), ahead)
    releasing = {t["job"] for t in report["tasks"] if t["status"] == "Releasing"}
    assert releasing == {"v5", "v1"} and tally["simulated"] == 5
    failing_on = {f"v{REACHED}"}
    with pytest.raises(RuntimeError, match=f"building failed at v{REACHED}"):
        _run(tmp_path, set(), ahead)
