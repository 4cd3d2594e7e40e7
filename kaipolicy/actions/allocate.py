"""allocate: place pending jobs in queue order, each inside its own Statement; never evicts.

A job that could only partly start is pipelined whole (no BindRequests); a job that started
for the first time gets its start time; an elastic job with more to place goes back in line.
"""

from __future__ import annotations

from kaipolicy import timelimit
from kaipolicy.actions.ordering import PENDING_READY, JobsByQueue
from kaipolicy.actions.placement import allocate_job
from kaipolicy.framework.closing import job_failure
from kaipolicy.framework.session import Session


def allocate(ssn: Session) -> None:
    ssn.action = "allocate"
    order = JobsByQueue(ssn, depth=ssn.config.depth("allocate")).add(ssn.cluster.jobs.values(), PENDING_READY)
    nodes = ssn.node_list
    try:
        while not order.empty():
            job = order.pop()
            if job is None:
                break
            timelimit.check("in allocate")
            stmt = ssn.statement()
            already_started = job.num_allocated > 0
            if allocate_job(ssn, stmt, nodes, job, pipeline_only=False):
                pipelined = False
                if job.should_pipeline():
                    stmt.convert_allocated_to_pipelined(job.uid)
                    pipelined = True
                stmt.commit()   # the audit log has its pods' task records and, at close, its outcome
                if not pipelined and not already_started:
                    job.last_start = ssn.cluster.now
                if job.has_tasks_to_allocate(True):
                    order.push(job)
            else:
                stmt.discard()
                if ssn.audit.enabled:
                    ssn.audit.add("job", **job_failure(ssn, job, "allocate"))
    finally:
        order.dispose()   # its reference cycles would wait for the collector
