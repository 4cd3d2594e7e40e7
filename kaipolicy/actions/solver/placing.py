"""Whether a simulation's pipeline-only placement of a job is sure to succeed, without running it.

A gang whose pods all ask alike (whole GPUs or CPU only, nothing shared) is placed in full when,
right now, at least as many distinct nodes each take one of its pods: a node's fit and every
predicate on it depend only on that node and the pod (`node_local`), so a node no pod of the gang
has landed on still takes one, and the best-scored of those is always left for the next pod
(whatever the scores, which only choose among them). Where anything could tell otherwise (a gate
or pre-predicate that refuses or fails, a rule reading other nodes, the queues or state the gang
changes, topology, sub-groups, shadow rules, coverage), the answer is no and the placement runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.resources import RequestType
from kaipolicy.api.task import Task
from kaipolicy.builtins import affinity, capacity
from kaipolicy.framework import verdicts
from kaipolicy.framework.fits import fits_mask
from kaipolicy.framework.session import Rule, Session
from kaipolicy.framework.tasks import tasks_to_allocate

#: Vocabulary functions whose value for a (task, node) depends on the node's own state and the
#: task's and job's fixed fields only.
NODE_LOCAL = frozenset({"fits.idle", "fits.sharedGroup", "nodes.resourceTypeError", "placement.spread",
                        "affinity.nodeMatches", "affinity.untoleratedTaint", "gpu.fragments", "gpu.fragmentsAfter"})

#: Job fields that change as the job's pods are placed.
MOVING_JOB_FIELDS = frozenset({"elasticState"})

#: Prove a preemptor's placement instead of running it where a refusal after it is certain (False:
#: always place it, as the reference does; the tests compare both).
PLACEMENTS_PROVEN = True

#: The hooks a pipeline-only placement of one job asks, which a proof must be able to stand in for.
ASKED = ("preJobAllocation", "overCapacity", "subsetNodes", "prePredicate", "predicate", "taskOverCapacityOnNode",
         "gpuOrder")


def _conditional(ssn: Session, task: Task, job: Job, asking: frozenset[str]) -> dict[str, Callable[[], bool]]:
    """Functions that are node-local for this task and job only under a condition; `asking`: the
    functions whose condition is being asked already (a rule of a hook that such a function
    consults may call it again: that is not node-local)."""
    def rules_of(hook: str, name: str) -> bool:
        return name not in asking and all(node_local(ssn, r, task, job, asking | {name}) for r in ssn.hooks[hook])
    return {
        # the queue gates pass whatever is allocated when nothing up the path is capped
        "capacity.taskOverLimitOnNode": lambda: capacity.uncapped(ssn.shares, job),
        "capacity.onNode": lambda: rules_of("taskOverCapacityOnNode", "capacity.onNode"),
        # without terms of its own, and with no pod's anti-affinity about, the task's pod affinity
        # holds everywhere
        "affinity.podFits": lambda: task.pod_affinity is None and not affinity.holds_anti_affinity(ssn.cluster),
        # the GPU-order rules it asks see one node (and GPU) at a time
        "gpu.needsNewGroup": lambda: rules_of("gpuOrder", "gpu.needsNewGroup"),
    }


def node_local(ssn: Session, rule: Rule, task: Task, job: Job, asking: frozenset[str] = frozenset()) -> bool:
    """The rule's value for (task, node) depends only on the node's own state and the task's and
    job's fixed fields: what it reads is known, and every function it calls is such a function."""
    if any(var == "job" and f in MOVING_JOB_FIELDS for var, f in rule.selects):
        return False
    conditional = _conditional(ssn, task, job, asking)
    for name in rule.vocabulary_calls:
        if name in NODE_LOCAL:
            continue
        check = conditional.get(name)
        if check is None or not check():
            return False
    return True


def _profile(t: Task) -> tuple[object, ...]:
    """What rules and the fit can read of a pod besides its name: its request, placement
    constraints, labels and state."""
    return (t.request, t.sub_group, t.labels, t.node_affinity, t.node_selector, t.affinity_terms, t.tolerations,
            t.pod_affinity, t.legacy_mig, t.status, t.namespace)


def surely_placed(ssn: Session, job: Job, nodes: list[Node], margin: int = 0) -> bool:
    """Whether `allocate_job(ssn, stmt, nodes, job, pipeline_only=True)` would place every pod it
    places next. Asks the gates and rules quietly; True only when the proof above holds.
    `margin`: that many more nodes must take a pod, for a placement made after pods not placed
    yet land on at most that many nodes (any node they leave untouched is as it is now)."""
    if ssn.coverage is not None or (ssn.shadowing and any(ssn.shadow[h] for h in ASKED)):
        return False
    if job.root.groups or len(job.pod_sets) != 1 or job.root.topology is not None \
            or any(ps.topology is not None for ps in job.pod_sets.values()):
        return False
    tasks = tasks_to_allocate(ssn, job, False)
    if not tasks:
        return False
    first = tasks[0]
    req = first.request
    if req.kind not in (RequestType.REGULAR, RequestType.CPU_ONLY) or req.mig or req.is_shared \
            or any(_profile(t) != _profile(first) for t in tasks):
        return False
    # what rules say of the first pod they say of every pod: the pods are alike in all they read
    rules = [r for h in ("prePredicate", "predicate") for r in ssn.hooks[h]]
    if any(("task", "name") in r.selects for r in rules) \
            or not all(node_local(ssn, r, first, job) for r in rules):
        return False
    # the gate is asked once, before any pod is placed; the rest of the path as allocate_job takes it
    queue = ssn.cluster.queues.get(job.queue)
    if not verdicts.quietly_allowed(ssn, "overCapacity", {"job": job, "queue": queue, "tasks": list(tasks)},
                                    first_only=True):
        return False
    (ps,) = job.pod_sets.values()
    for group, pod_sets in ((job.root, job.root.all_pod_sets()), (ps, [ps])):
        sets = ssn.subset_nodes(job, group, pod_sets, tasks, nodes)
        if len(sets) != 1 or sets[0] != nodes:
            return False
    if not all(verdicts.quietly_allowed(ssn, "prePredicate", {"task": t, "job": job}) for t in tasks):
        return False
    fits = fits_mask(ssn.table.view(nodes), first, with_releasing=True)
    rows = np.flatnonzero(fits).tolist()
    if len(rows) < len(tasks) + margin:
        return False
    passing = verdicts.quietly_passing(ssn, first, job, [nodes[i] for i in rows])
    return passing is not None and passing >= len(tasks) + margin
