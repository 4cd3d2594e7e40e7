"""The cluster snapshot one cycle works on: nodes, jobs, queues and topologies."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaipolicy.api.job import Job
from kaipolicy.api.node import DEFAULT_GPU_MEMORY, Node
from kaipolicy.api.queue import Queue
from kaipolicy.api.task import Task


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]   # node-label keys, widest domain first


@dataclass(slots=True)
class ClusterInfo:
    nodes: dict[str, Node]
    jobs: dict[str, Job]
    queues: dict[str, Queue]
    topologies: dict[str, Topology] = field(default_factory=dict)
    now: float = 0.0                  # the scenario clock, seconds
    # whether any pod of the cluster has a required anti-affinity (see affinity.holds_anti_affinity)
    anti_affinity: bool | None = None

    def task(self, job_uid: str, task_uid: str) -> Task:
        return self.jobs[job_uid].tasks[task_uid]

    def unlink(self) -> None:
        """Drop every job's parent links (see Job.unlink), once nothing reads the cluster again."""
        for job in self.jobs.values():
            job.unlink()

    @property
    def min_node_gpu_memory(self) -> int:
        # Kept on purpose: the reference starts its minimum at the 100 MiB default and only
        # lowers it with nodes above 100, so the value is always 100 (GPU-memory requests are
        # counted in queues as memory / 100 devices).
        return DEFAULT_GPU_MEMORY
