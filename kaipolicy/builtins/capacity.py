"""Queue capacity gates and queue order, read from the fair-share state.

`over_limit` and `non_preemptible_over_quota` walk from the job's queue up to the top and
return a message naming the queue and numbers when a gate closes; `queue_order_key` gives
the proportion plugin's queue-order rules as one sortable key.
"""

from __future__ import annotations

from typing import Any

from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.queue import RESOURCES, UNLIMITED
from kaipolicy.api.task import Task
from kaipolicy.builtins.fairshare import (
    NO_FAIR_SHARE_DRF_MULTIPLIER,
    QueueShare,
    Share,
    Shares,
    Vec,
    at_most,
    less_equal,
    vec,
)

_UNITS = {"gpu": ("GPUs", 1.0, "GPUs"), "cpu": ("CPU cores", 1000.0, "cores"), "memory": ("memory", 1e9, "GB")}


def _h(x: float, div: float) -> str:
    v = x / div
    return f"{v:g}" if v == int(v) else f"{v:.3g}"


def _first_exceeded(shares: Shares, queue_uid: str, requested: Vec, cap: str,
                    used: str) -> tuple[QueueShare, str, Share] | None:
    """The first queue up the tree, and resource, where `used` + the request passes `cap`."""
    for qs, r, sh, limit in shares.capped(queue_uid, cap):
        if not requested.get(r):
            continue
        if limit < getattr(sh, used) + requested[r]:
            return qs, r, sh
    return None


def over_limit(shares: Shares, queue_uid: str, requested: Vec) -> str | None:
    hit = _first_exceeded(shares, queue_uid, requested, "max_allowed", "allocated")
    if hit is None:
        return None
    qs, r, sh = hit
    name, div, unit = _UNITS[r]
    return (f"{qs.queue.name} quota has reached the allowable limit of {name}. "
            f"Limit is {_h(sh.max_allowed, div)} {unit}, currently {_h(sh.allocated, div)} {unit} "
            f"allocated and workload requested {_h(requested[r], div)} {unit}")


def non_preemptible_over_quota(shares: Shares, queue_uid: str, preemptible: bool, requested: Vec) -> str | None:
    hit = None if preemptible else _first_exceeded(shares, queue_uid, requested, "deserved",
                                                    "allocated_non_preemptible")
    if hit is None:
        return None
    qs, r, sh = hit
    _, div, unit = _UNITS[r]
    return (f"Non-preemptible workload is over quota. Workload requested {_h(requested[r], div)} "
            f"{unit}, but {qs.queue.name} quota is {_h(sh.deserved, div)} {unit}, while "
            f"{_h(sh.allocated_non_preemptible, div)} {unit} are already allocated for "
            "non-preemptible pods. Use a preemptible workload to go over quota.")


class Dominance:
    """Orders by 'smaller in every resource and strictly smaller in one'; otherwise equal."""

    __slots__ = ("v",)

    def __init__(self, v: Vec) -> None:
        self.v = v

    def __lt__(self, other: Dominance) -> bool:
        return less_equal(self.v, other.v) and not less_equal(other.v, self.v)

    def __gt__(self, other: Dominance) -> bool:
        return other < self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dominance) and not (self < other) and not (other < self)

    # Unhashable on purpose (equal means neither dominates); typeshed types __hash__ as a method.
    __hash__ = None  # type: ignore[assignment]


def order_key_inputs(qs: QueueShare, job_request: Vec | None, victims: Vec | None) -> tuple[Any, ...]:
    """What `queue_order_key` reads that can change within a session: the queue's allocation, the
    job's request and the victims' resources (the key is remembered by these)."""
    sh = qs.shares
    return (qs.queue.uid, (sh["cpu"].allocated, sh["memory"].allocated, sh["gpu"].allocated),
            (job_request["cpu"], job_request["memory"], job_request["gpu"]) if job_request else None,
            (victims["cpu"], victims["memory"], victims["gpu"]) if victims else None)


def queue_order_key(shares: Shares, qs: QueueShare, job_request: Vec | None,
                    victims: Vec | None = None) -> list[object]:
    """The proportion plugin's queue order, first differing element decides (ascending).

    Remembered per queue allocation, request and victims: everything else it reads is fixed for
    the session, and the eviction solver orders the same queues in every simulation."""
    memo_key = order_key_inputs(qs, job_request, victims)
    known = shares.order_keys.get(memo_key)
    if known is None:
        if len(shares.order_keys) >= ORDER_KEYS_KEPT:
            shares.order_keys.clear()
        known = shares.order_keys[memo_key] = queue_order_key_unmemoised(shares, qs, job_request, victims)
    return list(known)


ORDER_KEYS_KEPT = 100_000


def queue_order_key_unmemoised(shares: Shares, qs: QueueShare, job_request: Vec | None,
                               victims: Vec | None, allocated: Vec | None = None) -> list[object]:
    """`queue_order_key` without its memo, for a caller that remembers keys by the same inputs.
    `allocated`: the key the queue would have with that allocation instead of its own. Every
    element but the last never decreases as the allocation grows (a queue is only ever judged
    worse for holding more)."""
    over_used, starved, zero_share_violation = True, True, False
    with_extra = plain = 0.0
    fixed, dominance = _fixed_parts(shares, qs)
    for r, sh, fair, deserved, cap_raw, cap in fixed:
        held = sh.allocated if allocated is None else allocated[r]
        alloc = float(held)
        requested = job_request[r] if job_request else 0.0
        with_job = alloc + requested
        over_used = over_used and fair < alloc
        starved = starved and at_most(with_job, deserved)
        zero_share_violation = zero_share_violation or (cap_raw == 0 and with_job > 0)
        extra = requested - (victims[r] if victims else 0.0)
        # the dominant share with the job (less the victims) and without it: held over what is
        # allocatable, or times the multiplier where nothing is (written out: every order key of
        # every simulation asks)
        if cap == 0:
            with_extra = max(with_extra, (held + extra) * NO_FAIR_SHARE_DRF_MULTIPLIER)
            plain = max(plain, (held + 0.0) * NO_FAIR_SHARE_DRF_MULTIPLIER)
        else:
            with_extra = max(with_extra, (held + extra) / cap)
            plain = max(plain, (held + 0.0) / cap)
    return [
        1 if over_used else 0,
        0 if starved else 1,
        -qs.queue.priority,
        1 if zero_share_violation else 0,
        with_extra,
        plain,
        dominance,
    ]


_Fixed = tuple[str, Share, float, float, float, float]


def _fixed_parts(shares: Shares, qs: QueueShare) -> tuple[list[_Fixed], Dominance]:
    """What the queue order reads of a queue that is fixed for the session (its fair share,
    deserved quota and allocatable share), per resource, and its Dominance element (compared by
    value, so one object serves every key)."""
    known = shares.order_fixed.get(qs.queue.uid)
    if known is not None and known[0] is qs:    # the share object it was worked out for
        return known[1], known[2]
    fixed: list[_Fixed] = []
    allocatable: Vec = {}
    for r in RESOURCES:
        sh = qs.shares[r]
        cap = allocatable[r] = sh.allocatable()
        fixed.append((r, sh, float(sh.fair_share), float(sh.deserved), cap, shares.total[r] if cap == UNLIMITED else cap))
    dominance = Dominance(allocatable)
    shares.order_fixed[qs.queue.uid] = (qs, fixed, dominance)
    return fixed, dominance


def _required(tasks: list[Task]) -> Vec:
    out = vec()
    for t in tasks:
        out["cpu"] += t.request.cpu
        out["memory"] += t.request.memory
        out["gpu"] += t.request.gpus_quota
    return out


def uncapped(shares: Shares, job: Job) -> bool:
    """No limit up the job's queue path, and no quota it must keep within: both gates pass."""
    return not shares.capped(job.queue, "max_allowed") and (job.preemptible or not shares.capped(job.queue, "deserved"))


def job_over_capacity(shares: Shares, job: Job, tasks: list[Task]) -> str | None:
    """The queue limit, then the non-preemptible quota, for the job's next tasks."""
    if uncapped(shares, job):
        return None
    req = _required(tasks)
    return over_limit(shares, job.queue, req) or non_preemptible_over_quota(shares, job.queue, job.preemptible, req)


def job_non_preemptible_over_quota(shares: Shares, job: Job, tasks: list[Task]) -> str | None:
    return non_preemptible_over_quota(shares, job.queue, job.preemptible, _required(tasks))


def task_on_node_over_capacity(shares: Shares, task: Task, job: Job, node: Node) -> str | None:
    """The same gates for one task as it would land on `node`.

    Kept on purpose: like the reference, a non-MIG task counts as the portion of ONE device its
    GPU memory covers on this node, so a whole-GPU task counts 1 here however many it asks.
    """
    if uncapped(shares, job):
        return None
    req = task.request
    if req.mig:
        gpus = req.gpus_quota
    else:
        gpus = node.portion_of_memory(node.gpu_memory_of(req)) if node.gpu_memory else 0.0
    amounts = vec(req.cpu, req.memory, gpus)
    return over_limit(shares, job.queue, amounts) or non_preemptible_over_quota(shares, job.queue, job.preemptible,
                                                                                amounts)
