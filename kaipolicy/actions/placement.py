"""Placing one job: the gang per pod set, the sub-group tree with its candidate node sets,
task by task onto the best node that passes every filter, shared GPUs for fractions.

`allocate_job` works inside the caller's Statement and leaves it dirty on failure (the
caller discards); fit errors are recorded on the job when the attempt is real.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.task import Task
from kaipolicy.builtins import gpusharing
from kaipolicy.framework.nodetable import fits_mask
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement
from kaipolicy.framework.tasks import tasks_to_allocate


def allocate_job(ssn: Session, stmt: Statement, nodes: list[Node], job: Job, pipeline_only: bool) -> bool:
    ssn.pre_job_allocation(job)
    tasks = tasks_to_allocate(ssn, job, not pipeline_only)
    gate = ssn.over_capacity(job, tasks)
    if not gate.ok:
        if not pipeline_only:
            job.add_fit_error(gate.message)
        return False
    return _sub_group_set(ssn, stmt, nodes, job, job.root, tasks, pipeline_only)


def _sub_group_set(ssn: Session, stmt: Statement, nodes: list[Node], job: Job, group: SubGroupSet,
                   tasks: list[Task], pipeline_only: bool) -> bool:
    node_sets = ssn.subset_nodes(job, group, group.all_pod_sets(), tasks, nodes)
    for node_set in node_sets:
        cp = stmt.checkpoint()
        if _sub_group_set_on(ssn, stmt, node_set, job, group, tasks, pipeline_only):
            return True
        stmt.rollback(cp)
    return False


def _sub_group_set_on(ssn: Session, stmt: Statement, nodes: list[Node], job: Job, group: SubGroupSet,
                      tasks: list[Task], pipeline_only: bool) -> bool:
    for child in sorted(group.groups, key=lambda g: g.name):
        names = {ps.name for ps in child.all_pod_sets()}
        if not _sub_group_set(ssn, stmt, nodes, job, child, [t for t in tasks if t.sub_group in names],
                              pipeline_only):
            return False
    for ps in sorted(group.pod_sets, key=lambda p: ssn.pod_set_key(p, job)):
        if not _pod_set(ssn, stmt, nodes, job, ps, [t for t in tasks if t.sub_group == ps.name], pipeline_only):
            return False
    return True


def _pod_set(ssn: Session, stmt: Statement, nodes: list[Node], job: Job, ps: PodSet, tasks: list[Task],
             pipeline_only: bool) -> bool:
    for node_set in ssn.subset_nodes(job, ps, [ps], tasks, nodes):
        cp = stmt.checkpoint()
        if _tasks_on(ssn, stmt, node_set, job, tasks, pipeline_only):
            return True
        stmt.rollback(cp)
    return False


def _tasks_on(ssn: Session, stmt: Statement, nodes: list[Node], job: Job, tasks: list[Task],
              pipeline_only: bool) -> bool:
    for index, task in enumerate(tasks):
        if not allocate_task(ssn, stmt, nodes, job, task, pipeline_only):
            _record_failure(job, task, index)
            return False
    return True


SCALAR_PROBES = 4  # fitting nodes checked one by one before the rest are filtered as a vector


def allocate_task(ssn: Session, stmt: Statement, nodes: Sequence[Node], job: Job, task: Task,
                  pipeline_only: bool) -> bool:
    """Best-scored node that fits and passes every predicate, as the reference walks them."""
    pre = ssn.pre_predicate(task, job)
    if not pre.ok:
        job.task_fit_errors[task.uid] = pre.message
        return False
    view = ssn.table.view(nodes)
    fits = fits_mask(view, task, with_releasing=True)
    reasons: Counter[str] = Counter()
    if fits.any():
        order = ssn.node_order(task, job, nodes)
        candidates = [nodes[i] for i in order[fits[order]]]
        verdicts: dict[int, str | None] = {}
        for k, node in enumerate(candidates):
            if k == SCALAR_PROBES:
                rest = candidates[k:]
                verdicts.update(zip(map(id, rest), ssn.predicate_results(task, job, rest)))
            verdict = verdicts[id(node)] if k >= SCALAR_PROBES else ssn.predicate_on(task, job, node)
            if verdict is not None:
                reasons[verdict] += 1
            elif _place(ssn, stmt, task, node, pipeline_only):
                if ssn.audit.enabled:
                    ssn.audit.add("task", action=ssn.action, job=job.name, task=task.name, node=node.name,
                                  outcome=task.status.value, pipelineOnly=pipeline_only,
                                  scores=ssn.score_breakdown(node), rejected=dict(reasons.most_common(5)))
                return True
    if not pipeline_only:
        idle = fits_mask(view, task, with_releasing=False)
        for i in np.flatnonzero(~fits & ~idle):
            reasons[_insufficient(nodes[int(i)], task)] += 1
        job.task_fit_errors[task.uid] = _summary(len(nodes), reasons)
        if ssn.audit.enabled:
            ssn.audit.add("task", action=ssn.action, job=job.name, task=task.name, node=None, outcome="unplaced",
                          rejected=dict(reasons.most_common(5)))
    return False


def _place(ssn: Session, stmt: Statement, task: Task, node: Node, pipeline_only: bool) -> bool:
    if task.request.is_shared:
        fitting = gpusharing.fitting_gpus(node, task, lambda g: ssn.gpu_score(task, node, g))
        choice = gpusharing.choose_groups(node, task, fitting, pipeline_only, mint=ssn.new_gpu_group)
        if choice is None:
            return False
        task.gpu_groups = choice.groups
        if pipeline_only or choice.releasing:
            stmt.pipeline(task, node.name, not pipeline_only)
        else:
            stmt.allocate(task, node.name)
        return True
    if not pipeline_only and node.fits_idle(task):
        stmt.allocate(task, node.name)
    else:
        stmt.pipeline(task, node.name, not pipeline_only)
    return True


def _insufficient(node: Node, task: Task) -> str:
    req = task.request
    free = node.non_allocated()
    lacking = []
    if req.gpus > free.gpus + 1e-9 or (req.is_shared and not node.valid_portion(req)):
        lacking.append("GPUs")
    if req.cpu > free.cpu:
        lacking.append("CPU cores")
    if req.memory > free.memory:
        lacking.append("memory")
    if any(free.mig.get(name, 0) < n for name, n in req.mig):
        lacking.append("MIG profile")
    if free.pods < 1:
        lacking.append("pods")
    if not lacking:
        lacking.append("GPUs")
    return "node(s) didn't have enough resources: " + ", ".join(lacking)


def _summary(n_nodes: int, reasons: Counter[str]) -> str:
    if not reasons:
        return f"0/{n_nodes} nodes are available"
    parts = [f"{c} {r}" for r, c in sorted(reasons.items())]
    return f"0/{n_nodes} nodes are available: " + ", ".join(parts) + "."


def _record_failure(job: Job, task: Task, placed: int) -> None:
    why = job.task_fit_errors.get(task.uid, "no node fits the pod")
    gang = any(ps.min_available > 1 for ps in job.pod_sets.values())
    ps = job.pod_sets[task.sub_group]
    if not gang or ps.active_used >= ps.min_available:
        job.add_fit_error(f"Resources were not found for pod {task.key} due to: {why}")
    elif len(job.pod_sets) == 1:
        job.add_fit_error(f"Resources were found for {placed} pods while {ps.min_available} are required for "
                          f"gang scheduling. Additional pods cannot be scheduled due to: {why}")
    else:
        job.add_fit_error(f"Resources were found for {placed} pods from all sub-groups while sub-group "
                          f"{ps.name} requires {ps.min_available} pods for gang scheduling. Additional pods "
                          f"cannot be scheduled in this sub-group due to: {why}")
