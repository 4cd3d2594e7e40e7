"""consolidation: make room for a pending job by moving running preemptible jobs elsewhere.

Pure relocation: a scenario is accepted only if every victim is placed again (none is left
Releasing). Preemptors are pending, ready, preemptible jobs for which the cluster as a whole
has enough idle or releasing GPUs; victims are active preemptible jobs of any queue, at most
`maxConsolidationPreemptees` + 1 of them (the reference's off-by-one; 0 means no cap, as the
scenario format says). Failed signatures are remembered across queues.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kaipolicy.actions.eviction_loop import solve_in_order
from kaipolicy.actions.ordering import JobFilter, JobsByQueue
from kaipolicy.actions.preempt import has_live_pod
from kaipolicy.actions.signatures import FailedSignatures
from kaipolicy.actions.solver import AnyScenario, JobSolver, feasible_nodes
from kaipolicy.actions.solver.filters import free_gpus
from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.task import Status, Task
from kaipolicy.framework.outcome import OK, Code, Outcome
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement
from kaipolicy.framework.tasks import tasks_to_allocate

ACTION = "consolidation"
RULE = "(every victim placed again)"  # built into the action, not a rule of the bundle


def consolidation(ssn: Session) -> None:
    ssn.action = ACTION
    flt = JobFilter(pending=True, ready=True, preemptible=True)
    order = JobsByQueue(ssn, depth=ssn.config.depth(ACTION)).add(ssn.cluster.jobs.values(), flt)
    failed = FailedSignatures(ssn, per_queue=False)
    solve_in_order(ssn, ACTION, "consolidated", order, failed, lambda job: _attempt(ssn, job))


def all_placed_again(job: Job, scenario: AnyScenario) -> Outcome:
    for victim in scenario.victims:
        if any(t.status == Status.RELEASING for t in victim.tasks):
            return Outcome(Code.DENY, RULE, f"a victim of {victim.job.name} would not be placed again")
    return OK


def enough_gpus(ssn: Session, job: Job) -> bool:
    """The cluster's idle plus releasing GPUs (and GPU memory) cover the job's next tasks."""
    gpus = memory = 0.0
    if FREE_ROOM_PER_NODE_KEPT:
        # the same per-node values added in the same (node) order as below: the same sums
        for g, m in zip(_kept(ssn, "gpus", free_gpus).tolist(), _kept(ssn, "memory", _free_gpu_memory).tolist()):
            gpus += g
            memory += m
    else:
        for node in ssn.node_list:
            if not node.ready:
                continue
            gpus += node.idle_gpus_total() + node.releasing_gpus_total()
            memory += _free_gpu_memory(node)
    want_gpus = want_memory = 0.0
    for t in tasks_to_allocate(ssn, job, False):
        want_gpus += t.request.gpus + t.request.mig_gpus
        want_memory += t.request.gpu_memory
    return gpus >= want_gpus and memory >= want_memory


#: Keep each node's free GPUs and GPU memory between preemptors, recomputed only on the nodes
#: a task landed on or left since (False: add up every node for every preemptor; the tests
#: compare both).
FREE_ROOM_PER_NODE_KEPT = True


def _kept(ssn: Session, what: str, of_node: Callable[[Node], float]) -> np.ndarray:
    """One value per node in the table's (name) order, 0 for a node that is not ready (adding
    0.0 leaves a sum as it was). Floats always: the sums below add floats, so an integer value
    (GPU memory) counts as the same float either way."""
    def row(node: Node) -> float:
        return of_node(node) if node.ready else 0.0

    return ssn.table.per_node(("consolidation-free", what), row)


def _free_gpu_memory(node: Node) -> float:
    """The node's idle and releasing GPU memory as the reference adds it up: a shared GPU whose
    every pod is releasing counts once, as a whole releasing GPU."""
    shared_idle = sum(node.gpu_memory - v for v in node.shared_allocated.values() if v > 0)
    whole = int(node.idle.gpus + node.idle.mig_gpus) + int(node.releasing.gpus + node.releasing.mig_gpus)
    return shared_idle + node.releasing_shared_memory() + whole * node.gpu_memory


def _attempt(ssn: Session, job: Job) -> tuple[bool, Statement | None, list[Task]]:
    if not enough_gpus(ssn, job):
        return False, None, []
    cap = ssn.params.max_consolidation_preemptees

    def victims() -> list[Job]:
        if VICTIMS_KEPT:
            return _victims_kept(ssn, job, cap)
        out: list[Job] = []
        for v in sorted(ssn.cluster.jobs.values(), key=lambda j: j.order):
            if not has_live_pod(ssn, v) or not v.preemptible or v.uid == job.uid:
                continue
            if cap > 0 and len(out) > cap:
                continue
            if not ssn.has_evictable(v):
                continue
            out.append(v)
        return out

    solver = JobSolver(ssn, ACTION, feasible_nodes(ssn.node_list, job, ssn.table), victims,
                       all_placed_again, RULE)
    return solver.solve(job)


#: Keep which jobs could be victims between preemptors, asked again only of jobs whose pods
#: changed status since (False: ask every job for every preemptor; the tests compare both).
VICTIMS_KEPT = True


class _VictimJobs:
    """The session's jobs in creation order, and per job whether it could be a victim (a live
    pod, preemptible, a pod to evict) with its status-change count when that was asked. The
    answer reads only the job's pod statuses and the pods already evicted; a pod is recorded as
    evicted when a statement commits, and that statement changed its status after the victims
    were last listed (they are listed once, when a preemptor's solving starts), so the count
    always moves first."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.jobs = sorted(ssn.cluster.jobs.values(), key=lambda j: j.order)
        self.known: dict[str, tuple[int, bool]] = {}

    def ask(self, job: Job, count: int) -> bool:
        ssn = self.ssn
        answer = (has_live_pod(ssn, job) and job.preemptible
                  and ssn.has_evictable(job))
        self.known[job.uid] = (count, answer)
        return answer


def _victims_kept(ssn: Session, preemptor: Job, cap: int) -> list[Job]:
    """The victims `_attempt` lists, in the same order, from the answers kept per job."""
    kept = ssn.cache.get(("consolidation-victims",))
    if kept is None:
        kept = ssn.cache[("consolidation-victims",)] = _VictimJobs(ssn)
    counts, known = ssn.status_changes, kept.known
    out: list[Job] = []
    for v in kept.jobs:
        if cap > 0 and len(out) > cap:
            break   # the list only grows: no later job gets in
        if v.uid == preemptor.uid:
            continue
        count = counts.get(v.uid, 0)
        answer = known.get(v.uid)
        if answer is None or answer[0] != count:
            if kept.ask(v, count):
                out.append(v)
        elif answer[1]:
            out.append(v)
    return out
