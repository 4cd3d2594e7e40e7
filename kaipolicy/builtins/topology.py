"""Topology-aware placement (being written): candidate node sets per required level, and a
preference score for nodes inside the preferred domain."""

from __future__ import annotations

from typing import Any

from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.task import Task


def subset_nodes(ssn: Any, with_args: Any, job: Job, group: Any, pod_sets: Any, tasks: Any,
                 nodes: list[Node]) -> list[list[Node]]:
    return [nodes]


def preferred_score(ssn: Any, task: Task, job: Job, node: Node) -> float:
    return 0.0


def pre_job_allocation(ssn: Any, job: Job) -> None:
    return None

