"""The scheduling-signature shortcut of the eviction actions: once a job fails, later jobs with
the same scheduling constraints that are not easier are skipped without trying.

"Same constraints" is the reference's signature: per pod set its topology constraints (and its
ancestors'), and per pod not yet placed its node selector, node and pod affinity, tolerations,
priority and legacy-MIG flag (what kube places by, not how much it asks). "Easier" compares the pending pods' requests
sorted ascending: fewer pods is easier, and otherwise the first pair that differs decides.
The reference keeps one record per queue in reclaim and preempt, one overall in consolidation.
"""

from __future__ import annotations

from functools import cmp_to_key
from typing import Any

from kaipolicy.api.job import Job, PodSet
from kaipolicy.api.resources import MIN_GPU_DIFF, Request
from kaipolicy.api.task import ACTIVE_ALLOCATED, Status, Task
from kaipolicy.framework.session import Session


def _pod_signature(task: Task, job: Job) -> tuple[Any, ...]:
    return (task.node_affinity, task.node_selector, task.affinity_terms, task.tolerations, task.pod_affinity or (),
            job.priority, task.legacy_mig)


def _pod_set_signature(ps: PodSet, job: Job, opened_as: dict[str, Status]) -> tuple[Any, ...]:
    placed = [opened_as.get(t.key, t.status) in ACTIVE_ALLOCATED for t in ps.tasks.values()]
    if all(placed):
        return ()
    chain: list[Any] = [ps.topology]
    parent = ps.parent
    while parent is not None:
        chain.append(parent.topology)
        parent = parent.parent
    pods = sorted((_pod_signature(t, job) for t, done in zip(ps.tasks.values(), placed) if not done), key=repr)
    return (tuple(chain), tuple(pods))


def signature(job: Job, opened_as: dict[str, Status] | None = None) -> tuple[Any, ...]:
    """The job's signature over its pods not placed; with `opened_as` (a session's statuses of
    the pods that changed since it opened), as the session opened."""
    return tuple(sorted((_pod_set_signature(ps, job, opened_as or {}) for ps in job.pod_sets.values()), key=repr))


def request_le(a: Request, b: Request) -> bool:
    """The reference's ResourceRequirements.LessEqual (GPU memory is not compared)."""
    if a.cpu > b.cpu or a.memory > b.memory:
        return False
    if a.count > b.count:
        return False
    if not (a.portion < b.portion or abs(a.portion - b.portion) < MIN_GPU_DIFF):
        return False
    other = dict(b.mig)
    return all(name in other and n <= other[name] for name, n in a.mig)


def _compare_requests(x: Request, y: Request) -> int:
    return -1 if request_le(x, y) and not request_le(y, x) else (1 if request_le(y, x) and not request_le(x, y) else 0)


def _sorted_requests(job: Job) -> list[Request]:
    reqs = [t.request for t in job.tasks.values() if t.status == Status.PENDING]
    return sorted(reqs, key=cmp_to_key(_compare_requests))


def easier(job: Job, than: Job) -> bool:
    mine, theirs = _sorted_requests(job), _sorted_requests(than)
    if not mine or not theirs:
        return False
    if len(theirs) > len(mine):
        return True
    for i, r in enumerate(mine):
        if i >= len(theirs):
            return False
        if request_le(r, theirs[i]):
            if request_le(theirs[i], r):
                continue
            return True
    return False


def smaller_footprint(job: Job, than: Job) -> bool:
    mine, theirs = _sorted_requests(job), _sorted_requests(than)
    if not mine or not theirs or len(mine) > len(theirs):
        return False
    return all(request_le(r, theirs[i]) for i, r in enumerate(mine))


class FailedSignatures:
    """The smallest failed job per signature (per queue unless `per_queue` is False)."""

    def __init__(self, ssn: Session, per_queue: bool = True) -> None:
        self.ssn = ssn
        self.enabled = ssn.params.use_scheduling_signatures
        self.per_queue = per_queue
        self.smallest: dict[tuple[str, tuple[Any, ...]], Job] = {}

    def _key(self, job: Job) -> tuple[str, tuple[Any, ...]]:
        """The job's signature as the session opened: the reference's snapshot takes every job's
        signature then, and the job keeps it for the session, whatever its pods do after (a
        solution's evictions, a placement; busy_three_levels seed 277 against the reference's Go)."""
        memo = self.ssn.cache
        sig = memo.get(("signature", job.uid))
        if sig is None:
            sig = memo[("signature", job.uid)] = signature(job, self.ssn.opened_as)
        return (job.queue if self.per_queue else "", sig)

    def skip(self, job: Job) -> Job | None:
        """The failed job that makes trying `job` pointless, or None."""
        if not self.enabled:
            return None
        failed = self.smallest.get(self._key(job))
        if failed is None or easier(job, failed):
            return None
        return failed

    def remember(self, job: Job) -> None:
        if not self.enabled:
            return
        key = self._key(job)
        current = self.smallest.get(key)
        if current is None or smaller_footprint(job, current):
            self.smallest[key] = job

