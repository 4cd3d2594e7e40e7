"""A simulation's turns read one by one from the queue keys as each comes (`solve.TURNS_ONE_BY_ONE`):
where the keys cannot tell a turn, everything the simulation did is undone and its turns are
popped from the order instead, from the same state. Either way a cycle decides, reports and
audits exactly what it decides with every shortcut off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kaipolicy.actions.solver import solve
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.framework.audit import Audit
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz import reclaim_pressure
from tests.scenarios.shared import default_bundle
from tests.scenarios.test_eviction_shortcuts import _bench, alike, observed, switched
from tests.unit.helpers import job, node, scenario

POLICIES = Path(__file__).resolve().parents[3] / "policies"

# A predicate that fails on the pods labelled `boom`: asked for a victim's pod wherever it could
# go back, it records a rule error per node asked (and denies the node).
BOOM = ("plugin: boom\nrules:\n  - {name: boom, hook: predicate, deny: \"'boom' in task.labels && "
        "10 / (size(task.name) - size(task.name)) > 0\"}\n")


@contextmanager
def forced(bounds_fail: bool, undecided_after: int | None) -> Iterator[dict[str, int]]:
    """`bounds_fail`: the bounds of `_turns_by_keys` never settle the turns, so every simulation
    whose queues allow it reads its turns one by one; `undecided_after`: that many turns are told,
    then the next is not (as when two keys are equal). Counts the turns told and the simulations
    sent back to the order after some job was placed."""
    seen = {"told": 0, "undone after a placement": 0}
    most_key, step, undo = solve._VictimLine.most_key, solve._Stepwise.next, solve._stepwise
    one_line = solve.ONE_LINE_AT_ONCE

    def never_below(self: Any, ssn: Any) -> list[object]:
        return [float("inf")] * 6

    def next_turn(self: solve._Stepwise) -> Any:
        told = getattr(self, "told", 0)
        if undecided_after is not None and told >= undecided_after:
            return solve.UNDECIDED
        self.told = told + 1
        seen["told"] += 1
        return step(self)

    def watched(solver: Any, scenario: Any, stmt: Any, *args: Any) -> Any:
        start = stmt.checkpoint()
        placed = []
        original = solve.allocate_job

        def counting(*a: Any, **k: Any) -> bool:
            placed.append(1)
            return original(*a, **k)
        solve.allocate_job = counting
        try:
            result = undo(solver, scenario, stmt, *args)
        finally:
            solve.allocate_job = original
        if result is solve.UNDECIDED:
            assert stmt.checkpoint() == start   # rolled back to where the turns began
            if placed:
                seen["undone after a placement"] += 1
        return result

    if bounds_fail:
        solve._VictimLine.most_key = never_below
        solve.ONE_LINE_AT_ONCE = False      # its one key would settle what most_key no longer does
    solve._Stepwise.next = next_turn
    solve._stepwise = watched
    try:
        yield seen
    finally:
        solve._VictimLine.most_key, solve._Stepwise.next, solve._stepwise = most_key, step, undo
        solve.ONE_LINE_AT_ONCE = one_line


def pressure_run(seed: int) -> Any:
    return lambda audit: simulate(scenario_from_doc(reclaim_pressure.scenario(seed), "<test>"), default_bundle(),
                                  audit=audit)


def test_clusters_under_reclaim_pressure_are_where_turns_get_read_one_by_one() -> None:
    # the comparisons with the shortcuts off mean something only if the turns are read one by one
    # there, the preemptor's turn coming before some victims' too
    read = 0
    for seed in range(100):
        res = simulate(scenario_from_doc(reclaim_pressure.scenario(seed), "<test>"), default_bundle())
        read += res.last.tally["turns from keys, one by one", "reclaim"] > 0
    assert read >= 10


@pytest.mark.parametrize("undecided_after", [0, 1, 2])
def test_a_simulation_sent_back_to_the_order_decides_as_the_order_would_have(undecided_after: int) -> None:
    # every simulation that can reads its turns one by one, and gives up after `undecided_after`
    # of them: what it did is undone, and its turns are popped from the order
    differ = []
    with forced(True, undecided_after) as seen:
        fast = {seed: observed(pressure_run(seed)) for seed in range(40)}
    with switched(False):
        for seed, got in fast.items():
            if not alike(got, observed(pressure_run(seed))):
                differ.append(seed)
    assert differ == []
    assert seen["told"] >= (20 if undecided_after else 0)
    if undecided_after:
        assert seen["undone after a placement"] >= 5


def exactly(run: Any) -> str:
    """A cycle's report and detailed audit log as they are written, GPU group ids and the rules'
    refusal counts included."""
    audit = Audit(enabled=True, detail=True)
    res = run(audit)
    return json.dumps([without_timings(res.report()), audit.records], sort_keys=True)


def openb_run(offset: int) -> Any:
    """Every 25th node and pod of the openb trace from `offset` on, allocated and then reclaimed:
    victims with GPU fractions, whose placements open and choose shared GPU groups."""
    openb = _bench("openb")
    nodes = openb.read_csv("openb_node_list_all_node.csv")
    pods = sorted(openb.read_csv("openb_pod_list_default.csv"), key=lambda p: int(p["creation_time"]))
    doc = openb.scenario_doc(nodes[offset::25], pods[offset::25], ["allocate", "reclaim"])
    return lambda audit: simulate(scenario_from_doc(doc, "<test>"), default_bundle(), audit=audit)


@pytest.mark.parametrize("undecided_after", [1, 2, 3])
def test_turns_given_up_leave_the_cycle_exactly_as_popping_them_from_the_start(undecided_after: int) -> None:
    # Against the same cycle with TURNS_ONE_BY_ONE off (every other shortcut on): not only the same
    # decisions but the same text, so the same GPU group ids minted and each refusal counted alike.
    # A placement undone leaves the pods it placed their grant and GPU groups (as the reference's
    # roll-back does) and the session a count of groups minted: both are put back.
    runs = [*(openb_run(offset) for offset in range(4)), *(pressure_run(seed) for seed in range(20))]
    with forced(True, undecided_after) as seen:
        given_up = [exactly(run) for run in runs]
    saved = solve.TURNS_ONE_BY_ONE
    solve.TURNS_ONE_BY_ONE = False
    try:
        differ = [k for k, run in enumerate(runs) if exactly(run) != given_up[k]]
    finally:
        solve.TURNS_ONE_BY_ONE = saved
    assert differ == []
    assert seen["undone after a placement"] >= 20


def _boom_run(tmp_path: Path) -> Any:
    policy = tmp_path / "boom"
    policy.mkdir(exist_ok=True)
    (policy / "boom.yaml").write_text(BOOM, encoding="utf-8")
    bundle = load_bundle([POLICIES, policy], VOCABULARY)
    # one-GPU victims of q0 (no share), two per node, every other one labelled boom; the pending
    # job of q1 asks for a whole node. n3's one GPU takes no preemptor, but a victim can go there
    nodes = [*(node(f"n{i}", gpus=2) for i in range(3)), node("n3", gpus=1)]
    jobs = [job(f"v{k}", "q0", createdMinutesAgo=100 - k,
                tasks=[{"state": "Running", "node": f"n{k // 2}", **({"labels": {"boom": "1"}} if k % 2 == 0 else {})}])
            for k in range(6)]
    jobs.append(job("want", "q1", perTask={"gpus": 2, "cpuMillis": 1000, "memoryBytes": 10**9}))
    queues = [{"name": "q0", "deserved": {"gpu": 0}}, {"name": "q1", "deserved": {"gpu": 6}}]
    tiers = [{"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "boom"}, {"name": "gpupack"}]}]
    scn = scenario(nodes, jobs, queues, actions=["reclaim"], config={"tiers": tiers})
    return lambda audit: simulate(scn, bundle, audit=audit)


@pytest.mark.parametrize("undecided_after", [None, 1, 2])
def test_rule_errors_of_turns_read_one_by_one_are_recorded_once(tmp_path: Path, undecided_after: int | None) -> None:
    # a victim going back asks the failing predicate: each error is audited once, where the order's
    # simulation records it, whether the turns read one by one end the simulation or give up
    run = _boom_run(tmp_path)
    with forced(True, undecided_after) as seen:
        fast = observed(run)
    with switched(False):
        plain = observed(run)
    errors = [r for r in plain[0][1] if r.get("kind") == "error"]
    assert errors and seen["told"] > 0
    assert alike(fast, plain)
    if undecided_after:
        assert seen["undone after a placement"] > 0


class _Named:
    def __init__(self, name: str) -> None:
        self.name = self.uid = name


def _told(p_leaf: list[str], victims: list[list[str]], keys: dict[str, list[float]]) -> list[str]:
    """The turns a _Stepwise tells, each line's key read from `keys` by the name of the job heading
    it (J and K take no part: each comes out of its line when that line is below the others);
    UNDECIDED ends the list."""
    jobs = {name: _Named(name) for name in [*p_leaf, *(n for line in victims for n in line)]}
    lines = [[jobs[n] for n in line] for line in [p_leaf, *victims]]
    taking_part = {n for n in jobs if n not in ("J", "K")}
    turns = solve._Stepwise(None, [(None, line) for line in lines], taking_part)  # type: ignore[arg-type]
    for line in turns.lines:
        line.key = lambda ssn, line=line: keys[line.jobs[line.next].name]  # type: ignore[method-assign]
    out: list[str] = []
    while (job := turns.next()) is not None:
        if job is solve.UNDECIDED:
            return [*out, "UNDECIDED"]
        out.append(job.name)
    return out


def test_each_turn_goes_to_the_line_whose_key_is_below_every_others() -> None:
    # the preemptor P's leaf holds J ahead of it: J's key is its leaf's until J comes out
    keys = {"J": [0, 5.0], "P": [0, 3.0], "v1": [0, 4.0], "v2": [0, 6.0], "w1": [0, 2.0]}
    assert _told(["J", "P"], [["v1", "v2"]], keys) == ["v1", "P", "v2"]    # v1 before J; J before v2
    assert _told(["J", "P"], [["v1", "v2"], ["w1"]], keys) == ["w1", "v1", "P", "v2"]
    keys["J"] = [0, 1.0]
    assert _told(["J", "P"], [["v1", "v2"]], keys) == ["P", "v1", "v2"]    # J and then P before v1
    # the last to take part takes its turn without a comparison
    assert _told(["P"], [], keys) == ["P"]
    # a pending job K ahead of the victim in its leaf: the leaf's key is K's while K heads it
    keys.update({"K": [0, 4.0], "v1": [0, 2.0], "P": [0, 3.0]})
    assert _told(["P"], [["K", "v1"]], keys) == ["P", "v1"]
    keys["K"] = [0, 1.0]
    assert _told(["P"], [["K", "v1"]], keys) == ["v1", "P"]


def test_a_turn_is_not_told_where_two_lines_keys_are_equal_but_the_last_element() -> None:
    # the last element (the queues' dominance, a partial order) is left out: the heap's shape
    # would decide between equal keys, so the order must be popped
    keys = {"J": [0, 5.0], "P": [0, 3.0], "v1": [0, 4.0], "v2": [0, 2.0], "v3": [0, 5.0], "w": [0, 4.0]}
    assert _told(["J", "P"], [["v2", "v3"]], keys) == ["v2", "UNDECIDED"]   # v2 before J, then v3 ties J
    assert _told(["P"], [["v1"], ["w"]], keys) == ["P", "UNDECIDED"]
    keys["P"] = [0, 4.0]
    assert _told(["P"], [["v1"]], keys) == ["UNDECIDED"]


def test_a_simulation_given_up_leaves_every_pod_and_node_as_before_it() -> None:
    # A victim asking GPU memory goes back to a node whose devices are larger: it is granted a
    # smaller share of a device and opens a new group there. Giving the simulation up undoes the
    # placement, the grant and the group, and the count of groups minted.
    from kaipolicy.actions.solver.solve import JobSolver, _KeyedOrder
    from kaipolicy.cycle import open_session
    from kaipolicy.framework.config import SchedulerConfig
    from tests.unit.framework.test_statement import state
    jobs = [job("victim", "v", tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["g0"]}],
                perTask={"gpuMemoryMiB": 20000, "cpuMillis": 1000, "memoryBytes": 10**9}),
            job("want", "p")]
    queues = [{"name": "p", "deserved": {"gpu": 1}}, {"name": "v", "deserved": {"gpu": 1}}]
    nodes = [node("n0", gpus=1, gpuMemoryMiB=40000), node("n1", gpus=1, gpuMemoryMiB=80000)]
    ssn = open_session(scenario(nodes, jobs, queues).snapshot(), SchedulerConfig(), default_bundle())
    ssn.action = "reclaim"
    victim, want = ssn.cluster.jobs["victim"], ssn.cluster.jobs["want"]
    (task,) = victim.tasks.values()
    solver = JobSolver(ssn, "reclaim", list(ssn.cluster.nodes.values()), lambda: [victim], None, "")
    stmt = ssn.statement()
    stmt.evict(task, "test", {})
    before = state(ssn), task.accepted, list(task.gpu_groups), ssn.groups_minted
    start = stmt.checkpoint()
    turns = solve._Stepwise(ssn, [(ssn.shares.queues["p"], [want]), (ssn.shares.queues["v"], [victim])],
                            {want.uid, victim.uid})
    told = iter([victim, solve.UNDECIDED])
    turns.next = lambda: next(told)  # type: ignore[method-assign]
    scn = type("S", (), {"preemptor": want})()
    got = solve._stepwise(solver, scn, stmt, [ssn.cluster.nodes["n1"]], [task], {victim.uid: victim, want.uid: want},
                          _KeyedOrder(ssn, solver.job_keys), turns)
    assert got is solve.UNDECIDED and stmt.checkpoint() == start
    assert (state(ssn), task.accepted, list(task.gpu_groups), ssn.groups_minted) == before
