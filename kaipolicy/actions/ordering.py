"""Jobs ordered by the queue tree: at each level the best queue by the queue-order hooks
(judged by its best job), inside a leaf queue the best job by the job-order hooks.

With `victims=True` every order is reversed (the worst job of the worst queue comes first)
and each queue is judged by the victims already taken from it plus its next one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.actions.heap import GoHeap, SortedByKey
from kaipolicy.api.job import Job, TakenVictims
from kaipolicy.api.queue import Queue
from kaipolicy.api.task import ACTIVE_ALLOCATED
from kaipolicy.framework.session import Session

#: Judge a victim queue by a running sum of the victims taken from it (False: re-sum them all
#: at every comparison, as the reference does; the tests compare both).
SUM_TAKEN_VICTIMS = True


@dataclass(eq=False)
class _QueueNode:
    queue: Queue
    leaf: bool
    children: Any   # GoHeap of queue nodes, or of jobs (GoHeap / SortedByKey) in a leaf
    parent: _QueueNode | None = None
    needs_reorder: bool = False
    key: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class SortedJobs:
    """Leaf queues' (key, sequence, job) entries in order, and each job's status-change count
    when its key was taken; per leaf, its jobs' keys by uid. The session notes the status
    changes of these jobs in `status_touched`.

    A job counts as changed when its pods are not in the statuses they had when listed, and,
    where job keys read more than the job (a job-order rule consults the session), whenever its
    pods changed status since. A changed job is taken out of its leaf and pushed again when an
    order loads, and where that push links its leaf into the tree the heaps take another shape
    (with keys that are not a strict weak order, other queues pop first). The reference pushes
    a simulation's jobs in the iteration order of a Go map, which varies from run to run; this
    fixed order reads only the cluster as it is. It once counted a job whose pods are
    back in their statuses (a preemptor's pipelines rolled back) as changed too, which made the
    shape depend on which simulations had run: a shortcut skipping one, or a solution simulated
    again, then shaped the heaps otherwise than the shortcuts off (busy_three_levels seed 26385)."""

    leaves: dict[str, list[tuple[Any, int, Job]]]
    versions: dict[str, int]
    keys: dict[str, dict[str, Any]]
    jobs: dict[str, Job]
    position: dict[str, int]    # per job uid: where the leaves list it
    leaf_of: dict[str, str]
    statuses: dict[str, tuple[Any, ...]]    # per job uid: its pods' statuses when listed
    # the jobs changed, and those of them with pending pods, as of a count of the session's status
    # changes of these jobs (see _changed)
    _changed_then: list[Any] = field(default_factory=lambda: [-1, [], []], compare=False, repr=False)

    def changed(self, ssn: Session, skip: set[str]) -> list[Job]:
        """The jobs listed here, but not in `skip`, whose pods changed status since their keys
        were taken (their keys may differ), in the order listed."""
        return [j for j in self._changed(ssn)[0] if j.uid not in skip]

    def changed_pending(self, ssn: Session, skip: set[str]) -> bool:
        """Some job `changed` gives has pending pods."""
        return any(j.uid not in skip for j in self._changed(ssn)[1])

    def _changed(self, ssn: Session) -> tuple[list[Job], list[Job]]:
        """Every changed job, and those with pending pods; worked out again only after a status
        change of one of these jobs (nothing else changes either list)."""
        then = self._changed_then
        if then[0] != ssn.watched_changes:
            changes = ssn.status_changes
            versions = self.versions
            # only the jobs the session saw change can have changed: the rest are as they were listed
            changed = [self.jobs[uid] for uid in ssn.status_touched
                       if uid in versions and changes.get(uid, 0) != versions[uid]]
            if ssn.job_keys_pure:
                # (a job back in the statuses it had has the key it was listed with)
                statuses = self.statuses
                changed = [j for j in changed if tuple([t.status for t in j.tasks.values()]) != statuses[j.uid]]
            changed.sort(key=lambda j: self.position[j.uid])
            then[:] = [ssn.watched_changes, changed, [j for j in changed if j.has_pending]]
        return then[1], then[2]


@dataclass(frozen=True)
class JobFilter:
    pending: bool = False        # has a Pending task
    ready: bool = False          # enough alive, non-gated tasks for every pod set
    preemptible: bool = False
    active: bool = False         # has an active allocated task
    extra: Callable[[Job], bool] | None = None


class JobsByQueue:
    def __init__(self, ssn: Session, *, depth: int | None = None, victims: bool = False) -> None:
        self.ssn = ssn
        self.depth = depth
        self.victims = victims
        self.roots: GoHeap[_QueueNode] = GoHeap(self._node_less)
        self.nodes: dict[str, _QueueNode] = {}
        self.popped: dict[str, list[Job]] = {}
        self.taken: dict[str, tuple[float, float, float]] = {}   # per leaf: popped's allocated, summed
        self._job_keys: dict[str, tuple[Any, ...]] = {}

    # ---- filling ------------------------------------------------------------------------------
    def add(self, jobs: Iterable[Job], flt: JobFilter) -> JobsByQueue:
        queues = self.ssn.cluster.queues
        for job in sorted(jobs, key=lambda j: j.order):
            # the cheap test first: most jobs of a busy cluster have nothing pending
            if flt.pending and not job.has_pending:
                continue
            if flt.ready and not job.ready():
                continue
            if flt.preemptible and not job.preemptible:
                continue
            if flt.active and not any(t.status in ACTIVE_ALLOCATED for t in job.tasks.values()):
                continue
            if flt.extra is not None and not flt.extra(job):
                continue
            q = queues.get(job.queue)
            if q is None or (q.parent and q.parent not in queues) or not q.is_leaf:
                continue
            self.push(job)
        return self

    def sorted_jobs(self) -> SortedJobs:
        """The jobs as loaded, per leaf queue in order, to load into another order of the same
        session (no depth cap) without sorting them again."""
        leaves = {uid: list(node.children.items) for uid, node in self.nodes.items()
                  if node.leaf and isinstance(node.children, SortedByKey)}
        changes = self.ssn.status_changes
        jobs = {e[2].uid: e[2] for es in leaves.values() for e in es}
        self.ssn.watch_status(jobs)
        return SortedJobs(leaves, {uid: changes.get(uid, 0) for uid in jobs},
                          {quid: {e[2].uid: e[0] for e in es} for quid, es in leaves.items()}, jobs,
                          {uid: i for i, uid in enumerate(jobs)},
                          {e[2].uid: quid for quid, es in leaves.items() for e in es},
                          {uid: tuple([t.status for t in j.tasks.values()]) for uid, j in jobs.items()})

    def add_sorted(self, jobs: SortedJobs, skip: set[str]) -> list[Job]:
        """Load the leaf queues of `jobs`, leaving out the jobs whose uid is in `skip` and those
        whose pods changed status since (their keys may differ): those are returned, for the
        caller to add again if they still belong."""
        queues = self.ssn.cluster.queues
        changed = jobs.changed(self.ssn, skip)
        left_out = skip | {j.uid for j in changed}
        hit = {jobs.leaf_of[u] for u in left_out if u in jobs.leaf_of}   # leaves losing a job
        for uid, entries in jobs.leaves.items():
            kept = list(entries)
            self._job_keys.update(jobs.keys[uid])
            if uid in hit:
                # a leaf's entries sit at consecutive positions: drop the left-out ones by index
                start = jobs.position[entries[0][2].uid]
                gone = [u for u in left_out if jobs.leaf_of.get(u) == uid]
                for i in sorted((jobs.position[u] - start for u in gone), reverse=True):
                    del kept[i]
                for u in gone:
                    del self._job_keys[u]
            if kept:
                leaf = _QueueNode(queues[uid], True, self._leaf_jobs())
                leaf.children.items = kept
                self.nodes[uid] = leaf
                self._link(leaf)
                self._mark(leaf)
        return changed

    def key_of(self, job: Job) -> tuple[Any, ...]:
        """The job's order key, taken when it is pushed (subclasses memoise it)."""
        return self.ssn.job_key(job)

    def _leaf_jobs(self) -> GoHeap[Job] | SortedByKey[Job]:
        if self.depth is not None:
            return GoHeap(self._job_less, self.depth)
        return SortedByKey(lambda j: self._job_keys[j.uid], reverse=self.victims)

    def push(self, job: Job) -> None:
        queue = self.ssn.cluster.queues[job.queue]
        if not queue.is_leaf or self.depth == 0:
            return   # a depth of 0 lets no job of the queue through, as the reference's capped heap
        self._job_keys[job.uid] = self.key_of(job)
        leaf = self.nodes.get(queue.uid)
        new = leaf is None
        if leaf is None:
            leaf = _QueueNode(queue, True, self._leaf_jobs())
            self.nodes[queue.uid] = leaf
        leaf.children.push(job)
        if new:
            self._link(leaf)
        self._mark(leaf)

    def _link(self, child: _QueueNode) -> None:
        queues = self.ssn.cluster.queues
        pname = child.queue.parent
        if not pname:
            if child.parent is None:
                self.roots.push(child)
            return
        pq = queues.get(pname)
        if pq is None:
            return
        parent = self.nodes.get(pq.uid)
        new = parent is None
        if parent is None:
            parent = _QueueNode(pq, False, GoHeap(self._node_less))
            self.nodes[pq.uid] = parent
        if child.parent is None:
            child.parent = parent
            parent.children.push(child)
        if new:
            self._link(parent)

    def holding(self, uids: Collection[str]) -> bool:
        """Whether a job whose uid is in `uids` is still in the order (pushed, not popped yet)."""
        for node in self.nodes.values():
            if node.leaf:
                for item in node.children.items:
                    job = item[2] if isinstance(item, tuple) else item
                    if job.uid in uids:
                        return True
        return False

    def dispose(self) -> None:
        """Break the order's reference cycles (its heaps hold its comparison methods, its nodes
        their parents), so reference counting frees it at once: the cyclic collector is paused
        during a cycle, and the solver builds an order per simulation. The order is empty after."""
        for node in self.nodes.values():
            node.parent = None
            node.children = None
        self.nodes.clear()
        self.roots = GoHeap(_unordered)
        self._job_keys.clear()

    # ---- popping ------------------------------------------------------------------------------
    def empty(self) -> bool:
        return not self.roots.items

    def pop(self) -> Job | None:
        leaf = self._to_leaf(self.roots)
        if leaf is None:
            return None
        job: Job = leaf.children.pop()
        if self.victims:
            self._take(leaf.queue.uid, job)
        self._after_pop(leaf)
        return job

    def _take(self, quid: str, job: Job) -> None:
        """Remember a popped victim and add its allocated resources to its queue's sum. The sum
        stays right while the order is used: every scenario tried between two pops is rolled
        back, so a taken victim's pods hold the same resources at every later comparison."""
        self.popped.setdefault(quid, []).append(job)
        res = job.allocated_resources()
        cpu, memory, gpus = self.taken.get(quid, (0.0, 0.0, 0.0))
        self.taken[quid] = (cpu + res.cpu, memory + res.memory, gpus + res.gpus)

    def _to_leaf(self, heap: GoHeap[_QueueNode]) -> _QueueNode | None:
        while True:
            node = self._next(heap)
            if node is None or node.leaf:
                return node
            heap = node.children

    def _next(self, heap: GoHeap[_QueueNode]) -> _QueueNode | None:
        while heap.items:
            node = heap.peek()
            if node.needs_reorder:
                node.key = None
                heap.fix(0)
                node.needs_reorder = False
                continue
            return node if node.children.items else None
        return None

    def _after_pop(self, node: _QueueNode) -> None:
        if not node.children.items:
            if node.parent is not None:
                node.parent.children.pop()
            else:
                self.roots.pop()
            self.nodes.pop(node.queue.uid, None)
            if node.parent is not None:
                self._after_pop(node.parent)
            return
        self._mark(node)

    def forget_keys(self) -> None:
        """Forget every queue key kept, leaving the heaps as they are: for a caller that moved
        queue allocations outside the order (an eviction action's commit, or a statement it left
        applied). A node's key is kept until a pop or push marks it; the reference asks its queue
        order afresh at every comparison, so a queue whose pods a solution evicted is compared by
        its key as it stands (busy_three_levels seed 26385: q4's key, kept from before busy2's
        solution evicted gang1, held busy3 behind q0's busy0)."""
        for node in self.nodes.values():
            node.key = None

    def _mark(self, node: _QueueNode | None) -> None:
        while node is not None:
            node.needs_reorder = True
            node.key = None
            node = node.parent

    # ---- comparisons --------------------------------------------------------------------------
    def _job_less(self, a: Job, b: Job) -> bool:
        ka, kb = self._job_keys[a.uid], self._job_keys[b.uid]
        return kb < ka if self.victims else ka < kb

    def _node_less(self, a: _QueueNode, b: _QueueNode) -> bool:
        if not a.children.items:
            return not self.victims
        if not b.children.items:
            return self.victims
        less = self._node_key(a) < self._node_key(b)
        return not less if self.victims else less

    def _node_key(self, node: _QueueNode) -> tuple[Any, ...]:
        if node.key is None:
            leaf = node
            while not leaf.leaf:
                leaf = leaf.children.peek()
            best: Job = leaf.children.peek()
            if self.victims:
                quid = leaf.queue.uid
                popped = self.popped.get(quid, [])
                victims: Sequence[Job] = (TakenVictims(popped, best, self.taken.get(quid, (0.0, 0.0, 0.0)))
                                          if SUM_TAKEN_VICTIMS else [*popped, best])
                node.key = self.ssn.queue_key(node.queue, None, victims)
            else:
                node.key = self.ssn.queue_key(node.queue, best)
        return node.key


def _unordered(a: object, b: object) -> bool:
    return False


PENDING_READY = JobFilter(pending=True, ready=True)
