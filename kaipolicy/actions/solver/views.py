"""Job views the solver works with: a job cut down to some of its tasks (the pending job grown
one task at a time, a victim's not-yet-taken pods), which pods a victim gives up next, and
the nodes worth trying for a job.

A view shares the job's uid and its Task objects, so statuses changed through a Statement show
in every view at once; only the sub-group tree (and, for a partial job, the gang sizes) is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.task import Task
from kaipolicy.framework.nodetable import NodeTable
from kaipolicy.framework.session import Session
from kaipolicy.framework.tasks import in_order


def clone_with_tasks(job: Job, tasks: Iterable[Task], minimums: dict[str, int] | None = None) -> Job:
    """The job holding only `tasks`; pod sets keep their minimum unless `minimums` names one."""
    pod_sets: dict[str, PodSet] = {}
    root = _clone_group(job.root, None, pod_sets, minimums or {})
    view = Job(job.uid, job.name, job.namespace, job.queue, job.priority, job.preemptible, job.created, root,
               pod_sets, last_start=job.last_start, stale_since=job.stale_since, deleted=job.deleted,
               order=job.order)
    for t in tasks:
        view.add_task(t)
    return view


def _clone_group(group: SubGroupSet, parent: SubGroupSet | None, pod_sets: dict[str, PodSet],
                 minimums: dict[str, int]) -> SubGroupSet:
    out = SubGroupSet(group.name, group.topology, parent)
    for child in group.groups:
        out.groups.append(_clone_group(child, out, pod_sets, minimums))
    for ps in group.pod_sets:
        copy = PodSet(ps.name, minimums.get(ps.name, ps.min_available), ps.topology, out)
        out.pod_sets.append(copy)
        pod_sets[ps.name] = copy
    return out


def partial_job(job: Job, tasks: Sequence[Task]) -> Job:
    """The pending job as far as it has been grown: these tasks, each pod set's gang = its share."""
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.sub_group] = counts.get(t.sub_group, 0) + 1
    return clone_with_tasks(job, tasks, counts)


def tasks_to_evict(ssn: Session, job: Job) -> tuple[list[Task], bool]:
    """The pods a victim gives up next, and whether it keeps more after that.

    A pod set above its minimum gives up one pod (the last in task order); if no pod set is
    above its minimum, every pod set gives up all its pods (the gang goes as a whole).
    """
    sets = in_order(job.pod_sets.values(), lambda ps: ssn.pod_set_key(ps, job), reverse=True)
    above = any(ps.active_allocated > ps.min_available for ps in job.pod_sets.values())
    max_sets = 1 if above else len(sets)
    out: list[Task] = []
    for ps in sets[:max_sets]:
        # (a lone pod is not ordered: the reference's sort compares no single item, so the task
        # order is not asked of it and a failing task-order rule records nothing)
        running = in_order([t for t in ps.tasks.values() if ssn.evictable(t)], lambda t: ssn.task_key(t, job),
                           reverse=True)
        n = 1 if len(running) > ps.min_available else len(running)
        out.extend(running[:n])
    return out, len(out) < sum(1 for t in job.tasks.values() if ssn.evictable(t))


#: Read each node's idle and releasing GPUs from values the node table keeps between calls
#: (False: ask every node every time; the tests compare both).
GPU_ROOM_KEPT = True


def feasible_nodes(nodes: Sequence[Node], job: Job, table: NodeTable | None = None) -> list[Node]:
    """All nodes, unless every pod of the job needs a GPU: then nodes with a GPU idle or releasing.
    `table`: the session's node table, when `nodes` are its nodes in its order."""
    if any(not t.request.needs_gpu for t in job.tasks.values()):
        return list(nodes)
    if table is not None and GPU_ROOM_KEPT:
        assert len(nodes) == len(table.nodes)
        idle, releasing = gpu_room(table)
        return [nodes[i] for i in np.flatnonzero((idle > 0) | (releasing > 0)).tolist()]
    return [n for n in nodes if n.idle_gpus_total() > 0 or n.releasing_gpus_total() > 0]


def gpu_room(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
    """Every node's idle and releasing GPUs (whole, shared and MIG), in the table's order: kept in
    the table and recomputed only on the nodes a task landed on or left since."""
    return table.per_node(("idle-gpus",), Node.idle_gpus_total), table.per_node(("releasing-gpus",), Node.releasing_gpus_total)
