"""Reclaim scenarios proven refused before they are simulated.

The proportion validator refuses a scenario as soon as a victim queue gives up anything while
the chunk strategies fail for it at its full allocation: neither strategy holds for less either,
so any pod of such a *protected* queue left evicted dooms the scenario. When an aggregate count
shows that the preemptor and the protected pods that can only go where the preemptor can cannot
all fit there together, some of those pods stays evicted in every simulation that places the
preemptor: the simulation could only end unplaced or refused, so it is not run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kaipolicy.actions.solver.scenario import Scenario
from kaipolicy.api.node import Node
from kaipolicy.api.resources import RequestType
from kaipolicy.api.task import Status, Task
from kaipolicy.builtins.reclaimable import fits_strategy, leveled_queues
from kaipolicy.framework.fits import fits_mask
from kaipolicy.framework.session import Session
from kaipolicy.framework.tasks import tasks_to_allocate

#: Prove refusals before simulating (False: simulate every scenario, as the reference does; the
#: tests compare both).
REFUSALS_PROVEN = True

#: The validator whose refusals can be proven, as the proportion plugin's rule file calls it.
RECLAIMABLE = "reclaim.reclaimable"


class ReclaimRefusals:
    """The proof for one reclaim job's solution (its queue shares stay as they were at its start)."""

    def __init__(self, ssn: Session, label: str) -> None:
        self.ssn = ssn
        self.label = label
        self.skip_reallocated = bool(ssn.params.allow_consolidating_reclaim)
        self._protected: dict[tuple[str, tuple[float, ...]], bool] = {}

    @staticmethod
    def for_session(ssn: Session) -> ReclaimRefusals | None:
        """The proof when the session's reclaim validators allow it: the proportion built-in first
        (nothing runs before it, so a refusal has no other side effect), no shadow validator."""
        rules = ssn.hooks["reclaimScenarioValidator"]
        if not REFUSALS_PROVEN or not rules or getattr(rules[0], "head_call", "") != RECLAIMABLE:
            return None
        if ssn.shadowing and ssn.shadow["reclaimScenarioValidator"]:
            return None
        return ReclaimRefusals(ssn, rules[0].label)

    def refuses(self, scenario: Scenario, nodes: Sequence[Node], evicted: Sequence[Task]) -> bool:
        """True when every simulation of these evictions that places the preemptor is refused.
        Called with the evictions applied; records the refusal as the validator would."""
        jobs = self.ssn.cluster.jobs
        if any(jobs[t.job].has_pending for t in evicted):
            return False    # a victim's failed re-placement records fit errors its owner reads
        preemptor = tasks_to_allocate(self.ssn, scenario.preemptor, False)
        if not all(map(_placed_alike, preemptor)) or not all(map(_placed_back_alike, evicted)):
            return False
        if self.skip_reallocated:
            doomed = [t for t in evicted if t.status == Status.RELEASING and self._is_protected(scenario, jobs[t.job].queue)]
            proven = bool(doomed) and one_stays_evicted(self.ssn, nodes, preemptor, doomed)
        else:   # every victim of the scenario counts, placed back or not
            proven = any(v.tasks and self._is_protected(scenario, v.job.queue) for v in scenario.victims)
        if proven:
            ssn = self.ssn
            ssn.refusals[self.label] += 1
            if ssn.coverage is not None:
                ssn.coverage.hit(self.label)
            ssn.tally["proven", ssn.action] += 1
        return proven

    def _is_protected(self, scenario: Scenario, queue: str) -> bool:
        """Neither chunk strategy holds for the queue's first chunk (taken at its full allocation)."""
        request = scenario.request
        key = (queue, tuple(request[r] for r in sorted(request)))
        known = self._protected.get(key)
        if known is None:
            queues = scenario.start_shares or self.ssn.shares.queues
            if queue not in queues or scenario.preemptor.queue not in queues:
                known = False
            else:
                reclaimer, reclaimee = leveled_queues(queues, scenario.preemptor.queue, queue)
                known = not fits_strategy(request, reclaimer, reclaimee, reclaimee.get("allocated"))
            self._protected[key] = known
        return known


# A simulation leaves a trace on the pods it placed, as the reference's does: a pod keeps what it
# was last granted (its accepted request, and a pending pod its GPU groups). A simulation stands
# in for another only when every pod it could place would keep the same trace either way.
def _placed_alike(task: Task) -> bool:
    """A preemptor pod that any placement leaves as it is: whole GPUs (no groups to keep), its
    grant already its request."""
    req = task.request
    return not req.is_shared and not req.mig and task.accepted == req


def _placed_back_alike(task: Task) -> bool:
    """A victim pod that a placement anywhere leaves with the grant it has: its request (whole
    GPUs, CPU only), or for a fraction the same share of a device (only the device's size in MiB
    can differ, which nothing reads); a GPU-memory request's share depends on the device."""
    req, acc = task.request, task.accepted
    if acc is None or req.kind == RequestType.GPU_MEMORY or req.mig:
        return False
    return acc.gpus_quota == req.gpus_quota and acc.cpu == req.cpu and acc.memory == req.memory \
        if req.kind == RequestType.FRACTION else acc == req


def one_stays_evicted(ssn: Session, nodes: Sequence[Node], preemptor: Sequence[Task], evicted: Sequence[Task]) -> bool:
    """Whether some of `evicted` must stay evicted in any placement that also places every pod
    of `preemptor` on `nodes` (filled from their state now, as a simulation fills them).

    The pods of `evicted` that fit nowhere but where a preemptor pod fits would have to share
    those nodes with the preemptor; if their sum exceeds what those nodes have (CPU, memory, pod
    slots, whole devices, then GPU memory for the shared requests), they cannot all go back."""
    tasks = [*preemptor, *evicted]
    if not preemptor or any(t.request.mig for t in tasks):
        return False
    view = ssn.table.view(nodes)
    where = np.zeros(len(nodes), dtype=bool)
    for t in preemptor:
        where |= fits_mask(view, t, with_releasing=True)
    confined = [t for t in evicted if not (fits_mask(view, t, with_releasing=True) & ~where).any()]
    if not confined:
        return False
    rows = np.flatnonzero(where)
    demand = [*preemptor, *confined]
    if (sum(t.request.cpu for t in demand) > float(view.free_cpu_millis[rows].sum())
            or sum(t.request.memory for t in demand) > float(view.free_memory_bytes[rows].sum())
            or len(demand) > float(view.free_pods[rows].sum())):
        return True
    hosts = [nodes[int(i)] for i in rows]
    devices = sum(math.floor(n.free_gpus + 1e-9) for n in hosts)
    whole = sum(t.request.count for t in demand if not t.request.is_shared and t.request.gpus > 0)
    if whole > devices:
        return True
    shared = [t for t in demand if t.request.is_shared]
    if not shared:
        return False
    # GPU memory the shared pods need at least, against what the hosts' free devices (less those
    # the whole-GPU pods take, each at least the smallest device) and their open groups offer
    need = sum(t.request.count * min(n.gpu_memory_of(t.request) for n in hosts) for t in shared)
    offered = sum(math.floor(n.free_gpus + 1e-9) * n.gpu_memory + n.shared_room_total for n in hosts)
    return need > offered - whole * min(n.gpu_memory for n in hosts)

