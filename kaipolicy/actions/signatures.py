"""The scheduling-signature shortcut: once a job fails, later jobs of the same queue with the
same scheduling constraints that are not easier (as many pods or more, each asking as much
or more) are skipped without trying; the reference does this to keep big queues cheap.
"""

from __future__ import annotations

from typing import Any

from kaipolicy.api.job import Job
from kaipolicy.api.task import ACTIVE_ALLOCATED
from kaipolicy.framework.session import Session


def signature(job: Job) -> tuple[Any, ...]:
    """What decides where a job's pending pods may go, apart from how much they ask."""
    parts = []
    for ps in sorted(job.pod_sets.values(), key=lambda p: p.name):
        if all(t.status in ACTIVE_ALLOCATED for t in ps.tasks.values()):
            continue
        pods = sorted((t.request.kind.value, t.node_affinity, t.pod_affinity or (), tuple(sorted(t.labels.items())),
                       t.legacy_mig) for t in ps.tasks.values() if t.status not in ACTIVE_ALLOCATED)
        parts.append((ps.name, ps.topology, tuple(pods)))
    return (job.root.topology, tuple(parts))


def _size(job: Job) -> tuple[int, float, float, float, int]:
    pending = [t for t in job.tasks.values() if t.status not in ACTIVE_ALLOCATED]
    if not pending:
        return (0, 0.0, 0.0, 0.0, 0)
    return (len(pending), max(t.request.gpus_quota for t in pending), max(t.request.cpu for t in pending),
            max(t.request.memory for t in pending), max(t.request.gpu_memory for t in pending))


class FailedSignatures:
    def __init__(self, ssn: Session) -> None:
        self.enabled = ssn.params.use_scheduling_signatures
        self.smallest: dict[tuple[str, tuple[Any, ...]], tuple[int, float, float, float, int]] = {}

    def skip(self, job: Job) -> bool:
        if not self.enabled:
            return False
        failed = self.smallest.get((job.queue, signature(job)))
        if failed is None:
            return False
        size = _size(job)
        return all(s >= f for s, f in zip(size, failed))

    def remember(self, job: Job) -> None:
        if not self.enabled:
            return
        key = (job.queue, signature(job))
        size = _size(job)
        old = self.smallest.get(key)
        if old is None or all(s <= o for s, o in zip(size, old)):
            self.smallest[key] = size
