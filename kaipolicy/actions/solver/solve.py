"""The victim solver shared by reclaim, preempt and consolidation.

`JobSolver` grows the pending job one task at a time; for each partial job it walks the
scenarios of a `ScenarioBuilder` and hands each to `solve_scenario`, which evicts the victims
recorded by the previous (smaller) solution, then the potential victims node by node (a
checkpoint per node), and re-places the partial job and the victims in pipeline-only mode. A
victim that fits back has only moved; one left Releasing is a real victim. The validator must
accept the scenario, and the solution of the whole job is the Statement left applied.
"""

from __future__ import annotations

import bisect
import enum
import math
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from kaipolicy import timelimit
from kaipolicy.actions import ordering
from kaipolicy.actions.heap import GoHeap, SortedByKey
from kaipolicy.actions.ordering import JobFilter, JobsByQueue, SortedJobs, _QueueNode
from kaipolicy.actions.placement import allocate_job
from kaipolicy.actions.solver import placing, proofs
from kaipolicy.actions.solver.evict import evict_all
from kaipolicy.actions.solver.proofs import (
    EXACT_BELOW,
    ReclaimRefusals,
    placed_alike,
    placed_back_alike,
    victim_pending,
)
from kaipolicy.actions.solver.scenario import AnyScenario, Scenario, ScenarioView
from kaipolicy.actions.solver.victim_queue import KeptLeaves, ScenarioBuilder, VictimQueue, VictimSource
from kaipolicy.actions.solver.views import partial_job
from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.queue import RESOURCES
from kaipolicy.api.resources import Request, RequestType
from kaipolicy.api.task import ACTIVE_ALLOCATED, Status, Task
from kaipolicy.builtins import capacity
from kaipolicy.builtins.fairshare import QueueShare, request_quantities
from kaipolicy.errors import StatementError
from kaipolicy.framework.fits import fits_mask
from kaipolicy.framework.outcome import Outcome
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement
from kaipolicy.framework.tasks import init_request_quantities, tasks_to_allocate

Validator = Callable[[Job, AnyScenario], Outcome]

#: A simulation stops once the preemptor and every victim job have had their turn (False: pop
#: the rest of the pending jobs too, as the reference does; the tests compare both).
STOP_AFTER_LAST_TURN = True

#: With one job left to take part, it takes its turn at once (False: pop the pending jobs ahead
#: of it one by one, as the reference does; the tests compare both). Popping changes no session
#: state, so that job is placed on the same cluster whenever its turn comes.
LAST_TURN_AT_ONCE = True

#: Pops that provably come from the same leaf as the pop before are made without re-ordering the
#: queues (False: every pop re-orders them; the tests compare both). See _KeyedOrder.
STREAKS_POPPED_AT_ONCE = True

#: A pop after a pop from the same leaf, nothing placed between, asks only the comparisons the
#: heaps on the leaf's path would make (False: the full walk from the roots; the tests compare
#: both). See _KeyedOrder._path_leaf.
PATH_POPS = True

#: Whether the preemptor fits right after a scenario's evictions is read from where its pods fitted
#: before them, asking only the nodes the evictions touched (False: a fit mask over every node;
#: the tests compare both). See JobSolver.fitting_before.
FITS_FROM_BEFORE = True

#: When every victim job of a simulation sits at the head of one leaf queue, a sibling of the
#: preemptor's, and that queue's key stays below the preemptor's queue's key at every victim's turn
#: (bounded from above by what the victims before it can take back), the turns are taken in that
#: order without popping the order (False: always pop; the tests compare both). See _turns_by_keys.
TURNS_FROM_KEYS = True

#: After a pop of a job that takes no part, the jobs next in the same leaf that surely come out
#: next and take no part either are popped in one pass, without a turn each in the simulation's
#: loop (False: one turn per pop; the tests compare both). See _KeyedOrder.pass_over.
RUNS_PASSED_OVER = True


#: Once the preemptor is placed, the victim job to be placed next is read ahead from the order
#: (the jobs before it are passed over as the loop would pass them), and where its placement is
#: sure the refusal bounds are asked as they would be right after it, without running it (False:
#: the placement runs and the bounds are asked after it; the tests compare both). Only where the
#: turns are popped from the order. See _refused_after_next.
NEXT_TURN_READ = True

#: At the preemptor's turn, where its placement is sure but the bounds do not refuse before it,
#: the victim job placed after it is read ahead before it is placed: the order is popped with the
#: queue shares as the placement leaves them (nothing else the order reads moves with it), and
#: where that job's placement is sure as well, whichever nodes the preemptor's pods land on, the
#: bounds are asked as right after both; a refusal then ends the simulation before either
#: placement (False: the preemptor is placed first, then the next job read; the tests compare
#: both). See _next_read_before_placing.
NEXT_READ_BEFORE_PLACING = True

#: A partial job's recorded victims are evicted once for a run of scenarios built ahead, instead
#: of once per scenario (False: once per scenario; the tests compare both). See _solve_ahead.
RECORDED_EVICTED_ONCE = True

#: The most scenarios built ahead of their simulation: runs grow 1, 2, 4, ... up to it, so a
#: search solved at its first scenarios builds few it never simulates.
AHEAD_MOST = 64


@dataclass
class Solution:
    solved: bool
    victim_tasks: list[Task] = field(default_factory=list)
    victim_jobs: list[Job] = field(default_factory=list)
    statement: Statement | None = None
    # the nodes its simulation added to the walk's feasible nodes (they stay there with it)
    nodes_added: tuple[str, ...] = ()


FAILED = Solution(False)


class JobSolver:
    def __init__(self, ssn: Session, action: str, feasible: Sequence[Node], victims: Callable[[], list[Job]],
                 validator: Validator | None, rules: str, start_shares: Any = None,
                 refusals: ReclaimRefusals | None = None) -> None:
        """`refusals`: proves some scenarios refused by `validator` before they are simulated."""
        self.ssn = ssn
        self.action = action
        self.where = f"in {action}"     # what a time limit reached in the middle says
        self.feasible = list(feasible)
        self._victims_fn = victims
        self._victims: VictimSource | None = None
        self.validator = validator
        self.rules = rules
        self.start_shares = start_shares
        self.refusals = refusals
        self.job_keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._pending_order: SortedJobs | None = None
        self._node_list: list[Node] = []
        # the feasible dict the list was last read from (held, so its identity is not reused),
        # and the count of its changes then
        self.feasible_changes = 0
        self._node_list_of: tuple[dict[str, Node] | None, int] = (None, -1)
        # per partial job and request of its pods: the nodes it fitted before the evictions (see
        # _preemptor_cannot_fit), and the nodes whose fit then is not known
        self.fitting_before: dict[Request, tuple[set[str], set[str]]] = {}
        self._asks: tuple[Job | None, list[Task]] = (None, [])
        # the partial job and its pods' whole GPUs; by job uid, each job taking part and whether
        # none of its pods is shared or MIG (see whole_gpus_asked)
        self._whole_need: tuple[Job | None, float | None] = (None, None)
        self._plain_jobs: dict[str, tuple[Job, bool]] = {}

    def asks_of(self, preemptor: Job) -> list[Task]:
        """One pod per request among the partial job's pods to place (a pod's fit reads only its
        request), kept for its walk: every scenario starts from the same state."""
        job, asks = self._asks
        if job is not preemptor:
            asks = list({t.request: t for t in tasks_to_allocate(self.ssn, preemptor, False)}.values())
            self._asks = (preemptor, asks)
        return asks

    def whole_gpus_asked(self, preemptor: Job, jobs: dict[str, Job]) -> float | None:
        """The whole GPUs the partial job's pods ask in all (see _short_of_whole_gpus), or None
        when its pods are not all plain requests of whole GPUs, or when a job taking part has a
        shared or MIG pod. Known per partial job, and per victim job. None for a lone pod too:
        whether one pod fits is asked node by node (HOPELESS_AFTER_VICTIMS, the placement),
        which a sum over the nodes cannot better."""
        counted_for, need = self._whole_need
        if counted_for is not preemptor:
            requests = [t.request for t in tasks_to_allocate(self.ssn, preemptor, False)]
            whole = len(requests) > 1 and all(not r.is_shared and not r.mig and float(r.gpus).is_integer()
                                              for r in requests)
            need = (sum(r.gpus for r in requests) or None) if whole else None
            self._whole_need = (preemptor, need)
        if need is None:
            return None
        plain_jobs = self._plain_jobs
        for uid, job in jobs.items():
            known = plain_jobs.get(uid)
            if known is None or known[0] is not job:
                known = plain_jobs[uid] = (job, all(not (t.request.is_shared or t.request.mig)
                                                    for t in job.tasks.values()))
            if not known[1]:
                return None
        return need

    def node_list(self, feasible: dict[str, Node]) -> list[Node]:
        """The feasible nodes as a list, the same list while they stay the same nodes: the node
        table knows a list by its identity, so its arrays of them are not built again. Not read
        again while `feasible` is the dict it was read from and has not changed since (its
        changes bump `feasible_changes`)."""
        read_from, changes = self._node_list_of
        if read_from is feasible and changes == self.feasible_changes:
            return self._node_list
        nodes = list(feasible.values())
        if nodes != self._node_list:    # (nodes compare by identity)
            self._node_list = nodes
        self._node_list_of = (feasible, self.feasible_changes)
        return self._node_list

    def feasible_changed(self) -> None:
        """A node was added to or taken out of the feasible nodes a walk simulates on."""
        self.feasible_changes += 1

    def solve(self, job: Job) -> tuple[bool, Statement | None, list[Task]]:
        self.where = f"in {self.action}, trying victims for job {job.name}"
        before = job.active_used
        to_allocate = tasks_to_allocate(self.ssn, job, False)
        statement: Statement | None = None
        recorded_tasks: list[Task] = []
        recorded_jobs: list[Job] = []
        pending: list[Task] = []
        for task in to_allocate:
            pending.append(task)
            result = self._solve_partial(partial_job(job, pending), recorded_tasks, recorded_jobs)
            if result is None or not result.solved:
                break
            if len(pending) < len(to_allocate) and result.statement is not None:
                result.statement.discard()
            statement = result.statement
            recorded_tasks, recorded_jobs = result.victim_tasks, result.victim_jobs
        solved = job.gang_satisfied() and job.active_used > before
        return solved, statement, recorded_tasks

    # ---- one partial job -------------------------------------------------------------------------
    def victims(self) -> VictimSource:
        # The session is in the same state at every partial job's start, so the eligible
        # victims, their keys and their order are computed once per job.
        if self._victims is None:
            memo = ("victim-leaves", self.action)
            kept = self.ssn.cache.get(memo)
            if kept is None:
                kept = self.ssn.cache[memo] = KeptLeaves()
            self._victims = VictimSource(self.ssn, self._victims_fn(), kept)
        return self._victims

    def pending_order(self) -> SortedJobs:
        """The pending jobs in job order per leaf queue, as the simulations order them. When job
        keys depend only on the jobs (no job-order rule consults the session) it is shared by the
        action's solutions: the pending jobs only ever leave it, and add_sorted sees them go."""
        if self._pending_order is None:
            memo = ("pending-order", self.action)
            shared = self.ssn.cache.get(memo) if self.ssn.job_keys_pure else None
            if shared is None:
                pending = [j for j in self.ssn.cluster.jobs.values() if j.has_pending]
                shared = _KeyedOrder(self.ssn, self.job_keys).add(pending, JobFilter()).sorted_jobs()
                if self.ssn.job_keys_pure:
                    self.ssn.cache[memo] = shared
            self._pending_order = shared
        return self._pending_order

    def _solve_partial(self, partial: Job, recorded_tasks: list[Task], recorded_jobs: list[Job]) -> Solution | None:
        ssn = self.ssn
        feasible = {n.name: n for n in self.feasible}
        for t in recorded_tasks:
            if t.node in ssn.cluster.nodes:
                feasible[t.node] = ssn.cluster.nodes[t.node]
        self.fitting_before = {}
        with _memo_of(ssn, partial.uid):
            request = dict(init_request_quantities(ssn, partial))
            scenario = Scenario(self.action, ssn.cluster.jobs, partial, request, recorded_jobs, self.start_shares)
            queue = self.victims().queue({t.uid for t in scenario.recorded_tasks})
            builder = ScenarioBuilder(ssn, scenario, queue, feasible.keys())
            try:
                return self._walk(scenario, builder, feasible)
            finally:
                if isinstance(queue, VictimQueue):
                    queue.dispose()   # its reference cycles would wait for the collector

    def _walk(self, scenario: Scenario, builder: ScenarioBuilder, feasible: dict[str, Node]) -> Solution | None:
        """The scenarios in turn until one solves the partial job."""
        ssn = self.ssn
        if _built_ahead(ssn, scenario):
            return self._solve_ahead(scenario, builder, feasible)
        current = builder.first()
        try:
            while current is not None:
                timelimit.check(self.where)
                ssn.tally["simulated", self.action] += 1
                result = solve_scenario(self, current, feasible)
                if result.solved:
                    return self._as_the_reference(result, current, feasible)
                current = builder.next()
        finally:
            ssn.tally["filtered", self.action] += builder.filtered
        return None

    def _solve_ahead(self, scenario: Scenario, builder: ScenarioBuilder, feasible: dict[str, Node]) -> Solution | None:
        """_solve_partial's walk over the scenarios with the recorded victims evicted once per run
        of scenarios built ahead, instead of once per scenario: runs of 1, 2, 4, ... scenarios
        (at most AHEAD_MOST), each scenario simulated from a checkpoint after the recorded
        evictions and rolled back to it. The same simulations in the same order, each starting
        from the same state; building a scenario changes no state a simulation reads, and reads
        none a simulation leaves changed (the builder reads victims' grants only through pods
        whose grant any placement leaves alike, see _built_ahead). What building ahead records
        (rule errors, scenarios filtered out) counts only once the walk reaches it."""
        ssn = self.ssn
        ssn.tally["built ahead", self.action] += 1
        size = 1
        ahead = _Ahead(ssn, builder)
        try:
            run = ahead.build(size)
            while run:
                result = self._simulate_run(scenario, run, feasible, ahead)
                if result is not None:
                    return result
                size = min(2 * size, AHEAD_MOST)
                run = ahead.build(size)
            ahead.reached = builder.filtered
            ahead.finish()
        finally:
            ssn.tally["filtered", self.action] += ahead.reached
        return None

    def _simulate_run(self, scenario: Scenario, run: list[_Built], feasible: dict[str, Node],
                      ahead: _Ahead) -> Solution | None:
        """One run of scenarios built ahead: the solution if one solves the partial job."""
        ssn = self.ssn
        kept = ssn.statement()
        stmt: Statement | None = kept
        try:
            evict_all(ssn, kept, scenario.recorded_tasks, scenario.preemptor, self.action, self.rules)
        except StatementError:
            kept.discard()
            stmt = None   # each scenario fails on its own evictions, as it would
        start = stmt.checkpoint() if stmt is not None else 0
        # A placement leaves its GPU groups on the pod it placed (a rollback gives them back only
        # where it undoes the pod's eviction too), so a recorded victim placed back in one
        # scenario would start the next with them: each scenario evicting the recorded victims
        # anew starts with the groups they had (reclaim_pressure.scenario seed 7011).
        groups = [(t, list(t.gpu_groups)) for t in scenario.recorded_tasks] if stmt is not None else []
        try:
            for built in run:
                ssn.record_held(built.held)
                ahead.reached = built.filtered
                timelimit.check(self.where)
                ssn.tally["simulated", self.action] += 1
                result = solve_scenario(self, built.view, feasible, stmt, start)
                if result.solved:
                    stmt = None   # the solution holds it
                    return self._as_the_reference(result, built.view, feasible)
                for t, kept_groups in groups:
                    t.gpu_groups = list(kept_groups)
        finally:
            if stmt is not None:
                stmt.discard()
        return None

    def _as_the_reference(self, result: Solution, scenario: AnyScenario, feasible: dict[str, Node]) -> Solution:
        """The solution as the reference's simulation leaves it. A job remembers the pods it
        places next until one of them changes status, and committing a solution changes none
        (it only marks the evicted pods real): what the solution's simulation remembered of a
        victim job stays. The reference's order keys every job it pops, and the shortcuts skip
        pops (after the last turn, turns read from the keys), so where a victim job has pending
        pods or is yet to be tried by the action, so that a gate later reads that memory (what
        it places next, and what that asks), the scenario is simulated again with
        the simulation's shortcuts off, from the walk's start (the same solution: they are exact
        but for what they leave remembered)."""
        if not any(getattr(module, name) for module, name in _simulation_switches()) \
                or not (victim_pending(self.ssn, result.victim_tasks) or self._victim_waiting(result)):
            return result
        assert result.statement is not None
        # back to the state before the solution's simulation, grants too: an evicted victim placed
        # again with another grant would otherwise give its queue back the new grant
        # (generate.scenario seed 17 with the latest victim's loaded nodes tried first)
        result.statement.discard(grants=True)
        # the walk's feasible nodes as the scenario found them: a victim node the solution's
        # simulation added would let the preemptor fit where the scenario's first simulation
        # (of fewer evictions) found no room (busy_three_levels seed 1887)
        for name in result.nodes_added:
            feasible.pop(name, None)
        if result.nodes_added:
            self.feasible_changed()
        self.ssn.tally["solution simulated again as the reference", self.action] += 1
        with _simulation_shortcuts_off():
            again = solve_scenario(self, scenario, feasible)
        return again

    def _victim_waiting(self, result: Solution) -> bool:
        """A victim job of the solution is one the action has yet to try: its gates will then read
        what the solution's simulation left remembered of it (busy_three_levels seed 8270:
        elastic15, a victim whose pending pod had been placed, is tried after the solution; the
        reference's pop had remembered its request with its evicted pods, and
        reclaim-within-fair-share turns it away)."""
        waiting = self.ssn.preemptors_waiting
        return waiting is not None and waiting.holding({t.job for t in result.victim_tasks})


def _simulation_switches() -> list[tuple[Any, str]]:
    """The switches of the shortcuts inside one simulation (this module's, the proofs' and the
    proven placement's)."""
    here = sys.modules[__name__]
    return [*((here, name) for name in _SWITCH_NAMES), (placing, "PLACEMENTS_PROVEN"),
            *((proofs, name) for name in proofs.SWITCH_NAMES)]


@contextmanager
def _simulation_shortcuts_off() -> Iterator[None]:
    switches = _simulation_switches()
    saved = [getattr(module, name) for module, name in switches]
    try:
        for module, name in switches:
            setattr(module, name, False)
        yield
    finally:
        for (module, name), value in zip(switches, saved):
            setattr(module, name, value)


_SWITCH_NAMES = ("STOP_AFTER_LAST_TURN", "LAST_TURN_AT_ONCE", "STREAKS_POPPED_AT_ONCE", "PATH_POPS", "FITS_FROM_BEFORE",
                 "TURNS_FROM_KEYS", "RUNS_PASSED_OVER", "NEXT_TURN_READ", "NEXT_READ_BEFORE_PLACING",
                 "RECORDED_EVICTED_ONCE", "QUEUES_INTERLEAVED", "ONE_LINE_AT_ONCE", "TURNS_ONE_BY_ONE",
                 "HOPELESS_AFTER_VICTIMS", "WHOLE_GPUS_COUNTED", "SHORT_READ_AHEAD", "SHORT_BEFORE_EVICTING")


def _built_ahead(ssn: Session, scenario: Scenario) -> bool:
    """Whether the partial job's scenarios are built ahead (see JobSolver._solve_ahead): it has
    recorded victims to keep evicted, and building a scenario ahead cannot read what a simulation
    leaves behind or record what a later turn would. A simulation leaves its placements' grants
    on the pods it placed back; the builder reads a victim's grant only through a whole job
    holding recorded pods (a victim queue judged by a running sum of what it gave, so pods taken
    earlier are not read again), and a recorded pod whose grant any placement leaves alike reads
    the same. Coverage and shadow rules record every rule they ask: not built ahead with them."""
    return (RECORDED_EVICTED_ONCE and bool(scenario.recorded_tasks) and ordering.SUM_TAKEN_VICTIMS
            and ssn.coverage is None and not ssn.shadowing and all(map(placed_back_alike, scenario.recorded_tasks)))


@dataclass(slots=True)
class _Built:
    """A scenario built ahead: as it stood, the scenarios filtered out by then, and the rule errors
    its building recorded (held until the walk reaches it)."""

    view: ScenarioView
    filtered: int
    held: list[Any]


class _Ahead:
    """Builds runs of scenarios ahead. The first of a run is built where the walk would build it
    (the simulations before it are done); the others are held to their turn."""

    def __init__(self, ssn: Session, builder: ScenarioBuilder) -> None:
        self.ssn = ssn
        self.builder = builder
        self.started = False
        self.done = False
        self.tail: list[Any] = []    # errors held while building past the last scenario
        self.failure: Exception | None = None   # raised while building ahead, raised at its turn
        self.reached = 0             # scenarios filtered out until the last one the walk reached

    def build(self, size: int) -> list[_Built]:
        ssn, builder = self.ssn, self.builder
        run: list[_Built] = []
        while len(run) < size and not self.done:
            mark = ssn.hold_errors() if run else None
            try:
                current = builder.next() if self.started else builder.first()
            except Exception as e:
                if mark is None:
                    raise
                self.failure, current = e, None   # the walk meets it after the scenarios before
            finally:
                held = ssn.held_errors(mark) if mark is not None else []
            self.started = True
            if current is None:
                self.done = True
                self.tail = held
                break
            run.append(_Built(current.view(), builder.filtered, held))
        return run

    def finish(self) -> None:
        """The walk went past the last scenario built: what building on recorded, as it would."""
        self.ssn.record_held(self.tail)
        if self.failure is not None:
            raise self.failure


@contextmanager
def _memo_of(ssn: Session, uid: str) -> Iterator[None]:
    """While a partial job is simulated it owns the session's per-job memos of its uid."""
    ssn.next_tasks.pop(uid, None)
    ssn.next_request.pop(uid, None)
    try:
        yield
    finally:
        ssn.next_tasks.pop(uid, None)
        ssn.next_request.pop(uid, None)


# ---- one scenario ----------------------------------------------------------------------------------
def solve_scenario(solver: JobSolver, scenario: AnyScenario, feasible: dict[str, Node],
                   stmt: Statement | None = None, start: int = 0) -> Solution:
    """With `stmt`, the recorded victims are evicted in it already, up to the checkpoint `start`,
    and a scenario that fails rolls back to there."""
    ssn = solver.ssn
    preemptor = scenario.preemptor
    if stmt is None:
        stmt, start = ssn.statement(), 0
        recorded = scenario.recorded_tasks
    else:
        recorded = []
    try:
        evict_all(ssn, stmt, recorded, preemptor, solver.action, solver.rules)
        latest = scenario.latest_potential_victim
        if latest is None:
            if scenario.recorded_tasks:
                result = _simulate(solver, scenario, stmt, feasible, list(scenario.recorded_tasks), True, start)
                if result is not None:
                    return result
        else:
            victim_nodes = sorted({t.node for t in latest.tasks.values()})
            for node in victim_nodes:
                tasks = scenario.tasks_on_nodes([node])
                if not scenario.recorded_tasks and _short_before_evicting(solver, preemptor, node, tasks, feasible):
                    ssn.tally["cannot fit before evicting", solver.action] += 1
                    continue   # as the simulation of these evictions ends (see SHORT_BEFORE_EVICTING)
                if len(victim_nodes) == 1 and solver.refusals is not None and all(t.node in feasible for t in tasks) \
                        and solver.refusals.refuses_before_evicting(scenario, lambda: solver.node_list(feasible),
                                                                    scenario.recorded_tasks, tasks):
                    stmt.rollback(start)   # as a refusal proven after the evictions ends (see _simulate)
                    return FAILED
                cp = stmt.checkpoint()
                evict_all(ssn, stmt, tasks, preemptor, solver.action, solver.rules)
                added = []
                for t in tasks:
                    if t.node not in feasible:
                        feasible[t.node] = ssn.cluster.nodes[t.node]
                        added.append(t.node)
                if added:
                    solver.feasible_changed()
                # A proven refusal ends the scenario as a refused simulation would; one that would
                # not place the preemptor goes on to the next node and takes the added nodes back
                # out, so a proof stands in for the simulation only where both end alike.
                provable = len(victim_nodes) == 1 and not added
                result = _simulate(solver, scenario, stmt, feasible, [*scenario.recorded_tasks, *tasks], provable,
                                   start)
                if result is not None:
                    if result.solved:
                        result.nodes_added = tuple(added)
                    return result
                for name in added:
                    feasible.pop(name, None)
                if added:
                    solver.feasible_changed()
                stmt.rollback(cp)
    except StatementError:
        pass
    stmt.rollback(start)
    return FAILED


def _simulate(solver: JobSolver, scenario: AnyScenario, stmt: Statement, feasible: dict[str, Node],
              victim_tasks: list[Task], provable: bool, start: int = 0) -> Solution | None:
    """None when the partial job does not fit; otherwise the (validated or refused) solution.
    With `provable`, a refusal proven before the simulation ends it as the validator would. A
    refused scenario rolls `stmt` back to `start`."""
    nodes = solver.node_list(feasible)
    if _preemptor_cannot_fit(solver, scenario.preemptor, nodes, victim_tasks, feasible):
        return None
    if provable and solver.refusals is not None and solver.refusals.refuses(scenario, nodes, victim_tasks):
        stmt.rollback(start)
        return FAILED
    placed = _allocate_virtually(solver, scenario, stmt, nodes, victim_tasks, feasible)
    if placed is REFUSED:
        stmt.rollback(start)
        return FAILED
    if not placed:
        return None
    preempted = [t for t in victim_tasks if t.status == Status.RELEASING]
    moved = [t for t in victim_tasks if t.status == Status.PIPELINED]
    if solver.validator is not None and not solver.validator(scenario.preemptor, scenario).ok:
        stmt.rollback(start)
        return FAILED
    victims = preempted + moved
    jobs: list[Job] = []
    seen: set[int] = set()
    for t in victims:
        group = scenario.group_of(t)
        if group is not None and id(group) not in seen:
            seen.add(id(group))
            jobs.append(group)
    return Solution(True, victims, jobs, stmt)


#: What `_allocate_virtually` returns when the preemptor was placed and the validator is sure to
#: refuse whatever the rest of the simulation does (it is not run).
REFUSED = "refused"


def _allocate_virtually(solver: JobSolver, scenario: AnyScenario, stmt: Statement, nodes: list[Node],
                        victim_tasks: list[Task], feasible: dict[str, Node] | None = None) -> bool | str:
    """Re-place the preemptor and the victims' jobs in job order, pipeline only; other pending
    jobs only take part in the ordering, as in the reference. True when the preemptor was placed,
    REFUSED when it was and the refusal is already certain. `feasible`: the nodes by name, for
    asking after a victim's turn whether the preemptor still fits (see HOPELESS_AFTER_VICTIMS)."""
    ssn = solver.ssn
    preemptor = scenario.preemptor
    jobs = {uid: ssn.cluster.jobs[uid] for uid in dict.fromkeys(t.job for t in victim_tasks)}
    jobs[preemptor.uid] = preemptor
    # the other pending jobs come in the order sorted before; those whose pods changed status
    # since (a solution was committed, a simulation moved them) are sorted in again
    order = _KeyedOrder(ssn, solver.job_keys)
    try:
        plan = _turns_by_keys(solver, order, preemptor, jobs) if TURNS_FROM_KEYS else None
        if isinstance(plan, _Stepwise):
            placed = _stepwise(solver, scenario, stmt, nodes, victim_tasks, jobs, order, plan, feasible)
            if placed is not UNDECIDED:
                return placed
            plan = None
        if plan is None:
            changed = order.add_sorted(solver.pending_order(), set(jobs))
            order.add([*(j for j in changed if j.has_pending), *jobs.values()], JobFilter())
        else:
            ssn.tally["turns from keys", ssn.action] += 1
        placed = _take_turns(solver, scenario, stmt, nodes, victim_tasks, jobs, order, plan, feasible)
        assert placed is not UNDECIDED   # only turns told one by one give up
        return placed
    finally:
        order.dispose()   # its reference cycles would wait for the paused collector


def _take_turns(solver: JobSolver, scenario: AnyScenario, stmt: Statement, nodes: list[Node],
                victim_tasks: list[Task], jobs: dict[str, Job], order: _KeyedOrder,
                turns: list[Job] | _Stepwise | None, feasible: dict[str, Node] | None = None) -> bool | str | _Undecided:
    """The simulation's turns: from `turns` (a list worked out before, or decided one by one),
    else popped from the loaded `order`. UNDECIDED when `turns` cannot tell the next one. With
    `feasible`, a victim's turn before the preemptor's that leaves the preemptor fitting nowhere
    ends the simulation as the preemptor's turn would (see HOPELESS_AFTER_VICTIMS)."""
    ssn = solver.ssn
    preemptor = scenario.preemptor
    victim_uids = set(jobs) - {preemptor.uid}
    placed = False
    hopeless: set[Request] = set()
    evicted_from = {t.node for t in victim_tasks}   # (a victim placed again has moved on)
    # whether no victim job has pending pods, once asked: turns only place pods (none becomes
    # pending), so a job without pending pods keeps none
    none_pending: bool | None = None
    # Once the preemptor and every victim job have had their turn, the jobs left only take part
    # in the ordering: popping them would change nothing.
    unplaced = set(jobs)
    ahead: Job | None = None    # the victim placed next, read ahead (see NEXT_TURN_READ)
    # that job and the jobs left to take part after it, read before the preemptor's placement
    read: tuple[Job | None, set[str]] | str | None = None
    # the whole GPUs the preemptor's pods ask, where they can be counted (see WHOLE_GPUS_COUNTED)
    whole_gpus = solver.whole_gpus_asked(preemptor, jobs) if WHOLE_GPUS_COUNTED else None
    job: Job | _Undecided | None
    while ahead is not None or ((unplaced or not STOP_AFTER_LAST_TURN) and (turns is not None or not order.empty())):
        if ahead is not None:
            job, ahead = ahead, None    # (out of the order already, and found placing)
            victim_turn = True
        else:
            if isinstance(turns, _Stepwise):
                job = turns.next()
                if job is UNDECIDED:
                    return UNDECIDED
            elif turns is not None:
                job = turns.pop(0) if turns else None
            else:
                job = _last_turn(order, jobs, unplaced) or order.pop()
            if job is None:
                break
            unplaced.discard(job.uid)
            victim_turn = False
        if job.uid == preemptor.uid:
            order.placements += 1
            if whole_gpus is not None and _short_of_whole_gpus(solver, nodes, whole_gpus):
                ssn.pre_job_allocation(job)   # the placement would begin so, and then fail
                ssn.tally["preemptor short of whole GPUs", ssn.action] += 1
                return False
            if unplaced and _refused_before_placing(solver, scenario, nodes, victim_tasks, unplaced):
                return REFUSED
            if NEXT_READ_BEFORE_PLACING and NEXT_TURN_READ and turns is None and unplaced:
                read = _next_read_before_placing(solver, scenario, nodes, victim_tasks, unplaced, order, jobs,
                                                 victim_uids, hopeless)
                if read is REFUSED:
                    return REFUSED
            if not allocate_job(ssn, stmt, nodes, job, pipeline_only=True):
                return False
            placed = True
        elif victim_turn or (job.uid in victim_uids and not _cannot_fit(ssn, job, nodes, hopeless)):
            order.placements += 1
            if feasible is not None and preemptor.uid in unplaced:
                if none_pending is None:
                    none_pending = not victim_pending(ssn, victim_tasks)
                if SHORT_READ_AHEAD and none_pending and whole_gpus is not None \
                        and _short_once_placed(solver, nodes, whole_gpus, job):
                    ssn.tally["preemptor short of whole GPUs after a victim, read ahead", ssn.action] += 1
                    return False
            allocate_job(ssn, stmt, nodes, job, pipeline_only=True)
            if feasible is not None and preemptor.uid in unplaced:   # (none_pending is known here)
                if none_pending and _hopeless_after_victim(solver, preemptor, nodes, victim_tasks, feasible,
                                                           evicted_from):
                    ssn.tally["preemptor hopeless after a victim", ssn.action] += 1
                    return False
                if none_pending and whole_gpus is not None and _short_of_whole_gpus(solver, nodes, whole_gpus):
                    ssn.tally["preemptor short of whole GPUs after a victim", ssn.action] += 1
                    return False
        else:
            if RUNS_PASSED_OVER and turns is None:
                order.pass_over(jobs)
            continue
        if placed and unplaced and solver.refusals is not None:
            if solver.refusals.refused_after_preemptor(scenario, nodes, victim_tasks, unplaced):
                return REFUSED
            if NEXT_TURN_READ and turns is None:
                # the victim placed next, read ahead: where its placement is sure the bounds are
                # asked as right after it, and it is placed only if they do not refuse
                if isinstance(read, tuple):
                    # read before the preemptor's placement: the same pops (see
                    # _next_read_before_placing), save that the job read may not fit now
                    ahead, popped = read
                    read = None
                    unplaced.intersection_update(popped)
                    if ahead is not None and _cannot_fit(ssn, ahead, nodes, hopeless):
                        if RUNS_PASSED_OVER:
                            order.pass_over(jobs)
                        ahead = _next_placing(ssn, order, jobs, unplaced, victim_uids, nodes, hopeless)
                else:
                    ahead = _next_placing(ssn, order, jobs, unplaced, victim_uids, nodes, hopeless)
                if ahead is None:
                    break   # the order ran out before one: the loop would end there too
                if _refused_after_next(solver, scenario, nodes, victim_tasks, unplaced, ahead):
                    return REFUSED
    return placed


def _next_placing(ssn: Session, order: _KeyedOrder, jobs: dict[str, Job], unplaced: set[str], victim_uids: set[str],
                  nodes: list[Node], hopeless: set[Request]) -> Job | None:
    """The victim job _take_turns places next, popped from the order: the jobs popped before it
    (taking no part, or a victim that cannot fit) are passed over and leave `unplaced` as the
    loop's turns would leave them; popping places nothing. None when the turns end first."""
    while (unplaced or not STOP_AFTER_LAST_TURN) and not order.empty():
        job = _last_turn(order, jobs, unplaced) or order.pop()
        if job is None:
            return None
        unplaced.discard(job.uid)
        if job.uid in victim_uids and not _cannot_fit(ssn, job, nodes, hopeless):
            return job
        if RUNS_PASSED_OVER:
            order.pass_over(jobs)
    return None


class _Undecided(enum.Enum):
    UNDECIDED = "undecided"


#: What `_take_turns` returns when turns told one by one meet one the keys cannot tell.
UNDECIDED: Final = _Undecided.UNDECIDED


def _stepwise(solver: JobSolver, scenario: AnyScenario, stmt: Statement, nodes: list[Node],
              victim_tasks: list[Task], jobs: dict[str, Job], order: _KeyedOrder,
              turns: _Stepwise, feasible: dict[str, Node] | None = None) -> bool | str | _Undecided:
    """The simulation with each turn decided from the queue keys as they are when it comes
    (`_Stepwise`); UNDECIDED, with everything it did undone, when a turn cannot be told that way
    (the caller then pops the turns from the order, from the same state).

    Undone exactly: the statement rolls back to where the turns began; what a placement leaves
    on the pods it placed (their grant and GPU groups) and the count of GPU groups minted are
    put back as they were; rule errors are held meanwhile and dropped. What the turns before the
    undecided one asked or recorded besides (fit errors on a victim job, memos of keys) is
    asked or recorded again, alike, by the turns popped from the order: they come in the same
    order (each was decided strictly, as the order decides it) onto the same cluster."""
    ssn = solver.ssn
    start = stmt.checkpoint()
    traces = [(t, t.accepted, list(t.gpu_groups)) for j in jobs.values() for t in j.tasks.values()]
    minted = ssn.groups_minted
    mark = ssn.hold_errors()
    try:
        placed = _take_turns(solver, scenario, stmt, nodes, victim_tasks, jobs, order, turns, feasible)
    except BaseException:
        ssn.record_held(ssn.held_errors(mark))   # as they were met: the failure ends the search
        raise
    held = ssn.held_errors(mark)
    if placed is not UNDECIDED:
        ssn.record_held(held)
        ssn.tally["turns from keys, one by one", ssn.action] += 1
        return placed
    stmt.rollback(start, grants=True)
    for task, accepted, groups in traces:
        task.accepted, task.gpu_groups = accepted, groups
    ssn.groups_minted = minted
    ssn.tally["turns one by one undecided", ssn.action] += 1
    return UNDECIDED


def _turns_by_keys(solver: JobSolver, order: _KeyedOrder, preemptor: Job,
                   jobs: dict[str, Job]) -> list[Job] | _Stepwise | None:
    """The jobs taking part, in the order their turns come, when keys alone settle it (the order
    is then not loaded); a _Stepwise when their bounds do not, but each turn may be told from the
    keys when it comes (see TURNS_ONE_BY_ONE); else None, with the participants' keys handed to
    `order` to load.

    Settled when the victim jobs would be the first jobs of their leaf queues, those leaves and the
    preemptor's queue P are siblings (or all roots), queue keys are the proportion built-in's, and
    at each victim's turn its queue's key is below P's key with the preemptor at its head, and
    below the key of every other victim queue still holding victims, in the elements before the
    last (plain numbers, compared in order). Until the preemptor's turn only victims are placed, so
    P's key is as it is now, and a victim queue holds at least what it holds now and at most that
    plus what its victims before can take back: every element but the last never decreases with
    the allocation, so keys taken at those bounds bound the queue's. At any level of the order the
    heap's top is never above any other node in those elements (each parent is not above its
    children), so a queue whose key is surely below every other participant's comes out first:
    the victims come out in the order worked out here, all before the preemptor, and the jobs
    popped between take no part.

    The participants' keys are asked as loading the order asks them (in input order), and only
    when no other job would be keyed again on loading (none whose pods changed status since the
    pending order was sorted still has pending pods), and when the heap of the leaves loading
    builds is a heap of the keys as they stand then (_heap_by_keys)."""
    ssn = solver.ssn
    if not (STOP_AFTER_LAST_TURN and ssn.queue_keys_remembered):
        return None
    by_queue: dict[str, list[Job]] = {}
    for uid, j in jobs.items():
        if uid != preemptor.uid:
            by_queue.setdefault(j.queue, []).append(j)
    if len(by_queue) > 1 and not QUEUES_INTERLEAVED:
        return None
    queues = ssn.cluster.queues
    p_queue = queues.get(preemptor.queue)
    v_queues = [queues.get(name) for name in by_queue]
    for q in (*v_queues, p_queue):
        if q is None or (q.parent and q.parent not in queues) or not q.is_leaf:
            return None   # a job there would not be loaded
    assert p_queue is not None
    parent = p_queue.parent or ""
    if any(q is p_queue or (q.parent or "") != parent for q in v_queues if q is not None):
        return None
    shared = solver.pending_order()
    taking_part = set(jobs)
    changed = shared.changed(ssn, taking_part)
    if shared.changed_pending(ssn, taking_part):
        return None   # loading would key it again
    left_out = {*jobs, *(j.uid for j in changed)}
    keys = {j.uid: order.key_of(j) for j in sorted(jobs.values(), key=lambda j: j.order)}
    order.preset = keys
    if not _heap_by_keys(ssn, shared, order, parent, jobs, preemptor, by_queue, keys, left_out, changed):
        return None
    shares = ssn.shares
    p_share = shares.queues.get(p_queue.uid)
    if p_share is None:
        return None
    lines: list[_VictimLine] = []
    first_of_their_leaves = True
    for q in v_queues:
        assert q is not None
        ahead = sorted(by_queue[q.name], key=lambda j: keys[j.uid])
        after = next((e[0] for e in shared.leaves.get(q.uid, ()) if e[2].uid not in left_out), None)
        if after is not None and not keys[ahead[-1].uid] < after:
            first_of_their_leaves = False   # a pending job comes out between: only told one by one
        share = shares.queues.get(q.uid)
        if share is None:
            return None
        lines.append(_VictimLine(share, ahead))
    leaves = [(p_share, [preemptor]), *((line.share, line.ahead) for line in lines)]
    if not first_of_their_leaves or any(_held_below_zero(share) for share, _ in leaves):
        return _stepwise_lines(ssn, shared, left_out, keys, leaves, taking_part)
    try:
        limit = capacity.queue_order_key_unmemoised(shares, p_share, ssn.job_request(preemptor), None)[:-1]
        if len(lines) == 1 and ONE_LINE_AT_ONCE:
            told = _VictimLine(lines[0].share, lines[0].ahead).all_below(ssn, limit)
            if told is UNDECIDED:
                return _stepwise_lines(ssn, shared, left_out, keys, leaves, taking_part)
            if told is not None:
                return [*told, preemptor]
        turns: list[Job] = []
        while True:
            waiting = [line for line in lines if line.left()]
            if not waiting:
                break
            highs = [line.most_key(ssn) for line in waiting]
            lows = [line.least_key(ssn) for line in waiting] if len(waiting) > 1 else highs
            first = next((k for k, high in enumerate(highs)
                          if high < limit and all(high < low for m, low in enumerate(lows) if m != k)), None)
            if first is None:
                break   # the bounds cannot tell: each turn is read when it comes, if it can be
            job = waiting[first].take(ssn)
            if job is None:
                break   # its grant's share of a device depends on the node: read when it comes
            turns.append(job)
        if not waiting:
            return [*turns, preemptor]
    except Exception:  # noqa: BLE001 - the built-in's own failure is left to the order's keys
        return None
    return _stepwise_lines(ssn, shared, left_out, keys, leaves, taking_part)


def _heap_by_keys(ssn: Session, shared: SortedJobs, order: _KeyedOrder, parent: str, jobs: dict[str, Job],
                  preemptor: Job, by_queue: dict[str, list[Job]], keys: dict[str, Any], left_out: set[str],
                  changed: list[Job]) -> bool:
    """Whether the loaded order's heap of the leaves under `parent` is a heap of their keys as
    they stand once it is loaded, which the turns read from the keys take for granted. `changed`:
    the listed jobs changed since (none with pending pods), left out with `jobs` (`left_out`).

    Loading links each leaf into its parent's heap with the head it has then, and then pushes
    the jobs taking part, in input order: a pushed job ahead of a leaf's head becomes its head,
    and the leaf is marked, but the heap moves a marked node only once it reaches the top. A
    leaf whose key moved on such a push can stay below a sibling whose key is now above it, and
    that sibling comes out first (openb_sample seed 509: Burstable's victim, asking less than the
    pending job it was linked with, came out after the preemptor's LS). Where no head changes
    what it asks (a queue's key reads its head's request), every comparison saw the keys as they
    stand; else the heap is rebuilt on the leaves and checked (_loaded_heap_holds)."""
    queues = ssn.cluster.queues
    if _heads_kept(ssn, shared, left_out, keys, queues[preemptor.queue].uid, [preemptor]) \
            and all(_heads_kept(ssn, shared, left_out, keys, queues[name].uid, line) for name, line in by_queue.items()):
        return True
    return _loaded_heap_holds(ssn, shared, order, parent, jobs, changed)


def _heads_kept(ssn: Session, shared: SortedJobs, left_out: set[str], keys: dict[str, Any], quid: str,
                taking_part: list[Job]) -> bool:
    """Whether every job that heads the leaf queue `quid` from its linking on, as the order is
    loaded, asks what the first asked: its first job the order keeps (none of `left_out`), or
    else the first of `taking_part` pushed, then each of `taking_part` pushed ahead of the head."""
    kept = next(((e[0], e[2]) for e in shared.leaves.get(quid, ()) if e[2].uid not in left_out), None)
    pushed = sorted(taking_part, key=lambda j: j.order)    # as the order's loading pushes them
    head = kept if kept is not None else (keys[pushed[0].uid], pushed[0])
    asks = _asks_of(ssn, head[1])
    for job in pushed:
        if keys[job.uid] < head[0]:
            head = (keys[job.uid], job)
            if _asks_of(ssn, job) != asks:
                return False
    return True


def _loaded_heap_holds(ssn: Session, shared: SortedJobs, order: _KeyedOrder, parent: str,
                      taking_part: dict[str, Job], changed: list[Job] | None = None) -> bool:
    """Whether the heap of the leaf queues under `parent`, as loading the order builds it, is a
    heap of their keys as they stand once it is loaded (see loaded_leaf_heap): no leaf is below
    one whose key is now above its own. Where it holds, every pop sifts only the leaf popped, at
    the top, so the leaves come out by their keys as _turns_by_keys reads them."""
    built = loaded_leaf_heap(ssn, shared, order, parent, taking_part, changed)
    if built is None:
        return False
    heap, _ = built
    items = heap.items
    return not any(heap.less(items[i], items[(i - 1) // 2]) for i in range(1, len(items)))


def loaded_leaf_heap(ssn: Session, shared: SortedJobs, order: _KeyedOrder, parent: str,
                     taking_part: dict[str, Job], changed: list[Job] | None = None,
                     ) -> tuple[GoHeap[str], dict[str, tuple[Any, Job]]] | None:
    """The heap of the leaf queues under `parent` (the roots when empty) as loading the order
    builds it, rebuilt on the leaves alone, with each leaf's head then (by queue uid); None where
    a child of `parent` holding jobs is not a leaf (its key is its best leaf's). The leaves
    holding pending jobs the order keeps (not taking part, pods not changed since listed) are
    linked in the pending order's order, each with its first such job
    at its head; then the jobs taking part and the changed pending ones are pushed in input
    order, a pushed job ahead of a leaf's head becoming its head (the leaf keeps its place) and a
    leaf not there yet being linked with it. Each link sifts up as Go's heap does, comparing the
    keys the order would take then (a leaf's key reads its head)."""
    queues = ssn.cluster.queues
    if changed is None:   # (the listed jobs changed since, as `shared` tells them)
        changed = shared.changed(ssn, set(taking_part))
    left_out: Collection[str] = {*taking_part, *(j.uid for j in changed)} if changed else taking_part.keys()
    where = _leaves_under(ssn, parent)
    heads: dict[str, tuple[Any, Job]] = {}
    # each leaf's key, taken when its head is set: nothing else it reads moves while the order loads
    leaf_keys: dict[str, tuple[Any, ...]] = {}
    heap: GoHeap[str] = GoHeap(lambda a, b: leaf_keys[a] < leaf_keys[b])
    queue_key = ssn.queue_key
    for quid, entries in shared.leaves.items():
        linked = where.get(quid, False)
        if linked is False:
            continue
        for entry in entries:
            if entry[2].uid not in left_out:
                break
        else:
            continue   # no job the order keeps
        if linked is None:
            return None
        heads[quid] = (entry[0], entry[2])
        leaf_keys[quid] = queue_key(queues[quid], entry[2])
        heap.push(quid)
    for job in sorted([*(j for j in changed if j.has_pending), *taking_part.values()], key=_by_order):
        linked = where.get(job.queue, False)
        if linked is False:
            continue   # (elsewhere, or a queue the order leaves out)
        if linked is None:
            return None
        key = order.key_of(job)
        head = heads.get(job.queue)
        if head is None or key < head[0]:
            heads[job.queue] = (key, job)
            leaf_keys[job.queue] = queue_key(queues[job.queue], job)
            if head is None:
                heap.push(job.queue)
    return heap, heads


def _by_order(job: Job) -> int:
    return job.order


def _leaves_under(ssn: Session, parent: str) -> dict[str, bool | None]:
    """Per queue the order loads jobs into (a leaf whose parent is known, or a root): True for
    one linked straight under `parent` (the roots when empty), None for one below a child of
    `parent`; the rest are left out. Remembered for the session, whose queues are fixed."""
    memo_key = ("leaves under", parent)
    known: dict[str, bool | None] | None = ssn.cache.get(memo_key)
    if known is not None:
        return known
    queues = ssn.cluster.queues
    known = {}
    for name, queue in queues.items():
        if (queue.parent and queue.parent not in queues) or not queue.is_leaf:
            continue
        if (queue.parent or "") == parent:
            known[name] = True
            continue
        up = queues.get(queue.parent or "")
        while up is not None:
            if (up.parent or "") == parent:
                known[name] = None
                break
            up = queues.get(up.parent or "")
    ssn.cache[memo_key] = known
    return known


def _asks_of(ssn: Session, job: Job) -> tuple[float, float, float]:
    request = ssn.job_request(job)
    return request["cpu"], request["memory"], request["gpu"]


def _held_below_zero(share: QueueShare) -> bool:
    """The queue holds less than nothing of some resource (its evicted pods' accounting can take
    it there). The keys' bounds rest on every element but the last never decreasing as the
    allocation grows, which fails where a sum meets -1, the value the queue order reads as
    unlimited: a queue holding -1 GPU is not starved, and one holding a little more is (seed
    47749 of reclaim_pressure.three_level_gangs). Its turns are then told one by one, from its
    keys as they are."""
    return any(float(sh.allocated) < 0 for sh in share.shares.values())


def _stepwise_lines(ssn: Session, shared: SortedJobs, left_out: set[str], keys: dict[str, Any],
                    lines: list[tuple[QueueShare, list[Job]]], taking_part: set[str]) -> _Stepwise | None:
    """The turns to tell one by one (None when TURNS_ONE_BY_ONE is off or errors are held): each
    line the jobs of its leaf in the order the loaded order holds them, up to its last job taking
    part. The order pushes those among the leaf's sorted jobs by their keys (a job's uid is in its
    key, so no two keys are equal)."""
    if not TURNS_ONE_BY_ONE or ssn.errors_held:
        return None
    out: list[tuple[QueueShare, list[Job]]] = []
    for share, parts in lines:
        last = max(keys[j.uid] for j in parts)
        entries = shared.leaves.get(share.queue.uid, [])
        # (the leaf's entries ascend by key: those below `last` are the ones before its place)
        below = entries[:bisect.bisect_left(entries, last, key=_entry_key)]
        others = [(e[0], e[2]) for e in below if e[2].uid not in left_out]
        merged = sorted([*others, *((keys[j.uid], j) for j in parts)], key=lambda e: e[0])
        out.append((share, [j for _, j in merged]))
    return _Stepwise(ssn, out, taking_part)


#: Victims of several queues take their turns in an order read from the keys where the keys
#: settle it (False: only victims of one queue; the tests compare both). See _turns_by_keys.
QUEUES_INTERLEAVED = True

#: With victims of one queue, one key bounding every turn's is compared with the preemptor's
#: queue's, instead of one per turn (False: one per turn; the tests compare both). See
#: _VictimLine.all_below.
ONE_LINE_AT_ONCE = True

#: Where the bounds of _turns_by_keys cannot settle the turns before the simulation, each turn is
#: read from the keys as they are when it comes, the preemptor's leaf queue taking part with the
#: jobs ahead of the preemptor; a turn they cannot tell sends the simulation back to its start,
#: to pop its turns from the order (False: the order is loaded; the tests compare both). See
#: _Stepwise.
TURNS_ONE_BY_ONE = True


def _entry_key(entry: tuple[Any, int, Job]) -> Any:
    return entry[0]


class _Stepwise:
    """A simulation's turns told one at a time from the queue keys as they stand when each comes.

    A line is a leaf queue taking part: its jobs in job order up to its last one taking part (the
    preemptor, or victims), the pending jobs between them taking no part. The lines are siblings,
    and nothing but the turns places a job. A line's key is its queue's key with the request of
    the job heading it: the queue's allocation changes only when a job of the line taking part
    is placed. The next line out is the one whose key, but the last element, is below every other
    line's: at any level of the order the heap's top is never above any node below it in those
    elements, so no other line can come out first, whatever the queues that take no part do
    (popping their jobs changes no key). A job of that line taking no part comes out and the
    comparison is made again; once one line alone has jobs taking part left, they come out in its
    order. When no line is below all others (equal elements, where the partial order of the last
    decides by the heap's shape), or the built-in fails, the turn is UNDECIDED."""

    def __init__(self, ssn: Session, lines: list[tuple[QueueShare, list[Job]]], taking_part: Collection[str]) -> None:
        self.ssn = ssn
        self.lines = [_ExactLine(share, jobs, taking_part) for share, jobs in lines]

    def next(self) -> Job | _Undecided | None:
        try:
            return self._next()
        except Exception:  # noqa: BLE001 - the built-in's own failure is left to the order's keys
            return UNDECIDED

    def _next(self) -> Job | _Undecided | None:
        ssn = self.ssn
        while True:
            waiting = [line for line in self.lines if line.left()]
            if len(waiting) < 2:
                return waiting[0].take_next_part() if waiting else None
            keys = [line.key(ssn) for line in waiting]
            first = next((k for k, key in enumerate(keys) if all(key < other for m, other in enumerate(keys) if m != k)),
                         None)
            if first is None:
                return UNDECIDED
            job = waiting[first].take()
            if job is not None:
                return job    # else a job taking no part came out


class _ExactLine:
    """A leaf queue's jobs in job order up to its last one taking part, with its key as it stands
    (taken once per job at its head, per request, until a job taking part is placed)."""

    def __init__(self, share: QueueShare, jobs: list[Job], taking_part: Collection[str]) -> None:
        self.share = share
        self.jobs = jobs
        self.taking_part = taking_part
        self.next = 0
        self.left_taking_part = sum(1 for j in jobs if j.uid in taking_part)
        self._keys: dict[tuple[float, float, float], list[object]] = {}

    def left(self) -> bool:
        return self.left_taking_part > 0

    def key(self, ssn: Session) -> list[object]:
        request = ssn.job_request(self.jobs[self.next])
        asks = (request["cpu"], request["memory"], request["gpu"])
        key = self._keys.get(asks)
        if key is None:
            key = self._keys[asks] = capacity.queue_order_key_unmemoised(ssn.shares, self.share, request, None)[:-1]
        return key

    def take(self) -> Job | None:
        """The job heading the line comes out: it, if it takes part (its placement may change the
        queue's allocation, so the keys are taken anew), else None."""
        job = self.jobs[self.next]
        self.next += 1
        if job.uid not in self.taking_part:
            return None
        self.left_taking_part -= 1
        self._keys.clear()
        return job

    def take_next_part(self) -> Job:
        """The next job taking part, the jobs ahead of it coming out first."""
        while True:
            job = self.take()
            if job is not None:
                return job


class _VictimLine:
    """One victim queue's victims in job order, with what the queue holds at a victim's turn
    bounded: at least what it holds now (placements only add), at most that plus what the
    victims before can take back. Its keys are taken once per victim at its head."""

    def __init__(self, share: QueueShare, ahead: list[Job]) -> None:
        self.share = share
        self.ahead = ahead
        self.next = 0
        self.most = {r: float(share.shares[r].allocated) for r in RESOURCES}
        self._least: list[object] | None = None
        self._most: list[object] | None = None

    def left(self) -> bool:
        return self.next < len(self.ahead)

    def least_key(self, ssn: Session) -> list[object]:
        """The queue's key, but the last element, when its next victim heads it, holding what it
        holds now."""
        if self._least is None:
            request = ssn.job_request(self.ahead[self.next])
            self._least = capacity.queue_order_key_unmemoised(ssn.shares, self.share, request, None)[:-1]
        return self._least

    def most_key(self, ssn: Session) -> list[object]:
        """The same, holding the most it can then."""
        if self._most is None:
            request = ssn.job_request(self.ahead[self.next])
            self._most = capacity.queue_order_key_unmemoised(ssn.shares, self.share, request, None, self._bound())[:-1]
        return self._most

    def all_below(self, ssn: Session, limit: list[object]) -> list[Job] | _Undecided | None:
        """The line's jobs, in turn order, when every turn's `most_key` is below `limit`, read from
        one key that bounds them all: the queue's key at the last turn's bound of what it holds,
        with per resource the greatest request of a job at its head. Bounds only grow from turn
        to turn, and every element of the key but the last never decreases as the allocation or
        the request grows (the sums are rounded up monotonically too). None when that key is not
        below `limit` (each turn is then asked as it comes); UNDECIDED when a job's grant depends
        on the node (`take`), which ends the settling as it would turn by turn. The line is used
        up."""
        bound: dict[str, float] = {}
        most_asked = {r: 0.0 for r in RESOURCES}
        taken: list[Job] = []
        while self.left():
            request = ssn.job_request(self.ahead[self.next])
            for r in RESOURCES:
                most_asked[r] = max(most_asked[r], request[r])
            bound = self._bound()
            job = self.take(ssn)
            if job is None:
                return UNDECIDED
            taken.append(job)
        key = capacity.queue_order_key_unmemoised(ssn.shares, self.share, most_asked, None, bound)[:-1]
        return taken if key < limit else None

    def _bound(self) -> dict[str, float]:
        """What the queue can hold at the head's turn, with a margin over the sum for the order the
        additions are made in."""
        return {r: v + abs(v) * 1e-9 + 1e-6 for r, v in self.most.items()}

    def take(self, ssn: Session) -> Job | None:
        """The next victim, its most added to what the queue can hold; None when a grant's share
        depends on the node."""
        job = self.ahead[self.next]
        self.next += 1
        self._least = self._most = None
        for t in tasks_to_allocate(ssn, job, False):
            if t.request.kind == RequestType.GPU_MEMORY:
                return None
            most = request_quantities(t.request)
            if t.accepted is not None:
                most = {r: max(most[r], v) for r, v in request_quantities(t.accepted).items()}
            for r in RESOURCES:
                self.most[r] += most[r]
        return job


def _refused_before_placing(solver: JobSolver, scenario: AnyScenario, nodes: list[Node], victims: list[Task],
                            waiting: set[str]) -> bool:
    """The preemptor's placement would succeed and the validator would then surely refuse (what
    the simulation proves right after the placement): the placement is not run. Its pods ask for
    whole GPUs and hold that grant already, so the placement would leave no trace on them and
    open no GPU group."""
    refusals = solver.refusals
    if refusals is None or not placing.PLACEMENTS_PROVEN:
        return False
    ssn = solver.ssn
    preemptor = scenario.preemptor
    tasks = tasks_to_allocate(ssn, preemptor, False)
    if not all(map(placed_alike, tasks)):
        return False   # a first placement would leave the pods their grant
    taking = float(sum(t.request.gpus for t in tasks))
    if not refusals.refused_once_placed(scenario, nodes, victims, waiting, taking):
        return False
    if not _placement_stood_in(ssn, preemptor, nodes):
        return False
    refusals.cut_short()
    return True


def _refused_after_next(solver: JobSolver, scenario: AnyScenario, nodes: list[Node], victims: list[Task],
                        waiting: set[str], job: Job) -> bool:
    """The victim job whose turn comes next (nothing is placed before it) would surely be placed,
    and the validator would then surely refuse (what the simulation proves right after that
    placement): the placement is not run. Its pods ask for whole GPUs (or CPU only) and keep
    their grant wherever they go back (`ReclaimRefusals.refused_after_next` asks both), so the
    placement would leave no trace on them."""
    refusals = solver.refusals
    if refusals is None or not placing.PLACEMENTS_PROVEN:
        return False
    ssn = solver.ssn
    if not refusals.refused_after_next(scenario, nodes, victims, waiting, job):
        return False
    if not _placement_stood_in(ssn, job, nodes):
        return False
    refusals.cut_short_ahead()
    return True


def _next_read_before_placing(solver: JobSolver, scenario: AnyScenario, nodes: list[Node], victims: list[Task],
                              unplaced: set[str], order: _KeyedOrder, jobs: dict[str, Job], victim_uids: set[str],
                              hopeless: set[Request]) -> tuple[Job | None, set[str]] | str | None:
    """At the preemptor's turn, before its placement: the victim job `_next_placing` gives right
    after it, and the jobs left to take part then (by uid; `unplaced` is left as it is). REFUSED
    when both placements are sure and the bounds refuse right after them: neither is run. None
    when the order is not read here (the loop reads it after the placement, as before).

    The pops are those the loop makes after the placement. The order reads the queue shares
    (the queue keys are the proportion built-in's, remembered by allocation, request and
    victims) and the jobs (job keys read the job alone); the placement moves only the shares
    on the preemptor's queue path, and those are applied for the pops (`placed_virtually`;
    no labelled usage counts pods by their node). A job passed over for fitting nowhere fits
    nowhere once the preemptor's pods take room either, so the same jobs are passed over; the
    job read is placed next unless it fits nowhere after the placement, which the loop then
    asks. Its placement is sure after the preemptor's when it is sure now with as many more
    nodes to spare as the preemptor has pods (each lands on one node, and every other node
    stays as it is). The bounds are `_refused_after_next`'s, the preemptor's whole GPUs taken
    from what is free besides the job's."""
    refusals = solver.refusals
    ssn = solver.ssn
    if refusals is None or not placing.PLACEMENTS_PROVEN or ssn.labelled or not ssn.queue_keys_remembered \
            or not ssn.job_keys_pure:
        return None
    preemptor = scenario.preemptor
    tasks = tasks_to_allocate(ssn, preemptor, False)
    if not tasks or not all(map(placed_alike, tasks)):
        return None
    popped = set(unplaced)
    with ssn.shares.placed_virtually(preemptor, tasks):
        ahead = _next_placing(ssn, order, jobs, popped, victim_uids, nodes, hopeless)
        proven = ahead is not None \
            and refusals.refused_after_next(scenario, nodes, victims, popped, ahead,
                                            float(sum(t.request.gpus for t in tasks))) \
            and placing.surely_placed(ssn, ahead, nodes, margin=len(tasks))
    if not proven or ahead is None or not placing.surely_placed(ssn, preemptor, nodes):
        return ahead, popped
    # both placements begin as they would, in turn, and are not run
    ssn.pre_job_allocation(preemptor)
    ssn.pre_job_allocation(ahead)
    refusals.cut_short_before_both()
    return REFUSED


def _placement_stood_in(ssn: Session, job: Job, nodes: list[Node]) -> bool:
    """Whether the job's pipeline-only placement, its turn come, is sure to succeed
    (`placing.surely_placed`); it is then begun as it would begin (whatever the placement resets
    first is reset) and not run."""
    if not placing.surely_placed(ssn, job, nodes):
        return False
    ssn.pre_job_allocation(job)
    return True


def _last_turn(order: _KeyedOrder, jobs: dict[str, Job], unplaced: set[str]) -> Job | None:
    """The one job left to take part, when it is still in the order: every job popped before it
    would only be passed over (nothing is placed between the turns of the jobs taking part), and
    an order without a depth cap pops every job it holds, so its turn would come on the cluster
    as it is now."""
    if not (LAST_TURN_AT_ONCE and STOP_AFTER_LAST_TURN) or len(unplaced) != 1:
        return None
    uid = next(iter(unplaced))
    return jobs[uid] if order.holds(uid) else None


def _preemptor_cannot_fit(solver: JobSolver, preemptor: Job, nodes: list[Node], victim_tasks: list[Task],
                          feasible: dict[str, Node]) -> bool:
    """A pod of the pending job fits no node right after the evictions, so the simulation fails
    at the job's turn: the jobs placed before it only take room (whatever the order), so the pod
    cannot fit then either, and the order need not be built. Not used when a victim job also
    has pending pods: its failed re-placement in the simulation records fit errors its owner reads.

    A node the evictions did not touch is as it was before them (every scenario of the partial
    job is rolled back exactly), so a pod fits there exactly where it fitted then: that is read
    once per request, at the first scenario that asks, from the nodes that scenario left
    untouched; only the nodes touched now, and those whose fit before is not known, are asked
    one by one."""
    return _fits_nowhere(solver, preemptor, nodes, victim_tasks, feasible, {t.node for t in victim_tasks})


#: After a victim's turn before the preemptor's, a preemptor that fits no node any more ends the
#: simulation unplaced, as its turn would: until then only victims are placed, and placements only
#: take room (False: every turn is taken; the tests compare both). Asked from the nodes the
#: evictions touched, as _preemptor_cannot_fit asks, so only where those are few.
HOPELESS_AFTER_VICTIMS = True


def _hopeless_after_victim(solver: JobSolver, preemptor: Job, nodes: list[Node], victim_tasks: list[Task],
                           feasible: dict[str, Node], evicted_from: set[str]) -> bool:
    """The preemptor, whose turn is still to come, fits no node now (see HOPELESS_AFTER_VICTIMS).
    `evicted_from`: the nodes the simulation's evictions touched. Any other node is now as it was
    before them or fuller (a victim may have moved there), so where the preemptor did not fit
    before it does not fit now. The caller has made sure no victim job has pending pods."""
    return HOPELESS_AFTER_VICTIMS and FITS_FROM_BEFORE and len(evicted_from) <= TOUCHED_ASKED \
        and _fits_nowhere(solver, preemptor, nodes, victim_tasks, feasible, evicted_from, read_before=False,
                          none_pending=True)


#: A simulation ends, the preemptor unplaced, once its pods together ask for more whole GPUs than
#: the nodes have free (idle or releasing), at its turn or after a victim's turn before it (False:
#: its placement is run, and fails; the tests compare both). See _short_of_whole_gpus.
WHOLE_GPUS_COUNTED = True


#: At a victim's turn before the preemptor's, where the victim's placement is sure and would leave
#: fewer whole GPUs free than the preemptor asks, the simulation ends there, the preemptor
#: unplaced, without the placement (False: the victim is placed and the count asked after it;
#: the tests compare both). See _short_once_placed.
SHORT_READ_AHEAD = True


def _short_once_placed(solver: JobSolver, nodes: list[Node], need: float, job: Job) -> bool:
    """`_short_of_whole_gpus` asked as right after the placement of the victim job `job`, whose
    turn it is, where that placement is sure (it is then begun as it would begin, and not run).
    Its pods ask whole GPUs or CPU only (no job taking part has a shared or MIG pod where `need`
    is known) and keep their grant wherever they go back, so the placement would leave no trace
    on them; a pod of g whole GPUs lands on a node with at least g free and takes exactly g of
    the whole GPUs the count sums, so the count after it is the count now less their GPUs. After
    the placement the simulation would end unplaced whether its next check (the preemptor
    fitting nowhere) or this one ends it."""
    back = tasks_to_allocate(solver.ssn, job, False)
    if not back or not all(map(placed_back_alike, back)):
        return False
    taking = float(sum(t.request.gpus for t in back))
    if not need > _whole_room(solver, nodes) - taking:
        return False
    return _placement_stood_in(solver.ssn, job, nodes)


def _whole_room(solver: JobSolver, nodes: list[Node]) -> float:
    """The whole GPUs the nodes could still give pods asking whole GPUs: the whole part of what is
    free on each (idle and releasing), none where it is below zero."""
    free = solver.ssn.table.view(nodes).free_gpus
    return float(np.floor(np.maximum(free, 0.0) + 1e-6).sum())


def _short_of_whole_gpus(solver: JobSolver, nodes: list[Node], need: float) -> bool:
    """The preemptor's pods, each asking whole GPUs (`need` in all, as
    JobSolver.whole_gpus_asked counts them), ask more than the nodes could still give them: its
    placement must fail.

    A pod asking g whole GPUs fits a node only where what is free there (idle and releasing)
    is at least g, and takes exactly g of it; so pods placed on a node take at most the whole
    part of what is free there, none where it is below zero. Until the preemptor's turn only
    the taking part jobs' pods are placed, and with none of them shared or MIG a placement
    never makes any node's free GPUs grow (a pod moved back onto the node it was evicted from
    gives back what it held as releasing and takes it as pipelined). Predicates, other
    resources and topology only cut the room further."""
    return need > _whole_room(solver, nodes)


def _fits_nowhere(solver: JobSolver, preemptor: Job, nodes: list[Node], victim_tasks: list[Task],
                  feasible: dict[str, Node], touched: set[str], read_before: bool = True,
                  none_pending: bool = False) -> bool:
    """_preemptor_cannot_fit's answer, on the cluster as it is now; `touched`: the nodes the
    evictions touched. Without `read_before` (mid-simulation, where the cluster is no longer as
    it was right after the evictions) False unless where each pod fitted before is known.
    `none_pending`: no victim job has pending pods, as the caller knows already."""
    ssn = solver.ssn
    if not none_pending and victim_pending(ssn, victim_tasks):
        return False
    asks = solver.asks_of(preemptor)   # a pod's fit reads only its request: one pod per request
    if not FITS_FROM_BEFORE or len(touched) > TOUCHED_ASKED:
        view = ssn.table.view(nodes)
        return any(not fits_mask(view, t, with_releasing=True).any() for t in asks)
    before = solver.fitting_before
    if not read_before and any(t.request not in before for t in asks):
        return False
    for t in asks:
        if not _fits_somewhere(t, _fitted_before(solver, t, touched), feasible, touched):
            return True
    return False


def _fitted_before(solver: JobSolver, t: Task, touched: set[str]) -> tuple[set[str], set[str]]:
    """Where the pod's request fitted before the partial job's first scenario that asks (see
    JobSolver.fitting_before), read then from the nodes that scenario did not touch."""
    known = solver.fitting_before.get(t.request)
    if known is None:
        table = solver.ssn.table
        rows = np.flatnonzero(fits_mask(table.whole(), t, with_releasing=True)).tolist()
        known = solver.fitting_before[t.request] = ({table.nodes[i].name for i in rows} - touched, set(touched))
    return known


def _fits_somewhere(t: Task, known: tuple[set[str], set[str]], feasible: dict[str, Node], touched: set[str]) -> bool:
    """Whether the pod fits a feasible node now, from where its request fitted before (`known`:
    the nodes it fitted then and those not asked then): an untouched node it fitted, or a touched
    or unknown node it fits now. Loops, not generators: asked for every simulation."""
    fitted, unknown = known
    for name in fitted:
        if name in feasible and name not in touched:
            return True
    for names in (touched, unknown):
        for name in names:
            node = feasible.get(name)
            if node is not None and node.fits_idle_or_releasing(t):
                return True
    return False


#: A scenario's evictions from one node (no recorded victims) whose simulation would end at once,
#: the preemptor fitting nowhere (_preemptor_cannot_fit), are not made where that is read from the
#: node's amounts before them (False: every such simulation is run; the tests compare both). See
#: _short_before_evicting.
SHORT_BEFORE_EVICTING = True


def _short_before_evicting(solver: JobSolver, preemptor: Job, name: str, tasks: list[Task],
                           feasible: dict[str, Node]) -> bool:
    """_preemptor_cannot_fit's True, read before evicting `tasks` from node `name`, the only node
    the scenario touches: some pod of the preemptor fits no other node (as `fitting_before`
    tells, each node other than this one being as it was then) and, on this one, asks for more
    CPU, memory or pod slots than it would have free once the victims are releasing, or more
    whole GPUs where no GPU is shared and no victim holds a fraction or a MIG slice.

    Exact where it answers: evicting a placed pod leaves the node's idle amounts as they were and
    adds its amounts to what is releasing, so what is free grows by exactly what the victims hold
    (whole numbers only: every sum is then exact, in any order). Evicting and rolling back change
    nothing else a later simulation reads: the victim jobs have no pending pods, so no pending
    order is keyed again for them. False when it cannot tell.

    Most scenarios leave room enough: the sums are compared first, and only a shortfall is
    checked further."""
    if not (SHORT_BEFORE_EVICTING and FITS_FROM_BEFORE) or not tasks:
        return False
    ssn = solver.ssn
    node = ssn.cluster.nodes.get(name)
    if node is None:
        return False
    asks = solver.asks_of(preemptor)
    idle, releasing = node.idle, node.releasing
    cpu, memory, pods = idle.cpu + releasing.cpu, idle.memory + releasing.memory, idle.pods + releasing.pods
    for t in tasks:
        req = t.request
        cpu += req.cpu
        memory += req.memory
        pods += 1.0
    gpus = math.nan    # whole GPUs, counted only on a node where none is shared and no victim holds a part

    def lacks(req: Request) -> bool:
        return req.cpu > cpu or req.memory > memory or pods < 1 \
            or (not req.is_shared and not req.mig and req.gpus > gpus + 1e-9)    # (False against NaN)

    short = [t for t in asks if lacks(t.request)]
    if len(short) < len(asks) and not (node.shared_used or idle.mig or releasing.mig) \
            and not any(t.request.is_shared or t.request.mig for t in tasks):
        gpus = idle.gpus + releasing.gpus + sum(t.request.gpus for t in tasks)
        short = [t for t in asks if lacks(t.request)]
    if not short:
        return False
    # the sums above are exact: whole numbers, each victim placed (its amounts then move to what
    # is releasing), on this node, none with pending pods
    values = [idle.cpu, releasing.cpu, idle.memory, releasing.memory, idle.pods, releasing.pods, cpu, memory, pods]
    if not math.isnan(gpus):
        values += (idle.gpus, releasing.gpus, gpus)
    for t in tasks:
        if t.node != name or t.status not in ACTIVE_ALLOCATED:
            return False
        values += (t.request.cpu, t.request.memory)
        if not math.isnan(gpus):
            values.append(t.request.gpus)
    if not all(float(v).is_integer() and abs(v) < EXACT_BELOW for v in values) or victim_pending(ssn, tasks):
        return False
    # (asked now, the node itself fits the pod no better than after the evictions: it has less free)
    touched = {name}
    return any(not _fits_somewhere(t, _fitted_before(solver, t, touched), feasible, touched) for t in short)


#: Nodes touched by a scenario's evictions past which a fit mask over every node is cheaper
#: than asking the touched nodes one by one.
TOUCHED_ASKED = 8


def _cannot_fit(ssn: Session, job: Job, nodes: list[Node], hopeless: set[Request]) -> bool:
    """A pod of the job fits on none of the nodes even counting releasing resources, so placing
    the job must fail. While jobs are being placed nodes only fill up, so a plain request found
    hopeless once stays hopeless for the rest of the simulation."""
    if job.root.topology is not None:
        return False   # the topology hook records its own fit errors: let it run
    for ps in job.pod_sets.values():
        if ps.topology is not None:
            return False
    candidates = [t for t in job.tasks.values() if t.should_allocate(False)]
    if not candidates:
        return False
    first = candidates[0].request
    # Pods all alike: whichever of them are placed next, the first is enough to judge. (A lone pod
    # is alike with itself: its request's dataclass equality, which builds two tuples of every
    # field, is not asked.)
    alike = len(candidates) == 1 or all(t.request is first or t.request == first for t in candidates)
    tasks = candidates[:1] if alike else tasks_to_allocate(ssn, job, False)
    view = None
    for task in tasks:
        req = task.request
        if req.is_shared or req.mig:
            continue
        if req in hopeless:
            return True
        if view is None:
            view = ssn.table.view(nodes)
        if not fits_mask(view, task, with_releasing=True).any():
            hopeless.add(req)
            return True
    return False


class _KeyedOrder(JobsByQueue):
    """Jobs by queue whose job keys come from a memo keyed by the job's task statuses (the
    same jobs are ordered again in every simulation of one solution)."""

    def __init__(self, ssn: Session, memo: dict[tuple[Any, ...], tuple[Any, ...]]) -> None:
        super().__init__(ssn)
        self.memo = memo
        self.popped_uids: set[str] = set()
        self.placements = 0      # jobs placed so far in the simulation: the cluster changes only then
        self._last_leaf: _QueueNode | None = None
        self._last_at = -1       # `placements` at the last pop
        self._streak: tuple[_QueueNode, int, tuple[float, float, float]] | None = None
        self.preset: dict[str, tuple[Any, ...]] | None = None   # keys asked before loading, by uid

    def holds(self, uid: str) -> bool:
        """The job was loaded and not popped yet (this order has no depth cap, so a job pushed
        stays until it is popped)."""
        return uid in self._job_keys and uid not in self.popped_uids

    def pop(self) -> Job | None:
        job = self._pop_in_streak() if STREAKS_POPPED_AT_ONCE else None
        if job is None:
            job = self._pop_noting_streak()
        if job is not None:
            self.popped_uids.add(job.uid)
        self._last_at = self.placements
        return job

    # A streak: the same leaf popped again and again. When the previous pop came from this leaf
    # too, every queue on its path was marked, so each pop re-takes their keys from the leaf's next
    # job. With the session remembering queue keys by queue allocation and request, those keys
    # are the same while no job is placed and the next job asks for the same resources; every heap
    # on the path then makes the very comparisons of the pop before, which moved nothing (or
    # another leaf would have come up), so the pop comes from this leaf again. Such a pop is
    # made at once: the job leaves the leaf and the path is marked, as a pop leaves them.
    def _pop_noting_streak(self) -> Job | None:
        leaf = self._path_leaf() if PATH_POPS else None
        if leaf is None:
            leaf = self._to_leaf(self.roots)
        if leaf is None:
            return None
        fresh = leaf is self._last_leaf
        asks = self._asks(leaf)
        keys_ok = self._keys_ok(_path_of(leaf))
        job: Job = leaf.children.pop()
        self._after_pop(leaf)
        self._last_leaf = leaf
        streak = fresh and keys_ok and bool(leaf.children.items) and self.ssn.queue_keys_remembered
        self._streak = (leaf, self.placements, asks) if streak else None
        return job

    def _path_leaf(self) -> _QueueNode | None:
        """The leaf the next pop comes from, found along the last pop's path when that pop came
        from a leaf that still has jobs and nothing was placed since: each node of the path still
        tops its heap (the walk took the top at every level) and every other node of those heaps
        is as it was, so `fix(0)` at each level makes only two comparisons, the top's children
        between them and the better child against the top, whose key is taken anew. Where the
        top stays, the heap is left as `fix` leaves it; where it does not, the heap is fixed there
        as `_next` fixes it and the walk goes on from that level as `_to_leaf` walks. None when
        the last pop's path does not apply (the caller walks from the roots)."""
        leaf = self._last_leaf
        if leaf is None or self._last_at != self.placements or not leaf.children.items:
            return None
        path = _path_of(leaf)
        level = self._where_it_sinks(path)
        if level is None:
            return None
        for node in path[:level]:
            node.needs_reorder = False
        if level == len(path):
            return leaf
        heap = path[level - 1].children if level else self.roots
        heap.fix(0)          # the top sinks, with the comparisons `_next` would make
        path[level].needs_reorder = False
        return self._to_leaf(heap)

    def _where_it_sinks(self, path: list[_QueueNode]) -> int | None:
        """`_path_leaf`'s checks and comparisons for the leaf at the end of `path` (roots first),
        moving nothing: None when the last pop's path does not apply (a node is not its heap's
        top, or was not marked by that pop); else the first level where a child of the top comes
        before it, or len(path) when the leaf stays on top of every heap on the path."""
        heap = self.roots
        for node in path:
            if not heap.items or heap.items[0] is not node or not node.needs_reorder:
                return None
            heap = node.children
        heap = self.roots
        for level, node in enumerate(path):
            items = heap.items
            if len(items) > 1:
                j = 2 if len(items) > 2 and self._node_less(items[2], items[1]) else 1
                if self._node_less(items[j], node):
                    return level
            heap = node.children
        return len(path)

    def _keys_ok(self, path: list[_QueueNode]) -> bool:
        """No queue key on the path holds a rule's error (a streak is not kept past one)."""
        return all(n.key is None or not self.ssn.key_failed(n.key) for n in path)

    def pass_over(self, taking_part: Collection[str]) -> None:
        """Pop, right after `pop` gave a job that takes no part in the simulation, the jobs that
        come out next from the same leaf, for as long as none of them takes part (the caller
        would only pass them over one by one). Nothing is placed between those pops, so each pop
        comes from the leaf again when its next job asks what the last one asked (a streak, as
        `_pop_in_streak` takes it) or when the comparisons `_path_leaf` makes keep the leaf on top
        of every heap on its path; those comparisons are made here without moving anything, and
        the first that would move a heap ends the pass, leaving that pop to `pop`. Every job
        popped here leaves the order as `pop` would have left it."""
        leaf = self._last_leaf
        if leaf is None or self._last_at != self.placements or self.victims or not self.ssn.queue_keys_remembered:
            return
        children = leaf.children
        if not isinstance(children, SortedByKey):
            return
        items = children.items
        if not items or items[0][2].uid in taking_part:
            return
        path = _path_of(leaf)
        request = self.ssn.job_request
        popped = self.popped_uids
        while items:
            job: Job = items[0][2]
            if job.uid in taking_part:
                return
            streak = self._streak
            if streak is not None and streak[0] is leaf and streak[1] == self.placements:
                # the streak's pops, all at once: the jobs from the head on that ask what it asks
                asks = streak[2]
                run = 0
                for entry in items:
                    other: Job = entry[2]
                    if other.uid in taking_part:
                        break
                    req = request(other)
                    if (req["cpu"], req["memory"], req["gpu"]) != asks:
                        break
                    run += 1
                if run:
                    popped.update([entry[2].uid for entry in items[:run]])
                    del items[:run]
                    self._after_pop(leaf)
                    if not items:
                        self._streak = None
                    continue
            if not self._stays_on_top(path):
                return
            asks = self._asks(leaf)
            keys_ok = self._keys_ok(path)
            children.pop()
            self._after_pop(leaf)
            self._streak = (leaf, self.placements, asks) if keys_ok and items else None
            popped.add(job.uid)

    def _stays_on_top(self, path: list[_QueueNode]) -> bool:
        """The leaf at the end of `path` (roots first) would come out of the next pop along its
        path, by `_path_leaf`'s comparisons, made without moving anything."""
        return self._where_it_sinks(path) == len(path)

    def _pop_in_streak(self) -> Job | None:
        if self._streak is None:
            return None
        leaf, placements, asks = self._streak
        if placements != self.placements or self._asks(leaf) != asks:
            self._streak = None
            return None
        job: Job = leaf.children.pop()
        self._after_pop(leaf)
        if not leaf.children.items:
            self._streak = None
        return job

    def _asks(self, leaf: _QueueNode) -> tuple[float, float, float]:
        req = self.ssn.job_request(leaf.children.peek())
        return req["cpu"], req["memory"], req["gpu"]

    def key_of(self, job: Job) -> tuple[Any, ...]:
        if self.preset is not None:
            known = self.preset.get(job.uid)
            if known is not None:
                return known   # asked already, for this order (see _turns_by_keys)
        if self.ssn.cluster.jobs.get(job.uid) is not job:
            return self.ssn.job_key(job)   # the partial job: its own gang sizes, never memoised
        memo_key = (job.uid, *(t.status for t in job.tasks.values()))
        key = self.memo.get(memo_key)
        if key is None:
            key = self.memo[memo_key] = self.ssn.job_key(job)
        return key


def _path_of(leaf: _QueueNode) -> list[_QueueNode]:
    """The queues from a root down to `leaf`."""
    path: list[_QueueNode] = []
    node: _QueueNode | None = leaf
    while node is not None:
        path.append(node)
        node = node.parent
    path.reverse()
    return path
