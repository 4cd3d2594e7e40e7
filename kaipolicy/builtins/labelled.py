"""GPUs held per queue on nodes grouped by the value of one node label (e.g. the GPU model in
`nvidia.com/gpu.product`), counted the way queue allocation is: a queue holds what its jobs and
the jobs of every queue below it hold. Kept current by the session's allocate/deallocate events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from kaipolicy.api.job import Job
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import ALLOCATED, Task


class LabelledUsage:
    def __init__(self, cluster: ClusterInfo, label: str, path: Callable[[str], list[str]]) -> None:
        self.cluster = cluster
        self.label = label
        self.path = path            # queue uid -> the queue and its ancestors' uids
        self.gpus: dict[tuple[str, str], float] = defaultdict(float)
        for job in cluster.jobs.values():
            for task in job.tasks.values():
                if task.status in ALLOCATED:   # as the fair-share build counts a snapshot
                    self.add(job, task, 1.0)

    def add(self, job: Job, task: Task, sign: float) -> None:
        node = self.cluster.nodes.get(task.node)
        value = node.labels.get(self.label) if node is not None else None
        if value is None:
            return
        gpus = sign * (task.accepted or task.request).gpus_quota
        for queue in self.path(job.queue):
            self.gpus[(queue, value)] += gpus

    def held(self, queue: str, value: str) -> float:
        return round(self.gpus.get((queue, value), 0.0), 9)
