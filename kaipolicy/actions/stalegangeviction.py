"""stalegangeviction: a gang that has stayed below its minimum (in some pod set) longer than the
grace period loses all its active pods; a negative grace period turns the action off.

The stale clock starts the first cycle a job is seen stale and is cleared when it recovers.
"""

from __future__ import annotations

from kaipolicy.api.job import DEFAULT_SUB_GROUP, Job
from kaipolicy.api.task import Task
from kaipolicy.framework.session import Session

ACTION = "stalegangeviction"


def stalegangeviction(ssn: Session) -> None:
    ssn.action = ACTION
    grace = ssn.params.stale_grace_seconds
    now = ssn.cluster.now
    for job in sorted(ssn.cluster.jobs.values(), key=lambda j: j.order):
        if not job.is_stale():
            job.stale_since = None
            continue
        if job.stale_since is None:
            job.stale_since = now
        if grace < 0 or now - job.stale_since < grace:
            continue
        victims = [t for t in job.tasks.values() if ssn.evictable(t)]
        stmt = ssn.statement()
        for task in sorted(victims, key=lambda t: t.order):
            stmt.evict(task, gang_eviction_message(task, job), {
                "job": job.key, "action": ACTION,
                "rule": f"gang below its minimum for {now - job.stale_since:g}s (grace period {grace:g}s)",
            })
        stmt.commit()


def gang_eviction_message(task: Task, job: Job) -> str:
    if len(job.pod_sets) == 1 and DEFAULT_SUB_GROUP in job.pod_sets:
        minimum = job.pod_sets[DEFAULT_SUB_GROUP].min_available
        return (f"Workload doesn't meet the minimum required number of pods ({minimum}), "
                f"evicting remaining pod: {task.key}")
    ps = job.pod_sets.get(task.sub_group)
    if ps is None:
        return (f"Workload doesn't meet the minimum required number of pods in sub-group {task.sub_group}, "
                f"evicting remaining pod: {task.key}")
    return (f"Workload doesn't meet the minimum required number of pods ({ps.min_available}) in sub-group "
            f"{ps.name}, evicting remaining pod: {task.key}")
