"""reclaim: pending jobs take resources back from other queues' preemptible jobs.

A job may try only if the canReclaim hook allows it (its queue stays within fair share); victims
are active preemptible jobs of other queues that pass reclaimVictimFilter, worst queue and job
first; a scenario must pass reclaimScenarioValidator, judged on the queue shares as they stood
when the job's solution started.
"""

from __future__ import annotations

from kaipolicy.actions.eviction_loop import solve_in_order
from kaipolicy.actions.ordering import PENDING_READY, JobsByQueue
from kaipolicy.actions.signatures import FailedSignatures
from kaipolicy.actions.solver import JobSolver, feasible_nodes
from kaipolicy.actions.solver.proofs import ReclaimRefusals
from kaipolicy.api.job import Job
from kaipolicy.api.task import Task
from kaipolicy.builtins.reclaimable import snapshot
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement

ACTION = "reclaim"


def reclaim(ssn: Session) -> None:
    ssn.action = ACTION
    order = JobsByQueue(ssn, depth=ssn.config.depth(ACTION)).add(ssn.cluster.jobs.values(), PENDING_READY)
    failed = FailedSignatures(ssn)
    rules = ", ".join([*ssn.allowing_rules("canReclaim")[:1], *ssn.allowing_rules("reclaimVictimFilter"),
                       *ssn.allowing_rules("reclaimScenarioValidator")])
    solve_in_order(ssn, ACTION, "reclaimed", order, failed, lambda job: _attempt(ssn, job, rules),
                   admit=lambda job: _admit(ssn, job))


def _admit(ssn: Session, job: Job) -> bool:
    verdict = ssn.can_reclaim(job)
    if not verdict.ok:
        ssn.note_denial(job, verdict)
    return verdict.ok


def _attempt(ssn: Session, job: Job, rules: str) -> tuple[bool, Statement | None, list[Task]]:
    ssn.on_job_solution_start()
    start = snapshot(ssn.shares.queues)

    def victims() -> list[Job]:
        return [v for v in ssn.cluster.jobs.values()
                if v.queue != job.queue and v.preemptible
                and ssn.has_evictable(v)
                and ssn.reclaim_victim_filter(job, v).ok]

    solver = JobSolver(ssn, ACTION, feasible_nodes(ssn.node_list, job, ssn.table), victims,
                       lambda partial, scenario: ssn.reclaim_scenario_validator(partial, scenario), rules, start,
                       ReclaimRefusals.for_session(ssn))
    return solver.solve(job)
