"""Whether a queue may take resources back from other queues (the proportion plugin's reclaim
rules): `can_reclaim` before a job's solution, `reclaimable` for one victim scenario.

The reclaimer and each reclaimee are compared at the level where their queue paths diverge;
every chunk a victim gives up must satisfy one of two strategies (the reclaimee stays above its
allocatable share, or the reclaimer stays within deserved while the reclaimee is above its
deserved); afterwards the reclaimer's allocated/fair-share ratio, times the saturation
multiplier, must stay below every involved sibling's at every level of its path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from kaipolicy.api.job import DEFAULT_SUB_GROUP, Job
from kaipolicy.api.queue import RESOURCES, UNLIMITED
from kaipolicy.api.task import ACTIVE_ALLOCATED, Task
from kaipolicy.builtins.fairshare import QueueShare, Vec, accepted_quantities, less_equal, vec


def can_reclaim(queues: dict[str, QueueShare], job: Job, request: Vec) -> bool:
    qs = queues[job.queue]
    if not less_equal(_plus(qs.get("allocated"), request), qs.get("fair_share")):
        return False
    if job.preemptible:
        return True
    return less_equal(_plus(qs.get("allocated_non_preemptible"), request), qs.get("deserved"))


def victim_chunks(job: Job, tasks: Sequence[Task], skip_reallocated: bool) -> list[Vec]:
    """What a victim gives up, chunk by chunk: each pod beyond its pod set's minimum alone, the
    pods within the minimum together. With `skip_reallocated`, pods still (or again) allocated
    after the simulation count nothing."""
    by_set: dict[str, list[Task]] = {}
    for t in tasks:
        by_set.setdefault(t.sub_group or DEFAULT_SUB_GROUP, []).append(t)
    core: list[Task] = []
    elastic: list[Task] = []
    for name, members in by_set.items():
        ps = job.pod_sets.get(name)
        minimum = ps.min_available if ps is not None else len(members)
        if minimum >= len(members):
            core.extend(members)
        else:
            core.extend(members[:minimum])
            elastic.extend(members[minimum:])
    chunks = [c for c in (_sum(skip_reallocated, [t]) for t in elastic) if c is not None]
    whole = _sum(skip_reallocated, core)
    if whole is not None:
        chunks.append(whole)
    return chunks


def _sum(skip_reallocated: bool, tasks: Iterable[Task]) -> Vec | None:
    counted = [t for t in tasks if not (skip_reallocated and t.status in ACTIVE_ALLOCATED)]
    if not counted:
        return None
    total = vec()
    for t in counted:
        for r, v in accepted_quantities(t).items():
            total[r] += v
    return total


def reclaimable(queues: dict[str, QueueShare], reclaimer: Job, preemptible: bool, request: Vec,
                chunks_by_queue: dict[str, list[Vec]], multiplier: float) -> bool:
    multiplier = max(multiplier, 1.0)
    remaining: dict[str, Vec] = {}
    involved: dict[str, set[str]] = {}
    for queue_uid, chunks in chunks_by_queue.items():
        reclaimer_q, reclaimee_q = leveled_queues(queues, reclaimer.queue, queue_uid)
        involved[queue_uid] = _involved(chunks)
        left = remaining.setdefault(reclaimee_q.queue.uid, reclaimee_q.get("allocated"))
        for chunk in chunks:
            if not fits_strategy(request, reclaimer_q, reclaimee_q, left):
                return False
            _take(queues, remaining, queue_uid, chunk, involved)
    return _within_boundaries(queues, reclaimer.queue, preemptible, request, remaining, involved, multiplier)


def fits_strategy(request: Vec, reclaimer: QueueShare, reclaimee: QueueShare, reclaimee_left: Vec) -> bool:
    # keep fair share: the reclaimee still holds more than it may keep
    if not less_equal(reclaimee_left, reclaimee.allocatable()):
        return True
    # guarantee deserved quota: the reclaimer stays within deserved, the reclaimee is above its own
    if not less_equal(_plus(reclaimer.get("allocated"), request), reclaimer.get("deserved")):
        return False
    return not less_equal(reclaimee_left, reclaimee.get("deserved"))


def _take(queues: dict[str, QueueShare], remaining: dict[str, Vec], queue_uid: str, chunk: Vec,
          involved: dict[str, set[str]]) -> None:
    source = set(involved[queue_uid])
    for qs in path_up(queues, queue_uid):
        left = remaining.setdefault(qs.queue.uid, qs.get("allocated"))
        for r in RESOURCES:
            left[r] -= chunk[r]
        involved.setdefault(qs.queue.uid, set()).update(source)


def _within_boundaries(queues: dict[str, QueueShare], queue_uid: str, preemptible: bool, request: Vec,
                       remaining: dict[str, Vec], involved: dict[str, set[str]], multiplier: float) -> bool:
    own = _involved([request])
    for qs in path_up(queues, queue_uid):
        left = remaining.get(qs.queue.uid)
        if left is None:
            left = qs.get("allocated")
        for r in RESOURCES:
            left[r] += request[r]
        for sib_uid in list(remaining):
            sib = queues[sib_uid]
            if sib.queue.parent != qs.queue.parent or sib is qs:
                continue
            names = involved.get(sib_uid, set()) | own
            if not saturation_lower(names, left, qs.get("fair_share"), remaining[sib_uid], sib.get("fair_share"),
                                     multiplier):
                return False
        if not preemptible and not less_equal(_plus(qs.get("allocated_non_preemptible"), request),
                                              qs.get("deserved")):
            return False
    return True


def saturation_lower(names: Iterable[str], mine: Vec, my_fair: Vec, theirs: Vec, their_fair: Vec,
                      multiplier: float) -> bool:
    for r in names:
        if my_fair[r] == UNLIMITED and their_fair[r] == UNLIMITED:
            continue
        ratio = share_ratio(mine[r], my_fair[r])
        if ratio > 1 and their_fair[r] > 0 and ratio * multiplier >= share_ratio(theirs[r], their_fair[r]):
            return False
    return True


def share_ratio(allocated: float, fair: float) -> float:
    if fair == 0:
        return math.inf if allocated > 0 else 0.0
    if fair == UNLIMITED:
        return 0.0
    return allocated / fair


def leveled_queues(queues: dict[str, QueueShare], a: str, b: str) -> tuple[QueueShare, QueueShare]:
    """The two queues' ancestors (or themselves) at the first level where their paths differ."""
    pa, pb = list(reversed(path_up(queues, a))), list(reversed(path_up(queues, b)))
    qa, qb = pa[0], pb[0]
    for x, y in zip(pa, pb):
        qa, qb = x, y
        if x.queue.uid != y.queue.uid:
            break
    return qa, qb


def path_up(queues: dict[str, QueueShare], uid: str) -> list[QueueShare]:
    out = []
    qs = queues.get(uid)
    while qs is not None:
        out.append(qs)
        qs = queues.get(qs.queue.parent) if qs.queue.parent else None
    return out


def _involved(amounts: Iterable[Vec]) -> set[str]:
    return {r for a in amounts for r in RESOURCES if a[r] > 0}


def _plus(a: Vec, b: Vec) -> Vec:
    return {r: a[r] + b[r] for r in RESOURCES}


def snapshot(queues: dict[str, QueueShare]) -> dict[str, QueueShare]:
    return {uid: qs.clone() for uid, qs in queues.items()}


def scenario_reclaimable(cluster: Any, scenario: Any, multiplier: float) -> bool:
    """The proportion validator over a solver scenario (see kaipolicy.actions.solver)."""
    queues = scenario.start_shares or cluster.shares.queues
    skip = bool(cluster.params.allow_consolidating_reclaim)
    by_queue: dict[str, list[Vec]] = {}
    for victim in scenario.victims:
        if skip and all(t.status in ACTIVE_ALLOCATED for t in victim.tasks):
            continue   # not evicted in this simulation, or placed back: it gives up nothing
        chunks = victim_chunks(victim.job, victim.tasks, skip)
        if chunks:
            by_queue.setdefault(victim.job.queue, []).extend(chunks)
    preemptor = scenario.preemptor
    return reclaimable(queues, preemptor, preemptor.preemptible, scenario.request, by_queue, multiplier)
