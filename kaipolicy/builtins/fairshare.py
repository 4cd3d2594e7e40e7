"""Fair share over the queue tree (the reference's proportion plugin, as data and functions).

`Shares.build()` totals the cluster, rolls allocations and requests up the tree and divides
each resource level by level: deserved quota first, then what is left by priority band and
over-quota weight in rounds of whole units, remainders one unit at a time. The session keeps
`allocated` current through `on_allocate` / `on_deallocate`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.api.job import Job
from kaipolicy.api.queue import RESOURCES, UNLIMITED, Queue
from kaipolicy.api.resources import Request, RequestType
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import ALLOCATED, Status, Task

NO_FAIR_SHARE_DRF_MULTIPLIER = 1000.0
Vec = dict[str, float]


def vec(cpu: float = 0.0, memory: float = 0.0, gpu: float = 0.0) -> Vec:
    return {"cpu": cpu, "memory": memory, "gpu": gpu}


def _cmp(a: float, b: float) -> int:
    if a == UNLIMITED:
        return 0 if b == UNLIMITED else 1
    if b == UNLIMITED:
        return -1
    return (a > b) - (a < b)


def at_most(a: float, b: float) -> bool:
    """a <= b where -1 means unlimited."""
    return _cmp(a, b) <= 0


def less_equal(a: Vec, b: Vec) -> bool:
    return all(_cmp(a[r], b[r]) <= 0 for r in RESOURCES)


@dataclass(slots=True)
class Share:
    """One resource of one queue."""

    deserved: float = 0.0
    fair_share: float = 0.0
    max_allowed: float = UNLIMITED
    over_quota_weight: float = 1.0
    allocated: float = 0.0
    allocated_non_preemptible: float = 0.0
    request: float = 0.0
    usage: float = 0.0

    def requestable(self) -> float:
        return self.request if self.max_allowed == UNLIMITED else min(self.max_allowed, self.request)

    def allocatable(self) -> float:
        if self.deserved == UNLIMITED:
            return self.max_allowed
        a = max(self.deserved, self.fair_share)
        return a if self.max_allowed == UNLIMITED else min(self.max_allowed, a)


#: Shares with their allocations (all, and of non-preemptible jobs) at one moment.
ShareValues = list[tuple[Share, float, float]]


@dataclass(slots=True, eq=False)
class QueueShare:
    queue: Queue
    shares: dict[str, Share] = field(default_factory=dict)

    def get(self, attr: str) -> Vec:
        return {r: float(getattr(self.shares[r], attr)) for r in RESOURCES}

    def allocatable(self) -> Vec:
        return {r: self.shares[r].allocatable() for r in RESOURCES}

    def dominant_share(self, total: Vec, extra: Vec | None = None) -> float:
        best = 0.0
        for r in RESOURCES:
            s = self.shares[r]
            allocatable = s.allocatable()
            if allocatable == UNLIMITED:
                allocatable = total[r]
            allocated = s.allocated + (extra[r] if extra else 0.0)
            value = allocated * NO_FAIR_SHARE_DRF_MULTIPLIER if allocatable == 0 else allocated / allocatable
            best = max(best, value)
        return best

    def clone(self) -> QueueShare:
        return QueueShare(self.queue, {r: Share(**{k: getattr(s, k) for k in Share.__slots__})
                                       for r, s in self.shares.items()})


def request_quantities(req: Request) -> Vec:
    return vec(req.cpu, req.memory, req.gpus_quota)


def pending_quantities(req: Request, min_gpu_memory: int) -> Vec:
    q = request_quantities(req)
    if req.kind == RequestType.GPU_MEMORY and min_gpu_memory:
        q["gpu"] += req.count * (req.gpu_memory / min_gpu_memory)
    return q


def accepted_quantities(task: Task) -> Vec:
    return request_quantities(task.accepted or task.request)


class Shares:
    """Fair share, allocation and requests of every queue for one session."""

    def __init__(self, cluster: ClusterInfo, k_value: float = 1.0) -> None:
        self.cluster = cluster
        self.k_value = max(k_value, 0.0)
        self.total = vec()
        self.queues: dict[str, QueueShare] = {}
        self._paths: dict[str, list[QueueShare]] = {}
        # per leaf queue, the (cpu, memory, gpu) shares of each queue on its path, leaf first
        self._path_shares: dict[str, list[tuple[Share, Share, Share]]] = {}
        self._capped: dict[tuple[str, str], list[tuple[QueueShare, str, Share, float]]] = {}
        # queue order keys by (queue, its allocation, job request, victims): the rest they read is
        # fixed for the session (capacity.queue_order_key)
        self.order_keys: dict[tuple[Any, ...], list[object]] = {}
        self.order_fixed: dict[str, Any] = {}   # per queue, what its order key reads that stays fixed (capacity.py)

    @classmethod
    def build(cls, cluster: ClusterInfo, k_value: float = 1.0) -> Shares:
        s = cls(cluster, k_value)
        for node in cluster.nodes.values():
            if not node.ready:
                continue  # the reference counts no capacity on cordoned or unhealthy nodes
            other = node.other_pods
            s.total["cpu"] += node.allocatable.cpu - (other.cpu if other else 0.0)
            s.total["memory"] += node.allocatable.memory - (other.memory if other else 0.0)
            s.total["gpu"] += node.allocatable.gpus + node.mig_gpu_slices() - (other.gpus if other else 0.0)
        for q in cluster.queues.values():
            qs = QueueShare(q)
            for r in RESOURCES:
                qs.shares[r] = Share(deserved=q.deserved.get(r), max_allowed=q.limit.get(r),
                                     over_quota_weight=q.over_quota_weight.get(r))
            s.queues[q.uid] = qs
        s._count_tasks(cluster)
        top = {uid: qs for uid, qs in s.queues.items() if not qs.queue.parent}
        s._divide(s.total, top)
        return s

    def path(self, queue_uid: str) -> list[QueueShare]:
        """The queue and its ancestors, leaf first."""
        cached = self._paths.get(queue_uid)
        if cached is not None:
            return cached
        out = []
        q = self.queues.get(queue_uid)
        while q is not None:
            out.append(q)
            q = self.queues.get(q.queue.parent) if q.queue.parent else None
        self._paths[queue_uid] = out
        return out

    def capped(self, queue_uid: str, cap: str) -> list[tuple[QueueShare, str, Share, float]]:
        """The (queue, resource) pairs up the queue's path, leaf first, whose `cap` (max_allowed
        or deserved) is not unlimited, with that cap: fixed for the session, so worked out once."""
        key = (queue_uid, cap)
        cached = self._capped.get(key)
        if cached is None:
            cached = self._capped[key] = [(qs, r, qs.shares[r], limit) for qs in self.path(queue_uid)
                                          for r in RESOURCES if (limit := getattr(qs.shares[r], cap)) != UNLIMITED]
        return cached

    def _count_tasks(self, cluster: ClusterInfo) -> None:
        """Every allocated and pending pod's amounts added up its job's queue path: what `_add_up`
        does per pod, with the path's shares looked up once per job (a busy cluster has
        hundreds of thousands of running pods). The additions happen in the same order."""
        mgm = cluster.min_node_gpu_memory
        for job in cluster.jobs.values():
            chain = [tuple(qs.shares[r] for r in RESOURCES) for qs in self.path(job.queue)]
            firm = not job.preemptible
            for task in job.tasks.values():
                status = task.status
                if status in ALLOCATED:
                    acc = task.accepted or task.request
                    amounts = (acc.cpu, acc.memory, acc.gpus_quota)
                    for shares in chain:
                        for sh, amount in zip(shares, amounts):
                            sh.request += amount
                            sh.allocated += amount
                            if firm:
                                sh.allocated_non_preemptible += amount
                elif status == Status.PENDING:
                    self._add_up(job, pending_quantities(task.request, mgm), allocated=False)

    def _add_up(self, job: Job, amounts: Vec, allocated: bool) -> None:
        for qs in self.path(job.queue):
            for r in RESOURCES:
                sh = qs.shares[r]
                sh.request += amounts[r]
                if allocated:
                    sh.allocated += amounts[r]
                    if not job.preemptible:
                        sh.allocated_non_preemptible += amounts[r]

    def on_allocate(self, job: Job, task: Task, sign: float = 1.0) -> None:
        acc = task.accepted or task.request
        cpu, memory, gpu = sign * acc.cpu, sign * acc.memory, sign * acc.gpus_quota
        path = self._path_shares.get(job.queue)
        if path is None:
            path = self._path_of_shares(job.queue)
        for c, m, g in path:
            c.allocated += cpu
            m.allocated += memory
            g.allocated += gpu
            if not job.preemptible:
                c.allocated_non_preemptible += cpu
                m.allocated_non_preemptible += memory
                g.allocated_non_preemptible += gpu

    @contextmanager
    def placed_virtually(self, job: Job, tasks: Sequence[Task]) -> Iterator[None]:
        """The shares as they are once `tasks` of `job` are placed (`on_allocate` for each), for
        the block only: on leaving it every amount on the job's queue path is given back its
        exact value (not taken off again, which could round differently). Nothing else of the
        session moves: no pod, no node."""
        kept = self.allocations_on_path(job.queue)
        try:
            for t in tasks:
                self.on_allocate(job, t, +1.0)
            yield
        finally:
            self.restore_allocations(kept)

    def allocations_on_path(self, queue: str) -> ShareValues:
        """What `on_allocate` changes for a job of `queue` (each share's allocation up the queue's
        path), to give back exactly with `restore_allocations`."""
        return [(sh, sh.allocated, sh.allocated_non_preemptible) for triple in self._path_of_shares(queue)
                for sh in triple]

    @staticmethod
    def restore_allocations(values: ShareValues) -> None:
        for sh, allocated, non_preemptible in values:
            sh.allocated, sh.allocated_non_preemptible = allocated, non_preemptible

    def _path_of_shares(self, queue: str) -> list[tuple[Share, Share, Share]]:
        path = self._path_shares.get(queue)
        if path is None:
            path = self._path_shares[queue] = [(qs.shares["cpu"], qs.shares["memory"], qs.shares["gpu"])
                                               for qs in self.path(queue)]
        return path

    # ---- division ---------------------------------------------------------------------------
    def _divide(self, total: Vec, queues: dict[str, QueueShare]) -> None:
        if not queues:
            return
        ordered = sorted(queues.values(), key=lambda q: (q.queue.created, q.queue.uid))
        for r in RESOURCES:
            remaining = _give_deserved(total[r], ordered, r)
            if remaining > 0:
                _divide_over_quota(remaining, self.k_value, ordered, r)
        for qs in ordered:
            children = {c: self.queues[c] for c in qs.queue.children if c in self.queues}
            self._divide({r: qs.shares[r].fair_share for r in RESOURCES}, children)


def _give_deserved(total: float, queues: list[QueueShare], r: str) -> float:
    remaining = total
    for qs in queues:
        sh = qs.shares[r]
        deserved = total if sh.deserved == UNLIMITED else sh.deserved
        amount = min(deserved, sh.requestable())
        sh.fair_share += amount
        remaining -= amount
    return remaining


def _satisfied(sh: Share) -> bool:
    return sh.request <= sh.fair_share or (sh.max_allowed != UNLIMITED and sh.max_allowed <= sh.fair_share)


def _remaining_request(sh: Share) -> float:
    req = sh.requestable()
    return 0.0 if req < sh.fair_share else req - sh.fair_share


def _divide_over_quota(total: float, k: float, queues: list[QueueShare], r: str) -> None:
    bands: dict[int, list[QueueShare]] = {}
    for qs in queues:
        bands.setdefault(qs.queue.priority, []).append(qs)
    leftovers: dict[int, dict[str, tuple[QueueShare, float]]] = {}
    remaining = total
    for prio in sorted(bands, reverse=True):
        remaining, leftovers[prio] = _up_to_fair_share(remaining, k, bands[prio], r)
    for prio in sorted(bands, reverse=True):
        if remaining <= 0:
            break
        pending = sorted(leftovers[prio].values(),
                         key=lambda e: (-e[1], e[0].queue.created, e[0].queue.uid))
        for qs, _ in pending:
            if remaining == 0:
                break
            give = min(1.0, remaining)
            qs.shares[r].fair_share += give
            remaining -= give


def _up_to_fair_share(total: float, k: float, queues: list[QueueShare],
                      r: str) -> tuple[float, dict[str, tuple[QueueShare, float]]]:
    leftovers: dict[str, tuple[QueueShare, float]] = {}
    while True:
        another_round = False
        round_amount = total
        weights, weight_sum = _share_weights(queues, r, k)
        if weight_sum == 0:
            break
        for qs in queues:
            if total == 0:
                break
            sh = qs.shares[r]
            if _satisfied(sh) or sh.over_quota_weight == 0:
                continue
            requested = _remaining_request(sh)
            fair = round_amount * weights.get(qs.queue.uid, 0.0) / weight_sum
            if requested <= fair:
                give = requested
                leftovers.pop(qs.queue.uid, None)
            else:
                give = max(math.floor(fair), 0.0)
                if fair - give > 0:
                    leftovers[qs.queue.uid] = (qs, fair - give)
            if give == 0:
                continue
            sh.fair_share += give
            total -= give
            another_round = another_round or requested < fair
        if not another_round or total == 0:
            break
    return total, leftovers


def _share_weights(queues: list[QueueShare], r: str, k: float) -> tuple[dict[str, float], float]:
    total_weight = sum(qs.shares[r].over_quota_weight for qs in queues if _remaining_request(qs.shares[r]) > 0)
    if total_weight == 0:
        return {}, 0.0
    weights: dict[str, float] = {}
    for qs in queues:
        sh = qs.shares[r]
        if _satisfied(sh):
            continue
        nw = sh.over_quota_weight / total_weight
        weights[qs.queue.uid] = max(0.0, nw + k * (nw - sh.usage))
    return weights, sum(weights.values())
