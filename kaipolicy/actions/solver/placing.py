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
from kaipolicy.api.task import Status, Task
from kaipolicy.builtins import capacity
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

#: A proof's predicate verdicts on nodes no change has touched since the simulation began are
#: taken from the walk's memo of them (False: every verdict asked anew; the tests compare both).
#: See NodeVerdicts.
VERDICTS_KEPT = True

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
        # without terms of its own the task's pod affinity holds everywhere
        "affinity.podFits": lambda: task.pod_affinity is None,
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


class NodeVerdicts:
    """Per walk of a partial job: whether a pod passes every predicate on a node, as the node
    stands when a simulation of the walk begins. Every simulation of a walk begins from the same
    cluster (each is rolled back exactly), and the proofs below ask only node-local rules, whose
    verdict on a node depends on that node's own state and the pod's and job's fixed fields; so
    the verdict on a node no change has touched since the simulation began (the node table logs
    every node a change touches) is the one kept for it. Kept per job, pod and the pod's status
    (the rest rules read of a pod is fixed)."""

    def __init__(self) -> None:
        self.began = -1     # the node table's change count when the running simulation began
        self.known: dict[tuple[str, str, Status], dict[int, bool]] = {}

    def walk(self) -> None:
        """A new walk: the cluster its simulations begin from is another."""
        self.known.clear()
        self.began = -1

    def begin(self, ssn: Session) -> None:
        """A simulation begins: the cluster is as the walk's simulations begin from."""
        self.began = ssn.table.change_count()

    def passing(self, ssn: Session, task: Task, job: Job, nodes: list[Node], rows: list[int]) -> int | None:
        """How many of the nodes at positions `rows` pass every predicate for `task`, as
        `verdicts.quietly_passing` counts them; None when a rule fails on one of them (a verdict
        is kept only where none failed, so every node not kept is asked)."""
        touched = ssn.table.changed_since(self.began) if VERDICTS_KEPT and self.began >= 0 else None
        if touched is None:
            return verdicts.quietly_passing(ssn, task, job, [nodes[i] for i in rows])
        kept = self.known.setdefault((job.uid, task.key, task.status), {})
        changed = set(touched)
        count = 0
        unknown: list[Node] = []
        fresh: list[Node] = []
        for i in rows:
            node = nodes[i]
            if node.index in changed:
                fresh.append(node)
                continue
            known = kept.get(node.index)
            if known is None:
                unknown.append(node)
            elif known:
                count += 1
        if unknown:
            at = verdicts.quietly_passing_at(ssn, task, job, unknown)
            if at is None:
                return None
            passed = set(at.tolist())
            for k, node in enumerate(unknown):
                kept[node.index] = k in passed
            count += len(passed)
        if fresh:
            more = verdicts.quietly_passing(ssn, task, job, fresh)
            if more is None:
                return None
            count += more
        return count


def surely_placed(ssn: Session, job: Job, nodes: list[Node], margin: int = 0,
                  kept: NodeVerdicts | None = None) -> bool:
    """Whether `allocate_job(ssn, stmt, nodes, job, pipeline_only=True)` would place every pod it
    places next. Asks the gates and rules quietly; True only when the proof above holds.
    `margin`: that many more nodes must take a pod, for a placement made after pods not placed
    yet land on at most that many nodes (any node they leave untouched is as it is now).
    `kept`: the walk's verdicts on nodes untouched since the simulation began."""
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
    need = len(tasks) + margin
    if len(rows) < need:
        return False
    if kept is not None:
        passing = kept.passing(ssn, first, job, nodes, rows)
    else:
        passing = verdicts.quietly_passing(ssn, first, job, [nodes[i] for i in rows])
    return passing is not None and passing >= need
