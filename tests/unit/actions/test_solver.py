"""The victim solver: statements roll back exactly through the solver's own moves, a failed
solution leaves no trace, victims come out in eviction order, filters drop hopeless scenarios."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kaipolicy.actions.heap import GoHeap
from kaipolicy.actions.solver import JobSolver, feasible_nodes, solve, tasks_to_evict
from kaipolicy.actions.solver.filters import greedy_match
from kaipolicy.actions.solver.victim_queue import KeptLeaves, LeafVictims
from kaipolicy.actions.solver.views import partial_job
from kaipolicy.api.task import Status
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.session import Session
from tests.scenarios.shared import default_bundle
from tests.unit.framework.test_statement import build, state
from tests.unit.helpers import job, node, scenario


def test_rollback_restores_exactly_the_state_taken_at_a_checkpoint_after_any_mix_of_solver_moves() -> None:
    # The solver's own moves: evict a victim, pipeline it back where it was (which only cancels
    # the eviction) or elsewhere, allocate or pipeline pending pods; checkpoints nest per node.
    for seed in range(80):
        rng = random.Random(seed)
        ssn = build()
        stmt = ssn.statement()
        tasks = [t for j in ssn.cluster.jobs.values() for t in j.tasks.values()]
        nodes = list(ssn.cluster.nodes)
        marks = []
        for _ in range(16):
            if rng.random() < 0.35:
                marks.append((stmt.checkpoint(), state(ssn)))
            t = rng.choice(tasks)
            target = ssn.cluster.nodes[rng.choice(nodes)]
            if t.status == Status.RUNNING and not t.request.is_shared:
                stmt.evict(t, "test", {"action": "test"})
            elif t.status == Status.RELEASING and t.is_virtual and not t.request.is_shared:
                where = t.node if rng.random() < 0.5 else target.name
                if ssn.cluster.nodes[where].fits_idle_or_releasing(t) or where == t.node:
                    stmt.pipeline(t, where, False)
            elif t.status == Status.PENDING and not t.request.is_shared:
                if target.fits_idle(t) and rng.random() < 0.5:
                    stmt.allocate(t, target.name)
                elif target.fits_idle_or_releasing(t):
                    stmt.pipeline(t, target.name, False)
            if marks and rng.random() < 0.15:
                cp, snap = marks.pop()
                stmt.rollback(cp)
                assert state(ssn) == snap, f"seed {seed}: rollback to {cp} differs"
        for cp, snap in reversed(marks):
            stmt.rollback(cp)
            assert state(ssn) == snap, f"seed {seed}: rollback to {cp} differs"


def _session(jobs: list, nodes: list) -> Session:  # type: ignore[type-arg]
    queues = [{"name": "q0", "deserved": {"gpu": 0}, "creationOrder": 0},
              {"name": "q1", "deserved": {"gpu": 8}, "creationOrder": 1}]
    return open_session(scenario(nodes, jobs, queues).snapshot(), SchedulerConfig(), default_bundle())


def test_a_solution_that_cannot_be_found_leaves_the_session_as_it_was() -> None:
    jobs = [job(f"r{i}", "q0", tasks=[{"state": "Running", "node": "n0"}]) for i in range(2)]
    jobs.append(job("huge", "q1", perTask={"gpus": 4, "cpuMillis": 1000, "memoryBytes": 10**9}))
    ssn = _session(jobs, [node("n0", gpus=2)])
    before = state(ssn)
    want = ssn.cluster.jobs["huge"]
    victims = [j for j in ssn.cluster.jobs.values() if j.queue == "q0"]
    solver = JobSolver(ssn, "reclaim", feasible_nodes(ssn.node_list, want), lambda: victims, None, "")
    solved, _, _ = solver.solve(want)
    assert not solved
    assert state(ssn) == before


def test_an_elastic_victim_gives_up_one_pod_at_a_time_then_its_gang_whole() -> None:
    jobs = [job("e", "q0", tasks=[{"state": "Running", "node": "n0"}] * 3, minAvailable=2)]
    ssn = _session(jobs, [node("n0", gpus=4)])
    e = ssn.cluster.jobs["e"]
    first, more = tasks_to_evict(ssn, e)
    assert len(first) == 1 and more
    rest = partial_job(e, [t for t in e.tasks.values() if t not in first])
    rest.pod_sets["default"].min_available = 2
    second, more = tasks_to_evict(ssn, rest)
    assert len(second) == 2 and not more


def test_a_victim_of_one_pod_set_gives_up_its_pods_without_asking_the_pod_set_order() -> None:
    # the reference's sort compares no single item, so a pod-set order rule is never asked there
    ssn = _session([job("v", "q0", [{"state": "Running", "node": "n0"}] * 2, minAvailable=2)], [node("n0")])

    def no_order(*_: object) -> tuple[object, ...]:
        raise AssertionError("a pod set's order key was asked of a single pod set")

    ssn.pod_set_key = no_order   # type: ignore[method-assign]
    v = ssn.cluster.jobs["v"]
    given, more = tasks_to_evict(ssn, v)
    assert sorted(t.uid for t in given) == sorted(v.tasks) and not more


def test_a_victims_lone_running_pod_is_given_up_without_asking_the_task_order() -> None:
    # nor is a pod ordered alone: the task order is asked only where two pods are compared
    ssn = _session([job("v", "q0", [{"state": "Running", "node": "n0"}]),
                    job("w", "q0", [{"state": "Running", "node": "n0"}] * 2, minAvailable=1)], [node("n0")])
    asked: list[str] = []
    real = ssn.task_key

    def noting(task: Any, job: Any) -> Any:
        asked.append(task.name)
        return real(task, job)

    ssn.task_key = noting   # type: ignore[method-assign]
    v, w = ssn.cluster.jobs["v"], ssn.cluster.jobs["w"]
    given, more = tasks_to_evict(ssn, v)
    assert given == list(v.tasks.values()) and not more and asked == []
    given, more = tasks_to_evict(ssn, w)
    assert len(given) == 1 and more and sorted(asked) == sorted(t.name for t in w.tasks.values())


def test_the_greedy_match_places_the_largest_need_first_on_the_roomiest_holder() -> None:
    cap = {"a": 8.0, "b": 4.0, "c": 0.0}
    assert greedy_match([4, 4, 4], ["a", "b", "c"], cap.__getitem__)
    assert not greedy_match([8, 8], ["a", "b", "c"], cap.__getitem__)
    assert greedy_match([0, 0], ["c"], cap.__getitem__)


def test_the_filters_count_each_victim_pod_once_recorded_first_and_a_pod_without_a_node_once_it_has_one() -> None:
    from kaipolicy.actions.solver import Scenario
    from kaipolicy.actions.solver.filters import NewVictims

    ssn = _session([job(f"v{i}", "q0", [{"state": "Running", "node": "n0"}]) for i in range(4)], [node("n0")])
    v0, v1, v2, v3 = (next(iter(j.tasks.values())) for j in sorted(ssn.cluster.jobs.values(), key=lambda j: j.name))
    new = NewVictims()
    scenario_ = Scenario("reclaim", ssn.cluster.jobs, ssn.cluster.jobs[v0.job], {}, [])
    scenario_.recorded_tasks, scenario_.potential_tasks = [v0], [v1]
    assert new.of(scenario_) == [v0, v1]
    v3.node = ""
    scenario_.potential_tasks += [v1, v3, v2]
    assert new.of(scenario_) == [v2]
    v3.node = "n0"
    assert new.of(scenario_) == [v3]
    assert new.of(scenario_) == []


class _Job:
    def __init__(self, uid: str) -> None:
        self.uid = uid


def _greatest_first(keys: dict[str, tuple[int, str]]) -> Callable[[_Job, _Job], bool]:
    """The victim queue's comparison: a job is `less` (pops first) when its key is greater."""
    return lambda a, b: keys[b.uid] < keys[a.uid]


def test_a_leaf_as_a_sorted_list_pops_its_victims_as_the_references_heap_does() -> None:
    # keys are distinct (they end with the job's uid); victims come out greatest key first, and a
    # victim pushed back (its pods not yet taken, under a new key) takes its place among the rest
    for seed in range(50):
        rng = random.Random(seed)
        keys: dict[str, tuple[int, str]] = {}
        jobs = [_Job(f"j{i:02d}") for i in range(rng.randint(1, 30))]
        for j in jobs:
            keys[j.uid] = (rng.randint(0, 5), j.uid)
        ascending = sorted(jobs, key=lambda j: keys[j.uid])
        heap: GoHeap[_Job] = GoHeap(_greatest_first(keys))
        heap.items = ascending[::-1]            # as the victim queue loads it: a sorted array is a heap
        leaf = LeafVictims(keys)
        leaf.items = list(ascending)  # type: ignore[arg-type]
        popped_heap, popped_leaf = [], []
        pushed = 0
        while heap.items:
            assert leaf.peek().uid == heap.peek().uid
            a, b = heap.pop(), leaf.pop()
            popped_heap.append(a.uid)
            popped_leaf.append(b.uid)
            if rng.random() < 0.3:
                back = _Job(f"{a.uid}-rest{pushed}")
                pushed += 1
                keys[back.uid] = (rng.randint(0, 5), back.uid)
                heap.push(back)
                leaf.push(back)  # type: ignore[arg-type]
        assert not leaf.items and popped_leaf == popped_heap, f"seed {seed}"


def test_a_kept_leaf_order_is_the_sort_of_its_jobs_whatever_joined_left_or_changed_between_loads() -> None:
    rng = random.Random(7)
    jobs = [_Job(f"j{i:02d}") for i in range(40)]
    counts: dict[str, int] = {}
    kept = KeptLeaves()

    def key_of(j: _Job) -> tuple[int, str]:   # a key that moves with the job's status changes
        return (counts.get(j.uid, 0) * 7919 % 5, j.uid)

    for _ in range(200):
        for j in rng.sample(jobs, rng.randint(0, 4)):
            counts[j.uid] = counts.get(j.uid, 0) + 1
        members = sorted(rng.sample(jobs, rng.randint(1, 30)), key=lambda j: j.uid)
        keys: dict[str, tuple[int, str]] = {}
        got = kept.ascending("leaf", members, key_of, counts, keys)  # type: ignore[arg-type]
        want = sorted(members, key=key_of)
        assert [j.uid for j in got] == [j.uid for j in want]
        assert keys == {j.uid: key_of(j) for j in members}


def test_a_kept_leaf_order_brought_up_from_the_status_log_is_the_sort_of_its_jobs() -> None:
    # loads from a few member lists (the same list object again and again, as one victim source
    # gives them, and now and then another), with the jobs whose counts moved told by a log
    rng = random.Random(11)
    jobs = [_Job(f"j{i:02d}") for i in range(40)]
    counts: dict[str, int] = {}
    log: list[str] = []
    kept = KeptLeaves()

    def key_of(j: _Job) -> tuple[int, str]:
        return (counts.get(j.uid, 0) * 7919 % 5, j.uid)

    def since(at: int) -> set[str] | None:
        return set(log[at:]) if at >= 0 else None

    lists = [sorted(rng.sample(jobs, rng.randint(1, 30)), key=lambda j: j.uid) for _ in range(3)]
    for step in range(300):
        for j in rng.sample(jobs, rng.randint(0, 4)):
            for _ in range(rng.randint(1, 2)):     # changed twice: the count moves, the status is back
                counts[j.uid] = counts.get(j.uid, 0) + 1
                log.append(j.uid)
        members = lists[0] if rng.random() < 0.8 else rng.choice(lists)
        keys: dict[str, tuple[int, str]] = {}
        got = kept.ascending("leaf", members, key_of, counts, keys, since, len(log))  # type: ignore[arg-type]
        want = sorted(members, key=key_of)
        assert [j.uid for j in got] == [j.uid for j in want], f"step {step}"
        assert keys == {j.uid: key_of(j) for j in members}


def test_where_the_preemptor_fits_after_evictions_is_read_as_a_fit_mask_over_every_node_reads_it() -> None:
    # n0 has room for the pending two-GPU pod before any eviction; n1 and n2 hold one GPU each,
    # too few even once emptied. A scenario that touches n0 first leaves n0's fit before unknown:
    # a later scenario touching only n1 must still find that the pod fits on n0, as a mask over
    # every node says.
    from kaipolicy.actions.solver import solve
    nodes = [node("n0", gpus=4), node("n1", gpus=1), node("n2", gpus=1)]
    running = [job(f"v{i}", "q1", tasks=[{"state": "Running", "node": n}]) for i, n in enumerate(["n0", "n1", "n2"])]
    queues = [{"name": "q0", "deserved": {"gpu": 2}}, {"name": "q1", "deserved": {"gpu": 1}}]
    want_spec = job("want", "q0", perTask={"gpus": 2, "cpuMillis": 1000, "memoryBytes": 10**9})
    ssn = open_session(scenario(nodes, [*running, want_spec], queues).snapshot(), SchedulerConfig(),
                       default_bundle())
    want = ssn.cluster.jobs["want"]
    feasible = dict(ssn.cluster.nodes)
    victims = {n: next(iter(ssn.cluster.jobs[f"v{i}"].tasks.values())) for i, n in enumerate(["n0", "n1", "n2"])}
    fast = JobSolver(ssn, "reclaim", feasible_nodes(ssn.node_list, want), list, None, "")
    for touched in (["n0"], ["n1"], ["n2", "n1"], ["n0", "n2"], ["n1"]):
        stmt = ssn.statement()
        tasks = [victims[n] for n in touched]
        for t in tasks:
            stmt.evict(t, "test", {})
        got = solve._preemptor_cannot_fit(fast, want, ssn.node_list, tasks, feasible)
        saved = solve.FITS_FROM_BEFORE
        solve.FITS_FROM_BEFORE = False
        try:
            expected = solve._preemptor_cannot_fit(fast, want, ssn.node_list, tasks, feasible)
        finally:
            solve.FITS_FROM_BEFORE = saved
        stmt.discard()
        assert got == expected, touched
        assert not got   # n0 takes the pod in every one of these scenarios


def test_turns_are_not_read_from_the_keys_when_loading_would_key_a_changed_pending_job_again() -> None:
    # The victims' queue "v" goes first by priority, so the keys settle the turns; but a pending
    # gang of "v" had a pod placed since the pending order was sorted: loading the order would key
    # it again (it could then come before the victim), so the turns are left to the order.
    from kaipolicy.actions.solver import solve
    from kaipolicy.actions.solver.solve import _KeyedOrder, _turns_by_keys
    queues = [{"name": "d", "deserved": {"gpu": 8}},
              {"name": "p", "parent": "d", "deserved": {"gpu": 4}, "priority": 50, "creationOrder": 1},
              {"name": "v", "parent": "d", "deserved": {"gpu": 4}, "priority": 100, "creationOrder": 2}]
    jobs = [job("victim", "v", tasks=[{"state": "Running", "node": "n0"}], createdMinutesAgo=30),
            job("gang", "v", tasks=[{"state": "Pending"}, {"state": "Pending"}], minAvailable=1, createdMinutesAgo=20),
            job("want", "p", createdMinutesAgo=10)]
    ssn = open_session(scenario([node("n0", gpus=1), node("n1", gpus=1)], jobs, queues).snapshot(),
                       SchedulerConfig(), default_bundle())
    ssn.action = "reclaim"
    want, victim, gang = (ssn.cluster.jobs[n] for n in ("want", "victim", "gang"))
    solver = JobSolver(ssn, "reclaim", list(ssn.cluster.nodes.values()), lambda: [victim], None, "")
    solver.pending_order()

    def turns() -> list[str] | None:
        stmt = ssn.statement()
        stmt.evict(next(iter(victim.tasks.values())), "test", {})
        try:
            got = _turns_by_keys(solver, _KeyedOrder(ssn, solver.job_keys), want, {victim.uid: victim, want.uid: want})
        finally:
            stmt.discard()
        return None if got is None else [j.name for j in got]

    assert solve.TURNS_FROM_KEYS and turns() == ["victim", "want"]
    placed = ssn.statement()
    placed.allocate(next(iter(gang.tasks.values())), "n1")
    placed.commit()
    assert gang.has_pending and turns() is None


def test_one_key_settles_a_victim_queue_s_turns_only_when_every_turn_s_key_is_below() -> None:
    # solve._VictimLine.all_below stands for one most_key per turn: it may give up (None) where
    # the turns would settle, but where it settles them every turn's key is below the limit
    ssn = build()
    victims = [ssn.cluster.jobs[f"r{i}"] for i in range(4)]
    stmt = ssn.statement()
    for j in victims:
        for t in j.tasks.values():
            stmt.evict(t, "test")
    share = ssn.shares.queues[victims[0].queue]

    def turn_keys() -> list[list[object]]:
        line = solve._VictimLine(share, victims)
        keys = []
        while line.left():
            keys.append(line.most_key(ssn))
            line.take(ssn)
        return keys

    keys = turn_keys()
    assert keys[0] < keys[-1]          # the queue is judged worse turn by turn
    assert solve._VictimLine(share, victims).all_below(ssn, [float("inf")] * 6) == victims
    assert solve._VictimLine(share, victims).all_below(ssn, keys[-1]) is None
    for limit in keys:
        told = solve._VictimLine(share, victims).all_below(ssn, limit)
        assert told is None or all(k < limit for k in keys)
    stmt.discard()


def test_the_feasible_node_list_is_read_again_only_when_the_feasible_nodes_changed() -> None:
    ssn = open_session(scenario([node(f"n{i}") for i in range(3)], [job("want")]).snapshot(), SchedulerConfig(),
                       default_bundle())
    solver = JobSolver(ssn, "reclaim", ssn.node_list, list, None, "")
    n0, n1, n2 = (ssn.cluster.nodes[f"n{i}"] for i in range(3))
    feasible = {"n0": n0, "n1": n1}
    first = solver.node_list(feasible)
    assert first == [n0, n1] and solver.node_list(feasible) is first
    feasible["n2"] = n2                       # as a scenario adds its victims' node
    solver.feasible_changed()
    grown = solver.node_list(feasible)
    assert grown == [n0, n1, n2] and solver.node_list(feasible) is grown
    del feasible["n2"]                        # and takes it out again
    solver.feasible_changed()
    assert solver.node_list(feasible) == [n0, n1]
    again = {"n0": n0, "n1": n1}              # another partial job's dict of the same nodes
    assert solver.node_list(again) == [n0, n1] and solver.node_list(again) is solver.node_list(feasible)
