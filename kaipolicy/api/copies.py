"""Copies of model objects for one cycle: a session changes the nodes, jobs and tasks it is given
(Statement commits, evictions, fit errors), so a source that keeps pristine pieces across cycles
hands each cycle copies of them. A copy shares what no cycle changes (requests, labels, frozen
constraint tuples, what a node remembers of each pod) and copies the rest.

Every field is named here: tests/unit/api/test_copies.py fails when a model class gains a field
this module does not copy.
"""

from __future__ import annotations

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.queue import Queue
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import Task

_new = object.__new__


def copy_task(t: Task, created: float) -> Task:
    """The task with its creation time set to `created` (its job's, on this cycle's clock)."""
    c: Task = _new(Task)
    c.uid, c.name, c.namespace, c.job, c.request = t.uid, t.name, t.namespace, t.job, t.request
    c.status, c.node, c.gpu_groups, c.sub_group = t.status, t.node, list(t.gpu_groups), t.sub_group
    c.priority, c.labels, c.node_affinity, c.node_selector = t.priority, t.labels, t.node_affinity, t.node_selector
    c.affinity_terms, c.tolerations, c.pod_affinity = t.affinity_terms, t.tolerations, t.pod_affinity
    c.legacy_mig, c.created, c.order, c.accepted, c.is_virtual = t.legacy_mig, created, t.order, t.accepted, t.is_virtual
    c.listed_elsewhere, c.key = t.listed_elsewhere, t.key
    return c


def copy_job(job: Job, order: int, created: float, last_start: float | None, stale_since: float | None) -> Job:
    """The job, its sub-group tree and its tasks, at position `order` with this cycle's times."""
    pod_sets: dict[str, PodSet] = {}
    root = _copy_tree(job.root, None, pod_sets)
    c: Job = _new(Job)
    c.uid, c.name, c.namespace, c.queue, c.priority = job.uid, job.name, job.namespace, job.queue, job.priority
    c.preemptible, c.created, c.root, c.last_start, c.stale_since = job.preemptible, created, root, last_start, stale_since
    c.deleted, c.order, c.fit_errors, c.task_fit_errors = job.deleted, order, list(job.fit_errors), dict(job.task_fit_errors)
    c.pod_sets = {name: pod_sets[name] for name in job.pod_sets}
    c.tasks = tasks = {}
    for uid, task in job.tasks.items():    # as Job.add_task files them
        tasks[uid] = pod_sets[task.sub_group].tasks[uid] = copy_task(task, created)
    return c


def _copy_tree(group: SubGroupSet, parent: SubGroupSet | None, pod_sets: dict[str, PodSet]) -> SubGroupSet:
    c = SubGroupSet(group.name, group.topology, parent)
    for ps in group.pod_sets:
        pod_sets[ps.name] = copy_ps = PodSet(ps.name, ps.min_available, ps.topology, c)
        c.pod_sets.append(copy_ps)
    c.groups = [_copy_tree(g, c, pod_sets) for g in group.groups]
    return c


def copy_node(node: Node, index: int) -> Node:
    """The node with its accounting and the pods it holds, at row `index` of the node table."""
    c: Node = _new(Node)
    c.name, c.allocatable, c.labels, c.gpu_memory = node.name, node.allocatable.clone(), node.labels, node.gpu_memory
    c.gpu_memory_synced, c.mig_enabled, c.mig_strategy = node.gpu_memory_synced, node.mig_enabled, node.mig_strategy
    c.unschedulable, c.taints, c.conditions = node.unschedulable, node.taints, node.conditions
    c.other_pods = None if node.other_pods is None else node.other_pods.clone()
    c.index, c.idle, c.used, c.releasing = index, node.idle.clone(), node.used.clone(), node.releasing.clone()
    c.tasks = dict(node.tasks)    # PodOnNode records are never changed, only replaced
    c.shared_used, c.shared_releasing = dict(node.shared_used), dict(node.shared_releasing)
    c.shared_allocated, c.shared_marked_releasing = dict(node.shared_allocated), set(node.shared_marked_releasing)
    c.legacy_mig_tasks = set(node.legacy_mig_tasks)
    return c


def copy_queue(q: Queue) -> Queue:
    return Queue(q.uid, q.name, q.parent, q.priority, q.deserved, q.limit, q.over_quota_weight, q.created,
                 list(q.children), q.preempt_min_runtime, q.reclaim_min_runtime)


def copy_cluster(cluster: ClusterInfo) -> ClusterInfo:
    """A whole snapshot copied, each job keeping its own times."""
    jobs = {name: copy_job(j, j.order, j.created, j.last_start, j.stale_since) for name, j in cluster.jobs.items()}
    for name, j in cluster.jobs.items():    # a task may carry a creation time of its own
        for task, copied in zip(j.tasks.values(), jobs[name].tasks.values(), strict=True):
            copied.created = task.created
    return ClusterInfo(nodes={n: copy_node(node, node.index) for n, node in cluster.nodes.items()}, jobs=jobs,
                       queues={n: copy_queue(q) for n, q in cluster.queues.items()},
                       topologies=dict(cluster.topologies), now=cluster.now)
