"""Which tasks of a job to place next: pod sets in order, the gang minimum first, then one more.

The result is memoised per job until the job's tasks change status (the session clears it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from kaipolicy.api.job import Job
from kaipolicy.api.resources import RequestType
from kaipolicy.api.task import Task
from kaipolicy.builtins.fairshare import Vec, request_quantities

if TYPE_CHECKING:
    from kaipolicy.framework.session import Session

T = TypeVar("T")


def tasks_to_allocate(ssn: Session, job: Job, real: bool) -> list[Task]:
    # Memoised like the reference: the first caller's `real` wins until a task changes status.
    cached = ssn.next_tasks.get(job.uid)
    if cached is None:
        cached = ssn.next_tasks[job.uid] = _tasks_to_allocate(ssn, job, real)
    return list(cached)


def in_order(items: Iterable[T], key: Callable[[T], Any], reverse: bool = False) -> list[T]:
    """`sorted(items, key=key, reverse=reverse)`, without evaluating order rules when there is
    nothing to order (as the reference's sort never compares a single item)."""
    out = list(items)
    if len(out) > 1:
        out.sort(key=key, reverse=reverse)
    return out


def _tasks_to_allocate(ssn: Session, job: Job, real: bool) -> list[Task]:
    if len(job.pod_sets) == 1:
        tasks = next(iter(job.pod_sets.values())).tasks
        if len(tasks) == 1:
            # one pod in one pod set (no order is asked of one item): the pod, when it should be
            # placed, whether its pod set's minimum is met or not
            task = next(iter(tasks.values()))
            return [task] if task.should_allocate(real) else []
    pod_sets = in_order(job.pod_sets.values(), lambda ps: ssn.pod_set_key(ps, job))
    unsatisfied = sum(1 for ps in pod_sets if ps.active_allocated < ps.min_available)
    max_sets = unsatisfied if unsatisfied > 0 else 1
    out: list[Task] = []
    taken = 0
    for ps in pod_sets:
        if taken >= max_sets:
            break
        candidates = in_order([t for t in ps.tasks.values() if t.should_allocate(real)],
                              lambda t: ssn.task_key(t, job))
        if not candidates:
            continue
        allocated = ps.active_allocated
        if allocated >= ps.min_available:
            n = min(len(candidates), 1)
        else:
            n = ps.min_available - allocated
        out.extend(candidates[:n])
        taken += 1
    return out


def init_request_quantities(ssn: Session, job: Job) -> Vec:
    """What the job's next tasks ask for, as queue quota counts it (GetTasksToAllocateInitResource)."""
    cached = ssn.next_request.get(job.uid)
    if cached is not None:
        return cached
    total: Vec = {"cpu": 0.0, "memory": 0.0, "gpu": 0.0}
    mgm = ssn.cluster.min_node_gpu_memory
    for t in tasks_to_allocate(ssn, job, False):
        if not t.should_allocate(False):
            continue
        q = request_quantities(t.request)
        if t.request.kind == RequestType.GPU_MEMORY and mgm:
            q["gpu"] += t.request.count * (t.request.gpu_memory / mgm)
        for r in total:
            total[r] += q[r]
    ssn.next_request[job.uid] = total
    return total
