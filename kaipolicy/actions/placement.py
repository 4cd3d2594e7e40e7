"""Placing one job: the gang per pod set, the sub-group tree with its candidate node sets,
task by task onto the best node that passes every filter, shared GPUs for fractions.

`allocate_job` works inside the caller's Statement and leaves it dirty on failure (the
caller discards); fit errors are recorded on the job when the attempt is real.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.resources import Request
from kaipolicy.api.task import Task
from kaipolicy.builtins import gpusharing
from kaipolicy.framework import verdicts as verdicts_of
from kaipolicy.framework.audit import RESOURCES_RULE, Rejections
from kaipolicy.framework.fits import fits_mask, valid_portions
from kaipolicy.framework.nodetable import NodeVector
from kaipolicy.framework.outcome import Outcome
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
            ssn.note_denial(job, gate)
        return False
    root = job.root
    if FLAT_JOBS_DIRECT and not root.groups and len(root.pod_sets) == 1 and ssn.subsets_by_topology_only \
            and not _has_topology(root) and not _has_topology(root.pod_sets[0]):
        # what _sub_group_set comes to for one pod set and no topology: every subset is all of
        # `nodes`, and a single pod set is ordered without asking its key
        ps = root.pod_sets[0]
        cp = stmt.checkpoint()
        if _tasks_on(ssn, stmt, nodes, job, [t for t in tasks if t.sub_group == ps.name], pipeline_only):
            return True
        stmt.rollback(cp)
        return False
    return _sub_group_set(ssn, stmt, nodes, job, root, tasks, pipeline_only)


#: A job of one pod set and no topology goes straight to its pods' placement (False: through the
#: sub-group tree's walk, which comes to the same; the tests compare both).
FLAT_JOBS_DIRECT = True


def _has_topology(group: Any) -> bool:
    constraint = group.topology
    return constraint is not None and bool(constraint.topology)


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
    run = _Run() if SCORES_CARRIED and len(tasks) > 1 else None
    for index, task in enumerate(tasks):
        if not allocate_task(ssn, stmt, nodes, job, task, pipeline_only, run):
            _record_failure(job, task, index)
            if not pipeline_only:
                ps = job.pod_sets[task.sub_group]
                ssn.gangs_short[job.uid] = {"placed": index, "needed": ps.min_available, "task": task.name,
                                            "why": job.task_fit_errors.get(task.uid, ""),
                                            "subGroup": ps.name if len(job.pod_sets) > 1 else ""}
            return False
    return True


SCALAR_PROBES = 4  # fitting nodes checked one by one before the rest are filtered as a vector
RUNNER_UP_PROBES = 8  # candidates after the chosen node searched for the audit log's runner-up


#: Carry a run's fit masks and scores from one pod to the next (False: work them out for every
#: pod; the tests compare both).
SCORES_CARRIED = True


class _Run:
    """The pods of one pod set placed one after another onto one node set (`_tasks_on`), nothing
    else happening in between: what placing the last of them left for the next.

    When the next pod asks for an equal request and the only node changed since is the one the
    last pod landed on, the next pod fits every other node as the last did (a fit reads only the
    node and the request), and every other node scores as it did when each node-order rule
    reads no more than its node, the request and fixed fields, and what the set-relative ones
    compare against has not moved (`Session.score_scope`): only that node is asked again."""

    __slots__ = ("count", "fits", "pos", "request", "scope", "scores")

    def __init__(self) -> None:
        self.request: Request | None = None     # the last pod's, None before the first is placed
        self.fits: np.ndarray = np.zeros(0, dtype=bool)
        self.scores: np.ndarray | None = None   # None: not carried (the last pod was not scored)
        self.scope: Any = None
        self.pos = 0        # where the last pod landed, as a position in the node set
        self.count = 0      # the table's change count before it landed

    def carried(self, ssn: Session, view: NodeVector, task: Task) -> tuple[np.ndarray | None, np.ndarray | None, Any]:
        """The next pod's fit mask and scores, each None when it must be worked out afresh, and
        the scores' scope now."""
        scope = ssn.score_scope(view)     # (reads the table, marks nothing)
        if self.request is None or task.request != self.request:
            return None, None, scope
        landed = view.index[self.pos]
        changed = ssn.table.changed_since(self.count)
        if changed is None or any(row != landed for row in changed):
            return None, None, scope
        fits = self.fits.copy()
        fits[self.pos] = view.node(self.pos).fits_idle_or_releasing(task)
        scores = self.scores if scope is not None and scope == self.scope else None
        return fits, scores, scope

    def placed(self, task: Task, fits: np.ndarray, scores: np.ndarray | None, scope: Any, pos: int, count: int) -> None:
        self.request, self.fits, self.scores, self.scope = task.request, fits, scores, scope
        self.pos, self.count = pos, count


def allocate_task(ssn: Session, stmt: Statement, nodes: Sequence[Node], job: Job, task: Task,
                  pipeline_only: bool, run: _Run | None = None) -> bool:
    """Best-scored node that fits and passes every predicate, as the reference walks them.
    `run`: the run of pods this one belongs to (see `_Run`)."""
    audit = ssn.audit.enabled and not pipeline_only   # the solver's what-if placements are not logged
    pre = ssn.pre_predicate(task, job)
    if not pre.ok:
        job.task_fit_errors[task.uid] = pre.message
        if audit:
            ssn.audit.add("task", action=ssn.action, job=job.name, namespace=job.namespace, task=task.name,
                          outcome="unplaced", node=None, nodes=len(nodes),
                          deniedBy={"rule": pre.rule, "message": pre.message})
        return False
    view = ssn.table.view(nodes)
    if run is not None:
        count = ssn.table.change_count()
        fits, carried, scope = run.carried(ssn, view, task)
    else:
        count, fits, carried, scope = 0, None, None, None
    scores: np.ndarray | None = None
    if fits is None:
        fits = fits_mask(view, task, with_releasing=True)
    reasons: Counter[str] | None = None   # made at the first rejection (most pods take the first node)
    rejections = Rejections(ssn.audit.detail) if audit else None
    fitting = np.count_nonzero(fits)
    if fitting:
        if not audit and ssn.lone_candidate_unscored and fitting == 1:
            ranking = _Ranking(iter([int(np.flatnonzero(fits)[0])]))
        else:
            if carried is not None and run is not None:
                # the node the last pod landed on is scored again, unless it no longer fits (then
                # its score is not read)
                scores = ssn.rescored(task, job, nodes, view, carried, run.pos) if fits[run.pos] else carried
            if scores is None:
                scores = ssn.node_scores(task, job, nodes, fits)
            ranking = _Ranking(best_first(scores, fits, view.index, SCALAR_PROBES, view.every or view.rows_ascending()))
        verdicts: dict[int, Outcome | None] = {}   # by position in `nodes`, once judged as a vector
        k = 0
        while (i := ranking.at(k)) is not None:
            node = nodes[i]
            if k == SCALAR_PROBES:
                rest = ranking.rest(k)
                verdicts.update(zip(rest, ssn.predicate_results(task, job, [nodes[r] for r in rest])))
            verdict = verdicts[i] if k >= SCALAR_PROBES else ssn.predicate_on(task, job, node)
            k += 1
            if verdict is not None:
                reasons = reasons if reasons is not None else Counter()
                reasons[verdict.message] += 1
                if rejections is not None:
                    rejections.add(verdict.rule, node.name, verdict.message)
                continue
            runner_up = _runner_up(ssn, task, job, nodes, ranking, k, verdicts) if audit else None
            shadows = verdicts_of.shadow_predicates(ssn, task, job, node) if ssn.shadowing and not pipeline_only else []
            if _place(ssn, stmt, task, node, pipeline_only):
                if run is not None:
                    run.placed(task, fits, scores, scope, i, count)
                if rejections is not None:
                    _audit_placed(ssn, job, task, (i, runner_up), nodes, rejections)
                if shadows:
                    verdicts_of.record_shadows(ssn, shadows, task, job, node)
                return True
    if not pipeline_only:
        idle = fits_mask(view, task, with_releasing=False)
        short = ~fits & ~idle
        reasons = reasons if reasons is not None else Counter()
        for reason, count in _insufficient(view, task, short):
            reasons[reason] += count
        job.task_fit_errors[task.uid] = _summary(len(nodes), reasons)
        if rejections is not None:
            lacking = [nodes[int(r)] for r in np.flatnonzero(short)]
            _audit_unplaced(ssn, job, task, len(nodes), lacking, rejections)
    return False


class _Ranking:
    """The fitting nodes' positions best first, drawn from `best_first` as far as they are asked for."""

    def __init__(self, order: Iterator[int]) -> None:
        self._order = order
        self._seen: list[int] = []

    def at(self, k: int) -> int | None:
        """The k-th best position, or None past the last."""
        while len(self._seen) <= k:
            nxt = next(self._order, None)
            if nxt is None:
                return None
            self._seen.append(nxt)
        return self._seen[k]

    def rest(self, k: int) -> list[int]:
        """Every position from the k-th on."""
        self._seen.extend(self._order)
        return self._seen[k:]


def best_first(scores: np.ndarray, allowed: np.ndarray, rows: np.ndarray, probes: int,
               in_row_order: bool = False) -> Iterator[int]:
    """Positions of the allowed nodes, highest score first and equal scores by table row (node
    name), as lexsort orders them: the first `probes` picked one at a time, the rest sorted
    only if asked for. `in_row_order`: the rows are known to ascend (else ties are broken by
    looking the rows up, which gives the same order). Worked on the allowed positions alone
    (ascending, so the first of equal maxima and a stable sort's order are theirs): a pod fits
    few of a large cluster's nodes."""
    at = np.flatnonzero(allowed)
    if not len(at):
        return
    mine = scores[at]
    masked = mine.astype(np.float64)    # (a copy: fancy indexing made one already)
    mine_rows = rows[at]
    in_row_order = in_row_order or len(rows) < 2
    picked: list[int] = []
    for _ in range(probes):
        pick = int(masked.argmax())     # the first of equal maxima (or the first NaN)
        best = masked[pick]
        if best == -np.inf or np.isnan(best):
            break   # nothing left, or scores only the sort orders right (NaN, -inf)
        if not in_row_order:
            ties = np.flatnonzero(masked == best)
            pick = int(ties[np.argmin(mine_rows[ties])])
        masked[pick] = -np.inf
        picked.append(pick)
        yield int(at[pick])
    open_ = np.ones(len(at), dtype=bool)    # (only when more are asked for: most tasks take the first)
    open_[picked] = False
    order = np.lexsort((mine_rows, -mine))
    yield from at[order[open_[order]]].tolist()


def _runner_up(ssn: Session, task: Task, job: Job, nodes: Sequence[Node], ranking: _Ranking, k: int,
               verdicts: dict[int, Outcome | None]) -> int | None:
    """Position in `nodes` of the first candidate from the k-th on that passes every predicate
    (looked for among the next few only, before the chosen node is taken), or None."""
    for j in range(k, k + RUNNER_UP_PROBES):
        i = ranking.at(j)
        if i is None:
            return None
        if (verdicts[i] is None) if i in verdicts else verdicts_of.passes_predicates(ssn, task, job, nodes[i]):
            return i
    return None


def _audit_placed(ssn: Session, job: Job, task: Task, chosen: tuple[int, int | None], nodes: Sequence[Node],
                  rejections: Rejections) -> None:
    index, runner_up = chosen
    indices = [index] if runner_up is None else [index, runner_up]
    sheets = [{"node": nodes[i].name, **s} for i, s in zip(indices, verdicts_of.scores_at(ssn, indices))]
    scores: dict[str, Any] = {"chosen": sheets[0], "runnerUp": sheets[1] if len(sheets) > 1 else None}
    ssn.audit.add("task", action=ssn.action, job=job.name, namespace=job.namespace, task=task.name,
                  outcome=task.status.value.lower(), node=nodes[index].name, nodes=len(nodes),
                  rejected=rejections.records(), scores=scores)


def _audit_unplaced(ssn: Session, job: Job, task: Task, n_nodes: int, lacking: list[Node],
                    rejections: Rejections) -> None:
    closest: tuple[tuple[float, ...], Node, str] | None = None
    for node in lacking:
        rank, text = _shortfall(node, task)
        rejections.add(RESOURCES_RULE, node.name, text)
        if closest is None or rank < closest[0]:
            closest = (rank, node, text)
    if closest is not None:
        rejections.sample(RESOURCES_RULE, closest[1].name, closest[2])
    ssn.audit.add("task", action=ssn.action, job=job.name, namespace=job.namespace, task=task.name,
                  outcome="unplaced", node=None, nodes=n_nodes, rejected=rejections.records())


def _shortfall(node: Node, task: Task) -> tuple[tuple[float, ...], str]:
    """How far `node` is from taking the task: a rank (fewer and smaller gaps first) and a phrase."""
    req, free = task.request, node.non_allocated()
    gaps: list[tuple[float, str]] = []
    gpu_gap = req.gpus - free.gpus
    if gpu_gap > 1e-9:
        gaps.append((gpu_gap, f"{gpu_gap:g} GPU" + ("" if gpu_gap <= 1 else "s")))
    elif req.is_shared and not node.fits_idle_or_releasing(task):
        gaps.append((req.gpus, f"a GPU with {req.gpus:g} of it free"))
    if req.cpu > free.cpu:
        gaps.append(((req.cpu - free.cpu) / 1000, f"{(req.cpu - free.cpu) / 1000:g} CPU cores"))
    if req.memory > free.memory:
        gaps.append(((req.memory - free.memory) / 1e9, f"{(req.memory - free.memory) / 1e9:.3g} GB memory"))
    for name, n in req.mig:
        if free.mig.get(name, 0) < n:
            gaps.append((n - free.mig.get(name, 0), f"{n - free.mig.get(name, 0)} {name}"))
    if free.pods < 1:
        gaps.append((1.0, "a pod slot"))
    if not gaps:
        return (0.0,), f"node {node.name} cannot take the request as a whole"
    rank = (float(len(gaps)), *sorted((g for g, _ in gaps), reverse=True))
    return rank, f"node {node.name} lacks " + " and ".join(text for _, text in gaps)


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
    # a handful of codes (5 bits): counted by value, each found first where it first occurs
    counts = np.bincount(codes, minlength=1 << len(_LACKING))
    found = np.flatnonzero(counts)
    first = [int(np.argmax(codes == code)) for code in found.tolist()]
    out = []
    for k in sorted(range(len(found)), key=first.__getitem__):
        code = int(found[k])
        names = ", ".join(name for bit, name in enumerate(_LACKING) if code >> bit & 1)
        out.append(("node(s) didn't have enough resources: " + names, int(counts[code])))
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
