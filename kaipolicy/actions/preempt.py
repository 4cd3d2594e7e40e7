"""preempt: pending jobs evict lower-priority preemptible jobs of their own queue.

A non-preemptible job that would take its queue over its deserved quota does not try. Victims
are active, strictly lower-priority preemptible jobs of the same queue that pass
preemptVictimFilter; a scenario must pass preemptScenarioValidator.
"""

from __future__ import annotations

from kaipolicy.actions.eviction_loop import solve_in_order
from kaipolicy.actions.ordering import PENDING_READY, JobsByQueue
from kaipolicy.actions.signatures import FailedSignatures
from kaipolicy.actions.solver import JobSolver, feasible_nodes
from kaipolicy.api.job import Job
from kaipolicy.api.task import ALIVE, Task
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement
from kaipolicy.framework.tasks import tasks_to_allocate

ACTION = "preempt"


def preempt(ssn: Session) -> None:
    ssn.action = ACTION
    order = JobsByQueue(ssn, depth=ssn.config.depth(ACTION)).add(ssn.cluster.jobs.values(), PENDING_READY)
    failed = FailedSignatures(ssn)
    rules = ", ".join([*ssn.allowing_rules("preemptVictimFilter"), *ssn.allowing_rules("preemptScenarioValidator")])
    solve_in_order(ssn, ACTION, "preempted", order, failed, lambda job: _attempt(ssn, job, rules))


def has_live_pod(ssn: Session, job: Job) -> bool:
    """At least one alive pod, on a node the session knows when it names one."""
    nodes = ssn.cluster.nodes
    return any(t.status in ALIVE and (not t.node or t.node in nodes) for t in job.tasks.values())


def _attempt(ssn: Session, job: Job, rules: str) -> tuple[bool, Statement | None, list[Task]]:
    gate = ssn.non_preemptible_over_quota(job, tasks_to_allocate(ssn, job, False))
    if not gate.ok:
        ssn.note_denial(job, gate)
        return False, None, []

    def victims() -> list[Job]:
        return [v for v in ssn.cluster.jobs.values()
                if v.queue == job.queue and v.uid != job.uid and v.preemptible and v.priority < job.priority
                and ssn.has_evictable(v)
                and has_live_pod(ssn, v) and ssn.preempt_victim_filter(job, v).ok]

    solver = JobSolver(ssn, ACTION, feasible_nodes(ssn.node_list, job, ssn.table), victims,
                       lambda partial, scenario: ssn.preempt_scenario_validator(partial, scenario), rules)
    return solver.solve(job)
