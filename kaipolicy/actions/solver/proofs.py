"""Reclaim scenarios proven refused before they are simulated, or before their simulation ends.

The proportion validator refuses a scenario as soon as a victim queue gives up anything while
the chunk strategies fail for it at its full allocation: neither strategy holds for less either,
so any pod of such a *protected* queue left evicted dooms the scenario. When an aggregate count
shows that the preemptor and the protected pods that can only go where the preemptor can cannot
all fit there together, some of those pods stays evicted in every simulation that places the
preemptor: the simulation could only end unplaced or refused, so it is not run.

Once a simulation has placed the preemptor, what the victims still to take their turn can do is
bounded: nodes only fill up, so a pod that fits nowhere now stays evicted, and the whole GPUs the
others can take back are at most those left free. When the validator refuses every outcome in
those bounds (a protected queue loses a pod, or the reclaimer's saturation check fails against a
sibling that surely loses enough), the simulation stops there, refused as it would end.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from kaipolicy.actions.solver.scenario import AnyScenario
from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.queue import RESOURCES
from kaipolicy.api.resources import Request, RequestType
from kaipolicy.api.task import ACTIVE_ALLOCATED, Status, Task
from kaipolicy.builtins.fairshare import QueueShare, Vec, request_quantities
from kaipolicy.builtins.reclaimable import (
    fits_strategy,
    leveled_queues,
    path_up,
    saturation_lower,
    share_ratio,
)
from kaipolicy.framework.fits import fits_mask
from kaipolicy.framework.nodetable import NodeVector
from kaipolicy.framework.session import Session
from kaipolicy.framework.tasks import tasks_to_allocate

#: Prove refusals before simulating (False: simulate every scenario, as the reference does; the
#: tests compare both).
REFUSALS_PROVEN = True

#: Prove a refusal from victim jobs that each doom the scenario if they stay out and cannot all
#: go back for want of whole GPUs (False: only the bounds that attribute what must stay out to
#: the queues that refuse least; the tests compare both).
DOOMED_TOGETHER = True

#: Where the bounds cannot refuse, ask them again in two cases, of one victim job that may go back
#: and lies in a level of the reclaimer's path over its fair share: the job stays out, or it goes
#: back with its whole GPUs. Every outcome is one of the two, so refused in both is refused (False:
#: the bounds asked once; the tests compare both). Up to SPLIT_JOBS jobs deep.
CASES_SPLIT = True
SPLIT_JOBS = 2

#: Ask the refusal bounds (and DOOMED_TOGETHER) before a provable scenario's simulation too, not
#: only from the preemptor's turn on (False: only the protected-pods count before it; the tests
#: compare both).
BOUNDS_BEFORE_TURNS = True

#: Ask the refusal bounds of a provable scenario before its evictions are made, from what the
#: evictions would free counted by arithmetic, and make none where they refuse (False: the bounds
#: are asked once the evictions are made; the tests compare both). See ReclaimRefusals.refuses_before_evicting.
BOUNDS_BEFORE_EVICTING = True

#: What the bounds before the evictions read of a walk's recorded victims and of its nodes is read
#: once for the walk's scenarios (False: at each scenario; the tests compare both). See _WalkStart.
WALK_START_KEPT = True

#: This module's switches (see solve._simulation_shortcuts_off).
SWITCH_NAMES = ("REFUSALS_PROVEN", "DOOMED_TOGETHER", "CASES_SPLIT", "BOUNDS_BEFORE_TURNS", "BOUNDS_BEFORE_EVICTING",
                "WALK_START_KEPT", "PARTS_BY_JOB")

#: The validator whose refusals can be proven, as the proportion plugin's rule file calls it.
RECLAIMABLE = "reclaim.reclaimable"


class ReclaimRefusals:
    """The proof for one reclaim job's solution (its queue shares stay as they were at its start)."""

    def __init__(self, ssn: Session, label: str) -> None:
        self.ssn = ssn
        self.label = label
        self.skip_reallocated = bool(ssn.params.allow_consolidating_reclaim)
        self._protected: dict[tuple[str, tuple[float, ...]], bool] = {}
        self._siblings: dict[str, tuple[dict[str, QueueShare], list[QueueShare]]] = {}   # see _RefusalBounds
        self._walk: _WalkStart | None = None    # see _walk_read
        # the start shares read last (held, so their identity is not reused), the reclaimer and
        # its request, and their levels over fair share (see over_share)
        self._over: tuple[dict[str, QueueShare], tuple[object, ...], list[QueueShare]] | None = None
        self._paths: tuple[dict[str, QueueShare], dict[str, set[str]]] | None = None   # see paths_in

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

    def refuses(self, scenario: AnyScenario, nodes: Sequence[Node], evicted: Sequence[Task]) -> bool:
        """True when every simulation of these evictions that places the preemptor is refused.
        Called with the evictions applied; records the refusal as the validator would."""
        jobs = self.ssn.cluster.jobs
        if victim_pending(self.ssn, evicted):
            return False
        evicted = once(evicted)
        preemptor = tasks_to_allocate(self.ssn, scenario.preemptor, False)
        if not all(map(placed_alike, preemptor)) or not all(map(placed_back_alike, evicted)):
            return False
        if self.skip_reallocated:
            released = [t for t in evicted if t.status == Status.RELEASING]
            key = request_key_of(scenario.request)
            protected = {q: self._is_protected(scenario, q, key) for q in {jobs[t.job].queue for t in released}}
            doomed = [t for t in released if protected[jobs[t.job].queue]]
            proven = bool(doomed) and one_stays_evicted(self.ssn, nodes, preemptor, doomed)
            if not proven and BOUNDS_BEFORE_TURNS:
                # the bounds asked at the preemptor's turn, asked before any: every victim job
                # still waits, and a placement of the preemptor would take its whole GPUs from
                # those free now (the cluster only fills up from here, so they only widen)
                # (no victim has pending pods and every one is placed back alike: asked above)
                taking = float(sum(t.request.gpus for t in preemptor))
                proven = self._bounded(scenario, nodes, released, {t.job for t in evicted}, taking)
                self.ssn.tally["proven from the bounds", self.ssn.action] += proven
        else:   # every victim of the scenario counts, placed back or not
            proven = any(v.tasks and self._is_protected(scenario, v.job.queue) for v in scenario.victims)
        if proven:
            self._record("proven")
        return proven

    def refuses_before_evicting(self, scenario: AnyScenario, nodes: Callable[[], Sequence[Node]],
                                recorded: Sequence[Task], tasks: Sequence[Task]) -> bool:
        """`refuses`' bounds (BOUNDS_BEFORE_TURNS) asked before `tasks` are evicted, the recorded
        victims `recorded` evicted already: True when every simulation of these evictions that
        places the preemptor is refused. Records the refusal as `refuses` does; the caller then
        makes no eviction, as a proven refusal would roll them back. `nodes` gives the nodes the
        simulation would run on, asked for only once the bounds are (building that list anew
        costs more than the tests that turn most scenarios away).

        What the bounds read of the evictions is known before they are made: the pods' statuses
        become Releasing (every one of them on a node, active, none shared or MIG), each node they
        leave gains exactly their whole GPUs as free (whole numbers: exact in any order), and the
        queue shares the bounds read are those of the job's solution start. Two things are read
        more loosely than after the evictions, which only widens the bounds: a pod that would fit
        nowhere counts as one that may go back, and so does a job being evicted now whose pods
        ask for more whole GPUs than are free (which pods it would place next is read only once
        they are evicted)."""
        if not (BOUNDS_BEFORE_EVICTING and BOUNDS_BEFORE_TURNS and self.skip_reallocated) or not tasks:
            return False
        ssn = self.ssn
        # the preemptor first, the cheapest test and the one most often failed (a fraction, or a
        # pod granted nothing yet: a first placement would leave it its grant)
        preemptor = tasks_to_allocate(ssn, scenario.preemptor, False)
        if not all(map(placed_alike, preemptor)):
            return False
        walk = self._walk_read(recorded)
        if walk is None:
            return False
        cluster_nodes = ssn.cluster.nodes
        gained: dict[str, float] = {}
        for t in tasks:
            req, acc = t.request, t.accepted
            node = cluster_nodes.get(t.node)
            if node is None or t.status not in ACTIVE_ALLOCATED or t.key not in node.tasks or req.is_shared \
                    or req.mig or (acc is not None and (acc.is_shared or acc.mig)):
                return False
            gained[t.node] = gained.get(t.node, 0.0) + (acc or req).gpus
        if victim_pending(ssn, tasks) or not all(map(placed_back_alike, tasks)):
            return False
        parts = walk.parts_with(self, tasks)
        if not self._may_refuse(scenario, parts):
            return False
        free = walk.free_on(ssn, nodes())
        for name, gpus in gained.items():
            node = cluster_nodes[name]
            now = node.free_gpus
            if not (float(node.idle.gpus).is_integer() and float(node.releasing.gpus).is_integer()
                    and float(gpus).is_integer() and abs(now) + gpus < EXACT_BELOW):
                return False
            free += _whole_free(now + gpus) - _whole_free(now)
        free -= float(sum(t.request.gpus for t in preemptor))
        fresh = {t.job for t in tasks}
        sure, maybe = _split_by_job(parts, lambda uid: uid not in fresh and whole_gpus(
            tasks_to_allocate(ssn, ssn.cluster.jobs[uid], False)) > free)
        proven = self._refused_by(scenario, sure, maybe, free)
        if proven:
            ssn.tally["proven before evicting", ssn.action] += 1
            self._record("proven")
        return proven

    def _walk_read(self, recorded: Sequence[Task]) -> _WalkStart | None:
        """What the bounds before the evictions read of the walk whose recorded victims'
        pods are `recorded` (the walk's own list, known by identity): read at its first scenario,
        kept for the others (see _WalkStart). None when the recorded pods rule the bounds out
        (one not Releasing, a job of theirs with pending pods, a grant a placement may change)."""
        kept = self._walk
        if kept is not None and kept.recorded is recorded and WALK_START_KEPT:
            return kept
        ssn = self.ssn
        if any(t.status != Status.RELEASING for t in recorded) or victim_pending(ssn, recorded) \
                or not all(map(placed_back_alike, recorded)):
            return None   # (not kept: asked again at the next scenario, as before)
        self._walk = _WalkStart(recorded, _counted_by_job(recorded, ssn.cluster.jobs))
        return self._walk

    def refused_after_preemptor(self, scenario: AnyScenario, nodes: Sequence[Node], victims: Sequence[Task],
                                waiting: Collection[str]) -> bool:
        """True when the validator must refuse however the victim jobs still to take their turn
        (`waiting`, by uid) are placed back: the preemptor has just been placed. Records the
        refusal as the validator would (it would be asked, since the preemptor is placed)."""
        if not self._refused(scenario, nodes, victims, waiting, 0.0):
            return False
        self._record("cut short")
        return True

    def refused_once_placed(self, scenario: AnyScenario, nodes: Sequence[Node], victims: Sequence[Task],
                            waiting: Collection[str], taking: float) -> bool:
        """refused_after_preemptor asked at the preemptor's turn, before its placement, which takes
        `taking` whole GPUs: the bounds see the cluster as it is before (a victim that fits
        nowhere now fits nowhere after it, and what is free loses exactly those GPUs), so they
        only widen, and a refusal proven here is one proven after. Records nothing: the caller
        records it (`cut_short`) once it knows the placement succeeds."""
        return self._refused(scenario, nodes, victims, waiting, taking)

    def refused_after_next(self, scenario: AnyScenario, nodes: Sequence[Node], victims: Sequence[Task],
                           waiting: Collection[str], job: Job, taking: float = 0.0) -> bool:
        """refused_after_preemptor asked as it would be right after the placement of the victim job
        `job`, whose turn comes next, if that placement succeeds: the pods it places then are back
        (no longer evicted) and their whole GPUs come off what is free (a pod of g whole GPUs takes
        g from the free GPUs of a node with at least g), its other evicted pods stay evicted (a
        gang above its minimum takes back only what it needs: its turn is then over), and a
        victim that fits nowhere now fits nowhere after it. Records nothing: the caller records
        it (`cut_short_ahead`) once it knows the placement succeeds. `taking`: whole GPUs a
        placement before the job's takes besides, not made yet (the nodes are read as they are
        before it: a victim that fits nowhere now fits nowhere after it, and what is free loses
        exactly those GPUs, so the bounds only widen)."""
        if not self.skip_reallocated:
            return False   # a victim placed back counts all the same: nothing changes after it
        back = tasks_to_allocate(self.ssn, job, False)
        if not back or any(t.request.is_shared or t.request.mig or not placed_back_alike(t) for t in back):
            return False
        if victim_pending(self.ssn, victims):
            return False
        placed = {id(t) for t in back}
        rest = [t for t in victims if id(t) not in placed]
        left = [uid for uid in waiting if uid != job.uid]
        return self._refused(scenario, nodes, rest, left, taking + float(sum(t.request.gpus for t in back)))

    def cut_short_ahead(self) -> None:
        """A refusal proven before the placement of the victim job whose turn comes next."""
        self._record("cut short before a victim's placement")

    def cut_short_before_both(self) -> None:
        """A refusal proven before the preemptor's placement and that of the victim job whose turn
        comes after it."""
        self._record("cut short before placing and a victim's placement")

    def cut_short(self) -> None:
        """A refusal proven before the preemptor's placement, counted as the validator counts its own."""
        self._record("cut short before placing")

    def _refused(self, scenario: AnyScenario, nodes: Sequence[Node], victims: Sequence[Task],
                 waiting: Collection[str], taking: float) -> bool:
        if victim_pending(self.ssn, victims):
            return False
        evicted = [t for t in once(victims) if t.status == Status.RELEASING]
        if self.skip_reallocated and not all(placed_back_alike(t) for t in evicted if t.job in waiting):
            return False
        return self._bounded(scenario, nodes, evicted, waiting, taking)

    def _bounded(self, scenario: AnyScenario, nodes: Sequence[Node], evicted: list[Task],
                 waiting: Collection[str], taking: float) -> bool:
        """_refused once its callers' conditions hold: `evicted`, the victims' pods still evicted."""
        if self.skip_reallocated:
            if not evicted:
                return False
            parts = self._parts_of(evicted)    # what the pods give up, read once for every bound below
            if not self._may_refuse(scenario, parts):
                return False
            sure, maybe, free = self._left_evicted(nodes, parts, waiting, taking)
        else:   # every victim of the scenario counts, placed back or not
            sure = self._parts([t for v in scenario.victims for t in v.tasks])
            maybe, free = [], 0.0
        return self._refused_by(scenario, sure, maybe, free)

    def _refused_by(self, scenario: AnyScenario, sure: list[_Part], maybe: list[_Part], free: float) -> bool:
        """The bounds' verdict on `sure` pods staying out and `maybe` pods that may go back into at
        most `free` whole GPUs (with DOOMED_TOGETHER and CASES_SPLIT)."""
        if not sure and not maybe:
            return False
        return self._refused_within(scenario, sure, maybe, free) \
            or (CASES_SPLIT and self._refused_in_both_cases(scenario, sure, maybe, free, SPLIT_JOBS))

    def _refused_within(self, scenario: AnyScenario, sure: list[_Part], maybe: list[_Part], free: float) -> bool:
        return _RefusalBounds(self, scenario, sure, maybe, free).refused() \
            or (DOOMED_TOGETHER and self._doomed_together(scenario, sure, maybe, free))

    def _refused_in_both_cases(self, scenario: AnyScenario, sure: list[_Part], maybe: list[_Part], free: float,
                               depth: int) -> bool:
        """Refused whether a victim job of `maybe` in the reclaimer's branch goes back or stays out
        (see CASES_SPLIT): the bounds asked twice, with the job sure to stay out, and with it back,
        its whole GPUs taken from `free`. Each case may split on the next such job, `depth` jobs
        deep."""
        if depth <= 0:
            return False
        job = self._split_on(scenario, maybe)
        if job is None:
            return False
        mine = [p for p in maybe if p.job == job]
        rest = [p for p in maybe if p.job != job]
        whole = sum(p.whole for p in mine)
        stays_out = [*sure, *mine]
        if not (self._refused_within(scenario, stays_out, rest, free)
                or self._refused_in_both_cases(scenario, stays_out, rest, free, depth - 1)):
            return False
        if whole <= free and not (self._refused_within(scenario, sure, rest, free - whole)
                                  or self._refused_in_both_cases(scenario, sure, rest, free - whole, depth - 1)):
            return False
        self.ssn.tally["refused in both cases", self.ssn.action] += 1
        return True

    def _split_on(self, scenario: AnyScenario, maybe: list[_Part]) -> str | None:
        """The victim job of `maybe` to split the bounds on: one in a level of the reclaimer's path
        over its fair share (what such a job gives up lowers the reclaimer's side of the saturation
        check when it stays out), the one giving up most GPUs there (then by uid); None if none.
        Only a job that goes back whole or not at all (`goes_back_whole`): the two cases are then
        every outcome of its turn."""
        queues = scenario.start_shares or self.ssn.shares.queues
        levels = {qs.queue.uid for qs in self.over_share(scenario)}
        if not levels:
            return None
        gives: dict[str, float] = {}
        jobs = self.ssn.cluster.jobs
        for p in maybe:
            if goes_back_whole(jobs[p.job]) \
                    and not levels.isdisjoint(qs.queue.uid for qs in path_up(queues, p.queue)):
                gives[p.job] = gives.get(p.job, 0.0) + p.gives["gpu"]
        return min(gives, key=lambda uid: (-gives[uid], uid)) if gives else None

    def _parts_of(self, evicted: Sequence[Task]) -> list[_Part]:
        """_parts, the recorded victims' parts taken as read at the walk's start (_WalkStart) where
        `evicted` begins with the walk's recorded pods, in their order (a simulation's victims
        come so, until one of them is placed back)."""
        walk = self._walk
        if walk is not None and WALK_START_KEPT:
            n = len(walk.recorded)
            if n and len(evicted) >= n and evicted[:n] == walk.recorded:   # (pods compare by identity)
                return walk.parts_with(self, evicted[n:])
        return self._parts(evicted)

    def _parts(self, tasks: Sequence[Task]) -> list[_Part]:
        """The pods as the bounds count them: one part per victim job when every amount they give
        up is a whole number and their sums stay below 2**53 (every partial sum is then exact,
        so a job's pods added up first give the same totals in any order), else one part per
        pod, added up in the pods' order (see PARTS_BY_JOB)."""
        jobs = self.ssn.cluster.jobs
        tasks = once(tasks)
        parts = _parts_by_job(tasks, jobs) if PARTS_BY_JOB else None
        if parts is not None:
            return parts
        return [_Part(t.job, jobs[t.job].queue, [t], request_quantities(t.accepted or t.request),
                      _whole_request(t.request)) for t in tasks]

    def _doomed_together(self, scenario: AnyScenario, sure: list[_Part], maybe: list[_Part], free: float) -> bool:
        """Refused when the victim jobs of `maybe` that each doom the scenario if they stay out
        (the bounds refuse with that job's pods sure to stay evicted, whatever the others do)
        cannot all go back: their whole GPUs together exceed `free`. Only jobs that go back whole
        or not at all are counted (`goes_back_whole`), so one of them stays out, all of it. Asked
        from the largest job down, and only while the jobs left could still push the sum past
        `free`."""
        by_job: dict[str, list[_Part]] = {}
        jobs = self.ssn.cluster.jobs
        for p in maybe:
            if goes_back_whole(jobs[p.job]):
                by_job.setdefault(p.job, []).append(p)
        wholes = {uid: sum(p.whole for p in parts) for uid, parts in by_job.items()}
        left = sum(wholes.values())
        if left <= free:
            return False
        dooming = 0.0
        for uid in sorted(by_job, key=lambda u: (-wholes[u], u)):
            whole = wholes[uid]
            if whole <= 0 or dooming + left <= free:
                return False
            left -= whole
            rest = [p for p in maybe if p.job != uid]
            if _RefusalBounds(self, scenario, [*sure, *by_job[uid]], rest, math.inf).refused():
                dooming += whole
                if dooming > free:
                    self.ssn.tally["doomed together", self.ssn.action] += 1
                    return True
        return False

    def paths_in(self, queues: dict[str, QueueShare]) -> dict[str, set[str]]:
        """Per queue, the uids on its path up (filled as the bounds ask them), kept while the
        bounds read the same queue table (the tree is fixed)."""
        kept = self._paths
        if kept is None or kept[0] is not queues:
            kept = self._paths = (queues, {})
        return kept[1]

    def over_share(self, scenario: AnyScenario) -> list[QueueShare]:
        """_over_share of the scenario's reclaimer, on the queue shares the bounds read: those of
        the solution's start, which nothing changes while it lasts, are read once per request."""
        queues = scenario.start_shares
        if not queues:    # (as the bounds read them: the live shares then)
            return _over_share(self.ssn.shares.queues, scenario.preemptor.queue, scenario.request)
        request = scenario.request
        key = (scenario.preemptor.queue, tuple([request[r] for r in RESOURCES]))
        kept = self._over
        if kept is not None and kept[0] is queues and kept[1] == key:
            return kept[2]
        levels = _over_share(queues, scenario.preemptor.queue, request)
        self._over = (queues, key, levels)
        return levels

    def _record(self, how: str) -> None:
        """The refusal, counted as the validator counts its own, and how it was proven."""
        ssn = self.ssn
        ssn.refusals[self.label] += 1
        if ssn.coverage is not None:
            ssn.coverage.hit(self.label)
        ssn.tally[how, ssn.action] += 1

    def _may_refuse(self, scenario: AnyScenario, evicted: list[_Part]) -> bool:
        """Refused when every evicted pod stays out, the bounds' worst case: each queue gives up
        the most it can (the saturation check fails more, the more a sibling gives up, and is asked
        of more resources). A cheap test before the fit masks of `_left_evicted`."""
        return _RefusalBounds(self, scenario, evicted, [], 0.0).refused()

    def _left_evicted(self, nodes: Sequence[Node], evicted: list[_Part], waiting: Collection[str],
                      taking: float = 0.0) -> tuple[list[_Part], list[_Part], float]:
        """The evicted pods sure to stay evicted, those that may go back, and the whole GPUs left
        free on the nodes. A victim job goes back whole or not at all (its gang, pod set by pod
        set, as allocate_job places it): it stays out when its turn has passed, or when a pod it
        places fits nowhere now or its pods ask for more whole GPUs than are left."""
        ssn = self.ssn
        view = ssn.table.view(nodes)
        free = _free_whole(view) - taking
        nowhere: dict[Request, bool] = {}

        def fits_nowhere(t: Task) -> bool:
            # a pod's fit reads only its request: one pod per request is asked
            known = nowhere.get(t.request)
            if known is None:
                known = nowhere[t.request] = not fits_mask(view, t, with_releasing=True).any()
            return known

        def stays_out(uid: str) -> bool:
            if uid not in waiting:
                return True
            placing = tasks_to_allocate(ssn, ssn.cluster.jobs[uid], False)
            return whole_gpus(placing) > free or any(map(fits_nowhere, placing))

        sure, maybe = _split_by_job(evicted, stays_out)
        return sure, maybe, free

    def _is_protected(self, scenario: AnyScenario, queue: str, request_key: tuple[float, ...] | None = None) -> bool:
        """Neither chunk strategy holds for the queue's first chunk (taken at its full allocation).
        `request_key`: the scenario's request as `request_key_of` gives it, when the caller has it."""
        request = scenario.request
        key = (queue, request_key if request_key is not None else request_key_of(request))
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


def _free_whole(view: NodeVector) -> float:
    """The whole GPUs free on the view's nodes (idle and releasing); an overcommitted node (free
    GPUs below zero) takes no pod back: it counts none, not less."""
    return float(np.maximum(np.floor(view.free_gpus + 1e-9), 0.0).sum())


def _whole_free(free_gpus: float) -> int:
    """_free_whole's count for one node with `free_gpus` free (as a view's row counts it)."""
    return max(math.floor(free_gpus + 1e-9), 0)


def _split_by_job(parts: list[_Part], stays_out: Callable[[str], bool]) -> tuple[list[_Part], list[_Part]]:
    """The parts of the victim jobs `stays_out` names (by uid), and the others: a victim job goes
    back whole or not at all."""
    by_job: dict[str, list[_Part]] = {}
    for p in parts:
        by_job.setdefault(p.job, []).append(p)
    sure: list[_Part] = []
    maybe: list[_Part] = []
    for uid, job_parts in by_job.items():
        if stays_out(uid):
            sure += job_parts
        else:
            maybe += job_parts
    return sure, maybe


def request_key_of(request: dict[str, float]) -> tuple[float, ...]:
    return tuple(request[r] for r in sorted(request))


def whole_gpus(tasks: Collection[Task]) -> float:
    """The whole devices the pods ask for (shared and MIG requests left out)."""
    return sum(_whole_request(t.request) for t in tasks)


def _whole_request(req: Request) -> float:
    return 0.0 if req.is_shared or req.mig else req.gpus


#: Count a victim job's pods in the refusal bounds as one part, their amounts added up first,
#: where that gives the same sums (False: one part per pod; the tests compare both). See
#: ReclaimRefusals._parts.
PARTS_BY_JOB = True

#: Whole numbers whose absolute values add up to less than this are added exactly in any order.
EXACT_BELOW = 2.0**53


def _whole_amounts(grant: Request) -> bool:
    """What a pod with this grant gives up is whole numbers (CPU millis, bytes, devices)."""
    return float(grant.cpu).is_integer() and float(grant.memory).is_integer() and float(grant.gpus_quota).is_integer()


@dataclass(slots=True)
class _Part:
    """Evicted pods of one victim job that the refusal bounds count together: the job's queue,
    what the pods give up added up, and the whole GPUs they ask for."""

    job: str
    queue: str
    tasks: list[Task]
    gives: Vec
    whole: float



def _parts_by_job(tasks: Sequence[Task], jobs: dict[str, Job]) -> list[_Part] | None:
    """One part per victim job (ReclaimRefusals._parts), or None where some amount is not a whole
    number or their absolute values add up to EXACT_BELOW or more. n pods of one grant give n times
    its amounts: exactly so, for whole numbers below that."""
    counted = _counted_by_job(tasks, jobs)
    return counted[0] if counted is not None and counted[1] < EXACT_BELOW else None


def _counted_by_job(tasks: Sequence[Task], jobs: dict[str, Job]) -> tuple[list[_Part], float] | None:
    """_parts_by_job's parts with the sum of their amounts' absolute values (whole numbers: a sum
    below EXACT_BELOW is exact in any order, so sums of several lists of pods add up), or None
    where some amount is not a whole number."""
    by_job: dict[str, list[Task]] = {}
    for t in once(tasks):
        by_job.setdefault(t.job, []).append(t)
    parts: list[_Part] = []
    largest = 0.0
    for uid, pods in by_job.items():
        gives = {r: 0.0 for r in RESOURCES}
        whole = 0.0
        for (grant, req), n in Counter((t.accepted or t.request, t.request) for t in pods).items():
            if not _whole_amounts(grant):
                return None
            gives["cpu"] += n * grant.cpu
            gives["memory"] += n * grant.memory
            gives["gpu"] += n * grant.gpus_quota
            whole += n * _whole_request(req)
            largest += n * max(abs(grant.cpu), abs(grant.memory), abs(grant.gpus_quota))
        parts.append(_Part(uid, jobs[uid].queue, pods, gives, whole))
    return parts, largest


class _WalkStart:
    """What the bounds before the evictions read of a walk's recorded victims and of its nodes,
    read once for the walk's scenarios. Every scenario of a walk starts from the same cluster:
    the walk's start with the recorded victims evicted (every simulation is rolled back to there
    exactly). So what is read there holds for each scenario: the recorded pods' statuses and
    their jobs' pending pods, their grants (any placement leaves them alike: placed_back_alike
    held for each, see its comment) and so their parts, and the whole GPUs free on a node list,
    as long as the list stays the same; the walk's nodes only grow from one scenario to the next,
    or shrink back, so a list that extends the one read last adds what its new nodes have free."""

    def __init__(self, recorded: Sequence[Task], counted: tuple[list[_Part], float] | None) -> None:
        self.recorded = recorded     # the walk's own list, held: the walk is known by its identity
        self.counted = counted
        self.jobs = {t.job for t in recorded}
        self.nodes: Sequence[Node] | None = None
        self.free = 0.0

    def parts_with(self, proof: ReclaimRefusals, tasks: Sequence[Task]) -> list[_Part]:
        """The parts of the recorded pods and `tasks`, as ReclaimRefusals._parts gives them: the
        recorded jobs' parts as read at the walk's start, then the parts of `tasks` (their jobs
        come after the recorded ones, so by job the parts come in that order); read anew where a
        job of `tasks` also has recorded pods, or where the pods cannot be counted by job."""
        counted = self.counted
        if counted is not None and PARTS_BY_JOB and not any(t.job in self.jobs for t in tasks):
            more = _counted_by_job(tasks, proof.ssn.cluster.jobs)
            if more is not None and counted[1] + more[1] < EXACT_BELOW:
                return [*counted[0], *more[0]]
        return proof._parts([*self.recorded, *tasks])

    def free_on(self, ssn: Session, nodes: Sequence[Node]) -> float:
        """_free_whole over the nodes, on the cluster at the walk's start."""
        before = self.nodes
        if nodes is before:
            return self.free
        free: float
        if before is not None and isinstance(nodes, list) and isinstance(before, list) \
                and len(nodes) >= len(before) and nodes[:len(before)] == before:
            # (whole numbers: the same sum in any order; lists compare their nodes by identity)
            free = self.free + sum(_whole_free(n.free_gpus) for n in nodes[len(before):])
        else:
            free = _free_whole(ssn.table.view(nodes))
        self.nodes, self.free = nodes, free
        return free


def once(tasks: Sequence[Task]) -> Sequence[Task]:
    """The pods, each once, in their order. A simulation's victims are the recorded ones and
    every pod of the victim jobs on the node evicted from, which lists a recorded job's pods
    again when a new potential victim of that job is on the node (as the reference lists them):
    the bounds count each pod once, as the validator does."""
    seen = {id(t): t for t in tasks}
    return tasks if len(seen) == len(tasks) else list(seen.values())


def goes_back_whole(job: Job) -> bool:
    """The victim job's placement at its turn places every pod of it then evicted, or none: each
    pod set needs all its pods (the pods `tasks_to_allocate` gives are then every evicted one),
    or the job is one pod. A gang above its minimum (elastic) takes back only what it needs, and
    the rest of its evicted pods stay out once its turn is over."""
    return not job.is_elastic() or len(job.tasks) == 1


def victim_pending(ssn: Session, victims: Sequence[Task]) -> bool:
    """Some victim's job has pending pods: a simulation's failed re-placement of it records fit
    errors its owner reads, so no shortcut may stand in for that simulation."""
    jobs = ssn.cluster.jobs
    asked: set[str] = set()
    for t in victims:
        uid = t.job
        if uid not in asked:
            if jobs[uid].has_pending:
                return True
            asked.add(uid)
    return False


# A simulation leaves a trace on the pods it placed, as the reference's does: a pod keeps what it
# was last granted (its accepted request, and a pending pod its GPU groups). A simulation stands
# in for another only when every pod it could place would keep the same trace either way.
def placed_alike(task: Task) -> bool:
    """A preemptor pod that any placement leaves as it is: whole GPUs (no groups to keep), its
    grant already its request."""
    req = task.request
    return not req.is_shared and not req.mig and (task.accepted is req or task.accepted == req)


def placed_back_alike(task: Task) -> bool:
    """A victim pod that a placement anywhere leaves with the grant it has: its request (whole
    GPUs, CPU only), or for a fraction the same share of a device (only the device's size in MiB
    can differ, which nothing reads); a GPU-memory request's share depends on the device. Not a
    pod a committed pipeline moved off a node that still lists it: placed there again it takes
    its room back where it was evicted from, which may be taken already, so it goes back beyond
    what is free (busy_three_levels seed 17503)."""
    req, acc = task.request, task.accepted
    if acc is None or req.kind == RequestType.GPU_MEMORY or req.mig or task.listed_elsewhere:
        return False
    if acc is req:
        return True     # (the usual case, asked for every victim of every bound)
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


def _over_share(queues: dict[str, QueueShare], reclaimer: str, request: dict[str, float]) -> list[QueueShare]:
    """The levels of the reclaimer's path over their fair share with its request and nothing given
    up: the saturation check can fail only there (what the branch gives up only lowers its share)."""
    if reclaimer not in queues:
        return []
    return [qs for qs in path_up(queues, reclaimer)
            if any(share_ratio(qs.get("allocated")[r] + request[r], qs.get("fair_share")[r]) > 1 for r in RESOURCES)]


class _RefusalBounds:
    """What the proportion validator sees of a simulation's end, bounded: `sure` pods stay
    evicted; of `maybe` pods any may go back, but the whole-GPU ones together at most `free`
    GPUs. Refused when a protected queue surely gives up a pod, or when the reclaimer's
    saturation check fails against a sibling with what that sibling surely gives up and the
    most the reclaimer's own branch could give (the saturation multiplier taken as 1, its least).
    The pods come in parts (ReclaimRefusals._parts): a part is all sure or all maybe."""

    def __init__(self, proof: ReclaimRefusals, scenario: AnyScenario, sure: list[_Part], maybe: list[_Part],
                 free: float) -> None:
        self.proof, self.scenario = proof, scenario
        self.queues = scenario.start_shares or proof.ssn.shares.queues
        self.sure, self.maybe = sure, maybe
        # whole GPUs among `maybe` by queue (counts of devices: their sums are exact in any order)
        self._whole: dict[str, float] = {}
        for p in maybe:
            self._whole[p.queue] = self._whole.get(p.queue, 0.0) + p.whole
        self._whole_total = sum(self._whole.values())
        self.must_stay = max(0.0, self._whole_total - free)     # whole GPUs among `maybe` that cannot all go back
        self._request_key = request_key_of(scenario.request)
        self._paths = proof.paths_in(self.queues)
        self._queues = {p.queue for p in [*sure, *maybe]}
        self._sure_queues = {p.queue for p in sure}
        self._within: dict[str, set[str]] = {}

    def refused(self) -> bool:
        scenario = self.scenario
        for queue in dict.fromkeys(p.queue for p in [*self.sure, *self.maybe]):
            if self.proof._is_protected(scenario, queue, self._request_key) and self._least_taken(queue) is not None:
                return True
        request = scenario.request
        own = {r for r in RESOURCES if request[r] > 0}
        for qs in self.proof.over_share(scenario):
            most = self._taken(qs.queue.uid, self.sure, self.maybe)
            mine = {r: qs.get("allocated")[r] - most[r] + request[r] for r in RESOURCES}
            for sib in self._siblings(qs):
                least = self._least_taken(sib.queue.uid)
                if least is None:
                    continue
                names = own | {r for r in RESOURCES if least[r] > 0}
                theirs = {r: sib.get("allocated")[r] - least[r] for r in RESOURCES}
                if not saturation_lower(names, mine, qs.get("fair_share"), theirs, sib.get("fair_share"), 1.0):
                    return True
        return False

    def _siblings(self, qs: QueueShare) -> list[QueueShare]:
        """The queue's siblings, worked out once per proof and queue table (the tree is fixed)."""
        kept = self.proof._siblings.get(qs.queue.uid)
        if kept is None or kept[0] is not self.queues:
            kept = self.proof._siblings[qs.queue.uid] = (self.queues, [
                q for q in self.queues.values() if q.queue.parent == qs.queue.parent and q is not qs])
        return kept[1]

    def _least_taken(self, uid: str) -> Vec | None:
        """What the queue's subtree surely gives up, or None when it may give up nothing."""
        within = self._queues_within(uid)
        if not within and self.must_stay <= self._whole_total:
            return None     # no pod of the bounds is there, and what must stay out can stay elsewhere
        least = self._taken(uid, self.sure)
        outside = self._whole_total - sum(self._whole.get(q, 0.0) for q in within)
        least["gpu"] += max(0.0, self.must_stay - outside)
        inside = not self._sure_queues.isdisjoint(within)
        return least if inside or least["gpu"] > 0 else None

    def _taken(self, uid: str, *parts: list[_Part]) -> Vec:
        """What the parts in the queue's subtree give up, added up in their order."""
        total = {r: 0.0 for r in RESOURCES}
        within = self._queues_within(uid)
        for each in parts:
            for p in each:
                if p.queue in within:
                    for r, v in p.gives.items():
                        total[r] += v
        return total

    def _queues_within(self, uid: str) -> set[str]:
        """The pods' queues in the subtree of `uid` (asked once per queue, not once per pod)."""
        within = self._within.get(uid)
        if within is None:
            within = self._within[uid] = {q for q in self._queues if self._under(q, uid)}
        return within

    def _under(self, queue: str, uid: str) -> bool:
        path = self._paths.get(queue)
        if path is None:
            path = self._paths[queue] = {qs.queue.uid for qs in path_up(self.queues, queue)}
        return uid in path

