"""The loop reclaim, preempt and consolidation share: pending jobs in queue order, each solved
inside its own Statement; a solution is committed, a failure remembered by its signature."""

from __future__ import annotations

from collections.abc import Callable

from kaipolicy import timelimit
from kaipolicy.actions.ordering import JobsByQueue
from kaipolicy.actions.signatures import FailedSignatures
from kaipolicy.api.job import Job
from kaipolicy.api.task import Task
from kaipolicy.framework.closing import job_failure
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement

Attempt = Callable[[Job], tuple[bool, Statement | None, list[Task]]]


def solve_in_order(ssn: Session, action: str, outcome: str, order: JobsByQueue, failed: FailedSignatures,
                   attempt: Attempt, admit: Callable[[Job], bool] | None = None) -> None:
    """`admit` (when given) is asked before the signature shortcut, as the reference does for
    reclaim's canReclaim."""
    where = f"in {action}"     # what a time limit reached between two jobs says
    ssn.preemptors_waiting = order
    try:
        while not order.empty():
            job = order.pop()
            if job is None:
                break
            ssn.refusals.clear()
            if admit is not None and not admit(job):
                if ssn.audit.enabled:
                    ssn.audit.add("job", **job_failure(ssn, job, action))
                continue
            if failed.skip(job):
                if ssn.audit.enabled:
                    ssn.audit.add("job", action=action, job=job.name, namespace=job.namespace, queue=job.queue,
                                  outcome="skipped", reason="a job with the same requirements already failed "
                                                            f"in {action} this cycle")
                continue
            timelimit.check(where)
            ssn.tally["considered", action] += 1
            solved, stmt, victims = attempt(job)
            order.forget_keys()   # a commit, or a statement left applied, moved queue allocations
            if solved and stmt is not None:
                stmt.commit()
                ssn.audit.add("job", action=action, job=job.name, namespace=job.namespace, queue=job.queue,
                              outcome=outcome, victims=[t.key for t in victims])
            else:
                if stmt is not None:
                    stmt.note_moved()   # left applied, as the reference leaves it
                failed.remember(job)
                if ssn.audit.enabled:
                    ssn.audit.add("job", **job_failure(ssn, job, action))
    finally:
        ssn.preemptors_waiting = None
        order.dispose()   # its reference cycles would wait for the collector
