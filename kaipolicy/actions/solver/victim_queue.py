"""Victim jobs in eviction order, and the scenarios built from them one victim job at a time.

`VictimQueue` is the queue tree of `JobsByQueue(victims=True)` whose leaves are filled from one
sorted list per solution, with job keys memoised per view. Job keys are a total order (they end
with the job's uid), so a leaf's heap would pop its jobs in key order, greatest first: a leaf is
that list, popped from its end (`LeafVictims`).
`ScenarioBuilder` pops victims, lets each give up its next pods, and keeps only scenarios that
pass the filters.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from kaipolicy.actions.heap import GoHeap
from kaipolicy.actions.ordering import JobsByQueue, _QueueNode
from kaipolicy.actions.solver.filters import build_filters
from kaipolicy.actions.solver.scenario import Scenario
from kaipolicy.actions.solver.views import clone_with_tasks, tasks_to_evict
from kaipolicy.api.job import Job
from kaipolicy.framework.session import Session

KeyMemo = dict[tuple[str, frozenset[str] | None], tuple[Any, ...]]


class VictimQueue(JobsByQueue):
    def __init__(self, ssn: Session, keys: KeyMemo) -> None:
        super().__init__(ssn, victims=True)
        self.key_memo = keys

    def key_of(self, job: Job) -> tuple[Any, ...]:
        if self.ssn.cluster.jobs.get(job.uid) is job:
            # a whole job: the session remembers its key per state (keys are asked only while the
            # session is as it was when the job's solving started)
            return self.ssn.job_key(job)
        memo = (job.uid, frozenset(job.tasks))
        key = self.key_memo.get(memo)
        if key is None:
            key = self.key_memo[memo] = self.ssn.job_key(job)
        return key

    def fill(self, grouped: list[tuple[str, list[Job]]], kept: KeptLeaves | None = None) -> VictimQueue:
        """Load whole jobs (already filtered), grouped by queue as `by_queue` gives them; leaves are
        created in that order. With `kept`, each leaf's order is the one kept from the last fill,
        brought up to date."""
        queues = self.ssn.cluster.queues
        keys = self._job_keys
        key_of = self.key_of
        ssn = self.ssn
        for name, members in grouped:
            q = queues.get(name)
            if q is None or (q.parent and q.parent not in queues) or not q.is_leaf:
                continue
            if not LEAVES_AS_LISTS:
                leaf = _QueueNode(q, True, GoHeap(self._job_less))
            else:
                leaf = _QueueNode(q, True, LeafVictims(keys))
            if kept is not None:
                ascending = kept.ascending(q.uid, members, key_of, ssn.status_changes, keys,
                                           ssn.status_changed_since, ssn.status_log_at())
            else:
                keyed = [(key_of(j), j) for j in members]
                keyed.sort(key=_first)   # keys end with the job's uid: no two are equal
                for key, j in keyed:
                    keys[j.uid] = key
                ascending = [j for _, j in keyed]
            # a heap's array in descending order is a valid heap
            leaf.children.items = ascending if LEAVES_AS_LISTS else ascending[::-1]
            self.nodes[q.uid] = leaf
            self._link(leaf)
            self._mark(leaf)
        return self


def by_queue(jobs: Sequence[Job]) -> list[tuple[str, list[Job]]]:
    """The jobs by queue name, in job order, each queue where its first job comes in job order
    (so a leaf comes where it would if every job were checked, and each queue is checked once)."""
    grouped: dict[str, list[Job]] = {}
    for job in sorted(jobs, key=_order):
        members = grouped.get(job.queue)
        if members is None:
            members = grouped[job.queue] = []
        members.append(job)
    return list(grouped.items())


#: A leaf's victims are a list in key order popped from its end (False: a heap sifting like Go's,
#: as the reference's; the tests compare both).
LEAVES_AS_LISTS = True


class LeafVictims:
    """A leaf queue's victim jobs in ascending key order: the greatest pops first, as from the
    reference's heap (keys are distinct). `keys` is the order's job keys by uid; a job pushed
    has its key there already."""

    def __init__(self, keys: dict[str, tuple[Any, ...]]) -> None:
        self.items: list[Job] = []   # named as the heap's list: an order tells either kind empty by it
        self._keys = keys

    def __len__(self) -> int:
        return len(self.items)

    def peek(self) -> Job:
        return self.items[-1]

    def pop(self) -> Job:
        return self.items.pop()

    def push(self, job: Job) -> None:
        keys = self._keys
        bisect.insort(self.items, job, key=lambda j: keys[j.uid])


#: Keep each leaf queue's victims in key order between the victim queues of one action, placing
#: again only the jobs whose pods changed status since (False: sort every leaf for every queue;
#: the tests compare both).
LEAVES_KEPT = True


class _Leaf:
    """A leaf's kept order: keys and jobs ascending, each job's key and the count of status changes
    it was taken at, the member list it was loaded from and the status log's position then."""

    __slots__ = ("_by_uid", "at", "jobs", "keys", "members", "then")

    def __init__(self, keys: list[tuple[Any, ...]], jobs: list[Job], then: dict[str, int], members: list[Job],
                 at: int) -> None:
        self.keys, self.jobs, self.then, self.members, self.at = keys, jobs, then, members, at
        self._by_uid: dict[str, tuple[Any, ...]] | None = None

    @property
    def by_uid(self) -> dict[str, tuple[Any, ...]]:
        """Each job's key, made when first asked (a leaf loaded once never asks)."""
        if self._by_uid is None:
            self._by_uid = dict(zip([j.uid for j in self.jobs], self.keys))
        return self._by_uid


class KeptLeaves:
    """Per leaf queue, the whole jobs last loaded in ascending key order, with the count of status
    changes each key was taken at. Used only while job keys depend on the job alone (no job-order
    rule consults the session): a whole job's key then depends only on its pods' statuses, which
    change only through the session's set_status, which counts them. A job whose count is
    unchanged keeps its key and its place; keys end with the job's uid, so no two are equal and
    the order is the sort's.

    Loaded again from the same member list (the same victim source: the same jobs) and told which
    jobs changed status since (`since`, from the session's status log), only those are looked at:
    the others' counts are as they were."""

    def __init__(self) -> None:
        self.leaves: dict[str, _Leaf] = {}

    def ascending(self, quid: str, members: list[Job], key_of: Callable[[Job], tuple[Any, ...]],
                  counts: dict[str, int], keys_out: dict[str, tuple[Any, ...]],
                  since: Callable[[int], set[str] | None] | None = None, at: int = 0) -> list[Job]:
        """The leaf's jobs in ascending key order (a new list), their keys put in `keys_out`.
        `since(position)`: the jobs whose pods changed status since the status log stood there
        (None when unknown), `at`: its position now."""
        kept = self.leaves.get(quid)
        if kept is not None and since is not None and kept.members is members:
            touched = since(kept.at)
            if touched is not None:
                return self._brought_up(kept, touched, key_of, counts, keys_out, at)
        now = {j.uid: counts.get(j.uid, 0) for j in members}
        if kept is None:
            keyed = sorted([(key_of(j), j) for j in members], key=_first)
            keys, jobs = [k for k, _ in keyed], [j for _, j in keyed]
        else:
            keys, jobs, then = kept.keys, kept.jobs, kept.then
            if then != now:
                keys, jobs = list(keys), list(jobs)
                for i in reversed(range(len(jobs))):       # gone, or its pods changed status
                    if now.get(jobs[i].uid) != then[jobs[i].uid]:
                        del keys[i], jobs[i]
                for j in members:                          # new, or its pods changed status
                    if then.get(j.uid) != now[j.uid]:
                        k = key_of(j)
                        i = bisect.bisect_left(keys, k)
                        keys.insert(i, k)
                        jobs.insert(i, j)
        self.leaves[quid] = _Leaf(keys, jobs, now, members, at)
        keys_out.update(zip([j.uid for j in jobs], keys))
        return list(jobs)

    @staticmethod
    def _brought_up(kept: _Leaf, touched: set[str], key_of: Callable[[Job], tuple[Any, ...]],
                    counts: dict[str, int], keys_out: dict[str, tuple[Any, ...]], at: int) -> list[Job]:
        """`ascending` from the same members, of which only those in `touched` may have changed."""
        then = kept.then
        moved = [uid for uid in touched if uid in then and counts.get(uid, 0) != then[uid]]
        if moved:
            keys, jobs, by_uid = kept.keys, kept.jobs, kept.by_uid
            again: list[Job] = []
            for uid in moved:                              # out of their places
                i = bisect.bisect_left(keys, by_uid[uid])
                again.append(jobs[i])
                del keys[i], jobs[i]
            for j in again:                                # in again by their keys now
                k = key_of(j)
                i = bisect.bisect_left(keys, k)
                keys.insert(i, k)
                jobs.insert(i, j)
                by_uid[j.uid] = k
                then[j.uid] = counts.get(j.uid, 0)
        kept.at = at
        keys_out.update(kept.by_uid)
        return list(kept.jobs)


def _order(job: Job) -> int:
    return job.order


def _first(pair: tuple[tuple[Any, ...], Job]) -> tuple[Any, ...]:
    return pair[0]


class OneLeafQueue:
    """The victim queue when every victim sits in one leaf queue: no queue is ever compared, so
    the order is the jobs' own (a list in ascending key order, popped from the end)."""

    def __init__(self, keys: VictimQueue, ascending: list[Job]) -> None:
        self.keys = keys
        self.items = ascending

    def empty(self) -> bool:
        return not self.items

    def pop(self) -> Job | None:
        return self.items.pop() if self.items else None

    def push(self, job: Job) -> None:
        bisect.insort(self.items, job, key=self.keys.key_of)


class VictimOrder(Protocol):
    def empty(self) -> bool: ...
    def pop(self) -> Job | None: ...
    def push(self, job: Job) -> None: ...


class VictimSource:
    """Builds a fresh victim queue for every partial job from lists sorted once per job."""

    def __init__(self, ssn: Session, jobs: Sequence[Job], kept: KeptLeaves | None = None) -> None:
        """`kept`: the leaf orders kept for this action's victim queues (see KeptLeaves)."""
        self.ssn = ssn
        self.memo: KeyMemo = {}
        whole = all(ssn.cluster.jobs.get(j.uid) is j for j in jobs)
        self.kept = kept if LEAVES_KEPT and ssn.job_keys_pure and whole else None
        self.keys = VictimQueue(ssn, self.memo)
        queues = ssn.cluster.queues
        leaves: set[str] = set()
        for name in dict.fromkeys(j.queue for j in jobs):   # each queue checked once
            q = queues.get(name)
            if q is not None and not (q.parent and q.parent not in queues) and q.is_leaf:
                leaves.add(q.uid)
        self.jobs = [j for j in jobs if j.queue in leaves]
        self.one_leaf = len(leaves) == 1
        self.ascending = sorted(self.jobs, key=self.keys.key_of) if self.one_leaf else []
        self.task_owner = {t: j.uid for j in self.jobs for t in j.tasks} if self.one_leaf else {}
        self.grouped: list[tuple[str, list[Job]]] | None = None

    def queue(self, recorded: set[str]) -> VictimOrder:
        if self.one_leaf:
            # A job all of whose pods are recorded victims would only be popped and skipped.
            per_job: dict[str, int] = {}
            jobs = self.ssn.cluster.jobs
            for uid in recorded:
                owner = self.task_owner.get(uid)
                if owner is not None:
                    per_job[owner] = per_job.get(owner, 0) + 1
            done = {u for u, n in per_job.items() if n == len(jobs[u].tasks)}
            items = [j for j in self.ascending if j.uid not in done] if done else list(self.ascending)
            return OneLeafQueue(self.keys, items)
        if self.grouped is None:
            self.grouped = by_queue(self.jobs)   # (the same lists for every fill: see KeptLeaves)
        return VictimQueue(self.ssn, self.memo).fill(self.grouped, self.kept)


class ScenarioBuilder:
    def __init__(self, ssn: Session, scenario: Scenario, queue: VictimOrder, feasible: Iterable[str]) -> None:
        self.ssn = ssn
        self.scenario = scenario
        self.queue = queue
        self.recorded = {t.uid for t in scenario.recorded_tasks}
        self.filters = build_filters(scenario, feasible, ssn.cluster.nodes, ssn.table)
        self.filtered = 0

    def first(self) -> Scenario | None:
        return self.scenario if self._passes() else self.next()

    def next(self) -> Scenario | None:
        while not self.queue.empty():
            if self._add_next_victim() and self._passes():
                return self.scenario
        return None

    def _passes(self) -> bool:
        for f in self.filters:
            if not f.accepts(self.scenario):
                self.filtered += 1
                return False
        return True

    def _add_next_victim(self) -> bool:
        view = self.queue.pop()
        if view is None:
            return False
        tasks, more = tasks_to_evict(self.ssn, view)
        if any(t.uid in self.recorded for t in tasks):
            # Already a victim of the smaller solution: its other pods may still be taken later.
            rest = [t for t in view.tasks.values() if t.uid not in self.recorded]
            if rest:
                self.queue.push(clone_with_tasks(view, rest))
            return False
        if more:
            taken = {t.uid for t in tasks}
            self.queue.push(clone_with_tasks(view, [t for t in view.tasks.values() if t.uid not in taken]))
        self.scenario.add_potential(view, tasks)
        return True
