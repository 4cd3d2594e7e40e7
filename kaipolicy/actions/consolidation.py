"""consolidation: make room for a pending job by moving running preemptible jobs elsewhere.

Pure relocation: a scenario is accepted only if every victim is placed again (none is left
Releasing). Preemptors are pending, ready, preemptible jobs for which the cluster as a whole
has enough idle or releasing GPUs; victims are active preemptible jobs of any queue, at most
`maxConsolidationPreemptees` + 1 of them (the reference's off-by-one; 0 means no cap, as the
scenario format says). Failed signatures are remembered across queues.
"""

from __future__ import annotations

from kaipolicy.actions.eviction_loop import solve_in_order
from kaipolicy.actions.ordering import JobFilter, JobsByQueue
from kaipolicy.actions.preempt import has_live_pod
from kaipolicy.actions.signatures import FailedSignatures
from kaipolicy.actions.solver import JobSolver, Scenario, feasible_nodes
from kaipolicy.api.job import Job
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


def all_placed_again(job: Job, scenario: Scenario) -> Outcome:
    for victim in scenario.victims:
        if any(t.status == Status.RELEASING for t in victim.tasks):
            return Outcome(Code.DENY, RULE, f"a victim of {victim.job.name} would not be placed again")
    return OK


def enough_gpus(ssn: Session, job: Job) -> bool:
    """The cluster's idle plus releasing GPUs (and GPU memory) cover the job's next tasks."""
    gpus = memory = 0.0
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


def _free_gpu_memory(node: object) -> float:
    from kaipolicy.api.node import Node
    assert isinstance(node, Node)
    shared_idle = sum(node.gpu_memory - v for v in node.shared_allocated.values() if v > 0)
    shared_releasing = sum(v for g, v in node.shared_releasing.items() if v > 0)
    whole = int(node.idle.gpus + node.idle.mig_gpus) + int(node.releasing.gpus + node.releasing.mig_gpus)
    return shared_idle + shared_releasing + whole * node.gpu_memory


def _attempt(ssn: Session, job: Job) -> tuple[bool, Statement | None, list[Task]]:
    if not enough_gpus(ssn, job):
        return False, None, []
    cap = ssn.params.max_consolidation_preemptees

    def victims() -> list[Job]:
        out: list[Job] = []
        for v in sorted(ssn.cluster.jobs.values(), key=lambda j: j.order):
            if not has_live_pod(ssn, v) or not v.preemptible or v.uid == job.uid:
                continue
            if cap > 0 and len(out) > cap:
                continue
            if not any(ssn.evictable(t) for t in v.tasks.values()):
                continue
            out.append(v)
        return out

    solver = JobSolver(ssn, ACTION, feasible_nodes(ssn.node_list, job), victims, all_placed_again, RULE)
    return solver.solve(job)
