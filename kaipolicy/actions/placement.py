"""Placing one job: the gang per pod set, the sub-group tree with its candidate node sets,
task by task onto the best node that passes every filter, shared GPUs for fractions.

`allocate_job` works inside the caller's Statement and leaves it dirty on failure (the
caller discards); fit errors are recorded on the job when the attempt is real.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.task import Task
from kaipolicy.builtins import gpusharing
from kaipolicy.framework.fits import fits_mask, valid_portions
from kaipolicy.framework.nodetable import NodeVector
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement
from kaipolicy.framework.tasks import in_order, tasks_to_allocate


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
    for ps in in_order(group.pod_sets, lambda p: ssn.pod_set_key(p, job)):
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
        for i, verdict in _candidates(ssn, task, job, nodes, view.index, fits):
            node = nodes[i]
            if verdict is not None:
                reasons[verdict] += 1
            elif _place(ssn, stmt, task, node, pipeline_only):
                if ssn.audit.enabled:
                    ssn.audit.add("task", action=ssn.action, job=job.name, task=task.name, node=node.name,
                                  outcome=task.status.value, pipelineOnly=pipeline_only,
                                  scores=ssn.score_breakdown(node, i), rejected=dict(reasons.most_common(5)))
                return True
    if not pipeline_only:
        idle = fits_mask(view, task, with_releasing=False)
        for reason, count in _insufficient(view, task, ~fits & ~idle):
            reasons[reason] += count
        job.task_fit_errors[task.uid] = _summary(len(nodes), reasons)
        if ssn.audit.enabled:
            ssn.audit.add("task", action=ssn.action, job=job.name, task=task.name, node=None, outcome="unplaced",
                          rejected=dict(reasons.most_common(5)))
    return False


def _candidates(ssn: Session, task: Task, job: Job, nodes: Sequence[Node], rows: np.ndarray,
                fits: np.ndarray) -> Iterator[tuple[int, str | None]]:
    """Positions of the fitting nodes best score first (equal scores by name), each with its
    predicate verdict: the first few one by one (most tasks land on the first), the rest in one
    vector pass."""
    ranked = best_first(ssn.node_scores(task, job, nodes), fits, rows, SCALAR_PROBES)
    for _, i in zip(range(SCALAR_PROBES), ranked):
        yield i, ssn.predicate_on(task, job, nodes[i])
    rest = list(ranked)
    if rest:
        yield from zip(rest, ssn.predicate_results(task, job, [nodes[i] for i in rest]))


def best_first(scores: np.ndarray, allowed: np.ndarray, rows: np.ndarray, probes: int) -> Iterator[int]:
    """Positions of the allowed nodes, highest score first and equal scores by table row (node
    name), as lexsort orders them: the first `probes` picked one at a time, the rest sorted
    only if asked for."""
    open_ = allowed.copy()
    masked = np.where(allowed, scores, -np.inf)
    in_row_order = len(rows) < 2 or bool((rows[1:] > rows[:-1]).all())
    for _ in range(probes):
        pick = int(masked.argmax())     # the first of equal maxima (or the first NaN)
        best = masked[pick]
        if best == -np.inf or np.isnan(best):
            break   # nothing left, or scores only the sort orders right (NaN, -inf)
        if not in_row_order:
            ties = np.flatnonzero(masked == best)
            pick = int(ties[np.argmin(rows[ties])])
        masked[pick] = -np.inf
        open_[pick] = False
        yield pick
    order = np.lexsort((rows, -scores))
    yield from order[open_[order]].tolist()


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


_LACKING = ("GPUs", "CPU cores", "memory", "MIG profile", "pods")


def _insufficient(view: NodeVector, task: Task, rejected: np.ndarray) -> list[tuple[str, int]]:
    """What each rejected node lacks, as (message, number of nodes), in the order the messages
    first occur among the nodes."""
    req = task.request
    gpus: np.ndarray = view.free_gpus
    lacking = [req.gpus > gpus + 1e-9, req.cpu > view.free_cpu_millis, req.memory > view.free_memory_bytes,
               np.zeros(len(view), dtype=bool), view.free_pods < 1]
    if req.is_shared:
        lacking[0] = lacking[0] | ~valid_portions(view, task)
    if req.mig:
        for i in np.flatnonzero(rejected).tolist():
            free = view.node(i).non_allocated()
            lacking[3][i] = any(free.mig.get(name, 0) < n for name, n in req.mig)
    codes = sum(flags.astype(np.int64) << bit for bit, flags in enumerate(lacking))
    codes = np.where(codes == 0, 1, codes)[rejected]     # lacking nothing reads as lacking GPUs
    found, first, counts = np.unique(codes, return_index=True, return_counts=True)
    out = []
    for k in np.argsort(first, kind="stable").tolist():
        code = int(found[k])
        names = ", ".join(name for bit, name in enumerate(_LACKING) if code >> bit & 1)
        out.append(("node(s) didn't have enough resources: " + names, int(counts[k])))
    return out


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
